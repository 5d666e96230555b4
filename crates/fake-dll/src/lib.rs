//! What the three fake DLLs (fake-nvml, fake-pdh, fake-dxgi) do alike:
//! read a JSON scenario file with errors that name it, run an export's body
//! so that a panic becomes the library's own failure code instead of
//! unwinding into C, and move strings across the C ABI (NUL-terminated
//! bytes out, UTF-16 in and out) with the caller's limits checked.

use serde::de::DeserializeOwned;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// Says something on stderr: a fake DLL has no other channel, and a test
/// that fails shows it.
pub fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// Reads and parses the scenario at `path`; the error names the library
/// (`dll`, e.g. `fake-nvml`) and the file.
pub fn load_scenario<T: DeserializeOwned>(dll: &str, path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{dll}: cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{dll}: cannot parse {}: {e}", path.display()))
}

/// Runs an export's body: `Ok` is `success`, `Err(code)` the code, and a
/// panic `panicked` (a panic must not unwind across the C ABI).
pub fn guard<C>(success: C, panicked: C, body: impl FnOnce() -> Result<(), C>) -> C {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => success,
        Ok(Err(code)) => code,
        Err(_) => panicked,
    }
}

/// Why a string could not cross the ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrError {
    /// The caller passed a null pointer.
    Null,
    /// The caller's buffer is too small for the text and its NUL.
    TooSmall,
    /// A string read has no NUL within the limit.
    TooLong,
}

/// Copies `text` and a NUL into a caller's buffer of `length` bytes.
///
/// # Safety
/// `buffer` is null or valid for writing `length` bytes.
pub unsafe fn put_c_str(buffer: *mut std::os::raw::c_char, length: usize, text: &str) -> Result<(), StrError> {
    if buffer.is_null() {
        return Err(StrError::Null);
    }
    if text.len() >= length {
        return Err(StrError::TooSmall);
    }
    // SAFETY: the caller gave `length` bytes, more than text and its NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buffer.cast::<u8>(), text.len());
        buffer.add(text.len()).write(0);
    }
    Ok(())
}

/// A NUL-terminated UTF-16 string of at most `max` units, read lossily.
///
/// # Safety
/// `p` is null or points to a NUL-terminated wide string.
pub unsafe fn read_wide(p: *const u16, max: usize) -> Result<String, StrError> {
    if p.is_null() {
        return Err(StrError::Null);
    }
    let mut len = 0;
    // SAFETY: the string is NUL-terminated; reading stops there or at the cap.
    while len < max && unsafe { *p.add(len) } != 0 {
        len += 1;
    }
    if len == max {
        return Err(StrError::TooLong);
    }
    // SAFETY: len units were just read.
    Ok(String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(p, len) }))
}

/// `text` in a fixed UTF-16 field of `N` units (Windows' `WCHAR x[N]`), cut
/// to `N - 1` units so the last stays the NUL.
pub fn wide_field<const N: usize>(text: &str) -> [u16; N] {
    let mut field = [0u16; N];
    for (slot, unit) in field.iter_mut().zip(text.encode_utf16().take(N.saturating_sub(1))) {
        *slot = unit;
    }
    field
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_error_names_the_library_and_the_file() {
        let dir = std::env::temp_dir().join(format!("fake-dll-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{").unwrap();
        let err = load_scenario::<serde_json::Value>("fake-x", &bad).unwrap_err();
        assert!(
            err.starts_with("fake-x: cannot parse ") && err.contains("bad.json"),
            "{err}"
        );
        let err = load_scenario::<serde_json::Value>("fake-x", &dir.join("none.json")).unwrap_err();
        assert!(
            err.starts_with("fake-x: cannot read ") && err.contains("none.json"),
            "{err}"
        );
        std::fs::write(&bad, r#"{"a": 1}"#).unwrap();
        assert_eq!(load_scenario::<serde_json::Value>("fake-x", &bad).unwrap()["a"], 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_panic_becomes_the_failure_code() {
        assert_eq!(guard(0, 99, || Ok(())), 0);
        assert_eq!(guard(0, 99, || Err(7)), 7);
        assert_eq!(guard(0, 99, || panic!("inside an export")), 99);
    }

    #[test]
    fn strings_cross_with_the_callers_limits() {
        let mut buf = [1 as std::os::raw::c_char; 4];
        // SAFETY: buf holds 4 bytes.
        unsafe {
            assert_eq!(put_c_str(buf.as_mut_ptr(), 4, "abcd"), Err(StrError::TooSmall));
            assert_eq!(put_c_str(buf.as_mut_ptr(), 4, "abc"), Ok(()));
            assert_eq!(put_c_str(std::ptr::null_mut(), 4, "a"), Err(StrError::Null));
        }
        assert_eq!(buf.map(|c| c as u8), *b"abc\0");
        let wide: Vec<u16> = "Ä\\x".encode_utf16().chain([0]).collect();
        // SAFETY: NUL-terminated.
        unsafe {
            assert_eq!(read_wide(wide.as_ptr(), 8).as_deref(), Ok("Ä\\x"));
            assert_eq!(read_wide(wide.as_ptr(), 3), Err(StrError::TooLong));
            assert_eq!(read_wide(std::ptr::null(), 8), Err(StrError::Null));
        }
        let field: [u16; 4] = wide_field("NVIDIA");
        assert_eq!(field, [u16::from(b'N'), u16::from(b'V'), u16::from(b'I'), 0]);
    }
}
