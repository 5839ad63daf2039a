//! Checks of JavaScript arguments: milliseconds become Durations, with an
//! error naming the argument instead of a panic in `Duration`. index.js
//! checks types and ranges first (TypeError/RangeError); these are the
//! last line, for a caller of the native module itself.

use napi::{Error, Result, Status};
use std::time::Duration;

/// `value` milliseconds (>= 0, finite) as a Duration.
pub fn millis(what: &str, value: f64) -> Result<Duration> {
    if !value.is_finite() || value < 0.0 {
        return Err(Error::new(
            Status::InvalidArg,
            format!("{what} must be a finite number of milliseconds >= 0, got {value}"),
        ));
    }
    Duration::try_from_secs_f64(value / 1000.0).map_err(|_| {
        Error::new(
            Status::InvalidArg,
            format!("{what} is too large: {value} ms"),
        )
    })
}

/// Like [`millis`], but zero is refused too.
pub fn positive_millis(what: &str, value: f64) -> Result<Duration> {
    let d = millis(what, value)?;
    if d.is_zero() {
        return Err(Error::new(
            Status::InvalidArg,
            format!("{what} must be above 0 ms, got {value}"),
        ));
    }
    Ok(d)
}

pub fn lock_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::new(
            Status::InvalidArg,
            "name: the lock name must not be empty",
        ));
    }
    Ok(())
}

/// A Duration as JavaScript milliseconds.
pub fn to_millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
