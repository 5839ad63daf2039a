//! Shared by the integration tests and the chaos checker: real redis-server
//! processes with the module, the clock shim, and the chaos analysis.

pub mod chaos;
pub mod proxy;
pub mod server;
pub mod shim;

pub use proxy::{in_front_of, DelayProxy};
pub use server::*;
