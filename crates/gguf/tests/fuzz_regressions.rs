//! Inputs that once crashed the `gguf_reader` fuzz target (fuzz/): each
//! must now end in a value or an error.

use std::io::Cursor;
use std::path::Path;

#[test]
fn former_fuzz_crashes_are_errors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        if let Ok(header) = gguf::read_header(Cursor::new(bytes)) {
            if let Ok(model) = gguf::Model::from_header(&path, header) {
                let _ = gguf::estimate(&model, &gguf::KvSettings::default());
            }
        }
        seen += 1;
    }
    assert!(seen > 0, "no inputs in {}", dir.display());
}
