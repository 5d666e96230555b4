//! The parsers of values every command's flags share. Below the commands
//! and below `cli`, which assembles them: a command imports its parsers
//! from here, never from the module that imports the command.

/// The longest period any flag takes: a day.
pub const MAX_SECONDS: f64 = 86_400.0;

/// The parser of every flag that takes seconds. Bounded at parse time so
/// that no later `Duration::from_secs_f64` or `Instant + Duration` can
/// overflow and panic (1e19 s did), and a mistyped value is a usage error
/// (status 2) rather than a wait that never ends.
pub fn seconds(text: &str) -> Result<f64, String> {
    const WANT: &str = "give a number of seconds, more than 0 and at most 86400 (a day)";
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= MAX_SECONDS => Ok(s),
        _ => Err(WANT.to_string()),
    }
}

/// The parser of the counts `model` takes (`--ctx`, `--parallel`,
/// `--ubatch`): a negative one is named as such, not taken for a flag.
pub fn count(text: &str) -> Result<u32, String> {
    match (text.trim().parse::<u32>(), text.trim().parse::<i64>()) {
        (Ok(n), _) => Ok(n),
        (_, Ok(n)) if n < 0 => Err("a count cannot be negative: give 0 or more".into()),
        _ => Err(format!("give a whole number from 0 to {}", u32::MAX)),
    }
}
