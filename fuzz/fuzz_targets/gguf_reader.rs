//! Any bytes through the header reader, and what it reads through the
//! memory math: must end in a value or an error, never a panic, a hang or
//! an unbounded allocation.
#![no_main]

use std::io::Cursor;
use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(header) = gguf::read_header(Cursor::new(data)) else {
        return;
    };
    let Ok(model) = gguf::Model::from_header(Path::new("fuzz.gguf"), header) else {
        return;
    };
    let settings = gguf::KvSettings {
        n_gpu_layers: Some(8),
        ..gguf::KvSettings::default()
    };
    let _ = gguf::estimate(&model, &settings);
    let _ = gguf::fit(&model, &settings, 8 << 30);
});
