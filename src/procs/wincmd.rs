//! Windows command lines, split into arguments: pure, so tested everywhere
//! (the Windows process scan reads the line as one string).

/// Splits a Windows command line the way most programs' C runtime does:
/// whitespace separates, double quotes group (CommandLineToArgvW's rules
/// without its backslash subtleties, enough to find model paths).
pub fn split_command_line(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let (mut quoted, mut any) = (false, false);
    for c in line.chars() {
        match c {
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
}
