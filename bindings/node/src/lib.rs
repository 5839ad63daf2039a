//! Node.js bindings of the redis-lock quorum client (`redis-lock-client`):
//! thin napi-rs wrappers over the Rust crate, which does all the locking.
//! The JavaScript in `index.js` checks arguments and turns the outcomes
//! these return into the package's error classes.

mod args;
mod errors;
mod exit;
mod lock;
mod locker;
mod runtime;
mod settle;

use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;

/// Per env (the main thread and each worker thread): at its teardown,
/// wait for the clean-up under way (see `exit::wait_for_clean_up`).
#[napi(module_exports)]
pub fn init(_exports: Object<'_>, env: Env) -> Result<()> {
    env.add_env_cleanup_hook((), |()| exit::wait_for_clean_up(false))?;
    Ok(())
}

/// index.js calls this from `process.on('exit')`: `process.exit()` ends
/// the main thread without the env's cleanup hooks, and exit handlers may
/// block. The same work as at teardown (the second finds none left);
/// `main_thread`: the process ends (a worker's `exit` event is its own).
#[napi]
pub fn at_exit(main_thread: bool) {
    exit::wait_for_clean_up(main_thread);
}
