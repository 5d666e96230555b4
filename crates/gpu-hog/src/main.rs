//! `gpu-hog SIZE [--device N]`: holds SIZE of device memory until SIGTERM
//! or SIGINT; `gpu-hog --context-only` holds a CUDA context and allocates
//! nothing. See crates/gpu-hog/src/lib.rs.
//!
//! Linux's only: it loads `libcuda.so.1` and waits on POSIX signals. Built
//! elsewhere (a workspace check for Windows), it says so and exits 2.

#[cfg(target_os = "linux")]
mod linux {
    use clap::Parser;
    use gpu_hog::cuda::{block_stop_signals, wait_for_stop, Cuda};

    #[derive(Parser)]
    #[command(
        version,
        about = "Hold device memory through the CUDA driver API until SIGTERM or SIGINT."
    )]
    struct Args {
        /// How much: 2GiB, 512MiB, or bytes.
        #[arg(value_parser = gpu_hog::parse_size, required_unless_present = "context_only")]
        size: Option<u64>,
        /// Create the context and allocate nothing: what the driver alone
        /// costs a process (scripts/device-check.sh records it per GPU).
        #[arg(long, conflicts_with = "size")]
        context_only: bool,
        /// The CUDA device ordinal (as CUDA_VISIBLE_DEVICES leaves them).
        #[arg(long, default_value_t = 0)]
        device: i32,
        /// Load this library instead of libcuda.so.1.
        #[arg(long, value_name = "PATH")]
        lib: Option<String>,
    }

    pub fn main() {
        let stop = block_stop_signals();
        gpu_hog::cuda::stop_with_parent();
        let args = Args::parse();
        if let Err(failure) = run(&args, &stop) {
            eprintln!("gpu-hog: {failure}");
            std::process::exit(failure.exit_code());
        }
    }

    fn run(args: &Args, stop: &libc::sigset_t) -> Result<(), gpu_hog::cuda::Failure> {
        let cuda = Cuda::load(args.lib.as_deref())?;
        let held = cuda.hold(args.device, args.size.unwrap_or(0))?;
        // The line scripts wait for.
        println!(
            "gpu-hog: pid {} holds {} bytes on CUDA device {}",
            std::process::id(),
            held.bytes,
            held.device
        );
        let signal = wait_for_stop(stop);
        eprintln!("gpu-hog: signal {signal}: freeing and exiting");
        drop(held);
        Ok(())
    }
}

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("gpu-hog: holds memory through Linux's libcuda.so.1; this is not Linux");
    std::process::exit(2);
}
