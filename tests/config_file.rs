//! The config file end to end: `config init` writes it where XDG says, the
//! binary reads it from there (or from --config), a flag wins over it, and
//! a wrong key stops the program with the file and the line.

use assert_cmd::Command;

fn gputaskman(xdg: &std::path::Path) -> Command {
    let mut c = Command::cargo_bin("gputaskman").unwrap();
    c.env("XDG_CONFIG_HOME", xdg)
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
    c
}

#[test]
fn config_init_writes_the_defaults_once_where_xdg_says() {
    let xdg = tempfile::tempdir().unwrap();
    let path = xdg.path().join("gputaskman/config.toml");
    let out = gputaskman(xdg.path()).args(["config", "init"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("wrote {}\n", path.display())
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("\ninterval = 1.0\n") && text.contains("\nsort = \"vram\"\n"),
        "{text}"
    );
    // It does not overwrite what someone may have edited.
    std::fs::write(&path, "interval = 3\n").unwrap();
    let again = gputaskman(xdg.path()).args(["config", "init"]).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists; --force replaces it"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "interval = 3\n");
    let forced = gputaskman(xdg.path())
        .args(["config", "init", "--force"])
        .output()
        .unwrap();
    assert!(forced.status.success());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    // What it wrote is read back without complaint.
    let once = gputaskman(xdg.path()).arg("--once").output().unwrap();
    assert!(once.status.success(), "{}", String::from_utf8_lossy(&once.stderr));
}

#[test]
fn a_mistyped_key_in_the_default_file_stops_with_its_line() {
    let xdg = tempfile::tempdir().unwrap();
    std::fs::create_dir(xdg.path().join("gputaskman")).unwrap();
    let path = xdg.path().join("gputaskman/config.toml");
    std::fs::write(&path, "interval = 2\nsrot = \"pid\"\n").unwrap();
    let out = gputaskman(xdg.path()).arg("--once").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("config {}", path.display())), "{err}");
    assert!(err.contains("line 2") && err.contains("unknown field `srot`"), "{err}");
}

#[test]
fn remote_hosts_come_from_the_file_and_the_flag_wins() {
    let xdg = tempfile::tempdir().unwrap();
    let path = xdg.path().join("elsewhere.toml");
    // Port 1 on loopback: nothing listens, so the error names the host used.
    std::fs::write(&path, "remote = [\"http://127.0.0.1:1\"]\n").unwrap();
    let from_file = gputaskman(xdg.path())
        .args(["--config"])
        .arg(&path)
        .arg("--json")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&from_file.stdout).to_string() + &String::from_utf8_lossy(&from_file.stderr);
    assert!(text.contains("127.0.0.1:1"), "{text}");
    let flag = gputaskman(xdg.path())
        .args(["--config"])
        .arg(&path)
        .args(["--json", "--remote", "http://127.0.0.1:2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&flag.stdout).to_string() + &String::from_utf8_lossy(&flag.stderr);
    assert!(text.contains("127.0.0.1:2") && !text.contains("127.0.0.1:1"), "{text}");
}

#[test]
fn columns_and_readonly_are_read_and_a_wrong_column_stops_with_its_line() {
    let xdg = tempfile::tempdir().unwrap();
    let path = xdg.path().join("view.toml");
    std::fs::write(
        &path,
        "readonly = true\ncolumns = [\"pid\", \"device\", \"vram\", \"user\"]\n",
    )
    .unwrap();
    let ok = gputaskman(xdg.path())
        .arg("--config")
        .arg(&path)
        .arg("--once")
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    std::fs::write(&path, "readonly = true\n\ncolumns = [\"pid\", \"VRAM\"]\n").unwrap();
    let bad = gputaskman(xdg.path())
        .arg("--config")
        .arg(&path)
        .arg("--once")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains(&format!("config {}", path.display())), "{err}");
    assert!(
        err.contains("line 3") && err.contains("columns: no column VRAM; known: host, pid, device"),
        "{err}"
    );
}
