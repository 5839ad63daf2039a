//! Checks of Python arguments: seconds as floats become Durations, with
//! a ValueError naming the argument instead of a panic in `Duration`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::time::Duration;

/// `value` seconds (>= 0, finite) as a Duration.
pub fn seconds(what: &str, value: f64) -> PyResult<Duration> {
    if !value.is_finite() || value < 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what} must be a finite number of seconds >= 0, got {value}"
        )));
    }
    Duration::try_from_secs_f64(value)
        .map_err(|_| PyValueError::new_err(format!("{what} is too large: {value} seconds")))
}

/// Like [`seconds`], but zero is refused too.
pub fn positive_seconds(what: &str, value: f64) -> PyResult<Duration> {
    let d = seconds(what, value)?;
    if d.is_zero() {
        return Err(PyValueError::new_err(format!(
            "{what} must be above 0 seconds, got {value}"
        )));
    }
    Ok(d)
}

pub fn lock_name(name: &str) -> PyResult<()> {
    if name.is_empty() {
        return Err(PyValueError::new_err("the lock name must not be empty"));
    }
    Ok(())
}
