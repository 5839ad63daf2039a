//! Human durations for the CLI and configs: `500ms`, `10s`, `2m`, `1h`.

use std::time::Duration;

/// `500ms`, `10s`, `2m`, `1h`, or a bare number of seconds.
///
/// ```
/// use redis_lock_client::duration::parse;
/// use std::time::Duration;
/// assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
/// assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
/// assert_eq!(parse("10"), Ok(Duration::from_secs(10)));
/// assert!(parse("ten seconds").is_err());
/// ```
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?} (use e.g. 500ms, 10s, 2m)"))?;
    let ms = match unit {
        "ms" => n,
        "s" | "" => n.checked_mul(1000).ok_or("duration too large")?,
        "m" => n.checked_mul(60_000).ok_or("duration too large")?,
        "h" => n.checked_mul(3_600_000).ok_or("duration too large")?,
        _ => return Err(format!("invalid duration unit in {text:?} (ms, s, m or h)")),
    };
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["", "ms", "1.5s", "-1s", "10 days", "5x"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
