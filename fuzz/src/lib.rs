//! Helpers the fuzz targets share. The parsers themselves are gputaskman's
//! own, called through its library API.

/// Splits fuzz input into up to `n` parts at NUL bytes (the last part takes
/// the rest), so one input can feed several files or fields.
pub fn split(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts: Vec<&[u8]> = data.splitn(n, |b| *b == 0).collect();
    parts.resize(n, b"");
    parts
}

/// Bytes as text the way the binary reads files: lossy UTF-8.
pub fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}
