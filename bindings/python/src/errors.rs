//! Python exceptions for the core's errors. Every lock error carries
//! `failures`: a list of `(node, cause)` pairs, empty when the core has no
//! per-node detail (`Taken`).

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use redis_lock_client::Error;
use std::time::Duration;

create_exception!(
    redis_lock_client,
    LockError,
    PyException,
    "Base class of redis-lock-client errors. `failures`: list of (node, cause)."
);
create_exception!(
    redis_lock_client,
    Taken,
    LockError,
    "Another owner holds the lock and it did not come free within `wait`. \
     `waited`: the seconds the call waited."
);
create_exception!(
    redis_lock_client,
    NoQuorum,
    LockError,
    "Not enough servers answered (an outage, not contention). Attributes: \
     `granted`, `needed`, `failures` (list of (node, cause))."
);
create_exception!(
    redis_lock_client,
    LockLost,
    LockError,
    "The lock expired or was taken over: it is no longer held. Stop touching \
     the resource it protects."
);
create_exception!(
    redis_lock_client,
    Rejected,
    LockError,
    "A server refused the request for a reason retrying cannot fix (TTL above \
     lock.max-ttl-ms, NOPERM, the module not loaded...). Attributes: `node`, \
     `message`, `failures`."
);

/// A core error with what the binding knows around it: how long a wait
/// took (for `Taken`), and why a lock is no longer held (for `Expired`,
/// which the core uses for "expired", "taken by another owner" and
/// "released by someone else" alike).
pub struct Failure {
    pub err: Error,
    pub waited: Option<Duration>,
    pub lost_because: Option<String>,
}

impl From<Error> for Failure {
    fn from(err: Error) -> Failure {
        Failure {
            err,
            waited: None,
            lost_because: None,
        }
    }
}

/// The Python exception for `err`, its message prefixed with `context`
/// (e.g. `lock 'report'`).
pub fn to_py(py: Python<'_>, context: &str, err: impl Into<Failure>) -> PyErr {
    let Failure {
        err,
        waited,
        lost_because,
    } = err.into();
    let message = format!("{context}: {err}");
    let (exc, failures, quorum) = match err {
        Error::Config(why) => return PyValueError::new_err(format!("{context}: {why}")),
        Error::Taken => {
            let message = match waited {
                Some(w) => format!("{message} (waited {:.3} s)", w.as_secs_f64()),
                None => message,
            };
            let exc = Taken::new_err(message);
            let _ = exc
                .value(py)
                .setattr("waited", waited.map(|w| w.as_secs_f64()));
            (exc, vec![], None)
        }
        Error::NoQuorum {
            granted,
            needed,
            failures,
        } => {
            let pairs = failures.into_iter().map(|f| (f.node, f.cause)).collect();
            (NoQuorum::new_err(message), pairs, Some((granted, needed)))
        }
        Error::Expired => {
            let message = match lost_because {
                Some(why) => format!("{context}: {why}"),
                None => message,
            };
            (LockLost::new_err(message), vec![], None)
        }
        Error::Rejected { node, message: why } => {
            let exc = Rejected::new_err(message);
            let value = exc.value(py);
            let _ = value.setattr("node", &node);
            let _ = value.setattr("message", &why);
            (exc, vec![(node, why)], None)
        }
        other => (
            LockError::new_err(format!("{context}: {other}")),
            vec![],
            None,
        ),
    };
    let value = exc.value(py);
    let _ = value.setattr("failures", failures);
    if let Some((granted, needed)) = quorum {
        let _ = value.setattr("granted", granted);
        let _ = value.setattr("needed", needed);
    }
    exc
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LockError", py.get_type::<LockError>())?;
    m.add("Taken", py.get_type::<Taken>())?;
    m.add("NoQuorum", py.get_type::<NoQuorum>())?;
    m.add("LockLost", py.get_type::<LockLost>())?;
    m.add("Rejected", py.get_type::<Rejected>())?;
    Ok(())
}
