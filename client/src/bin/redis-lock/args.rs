//! The command line, and how a bad one is reported.

use crate::exit;
use clap::error::ErrorKind;
use clap::{Parser, Subcommand};
use redis_lock_client::{duration, MIN_TTL};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "redis-lock",
    version,
    about = "Run a command while holding a distributed lock on Redis servers with the redis-lock module",
    after_help = "Exit codes: see `redis-lock run --help`; `status` exits 69 when a majority \
                  of the servers cannot be reached; for `release` see `redis-lock release \
                  --help`; 64 bad command line; 78 bad settings."
)]
pub struct Cli {
    /// Server URLs, comma separated: redis://user:pass@host:port/db (user, password and
    /// db optional; rediss:// for TLS); redis+cluster://host:port/ for a Redis Cluster
    /// through one seed node; redis+sentinel://host:port/service for a Sentinel group.
    /// Each server once: two URLs reaching the same server are refused.
    #[arg(
        long,
        env = "REDIS_LOCK_SERVERS",
        default_value = "redis://127.0.0.1:7379/",
        value_delimiter = ',',
        global = true
    )]
    pub servers: Vec<String>,
    /// More diagnostics on stderr.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Cmd,
}

/// The `run` subcommand's arguments.
#[derive(clap::Args)]
#[command(after_help = exit::TABLE)]
pub struct Run {
    /// Lock TTL; renewed every third of it (500ms, 10s, 2m, 1h; at least 10ms).
    #[arg(long, default_value = "10s", value_parser = ttl)]
    pub ttl: Duration,
    /// How long to wait while another owner holds the lock (a deadline: it
    /// keeps trying until then).
    #[arg(long, default_value = "0s", value_parser = duration::parse)]
    pub wait: Duration,
    /// After a lost lock: time between SIGTERM and SIGKILL to the command.
    #[arg(long, default_value = "5s", value_parser = duration::parse)]
    pub grace: Duration,
    /// Exit code when the lock stays held by another owner past --wait
    /// (like flock -E), to tell it from the command's own codes.
    #[arg(long, default_value_t = exit::CONFLICT, value_name = "N")]
    pub conflict_exit_code: u8,
    /// Owner value to hold the lock as (default: 128 random bits); lets an
    /// operator release it by hand with `redis-lock release NAME --owner OWNER`.
    /// Must be unique per holder.
    #[arg(long)]
    pub owner: Option<String>,
    /// Hold NAME shared (like flock -s): any number of --shared runs hold it
    /// at once, never beside one without --shared (an exclusive one).
    #[arg(short, long)]
    pub shared: bool,
    /// At most N runs hold NAME at once across every host (a fleet-wide
    /// concurrency limit; implies --shared; 1 to 2147483647). Every run of
    /// NAME must give the same N. On 3 servers it needs all 3 (one server,
    /// replicated, suits it best).
    #[arg(long, value_name = "N", value_parser = limit)]
    pub limit: Option<u32>,
    /// Name of the lock (the key on every server).
    pub name: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Acquire NAME, run CMD with REDIS_LOCK_NAME/TOKEN/OWNER set, renew while it runs, release when it exits.
    Run(Run),
    /// Show the lock on every server and the quorum's verdict (held by OWNER on k of N / shared by OWNERs / free / unknown).
    Status {
        /// Name of the lock.
        name: String,
    },
    /// Release NAME held by OWNER on every server (operators).
    #[command(after_help = exit::RELEASE_TABLE)]
    Release {
        /// Name of the lock.
        name: String,
        /// The owner to release it for (as shown by `run` and `status`).
        #[arg(long)]
        owner: String,
    },
}

/// `--ttl`: checked here rather than by the client's builder, so that a TTL
/// it cannot use is a bad command line (64) like any other bad value, not
/// bad settings (78).
fn ttl(text: &str) -> Result<Duration, String> {
    let ttl = duration::parse(text)?;
    if ttl < MIN_TTL {
        return Err(format!("the TTL must be at least {MIN_TTL:?}"));
    }
    Ok(ttl)
}

/// `--limit`: what the servers accept, as a bad command line (64) otherwise.
fn limit(text: &str) -> Result<u32, String> {
    let max = redis_lock_client::MAX_LIMIT;
    match text.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("the limit must be a whole number from 1 to {max}")),
    }
}

/// Whether a failed `run` command line probably lacks the `--` before CMD.
pub fn forgot_dashdash(args: &[String]) -> bool {
    args.iter().skip(1).any(|a| a == "run") && !args.iter().any(|a| a == "--")
}

/// Parse the command line; a bad one exits with [`exit::USAGE`] (help and
/// version exit 0), with a hint when `--` is missing.
pub fn parse() -> Result<Cli, ExitCode> {
    let args: Vec<String> = std::env::args().collect();
    Cli::try_parse_from(&args).map_err(|e| {
        let _ = e.print();
        match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
            _ => {
                if forgot_dashdash(&args) {
                    say!("hint: did you forget -- before the command?");
                }
                ExitCode::from(exit::USAGE)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn ttl_has_a_minimum() {
        assert_eq!(ttl("10ms"), Ok(MIN_TTL));
        assert!(ttl("0s").unwrap_err().contains("at least 10ms"));
        assert!(ttl("soon").unwrap_err().contains("invalid duration"));
    }

    #[test]
    fn limits_the_servers_take() {
        assert_eq!(limit("4"), Ok(4));
        assert_eq!(limit("2147483647"), Ok(i32::MAX as u32));
        for bad in ["0", "2147483648", "-1", "two"] {
            assert!(limit(bad).unwrap_err().contains("from 1 to"), "{bad}");
        }
    }

    #[test]
    fn dashdash_hint() {
        assert!(forgot_dashdash(&words("redis-lock run job echo hi")));
        assert!(!forgot_dashdash(&words("redis-lock run job -- echo hi")));
        assert!(!forgot_dashdash(&words("redis-lock status job")));
    }

    #[test]
    fn every_argument_has_help() {
        use clap::CommandFactory;
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            for arg in sub.get_arguments() {
                assert!(
                    arg.get_help().is_some(),
                    "{} {}",
                    sub.get_name(),
                    arg.get_id()
                );
            }
        }
    }
}
