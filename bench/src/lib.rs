//! What the bench binary and the measuring tools (`src/bin`) share.

pub mod contention;
pub mod fanout;
pub mod server_cost;
pub mod stats;
pub mod waiter_memory;
