//! Quorum client for the redis-lock module: the Redlock algorithm over N
//! independent Redis servers running `LOCK.*`, with fencing tokens,
//! auto-renewal and distinct errors.
//!
//! ```no_run
//! # async fn demo() -> Result<(), redis_lock_client::Error> {
//! use std::time::Duration;
//! let locker = redis_lock_client::Builder::new(&[
//!     "redis://127.0.0.1:7001/", "redis://127.0.0.1:7002/", "redis://127.0.0.1:7003/",
//! ])
//! .ttl(Duration::from_secs(10))
//! .build()?;
//! let lock = locker.lock("jobs:nightly", Duration::from_secs(5)).await?;
//! println!("holding with fencing token {}", lock.token());
//! locker.unlock(&lock).await?;
//! # Ok(()) }
//! ```
//!
//! Features: `tls` (`rediss://` URLs, needs OpenSSL) and `cli` (the
//! `redis-lock` binary, with clap), both off by default, so a library user
//! needs neither unless it asks for them.
//!
//! # Entry points
//!
//! - [`Builder`] checks the settings and makes a [`Locker`] (one per set of
//!   servers; cheap to clone).
//! - [`Locker::try_lock`] (one round), [`Locker::lock`] (waits up to a
//!   deadline) and [`Locker::acquire`] (with [`LockOptions`]) return a
//!   [`Lock`] with its fencing token; [`Locker::extend`] and
//!   [`Locker::unlock`] take it.
//! - [`Locker::lock_auto`] and [`Locker::acquire_auto`] return an
//!   [`AutoLock`], renewed in the background until unlocked, with a
//!   [`AutoLock::lost`] future.
//! - [`Locker::status`] with [`quorum_state`], and [`Locker::force_release`]:
//!   the operators' view.
//! - [`background_done`]: what a process awaits before it exits.
//! - [`Error`]: `Taken` (contention), `NoQuorum` (outage), `Rejected` (a
//!   server refused for good), `Expired` (the lock was lost).
//!
//! The servers need the redis-lock module. How the client behaves on the
//! wire (waiting, cancellation, each server once) is in the repository's
//! `docs/client.md` and `docs/client-behaviour.md`.
#![warn(missing_docs)]

mod answer;
mod background;
pub use background::{background_done, counted};
mod busy;
mod cluster;
mod config;
pub mod duration;
mod endpoint;
mod error;
mod guard;
mod hold;
pub use hold::MAX_LIMIT;
mod hosts;
pub use hosts::unknown_host;
mod let_go;
mod lock;
mod locker;
mod member;
mod node;
mod one_runtime;
mod options;
mod pending;
pub mod quorum;
mod reachable;
mod request;
mod round;
mod sentinel;
mod server_clock;
mod server_ids;
mod slots;
mod status;
mod stragglers;
mod url_problem;
mod waiting;

pub use config::{Builder, Config, MIN_TTL};
pub use error::{Error, NodeFailure};
pub use guard::AutoLock;
pub use lock::Lock;
pub use locker::Locker;
pub use node::Failure;
pub use options::LockOptions;
pub use request::random_owner;
pub use status::{escape_owner, quorum_state, Holder, NodeReport, NodeStatus, QuorumState};
