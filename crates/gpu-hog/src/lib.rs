//! The real-driver check kit of `scripts/device-check.sh`, in two small
//! binaries that need nothing but the NVIDIA driver where they run:
//!
//! - `gpu-hog SIZE`: holds SIZE bytes of device memory through the CUDA
//!   driver API, loaded at run time from `libcuda.so.1` (no CUDA toolkit),
//!   until SIGTERM or SIGINT ([`cuda`]); `gpu-hog --context-only` holds a
//!   context alone, the driver's own cost;
//! - `gpu-check`: compares a `gputaskman --json` snapshot with what
//!   `nvidia-smi` says of the same moment ([`compare`]), so the check is a
//!   pure function tested here with canned `nvidia-smi` output.

pub mod compare;
/// Linux only: `libcuda.so.1` and POSIX signals.
#[cfg(target_os = "linux")]
pub mod cuda;

/// Bytes from `2GiB`, `512MiB`, `64KiB` or a plain number of bytes (binary
/// units only: `GB` is refused rather than guessed at).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        "TiB" => 40,
        other => return Err(format!("{other:?}: give bytes, or KiB, MiB, GiB, TiB (binary units)")),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: give a whole number with an optional unit, e.g. 2GiB"))?;
    number
        .checked_mul(1 << shift)
        .filter(|bytes| *bytes > 0)
        .ok_or_else(|| format!("{text:?}: more than 0 bytes and less than 2^64"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_are_binary_units_or_bytes() {
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("5 GiB"), Ok(5 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        for bad in ["", "GiB", "2GB", "2 gb", "-1GiB", "0", "99999999999TiB", "1.5GiB"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
