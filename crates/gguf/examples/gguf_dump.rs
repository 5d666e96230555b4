//! Prints what a GGUF file is and its KV cache at the training context:
//! `cargo run --release -p gguf --example gguf_dump -- FILE [FILE...]`.
//! Used by scripts/bench_gguf.sh to time the header read.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for arg in std::env::args_os().skip(1) {
        let path = Path::new(&arg);
        let model = match gguf::open(path) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("{e}");
                status = ExitCode::FAILURE;
                continue;
            }
        };
        let info = model.info();
        println!(
            "{}: {} {:?}, {} tensors, {:?} params, {:?} bytes of weights, {} metadata keys",
            path.display(),
            info.architecture.as_deref().unwrap_or("?"),
            info.kind,
            info.tensors,
            info.params,
            info.weights_bytes,
            model.metadata().len(),
        );
        match gguf::estimate(&model, &gguf::KvSettings::default()) {
            Ok(e) => println!("  KV at {} cells: {} bytes", e.kv.context, e.kv.bytes),
            Err(e) => println!("  KV: n/a ({e})"),
        }
    }
    status
}
