//! The integration tests' harness lives in the testkit crate (shared with
//! the chaos checker).
#![allow(unused_imports)]

pub use redis_lock_testkit::*;
