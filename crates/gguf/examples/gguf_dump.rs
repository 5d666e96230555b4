//! Prints what a GGUF file is and its KV cache at the training context:
//! `cargo run --release -p gguf --example gguf_dump -- [--repeat N] FILE...`.
//! With `--repeat N` it reads each header N more times and prints the mean
//! time of one read (scripts/bench_gguf.sh uses both forms).

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let mut args: Vec<_> = std::env::args_os().skip(1).collect();
    let mut repeat = 0u32;
    if args.first().is_some_and(|a| a == "--repeat") && args.len() >= 2 {
        repeat = args[1].to_str().and_then(|n| n.parse().ok()).unwrap_or(0);
        args.drain(..2);
    }
    let mut status = ExitCode::SUCCESS;
    for arg in args {
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
        if repeat > 0 {
            let start = Instant::now();
            for _ in 0..repeat {
                if gguf::open(path).is_err() {
                    return ExitCode::FAILURE;
                }
            }
            let mean = start.elapsed().as_secs_f64() / f64::from(repeat);
            println!("  header read: {:.3} ms mean over {repeat} reads", mean * 1e3);
        }
    }
    status
}
