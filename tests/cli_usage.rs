//! The command line's small promises, by the real binary: a reader that
//! stops early is no error, an empty variable is no setting, a wrong value
//! says what is wrong, a flag that means nothing to a command is refused,
//! a library asked for by name must load, and an error is said once.

mod common;

use assert_cmd::Command;
use std::process::Stdio;

/// The binary with no NVML of the machine's (none may be installed, but
/// the test must not depend on it).
fn gputaskman() -> Command {
    let mut cmd = Command::cargo_bin("gputaskman").unwrap();
    cmd.env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .timeout(std::time::Duration::from_secs(60));
    cmd
}

/// Runs `args` with a stdout whose reader has gone before the first write
/// (as `| head -c5` is, once it has its bytes); returns the exit status
/// and stderr.
fn closed_early(args: &[&str]) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gputaskman"))
        .args(args)
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_reader_that_stops_early_ends_every_command_quietly() {
    for args in [&["--json"][..], &["schema"], &["--once"], &["manpage"], &["explain"]] {
        let (code, err) = closed_early(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
    }
}

#[test]
fn an_empty_variable_is_no_setting() {
    let out = gputaskman()
        .env("GPUTASKMAN_NVML_LIB", "")
        .env("GPUTASKMAN_PROC_ROOT", "")
        .arg("--list-gpus")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("a value is required"), "{err}");
    // The default library is looked for, as with the variable unset.
    assert!(err.contains("nvml: libnvidia-ml.so.1"), "{err}");
}

/// One `error:` line that says `what`, status 2.
fn usage_error(args: &[&str], what: &str) {
    let out = gputaskman().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{args:?}: {err}");
    assert!(errors[0].contains(what), "{args:?}: {err}");
    assert!(!err.contains("unexpected argument '-"), "{args:?}: {err}");
}

/// Refused when run (not by clap): status 2, and stderr says `what`.
fn fails_with(args: &[&str], what: &str) {
    let out = gputaskman().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(what), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
}

#[test]
fn a_negative_number_is_named_as_such_not_taken_for_a_flag() {
    let seconds = "give a number of seconds, more than 0 and at most 86400";
    usage_error(&["--interval", "-1", "--once"], seconds);
    usage_error(&["record", "-o", "/nonexistent/x", "--interval", "-1"], seconds);
    usage_error(&["serve", "--interval", "-0.5"], seconds);
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.gguf");
    let model = model.to_str().unwrap();
    for flag in ["--ctx", "-c", "--parallel", "-np", "--ubatch"] {
        usage_error(&["model", model, flag, "-5"], "a count cannot be negative");
    }
}

#[test]
fn a_flag_that_means_nothing_to_a_command_is_refused() {
    for command in ["schema", "explain", "summary", "diff", "plot", "replay", "manpage"] {
        // After the subcommand: unknown to it.
        let out = gputaskman().args([command, "--gpu", "99"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {err}");
        assert!(err.contains("unexpected argument '--gpu'"), "{command}: {err}");
        // Nor does its help offer them.
        let help = gputaskman().args([command, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(
            !help.contains("--gpu") && !help.contains("--nvml-lib"),
            "{command}:\n{help}"
        );
    }
    // Before it: refused by name (commands that need nothing more).
    for command in ["schema", "explain", "manpage"] {
        usage_error(
            &["--gpu", "99", command],
            &format!("--gpu means nothing to `gputaskman {command}`"),
        );
    }
    // Where they mean something they stay, after the subcommand or before.
    for command in ["record", "serve", "model"] {
        let help = gputaskman().args([command, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(
            help.contains("--gpu") && help.contains("--nvml-lib"),
            "{command}:\n{help}"
        );
    }
}

#[test]
fn nvml_lib_before_a_command_that_reads_no_device_is_accepted() {
    // A shell alias (`gputaskman --nvml-lib X`) works for every command:
    // the library is not loaded, so not checked either.
    for args in [
        &["--nvml-lib", "/nonexistent.so", "schema"][..],
        &["--nvml-lib", "/nonexistent.so", "explain"],
        &["--nvml-lib", "/nonexistent.so", "completions", "bash"],
        &["--nvml-lib", "/nonexistent.so", "config", "--help"],
    ] {
        let out = gputaskman().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
    // Where a device is read, the library still must load.
    fails_with(
        &["--nvml-lib", "/nonexistent.so", "--once"],
        "cannot load /nonexistent.so",
    );
}

#[test]
fn a_one_shot_flag_before_a_subcommand_is_refused_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.gguf");
    let model = model.to_str().unwrap();
    usage_error(
        &["--json", "model", model],
        "--json before a subcommand means nothing to `gputaskman model`; give it after: `gputaskman model ... --json`",
    );
    usage_error(
        &["--once", "summary", model],
        "--once before a subcommand means nothing to `gputaskman summary`",
    );
    usage_error(
        &["--once", "schema"],
        "--once before a subcommand means nothing to `gputaskman schema`",
    );
    usage_error(
        &["--list-gpus", "explain"],
        "--list-gpus before a subcommand means nothing to `gputaskman explain`",
    );
}

#[test]
fn a_user_the_system_does_not_know_is_an_error() {
    let name = "no-such-user-7c1e";
    for args in [&["--user", name, "--once"][..], &["--user", name, "--json"]] {
        fails_with(args, &format!("gputaskman: --user {name}: there is no such user"));
    }
    // A user it knows is a filter, as before (root is in every passwd).
    let out = gputaskman().args(["--user", "root", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_one_shot_with_no_remote_host_answering_is_an_error() {
    // Nothing listens there: the connection is refused.
    let url = format!("http://127.0.0.1:{}", common::free_port());
    for mode in ["--once", "--json"] {
        let out = gputaskman().args(["--remote", &url, mode]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{mode}: {err}");
        assert!(
            err.contains("gputaskman: no --remote host answered (127.0.0.1:"),
            "{mode}: {err}"
        );
    }
}

#[test]
fn a_library_named_by_the_flag_must_load() {
    for args in [
        &["--nvml-lib", "/nonexistent.so", "--once"][..],
        &["--nvml-lib", "/nonexistent.so", "--json"],
        &["record", "-o", "/nonexistent/x.jsonl", "--nvml-lib", "/nonexistent.so"],
    ] {
        let out = gputaskman().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("gputaskman: --nvml-lib: cannot load /nonexistent.so:"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // One that loads is taken, before the subcommand or after it.
    let scenario = common::Scenario::new(&serde_json::json!({"devices": []}));
    for args in [
        vec![
            "--nvml-lib".to_string(),
            common::fake_nvml().display().to_string(),
            "--list-gpus".into(),
        ],
        vec![
            "model".into(),
            "/nonexistent.gguf".into(),
            "--nvml-lib".into(),
            common::fake_nvml().display().to_string(),
        ],
    ] {
        let out = gputaskman()
            .env("FAKE_NVML_SCENARIO", scenario.path())
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("--nvml-lib"), "{args:?}: {err}");
    }
}

#[test]
fn a_missing_model_file_is_said_once() {
    let out = gputaskman().args(["model", "/nonexistent.gguf"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(err.starts_with("gputaskman: /nonexistent.gguf: "), "{err}");
}
