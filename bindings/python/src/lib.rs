//! Python bindings of the redis-lock quorum client (`redis_lock_client`):
//! thin PyO3 wrappers over the Rust crate, which does all the locking.

mod acquire;
mod args;
mod errors;
mod hold;
mod lock;
mod locker;
mod runtime;
mod spawn;
mod status;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<locker::Locker>()?;
    m.add_class::<lock::Lock>()?;
    m.add_class::<spawn::Pending>()?;
    m.add_class::<locker::Acquisition>()?;
    m.add_class::<status::LockStatus>()?;
    m.add_function(wrap_pyfunction!(spawn::close_gate, m)?)?;
    m.add_function(wrap_pyfunction!(spawn::gate_after_fork, m)?)?;
    errors::register(m)?;
    // The wheel's version (pyproject takes it from Cargo.toml too).
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
