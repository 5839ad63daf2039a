//! Checks of Python arguments, each error naming the argument: seconds as
//! numbers become Durations (a ValueError instead of a panic in
//! `Duration`), and the shapes a redis-py user passes by habit are taken:
//! one URL string for one server, `wait=None` for no limit, names as bytes.
//! Booleans are refused where a number is expected: `ttl=True` was a 1 s
//! TTL (bool is an int to Python).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyString};
use std::time::Duration;

/// A number (int or float, not bool), or a TypeError naming `what`.
fn number(what: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    let refuse = || {
        PyTypeError::new_err(format!(
            "{what} must be a number of seconds, got {}",
            type_name(value)
        ))
    };
    if value.is_instance_of::<PyBool>() || value.is_instance_of::<PyString>() {
        return Err(refuse());
    }
    value.extract::<f64>().map_err(|_| refuse())
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// `value` seconds (>= 0, finite) as a Duration.
pub fn seconds(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Duration> {
    seconds_of(what, number(what, value)?)
}

fn seconds_of(what: &str, value: f64) -> PyResult<Duration> {
    if !value.is_finite() || value < 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what} must be a finite number of seconds >= 0, got {value}"
        )));
    }
    Duration::try_from_secs_f64(value)
        .map_err(|_| PyValueError::new_err(format!("{what} is too large: {value:?} seconds")))
}

/// Like [`seconds`], but zero is refused too.
pub fn positive_seconds(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let secs = number(what, value)?;
    if secs == 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what} must be > 0 seconds, got {secs}"
        )));
    }
    seconds_of(what, secs)
}

/// `wait`: seconds, or None for no limit (redis-py's "block forever").
pub struct Wait(pub Duration);

impl<'a, 'py> FromPyObject<'a, 'py> for Wait {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Wait> {
        if value.is_none() {
            return Ok(Wait(Duration::MAX));
        }
        seconds("wait", &value).map(Wait)
    }
}

/// A whole number from `min` up, not a bool.
pub fn count(what: &str, value: &Bound<'_, PyAny>, min: i64) -> PyResult<i64> {
    let refuse =
        || PyTypeError::new_err(format!("{what} must be an int, got {}", type_name(value)));
    if value.is_instance_of::<PyBool>() {
        return Err(refuse());
    }
    let n: i64 = value.extract().map_err(|_| refuse())?;
    if n < min {
        return Err(PyValueError::new_err(format!(
            "{what} must be {min} or more, got {n}"
        )));
    }
    Ok(n)
}

/// `limit`: an int from 1 to the servers' largest (2^31 - 1).
pub fn limit(value: &Bound<'_, PyAny>) -> PyResult<u32> {
    let n = count("limit", value, 1)?;
    let max = redis_lock_client::MAX_LIMIT;
    u32::try_from(n)
        .ok()
        .filter(|&n| n <= max)
        .ok_or_else(|| PyValueError::new_err(format!("limit must be from 1 to {max}, got {n}")))
}

/// A lock name: str, or bytes that are UTF-8 (the client crate carries
/// names as text); not empty.
pub fn lock_name(value: &Bound<'_, PyAny>) -> PyResult<String> {
    let name = if let Ok(s) = value.cast::<PyString>() {
        s.extract::<String>()?
    } else if let Ok(b) = value.cast::<PyBytes>() {
        String::from_utf8(b.as_bytes().to_vec()).map_err(|e| {
            PyValueError::new_err(format!(
                "a lock name given as bytes must be UTF-8 (byte {} is not): \
                 names are carried as text",
                e.utf8_error().valid_up_to()
            ))
        })?
    } else {
        return Err(PyTypeError::new_err(format!(
            "the lock name must be str or bytes, got {}",
            type_name(value)
        )));
    };
    if name.is_empty() {
        return Err(PyValueError::new_err("the lock name must not be empty"));
    }
    Ok(name)
}

/// The server URLs: one URL string (one server) or a sequence of them.
pub fn urls(value: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(vec![s.extract::<String>()?]);
    }
    value.extract::<Vec<String>>().map_err(|_| {
        PyTypeError::new_err(format!(
            "urls must be a server URL (str) or a list of them, got {}",
            type_name(value)
        ))
    })
}
