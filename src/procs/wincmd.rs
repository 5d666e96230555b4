//! Windows command lines, split into arguments: pure, so tested everywhere
//! (the Windows process scan reads the line as one string).

/// Splits a Windows command line as CommandLineToArgvW (and the C
/// runtime) do: whitespace separates, double quotes group, and backslashes
/// count only before a quote: 2n backslashes and a quote are n backslashes
/// and the quote toggles grouping; 2n+1 backslashes and a quote are n
/// backslashes and a literal quote; backslashes elsewhere are literal.
pub fn split_command_line(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let (mut quoted, mut any) = (false, false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let mut n = 1;
                while chars.peek() == Some(&'\\') {
                    chars.next();
                    n += 1;
                }
                any = true;
                if chars.peek() == Some(&'"') {
                    chars.next();
                    current.extend(std::iter::repeat_n('\\', n / 2));
                    match n % 2 {
                        1 => current.push('"'),
                        _ => quoted = !quoted,
                    }
                } else {
                    current.extend(std::iter::repeat_n('\\', n));
                }
            }
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut current));
                    any = false;
                }
            }
            c => {
                current.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::split_command_line;

    #[test]
    fn quotes_group_and_whitespace_separates() {
        assert_eq!(
            split_command_line(r#""C:\Program Files\llama\llama-server.exe"  -m "D:\models\my model.gguf" -c 4096"#),
            [
                "C:\\Program Files\\llama\\llama-server.exe",
                "-m",
                "D:\\models\\my model.gguf",
                "-c",
                "4096"
            ]
        );
        assert_eq!(split_command_line(r#"a "" b"#), ["a", "", "b"]);
        assert!(split_command_line("   ").is_empty());
        assert_eq!(split_command_line(r#"x "unterminated arg"#), ["x", "unterminated arg"]);
    }

    #[test]
    fn backslashes_count_only_before_a_quote() {
        // Microsoft's examples for CommandLineToArgvW / the C runtime.
        assert_eq!(split_command_line(r#""abc" d e"#), ["abc", "d", "e"]);
        assert_eq!(split_command_line(r#"a\\b d"e f"g h"#), [r"a\\b", "de fg", "h"]);
        assert_eq!(split_command_line(r#"a\\\"b c d"#), [r#"a\"b"#, "c", "d"]);
        assert_eq!(split_command_line(r#"a\\\\"b c" d e"#), [r"a\\b c", "d", "e"]);
        assert_eq!(
            split_command_line(r#"C:\dir\ "D:\a b\\" x"#),
            [r"C:\dir\", r"D:\a b\", "x"]
        );
        assert_eq!(split_command_line(r"trailing\\"), [r"trailing\\"]);
    }

    #[test]
    fn an_escaped_quote_in_a_secret_does_not_split_it_past_redaction() {
        let line = r#"server.exe --api-key "ab\"cd ef" --port 8080"#;
        let argv = split_command_line(line);
        assert_eq!(argv, ["server.exe", "--api-key", r#"ab"cd ef"#, "--port", "8080"]);
        let shown = crate::procs::redact::join_args(&crate::procs::redact::redact_args(&argv));
        assert!(!shown.contains("ab") && !shown.contains("ef"), "{shown}");
        assert!(shown.contains(crate::procs::redact::REDACTED), "{shown}");
    }
}
