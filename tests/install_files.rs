//! The files a package installs beside the binary, generated from the clap
//! definition: shell completions that really complete, and a man page that
//! `man` really renders.

use assert_cmd::Command;
use std::process::Command as Process;

fn generated(args: &[&str]) -> String {
    let out = Command::cargo_bin("gputaskman").unwrap().args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// What bash offers for the last word of `line` with the generated script
/// loaded, one candidate a line, as the shell's <TAB> would compute it.
fn bash_completes(line: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("gputaskman.bash");
    std::fs::write(&script, generated(&["completions", "bash"])).unwrap();
    let driver = r#"
        source "$1"
        read -r -a COMP_WORDS <<< "$2"
        case "$2" in *" ") COMP_WORDS+=("") ;; esac
        COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
        COMP_LINE=$2
        COMP_POINT=${#COMP_LINE}
        _gputaskman gputaskman "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf '%s\n' "${COMPREPLY[@]}"
    "#;
    let out = Process::new("bash")
        .args(["-c", driver, "driver"])
        .arg(&script)
        .arg(line)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_a_subcommand_from_its_first_letters() {
    assert_eq!(bash_completes("gputaskman mo"), ["model"]);
    assert_eq!(bash_completes("gputaskman re"), ["record", "replay"]);
}

#[test]
fn bash_completes_a_subcommands_flags_and_the_shell_names() {
    assert_eq!(bash_completes("gputaskman serve --tok"), ["--token-file"]);
    // An empty word offers the flags too; the values are the shells.
    let mut shells: Vec<String> = bash_completes("gputaskman completions ")
        .into_iter()
        .filter(|c| !c.starts_with('-'))
        .collect();
    shells.sort();
    assert_eq!(shells, ["bash", "elvish", "fish", "powershell", "zsh"]);
}

#[test]
fn every_shell_gets_a_script_of_its_own_that_knows_the_subcommands() {
    for (shell, marker) in [
        ("zsh", "#compdef gputaskman"),
        ("fish", "complete -c gputaskman"),
        ("elvish", "set edit:completion:arg-completer[gputaskman]"),
        (
            "powershell",
            "Register-ArgumentCompleter -Native -CommandName 'gputaskman'",
        ),
    ] {
        let script = generated(&["completions", shell]);
        assert!(script.contains(marker), "{shell}: no {marker:?} in\n{script}");
        for sub in ["model", "serve", "completions", "manpage"] {
            assert!(script.contains(sub), "{shell}: no {sub} in\n{script}");
        }
    }
}

#[test]
fn a_reader_that_stops_early_is_no_panic() {
    // `gputaskman completions bash | head -1`: the reader is gone (here
    // before the first write), so the write fails with a broken pipe.
    let mut child = Process::new(env!("CARGO_BIN_EXE_gputaskman"))
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    // The reader took what it wanted: no error, as with any command.
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err, "");
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let out = Command::cargo_bin("gputaskman")
        .unwrap()
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid value 'tcsh'"));
}

#[test]
fn man_renders_the_generated_page() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("gputaskman.1");
    std::fs::write(&page, generated(&["manpage"])).unwrap();
    let out = Process::new("man")
        .args(["-P", "cat", "-l"])
        .arg(&page)
        .env("MANWIDTH", "100")
        .env("LANG", "C.UTF-8")
        .env_remove("MANPAGER")
        .output()
        .expect("man (Debian's man-db) must be installed: .ci/run installs it");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // Rendered, not raw roff: sections are headings, flags are plain text.
    assert!(text.contains("NAME"), "{text}");
    assert!(
        text.contains("gputaskman - An htop for what is inside the GPU"),
        "{text}"
    );
    assert!(text.contains("--interval"), "{text}");
    assert!(text.contains("--remote-token-file"), "{text}");
    assert!(text.contains("completions"), "{text}");
    assert!(!text.contains(".TH") && !text.contains("\\f"), "{text}");
    // The live view's keys, from the table the view's `?` and footer use.
    let keys = text.split("KEYS").nth(1).expect("a KEYS section");
    let words = keys.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "s sort by the next column",
        "S reverse the sort",
        "[ ] step back",
        "q quit (Ctrl-C too)",
    ] {
        assert!(words.contains(needle), "{needle} in {keys}");
    }
    assert!(words.contains("k send a signal"), "{keys}");
}
