//! The integration tests, one module per file, as one test binary:
//! one release link instead of one per file, and one pool of test
//! threads across the files, so that a file's slowest test no longer
//! keeps its binary's other thread idle (`make test` built and ran 37
//! binaries one after another, 26 minutes in CI on 2026-11-29, above its
//! 25). Files that must be a process of their own are targets of their
//! own (Cargo.toml): `allocations.rs` (a counting global allocator),
//! `client_errors.rs` and `skewed_client_clock.rs` (they run one of
//! their own tests again as a child process, by its name), and
//! `quorum.rs`, `quorum_waiting.rs` and `lost_or_unknown.rs` (they
//! wait for the process's background clean-up to end, which the other
//! files' tests would share).

mod common;

mod chaos;
mod cli;
mod cli_shared;
mod cli_signals;
mod client_waiting;
mod cluster;
mod cluster_attack;
mod cluster_client;
mod cluster_tokens;
mod commands;
mod fencing_round;
mod fuzz;
mod grant_propagation;
mod hostile;
mod old_server;
mod operations;
mod persistence;
mod production;
mod reentrant;
mod resend;
mod safety;
mod sentinel_attack;
mod sentinel_client;
mod server_aliases;
mod server_clock_steps;
mod server_identity;
mod shared_client;
mod shared_locks;
mod version;
mod wait_outage;
mod waiting;
