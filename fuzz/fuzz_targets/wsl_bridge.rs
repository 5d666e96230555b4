//! The WSL host bridge's stream (powershell.exe on the Windows side, read
//! through interop): any lines give samples, errors or nothing, never a
//! panic; the parser's error list stays bounded however many bad lines come.
#![no_main]

use gputaskman::collect::wsl::{Event, Parser};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = gputaskman_fuzz::text(data);
    let mut parser = Parser::default();
    for line in text.split('\n') {
        match parser.line(line) {
            Event::Sample(sample) => {
                assert!(sample.errors.len() <= 6, "{} errors kept", sample.errors.len());
                assert!(sample.notes.len() <= 6, "{} notes kept", sample.notes.len());
            }
            Event::Error(e) => assert!(!e.is_empty()),
            Event::None => {}
        }
    }
});
