//! How numbers read in every view: bytes in binary units, durations, and
//! timestamps (RFC 3339, as snapshots carry them). Unknown is `n/a`, never 0.
//! The data model and the sources hold raw numbers; only views, notes meant
//! for people, and the wire formats that need text call these.

use std::time::SystemTime;
use time::format_description::well_known::Rfc3339;

/// Binary units, labelled as such; unknown is `n/a`, a measured 0 is `0 B`.
pub fn bytes(b: Option<u64>) -> String {
    const KIB: f64 = 1024.0;
    let Some(b) = b else { return "n/a".into() };
    let v = b as f64;
    if v >= KIB * KIB * KIB {
        format!("{:.2} GiB", v / (KIB * KIB * KIB))
    } else if v >= KIB * KIB {
        format!("{:.1} MiB", v / (KIB * KIB))
    } else if v >= KIB {
        format!("{:.1} KiB", v / KIB)
    } else {
        format!("{b} B")
    }
}

/// A signed move in binary units: `+84.0 MiB`, `-1.50 GiB`.
pub fn signed_bytes(d: i64) -> String {
    let sign = if d < 0 { "-" } else { "+" };
    format!("{sign}{}", bytes(Some(d.unsigned_abs())))
}

/// `1h 2m 3s`, `4m 5s`, `6.0s`.
pub fn duration(s: f64) -> String {
    if !s.is_finite() {
        return "n/a".into();
    }
    let sign = if s < 0.0 { "-" } else { "" };
    let a = s.abs();
    if a < 60.0 {
        return format!("{sign}{a:.1}s");
    }
    let t = a.round() as u64;
    let (h, m, sec) = (t / 3600, (t % 3600) / 60, t % 60);
    if h > 0 {
        format!("{sign}{h}h {m}m {sec}s")
    } else {
        format!("{sign}{m}m {sec}s")
    }
}

/// Energy in J, kJ or MJ: `0.4 J`, `812 J`, `12.3 kJ`, `2.52 MJ`.
pub fn joules(j: Option<f64>) -> String {
    match j {
        None => "n/a".into(),
        Some(j) if !j.is_finite() => "n/a".into(),
        Some(j) if j.abs() < 100.0 => format!("{j:.1} J"),
        Some(j) if j.abs() < 1_000.0 => format!("{j:.0} J"),
        Some(j) if j.abs() < 1_000_000.0 => format!("{:.1} kJ", j / 1e3),
        Some(j) => format!("{:.2} MJ", j / 1e6),
    }
}

/// RFC 3339 UTC with millisecond precision.
pub fn format_unix_nanos(unix_nanos: i128) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(unix_nanos - unix_nanos % 1_000_000).ok()?;
    t.format(&Rfc3339).ok()
}

/// The time now as a snapshot's `taken_at` (empty if the clock cannot be
/// written, which no snapshot reader takes for a time).
pub fn now_rfc3339() -> String {
    format_unix_nanos(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0),
    )
    .unwrap_or_default()
}

/// Seconds since the Unix epoch of an RFC 3339 time.
pub fn unix_seconds(rfc3339: &str) -> Option<f64> {
    let t = time::OffsetDateTime::parse(rfc3339, &Rfc3339).ok()?;
    // Whole seconds and the fraction apart: the nanoseconds since 1970 as
    // one f64 are rounded before the division (2026's need 61 bits), and
    // `…20.123Z` read back as …20.1230001.
    Some(t.unix_timestamp() as f64 + f64::from(t.nanosecond()) / 1e9)
}

/// Where times on screen are told: the machine's local time, or UTC (the
/// tests' screens, the same on every machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    Local,
    Utc,
}

/// An RFC 3339 time (a snapshot's, always UTC) as people read it on
/// screen: in `zone` with its offset, `2026-11-30 18:31:58 +01:00`; where
/// the local offset cannot be read, UTC said as such. `None` when it does
/// not parse (the caller shows it escaped, as written).
pub fn time_on_screen(rfc3339: &str, zone: Zone) -> Option<String> {
    let t = time::OffsetDateTime::parse(rfc3339, &Rfc3339).ok()?;
    let offset = match zone {
        Zone::Local => local_offset(t.unix_timestamp()),
        Zone::Utc => Some(time::UtcOffset::UTC),
    };
    match offset {
        Some(offset) => at_offset(t, offset),
        None => {
            let utc = t.to_offset(time::UtcOffset::UTC);
            utc.format(time::macros::format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second] UTC"
            ))
            .ok()
        }
    }
}

/// `t` at `offset`, to the second, with the offset written out.
fn at_offset(t: time::OffsetDateTime, offset: time::UtcOffset) -> Option<String> {
    t.to_offset(offset)
        .format(time::macros::format_description!(
            "[year]-[month]-[day] [hour]:[minute]:[second] [offset_hour sign:mandatory]:[offset_minute]"
        ))
        .ok()
}

/// The local offset from UTC at `unix` seconds (daylight saving included),
/// from the C library's `localtime_r` (TZ, /etc/localtime): thread-safe,
/// unlike `time`'s own reading, which refuses once threads run.
#[cfg(unix)]
fn local_offset(unix: i64) -> Option<time::UtcOffset> {
    // time_t is 32 bits on some targets.
    #[allow(clippy::useless_conversion)]
    let at: libc::time_t = unix.try_into().ok()?;
    // SAFETY: `tm` is plain data written by localtime_r, which reads `at`
    // and returns null on failure.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(&at, &mut tm) }.is_null() {
        return None;
    }
    time::UtcOffset::from_whole_seconds(i32::try_from(tm.tm_gmtoff).ok()?).ok()
}

/// Elsewhere the offset is not read: times are shown as UTC, said so.
#[cfg(not(unix))]
fn local_offset(_unix: i64) -> Option<time::UtcOffset> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_reads_in_j_kj_and_mj() {
        let said: Vec<String> = [
            None,
            Some(0.44),
            Some(812.4),
            Some(12_345.0),
            Some(2_520_000.0),
            Some(f64::NAN),
        ]
        .into_iter()
        .map(joules)
        .collect();
        assert_eq!(said, ["n/a", "0.4 J", "812 J", "12.3 kJ", "2.52 MJ", "n/a"]);
    }

    #[test]
    fn a_time_on_screen_is_local_with_its_offset() {
        let t = time::OffsetDateTime::parse("2026-11-30T17:31:58.250Z", &Rfc3339).unwrap();
        let plus = time::UtcOffset::from_hms(5, 30, 0).unwrap();
        assert_eq!(at_offset(t, plus).unwrap(), "2026-11-30 23:01:58 +05:30");
        let minus = time::UtcOffset::from_hms(-8, 0, 0).unwrap();
        assert_eq!(at_offset(t, minus).unwrap(), "2026-11-30 09:31:58 -08:00");
        assert_eq!(
            at_offset(t, time::UtcOffset::UTC).unwrap(),
            "2026-11-30 17:31:58 +00:00"
        );
        assert_eq!(time_on_screen("not a time", Zone::Local), None);
        assert_eq!(
            time_on_screen("2026-11-30T17:31:58Z", Zone::Utc).unwrap(),
            "2026-11-30 17:31:58 +00:00"
        );
        assert!(time_on_screen("2026-11-30T17:31:58Z", Zone::Local).is_some());
    }

    #[test]
    fn bytes_use_binary_units_and_unknown_is_not_zero() {
        assert_eq!(bytes(None), "n/a");
        assert_eq!(bytes(Some(0)), "0 B");
        assert_eq!(bytes(Some(1023)), "1023 B");
        assert_eq!(bytes(Some(1536)), "1.5 KiB");
        assert_eq!(bytes(Some(448 << 20)), "448.0 MiB");
        assert_eq!(bytes(Some(17_171_480_576)), "15.99 GiB");
    }

    #[test]
    fn rfc3339_times_read_back() {
        assert_eq!(unix_seconds("2023-11-14T22:13:20.123Z"), Some(1_700_000_000.123));
        assert_eq!(unix_seconds("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(unix_seconds("2023-11-14T23:13:20+01:00"), Some(1_700_000_000.0));
        assert_eq!(unix_seconds("yesterday"), None);
    }

    #[test]
    fn moves_and_durations() {
        assert_eq!(signed_bytes(-(3 << 30) / 2), "-1.50 GiB");
        assert_eq!(signed_bytes(84 << 20), "+84.0 MiB");
        assert_eq!(duration(3725.0), "1h 2m 5s");
    }

    #[test]
    fn times_format_as_rfc3339_utc_milliseconds() {
        assert_eq!(
            format_unix_nanos(1_700_000_000_123_456_789).as_deref(),
            Some("2023-11-14T22:13:20.123Z")
        );
    }
}
