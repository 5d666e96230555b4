//! The config file: `$XDG_CONFIG_HOME/gputaskman/config.toml` (or
//! `~/.config/...`), or the file `--config` names. It sets what flags set,
//! and a flag given on the command line wins over it. A key this version
//! does not know is an error that names its line, never silently ignored: a
//! typo in `readonly` must not leave someone believing it is on.

use crate::cli::Cli;
use crate::view::tui::app::SortKey;
use crate::view::tui::columns::Column;
use anyhow::Context;
use clap::parser::ValueSource;
use clap::ArgMatches;
use serde::{Deserialize, Deserializer};
use std::path::{Path, PathBuf};

/// More than any config anyone writes by hand; the file is read whole.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// What `gputaskman config init` writes: every key, set to the value it
/// has when the file does not set it (a test checks they agree).
pub const DEFAULTS: &str = r#"# gputaskman's settings. A flag on the command line wins over the value here.
# Unknown keys are an error. `gputaskman config init` wrote this file.

# Seconds between refreshes of the live view and of `record` (--interval).
interval = 1.0

# The live view's first sort column (--sort; `s` cycles it):
# "vram", "spill", "gpu", "cpu", "name" or "pid".
sort = "vram"

# Colours (--light, --no-color; NO_COLOR also turns them off):
# "default" (dark backgrounds), "light" or "no-color".
theme = "default"

# ASCII only: no box drawing, block glyphs or other non-ASCII text (--ascii).
ascii = false

# Show these hosts' `gputaskman serve` instead of this machine (--remote),
# and send them the token in this file (--remote-token-file; a relative path
# is taken from this file's folder). Empty: this machine. For https://
# hosts, the CA their certificates chain to (--remote-ca), and for hosts
# that ask for one, this client's certificate and key (--remote-cert,
# --remote-key).
remote = []
# remote_token_file = "token"
# remote_ca = "ca.pem"
# remote_cert = "client.pem"
# remote_key = "client.key"

# Show every host Prometheus scrapes `gputaskman serve` on (--prometheus),
# with a bearer token or user:password from a file
# (--prometheus-token-file, --prometheus-basic-auth-file) and, for an
# https:// URL, the CA it chains to (--prometheus-ca). Unset: not used.
# prometheus = "http://127.0.0.1:9090"
# prometheus_token_file = "prometheus-token"
# prometheus_basic_auth_file = "prometheus-auth"
# prometheus_ca = "prometheus-ca.pem"

# Ask the runtimes found (llama.cpp, Ollama, vLLM, ...) which models they
# hold, over their local HTTP APIs (--no-discovery turns it off).
discovery = true

# The live view sends no signal: `k` is refused (--readonly).
readonly = false

# The live view's columns, in this order (`m` still shows them all). Known:
# "pid", "device" (the GPU index), "name", "user", "container", "kind",
# "runtime", "vram", "spill", "paged", "gpu" (GPU%), "cpu", "rss", "model",
# "inside", "command". A narrow terminal leaves some out (README: columns).
# columns = ["pid", "device", "name", "user", "vram", "gpu", "cpu", "model"]
"#;

/// The `theme` key; the flags are `--light` and `--no-color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Theme {
    Default,
    Light,
    NoColor,
}

/// The file's keys. Each is optional: an absent key leaves the default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default, deserialize_with = "seconds")]
    interval: Option<f64>,
    sort: Option<SortKey>,
    theme: Option<Theme>,
    ascii: Option<bool>,
    remote: Option<Vec<String>>,
    remote_token_file: Option<PathBuf>,
    remote_ca: Option<PathBuf>,
    remote_cert: Option<PathBuf>,
    remote_key: Option<PathBuf>,
    prometheus: Option<String>,
    prometheus_token_file: Option<PathBuf>,
    prometheus_basic_auth_file: Option<PathBuf>,
    prometheus_ca: Option<PathBuf>,
    discovery: Option<bool>,
    readonly: Option<bool>,
    #[serde(default, deserialize_with = "columns")]
    columns: Option<Vec<Column>>,
}

/// Bounded as the flag is (`cli::values::seconds`), so the error has the line.
fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let value = f64::deserialize(d)?;
    crate::cli::values::seconds(&value.to_string())
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// Column names, each known and named once, at least one.
fn columns<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<Column>>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    let mut out = Vec::with_capacity(names.len());
    for name in &names {
        let column = Column::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = Column::ALL.iter().map(|c| c.name()).collect();
            serde::de::Error::custom(format!(
                "columns: no column {}; known: {}",
                crate::view::safe_text::safe(name),
                known.join(", ")
            ))
        })?;
        if out.contains(&column) {
            return Err(serde::de::Error::custom(format!("columns: {name} is named twice")));
        }
        out.push(column);
    }
    if out.is_empty() {
        return Err(serde::de::Error::custom("columns: name at least one"));
    }
    Ok(Some(out))
}

/// Where the config file is when `--config` does not say.
pub fn default_path() -> Option<PathBuf> {
    // The XDG base directory spec: $XDG_CONFIG_HOME if set and absolute,
    // else ~/.config. Windows has neither; there %APPDATA% is the place.
    let env_dir = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|p| p.is_absolute());
    let base = env_dir("XDG_CONFIG_HOME")
        .or_else(|| env_dir("HOME").map(|h| h.join(".config")))
        .or_else(|| env_dir("APPDATA"))?;
    Some(base.join("gputaskman").join("config.toml"))
}

/// Reads the config file (the one `--config` names, which must exist, or
/// the default one, if it exists) into `cli` wherever the command line did
/// not set the value itself.
pub fn apply(cli: &mut Cli, matches: &ArgMatches) -> anyhow::Result<()> {
    let path = match &cli.config {
        Some(path) => path.clone(),
        None => match default_path() {
            Some(path) if path.exists() => path,
            _ => return Ok(()),
        },
    };
    let bytes = gguf::regular_file::read_capped(&path, MAX_CONFIG_BYTES)
        .with_context(|| format!("config {}", path.display()))?;
    let file = parse(&String::from_utf8_lossy(&bytes)).with_context(|| format!("config {}", path.display()))?;
    let from_line = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    if let (Some(interval), false) = (file.interval, from_line("interval")) {
        cli.interval = interval;
    }
    if cli.sort.is_none() {
        cli.sort = file.sort;
    }
    if !(cli.light || cli.no_color) {
        match file.theme {
            Some(Theme::Light) => cli.light = true,
            Some(Theme::NoColor) => cli.no_color = true,
            Some(Theme::Default) | None => {}
        }
    }
    cli.ascii |= file.ascii == Some(true);
    cli.no_discovery |= file.discovery == Some(false);
    cli.readonly |= file.readonly == Some(true);
    cli.columns = file.columns;
    let dir = path.parent().unwrap_or(Path::new(""));
    // The command line's --remote or --prometheus wins over the file's
    // either.
    if cli.remote.is_none() && cli.prometheus.is_none() && file.prometheus.is_some() {
        cli.prometheus = file.prometheus;
        unless_given(
            dir,
            [
                (&mut cli.prometheus_token_file, file.prometheus_token_file),
                (&mut cli.prometheus_basic_auth_file, file.prometheus_basic_auth_file),
                (&mut cli.prometheus_ca, file.prometheus_ca),
            ],
        );
    }
    if cli.remote.is_none() && cli.prometheus.is_none() {
        cli.remote = file
            .remote
            .filter(|hosts| !hosts.is_empty())
            .map(|hosts| hosts.join(","));
        unless_given(
            dir,
            [
                (&mut cli.remote_token_file, file.remote_token_file),
                (&mut cli.remote_ca, file.remote_ca),
                (&mut cli.remote_cert, file.remote_cert),
                (&mut cli.remote_key, file.remote_key),
            ],
        );
    }
    Ok(())
}

/// Each file's path where its flag was not given, taken from the config
/// file's folder `dir` when relative.
fn unless_given<const N: usize>(dir: &Path, paths: [(&mut Option<PathBuf>, Option<PathBuf>); N]) {
    for (flag, key) in paths {
        if flag.is_none() {
            *flag = key.map(|p| dir.join(p));
        }
    }
}

fn parse(text: &str) -> anyhow::Result<File> {
    // One line, "line N: what": toml's own report spans several lines
    // with the source quoted, and errors are printed escaped, on one line.
    toml::from_str(text).map_err(|e| match e.span() {
        Some(span) => {
            let line = text.get(..span.start).unwrap_or(text).matches('\n').count() + 1;
            anyhow::anyhow!("line {line}: {}", e.message())
        }
        None => anyhow::anyhow!("{}", e.message()),
    })
}

/// `gputaskman config init [--force]`: the defaults, commented, at the
/// config path.
pub fn init(cli: &Cli, force: bool, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let path = cli
        .config
        .clone()
        .or_else(default_path)
        .context("no config folder: set XDG_CONFIG_HOME or HOME, or give --config FILE")?;
    if path.exists() && !force {
        anyhow::bail!("{} exists; --force replaces it", path.display());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&path, DEFAULTS).with_context(|| format!("writing {}", path.display()))?;
    writeln!(
        out,
        "wrote {}",
        crate::view::safe_text::safe(&path.display().to_string())
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use clap::FromArgMatches;

    /// The command line `args` with the config `text` applied.
    fn with_config(text: &str, args: &[&str]) -> anyhow::Result<Cli> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        let mut argv = vec!["gputaskman", "--config", path.to_str().unwrap()];
        argv.extend_from_slice(args);
        let matches = Cli::command().try_get_matches_from(argv).unwrap();
        let mut cli = Cli::from_arg_matches(&matches).unwrap();
        apply(&mut cli, &matches)?;
        Ok(cli)
    }

    #[test]
    fn the_written_defaults_are_the_defaults_of_the_flags() {
        let plain = Cli::command().try_get_matches_from(["gputaskman"]).unwrap();
        let plain = Cli::from_arg_matches(&plain).unwrap();
        let file: File = parse(DEFAULTS).unwrap();
        assert_eq!(file.interval, Some(plain.interval));
        assert_eq!(file.sort, Some(crate::view::tui::app::App::new(true, false).sort));
        assert_eq!(file.theme, Some(Theme::Default));
        assert_eq!(file.ascii, Some(plain.ascii));
        assert_eq!(file.discovery, Some(!plain.no_discovery));
        assert_eq!(file.remote, Some(vec![]));
        assert_eq!(file.readonly, Some(plain.readonly));
        assert_eq!(file.columns, None);
        let cli = with_config(DEFAULTS, &[]).unwrap();
        assert_eq!(cli.remote, None);
        assert!(!cli.light && !cli.no_color && !cli.ascii && !cli.no_discovery);
    }

    #[test]
    fn every_key_is_applied() {
        let cli = with_config(
            "interval = 2.5\nsort = \"name\"\ntheme = \"light\"\nascii = true\n\
             remote = [\"http://a:9464\", \"http://b:9464\"]\nremote_token_file = \"tok\"\ndiscovery = false\n\
             readonly = true\ncolumns = [\"vram\", \"pid\", \"user\"]\n",
            &[],
        )
        .unwrap();
        assert_eq!(cli.interval, 2.5);
        assert_eq!(cli.sort, Some(SortKey::Name));
        assert!(cli.light && !cli.no_color && cli.ascii && cli.no_discovery && cli.readonly);
        assert_eq!(cli.columns, Some(vec![Column::Vram, Column::Pid, Column::User]));
        assert_eq!(cli.remote.as_deref(), Some("http://a:9464,http://b:9464"));
        let token = cli.remote_token_file.unwrap();
        assert_eq!(token.file_name().unwrap(), "tok");
        assert_eq!(token.parent(), cli.config.as_deref().unwrap().parent());
        assert!(with_config("theme = \"no-color\"\n", &[]).unwrap().no_color);
        let usage = with_config("sort = \"gpu-time\"\ncolumns = [\"pid\", \"energy\"]\n", &[]).unwrap();
        assert_eq!(usage.sort, Some(SortKey::GpuTime));
        assert_eq!(usage.columns, Some(vec![Column::Pid, Column::Energy]));
        assert_eq!(
            with_config("", &["--sort", "energy"]).unwrap().sort,
            Some(SortKey::Energy)
        );
    }

    #[test]
    fn flags_win_over_the_file() {
        let text = "interval = 2.5\nsort = \"name\"\ntheme = \"light\"\nremote = [\"http://a:9464\"]\n";
        let cli = with_config(
            text,
            &[
                "--interval",
                "0.5",
                "--sort",
                "pid",
                "--no-color",
                "--remote",
                "http://c:1",
            ],
        )
        .unwrap();
        assert_eq!(cli.interval, 0.5);
        assert_eq!(cli.sort, Some(SortKey::Pid));
        assert!(cli.no_color && !cli.light);
        assert_eq!(cli.remote.as_deref(), Some("http://c:1"));
        // The flag's default is not a flag given: the file's value stands.
        assert_eq!(with_config(text, &["--interval", "1"]).unwrap().interval, 1.0);
        assert_eq!(with_config(text, &[]).unwrap().interval, 2.5);
    }

    #[test]
    fn an_unknown_key_is_an_error_with_its_line() {
        let e = with_config("interval = 2\n\nrefresh = 3\n", &[]).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("line 3"), "{text}");
        assert!(text.contains("unknown field `refresh`"), "{text}");
    }

    #[test]
    fn bad_values_are_errors_with_their_line() {
        for (text, line, says) in [
            (
                "readonly = \"yes\"\n",
                "line 1",
                "invalid type: string \"yes\", expected a boolean",
            ),
            (
                "sort = \"vram\"\ncolumns = [\"pid\", \"vrma\"]\n",
                "line 2",
                "columns: no column vrma; known: host, pid, device, name",
            ),
            (
                "\n\ncolumns = [\"pid\", \"pid\"]\n",
                "line 3",
                "columns: pid is named twice",
            ),
            ("columns = []\n", "line 1", "columns: name at least one"),
            ("\ninterval = 0\n", "line 2", "more than 0 and at most 86400"),
            ("sort = \"size\"\n", "line 1", "unknown variant `size`"),
            ("theme = \"solarized\"\n", "line 1", "unknown variant `solarized`"),
        ] {
            let e = format!("{:#}", with_config(text, &[]).unwrap_err());
            assert!(e.contains(line) && e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_missing_config_named_by_the_flag_is_an_error() {
        let matches = Cli::command()
            .try_get_matches_from(["gputaskman", "--config", "/nonexistent/gputaskman.toml"])
            .unwrap();
        let mut cli = Cli::from_arg_matches(&matches).unwrap();
        let e = format!("{:#}", apply(&mut cli, &matches).unwrap_err());
        assert!(e.contains("/nonexistent/gputaskman.toml"), "{e}");
    }
}
