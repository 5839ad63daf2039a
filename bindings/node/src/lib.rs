//! Node.js bindings of the redis-lock quorum client (`redis-lock-client`):
//! thin napi-rs wrappers over the Rust crate, which does all the locking.
//! The JavaScript in `index.js` checks arguments and turns the outcomes
//! these return into the package's error classes.

mod args;
mod errors;
mod lock;
mod locker;
mod runtime;
