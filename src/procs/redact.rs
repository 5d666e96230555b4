//! Secrets never leave the machine through gputaskman: every command line is
//! redacted before it enters a snapshot, so text, JSON, the live view,
//! metrics and recordings all see the same redacted string.
//!
//! What counts as a secret:
//! - the value of a flag whose name has a secret word in it (`--api-key X`,
//!   `--api_key=X`, `--hf-token X`, `--password=X`, `-token X`), except flags
//!   that name a file holding the secret (`--ssl-key-file`): a path is not the
//!   secret;
//! - `NAME=value` arguments whose NAME has a secret word (`OPENAI_API_KEY=...`);
//! - URL credentials (`https://user:pass@host`) and secret query parameters
//!   (`?token=...`);
//! - `Bearer <token>` in header arguments;
//! - well-known token shapes anywhere (`sk-...`, `hf_...`, `ghp_...`).

pub const REDACTED: &str = "<redacted>";

/// Words that make a flag or variable name secret, matched against the
/// name's `-`/`_`/`.`-separated words so that `--tokenizer` or
/// `--max-tokens` are left alone.
const SECRET_WORDS: &[&str] = &[
    "key",
    "apikey",
    "token",
    "password",
    "passwd",
    "pass",
    "pwd",
    "secret",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "bearer",
    "cookie",
];

/// Last words of a flag name that make its value a path, not a secret.
const PATH_WORDS: &[&str] = &["file", "path", "dir", "fd"];

/// Token prefixes of common providers (OpenAI, Hugging Face, GitHub, Slack,
/// Anthropic, AWS access keys) that are redacted wherever they appear.
const TOKEN_PREFIXES: &[&str] = &[
    "sk-",
    "hf_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "AKIA",
];

fn is_secret_name(name: &str) -> bool {
    let lower = name.trim_start_matches('-').to_ascii_lowercase();
    let words: Vec<&str> = lower.split(['-', '_', '.']).filter(|w| !w.is_empty()).collect();
    let Some(last) = words.last() else {
        return false;
    };
    // `--ssl-key-file` names a path; `--no-auth` is a switch with no value.
    if PATH_WORDS.contains(last) || words.first() == Some(&"no") {
        return false;
    }
    // `api-key`, `apikey`, `access_token`, `OPENAI_API_KEY`, `x-api-key`.
    words.iter().any(|w| SECRET_WORDS.contains(w))
}

fn looks_like_token(word: &str) -> bool {
    TOKEN_PREFIXES.iter().any(|p| {
        word.strip_prefix(p).is_some_and(|rest| {
            rest.len() >= 16 && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
    })
}

/// Redacts credentials in a URL (`scheme://user:pass@host`) and the values of
/// secret query parameters. Returns None when there is nothing to change.
fn redact_url(arg: &str) -> Option<String> {
    let scheme_end = arg.find("://")?;
    let rest_start = scheme_end + 3;
    let rest = &arg[rest_start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let mut out = String::with_capacity(arg.len());
    out.push_str(&arg[..rest_start]);
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon + 1]);
                    out.push_str(REDACTED);
                }
                // A lone userinfo is usually a token (`https://TOKEN@host`).
                None => out.push_str(REDACTED),
            }
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    let tail = &rest[authority_end..];
    match tail.find('?') {
        Some(q) => {
            out.push_str(&tail[..q + 1]);
            let (query, fragment) = match tail[q + 1..].find('#') {
                Some(h) => (&tail[q + 1..q + 1 + h], &tail[q + 1 + h..]),
                None => (&tail[q + 1..], ""),
            };
            let params: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if is_secret_name(k) => format!("{k}={REDACTED}"),
                    _ => kv.to_string(),
                })
                .collect();
            out.push_str(&params.join("&"));
            out.push_str(fragment);
        }
        None => out.push_str(tail),
    }
    (out != arg).then_some(out)
}

/// Redacts one argument that carries no secret flag before it.
fn redact_word(arg: &str) -> String {
    if let Some((name, value)) = arg.split_once('=') {
        // `--api-key=X`, `API_KEY=X`; the name must look like a name, not
        // like part of a URL query (handled below).
        if !value.is_empty() && !name.contains("://") && !name.contains(' ') && is_secret_name(name) {
            return format!("{name}={REDACTED}");
        }
    }
    if let Some(url) = redact_url(arg) {
        return url;
    }
    if let Some(pos) = arg.to_ascii_lowercase().find("bearer ") {
        let end = pos + "bearer ".len();
        return format!("{}{REDACTED}", &arg[..end]);
    }
    // A header argument whose name is secret: `X-Api-Key: V`,
    // `Authorization: Basic V`, `--header=Cookie: V`.
    let (flag, header) = match arg.split_once('=') {
        Some((flag, header)) if flag.starts_with('-') && header.contains(':') => (&arg[..=flag.len()], header),
        _ => ("", arg),
    };
    if let Some((name, value)) = header.split_once(':') {
        if !value.trim().is_empty() && !name.is_empty() && !name.contains([' ', '/']) && is_secret_name(name) {
            return format!("{flag}{name}: {REDACTED}");
        }
    }
    if looks_like_token(arg) {
        return REDACTED.to_string();
    }
    arg.to_string()
}

/// Redacts a command line given as its arguments.
pub fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut value_is_secret = false;
    for arg in args {
        if std::mem::take(&mut value_is_secret) && !arg.starts_with("--") {
            out.push(REDACTED.to_string());
            continue;
        }
        if arg.starts_with('-') && !arg.contains('=') && is_secret_name(arg) {
            // The next argument is the value: `--api-key VALUE`.
            value_is_secret = true;
            out.push(arg.clone());
            continue;
        }
        out.push(redact_word(arg));
    }
    out
}

/// Joins arguments into one line a person can read and a shell could take
/// back: arguments with spaces or quotes are single-quoted.
pub fn join_args(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty() && !a.contains([' ', '\t', '\n', '\'', '"', '\\', '$', '`']) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(line: &str) -> String {
        let args: Vec<String> = line.split(' ').map(String::from).collect();
        redact_args(&args).join(" ")
    }

    #[test]
    fn flag_values_are_redacted_in_both_spellings() {
        assert_eq!(
            redact("llama-server -m m.gguf --api-key s3cret --port 8080"),
            "llama-server -m m.gguf --api-key <redacted> --port 8080"
        );
        assert_eq!(redact("srv --api_key=s3cret"), "srv --api_key=<redacted>");
        assert_eq!(
            redact("vllm serve x --hf-token abc"),
            "vllm serve x --hf-token <redacted>"
        );
        assert_eq!(redact("x --password=hunter2"), "x --password=<redacted>");
        assert_eq!(redact("x --passwd hunter2"), "x --passwd <redacted>");
        assert_eq!(redact("x -token abc"), "x -token <redacted>");
        assert_eq!(redact("x --access-token abc"), "x --access-token <redacted>");
        assert_eq!(redact("x --secret abc"), "x --secret <redacted>");
        assert_eq!(redact("x --auth user:pw"), "x --auth <redacted>");
    }

    #[test]
    fn names_that_only_look_secret_are_left_alone() {
        let line = "vllm serve m --tokenizer /m/tok --max-tokens 512 --keep-alive 5m --kv-unified \
                    --ssl-key-file /etc/k.pem --cache-type-k q8_0";
        assert_eq!(redact(line), line);
    }

    #[test]
    fn environment_style_assignments_are_redacted() {
        assert_eq!(
            redact("env OPENAI_API_KEY=sk-abc HF_TOKEN=x PATH=/bin python app.py"),
            "env OPENAI_API_KEY=<redacted> HF_TOKEN=<redacted> PATH=/bin python app.py"
        );
    }

    #[test]
    fn url_credentials_and_secret_query_values_are_redacted() {
        assert_eq!(
            redact("app --db postgres://admin:pw@127.0.0.1:5432/db"),
            "app --db postgres://admin:<redacted>@127.0.0.1:5432/db"
        );
        assert_eq!(
            redact("git clone https://ghtoken@example.invalid/r.git"),
            "git clone https://<redacted>@example.invalid/r.git"
        );
        assert_eq!(
            redact("curl http://127.0.0.1/x?model=a&api_key=zzz&n=1#f"),
            "curl http://127.0.0.1/x?model=a&api_key=<redacted>&n=1#f"
        );
        assert_eq!(
            redact("curl http://127.0.0.1:8080/health"),
            "curl http://127.0.0.1:8080/health"
        );
    }

    #[test]
    fn bearer_headers_and_known_token_shapes_are_redacted() {
        let args: Vec<String> = ["curl", "-H", "Authorization: Bearer abc.def", "http://127.0.0.1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            redact_args(&args),
            ["curl", "-H", "Authorization: Bearer <redacted>", "http://127.0.0.1"]
        );
        assert_eq!(
            redact("run sk-proj-abcdefghijklmnopqrstuvwx hf_abcdefghijklmnopqrstu ok"),
            "run <redacted> <redacted> ok"
        );
        // Other headers with a secret name: the whole value.
        let args: Vec<String> = [
            "-H",
            "X-Api-Key: k1",
            "-H",
            "Authorization: Basic YWxpY2U6cHc=",
            "--header=Cookie: a=b",
            "-H",
            "Accept: text/plain",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            redact_args(&args),
            [
                "-H",
                "X-Api-Key: <redacted>",
                "-H",
                "Authorization: <redacted>",
                "--header=Cookie: <redacted>",
                "-H",
                "Accept: text/plain"
            ]
        );
        // Too short to be a token: a name like `sk-learn` stays.
        assert_eq!(redact("pip install sk-learn"), "pip install sk-learn");
    }

    #[test]
    fn a_secret_flag_without_value_is_kept() {
        assert_eq!(redact("x --api-key"), "x --api-key");
        assert_eq!(redact("x --api-key --port 1"), "x --api-key --port 1");
        assert_eq!(redact("x --no-auth --port 1"), "x --no-auth --port 1");
    }

    #[test]
    fn join_quotes_only_what_needs_it() {
        let args: Vec<String> = ["a", "b c", "it's", ""].iter().map(|s| s.to_string()).collect();
        assert_eq!(join_args(&args), r"a 'b c' 'it'\''s' ''");
    }
}
