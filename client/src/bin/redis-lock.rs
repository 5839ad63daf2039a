//! `redis-lock`: run a command while holding a quorum lock; inspect and
//! release locks.

use clap::{Parser, Subcommand};
use redis_lock_client::{duration, AutoLock, Builder, Error, Locker};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitCode;
use std::time::Duration;
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};

/// Exit codes of `redis-lock run` besides the command's own.
mod exit {
    /// The lock could not be had within --wait (held by another owner).
    pub const NOT_ACQUIRED: u8 = 75;
    /// The lock was lost while the command ran; the command was stopped.
    pub const LOST: u8 = 76;
    /// No majority of servers could be reached.
    pub const UNAVAILABLE: u8 = 69;
    /// Bad settings (server URLs, durations).
    pub const CONFIG: u8 = 78;
    /// The command could not be started.
    pub const NO_COMMAND: u8 = 127;
}

#[derive(Parser)]
#[command(
    name = "redis-lock",
    version,
    about = "Run a command while holding a distributed lock on Redis servers with the redis-lock module",
    after_help = "Exit codes of `run`: the command's own; 75 lock not acquired within --wait; \
                  76 lock lost while running (command was stopped); 69 no quorum of servers; 78 bad settings."
)]
struct Cli {
    /// Server URLs, comma separated (redis://[user:pass@]host:port, rediss://...).
    #[arg(
        long,
        env = "REDIS_LOCK_SERVERS",
        default_value = "redis://127.0.0.1:7379/",
        value_delimiter = ',',
        global = true
    )]
    servers: Vec<String>,
    /// More diagnostics on stderr.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Acquire NAME, run CMD with REDIS_LOCK_NAME/TOKEN/OWNER set, renew while it runs, release when it exits.
    Run {
        /// Lock TTL; renewed every third of it (500ms, 10s, 2m).
        #[arg(long, default_value = "10s", value_parser = duration::parse)]
        ttl: Duration,
        /// How long to wait for the lock before giving up.
        #[arg(long, default_value = "0s", value_parser = duration::parse)]
        wait: Duration,
        /// After a lost lock: time between SIGTERM and SIGKILL to the command.
        #[arg(long, default_value = "5s", value_parser = duration::parse)]
        grace: Duration,
        name: String,
        /// The command and its arguments (after --).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Show owner, token, ttl and waiters of NAME on every server.
    Status { name: String },
    /// Release NAME held by OWNER on every server (operators).
    Release {
        name: String,
        #[arg(long)]
        owner: String,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let ttl = match &cli.command {
        Cmd::Run { ttl, .. } => *ttl,
        _ => Duration::from_secs(10),
    };
    let locker = match Builder::new(&cli.servers).ttl(ttl).build() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("redis-lock: {e}");
            return ExitCode::from(exit::CONFIG);
        }
    };
    match cli.command {
        Cmd::Run {
            wait,
            grace,
            name,
            command,
            ..
        } => run(&locker, &name, wait, grace, &command, cli.verbose).await,
        Cmd::Status { name } => status(&locker, &name).await,
        Cmd::Release { name, owner } => release(&locker, &name, &owner).await,
    }
}

async fn run(
    locker: &Locker,
    name: &str,
    wait: Duration,
    grace: Duration,
    command: &[String],
    verbose: bool,
) -> ExitCode {
    let mut guard = match locker.lock_auto(name, wait).await {
        Ok(g) => g,
        Err(e @ Error::NoQuorum { .. }) => {
            eprintln!("redis-lock: cannot acquire {name:?}: {e}");
            return ExitCode::from(exit::UNAVAILABLE);
        }
        Err(e) => {
            eprintln!("redis-lock: lock {name:?} not acquired within {wait:?}: {e}");
            return ExitCode::from(exit::NOT_ACQUIRED);
        }
    };
    if verbose {
        eprintln!(
            "redis-lock: acquired {name:?} token {} owner {}",
            guard.token(),
            guard.owner()
        );
    }
    let mut child = match Command::new(&command[0])
        .args(&command[1..])
        .env("REDIS_LOCK_NAME", name)
        .env("REDIS_LOCK_TOKEN", guard.token().to_string())
        .env("REDIS_LOCK_OWNER", guard.owner())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("redis-lock: cannot start {:?}: {e}", command[0]);
            let _ = guard.unlock().await;
            return ExitCode::from(exit::NO_COMMAND);
        }
    };
    let pid = child.id().map(|p| p as i32);
    let (mut sigint, mut sigterm) = (
        signal(SignalKind::interrupt()).expect("SIGINT handler"),
        signal(SignalKind::terminate()).expect("SIGTERM handler"),
    );
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = guard.lost() => {
                eprintln!("redis-lock: lock {name:?} lost; stopping the command");
                return stop_after_loss(&mut child, pid, grace, guard).await;
            }
            _ = sigint.recv() => forward(pid, libc::SIGINT),
            _ = sigterm.recv() => forward(pid, libc::SIGTERM),
        }
    };
    if let Err(e) = guard.unlock().await {
        if verbose {
            eprintln!("redis-lock: release of {name:?}: {e}");
        }
    }
    match status {
        Ok(s) => ExitCode::from(
            s.code()
                .map_or_else(|| 128 + s.signal().unwrap_or(0) as u8, |c| c as u8),
        ),
        Err(e) => {
            eprintln!("redis-lock: waiting for the command: {e}");
            ExitCode::from(exit::NO_COMMAND)
        }
    }
}

fn forward(pid: Option<i32>, sig: i32) {
    if let Some(pid) = pid {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(pid, sig) };
    }
}

async fn stop_after_loss(
    child: &mut tokio::process::Child,
    pid: Option<i32>,
    grace: Duration,
    guard: AutoLock,
) -> ExitCode {
    forward(pid, libc::SIGTERM);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
    drop(guard); // best-effort release of whatever is left
    ExitCode::from(exit::LOST)
}

async fn status(locker: &Locker, name: &str) -> ExitCode {
    for (node, st) in locker.status(name).await {
        match st {
            Ok(Some(s)) => println!(
                "{node}\towner={}\ttoken={}\tttl={}ms\tholds={}\twaiters={}",
                String::from_utf8_lossy(&s.owner),
                s.token,
                s.ttl_ms,
                s.holds,
                s.waiters
            ),
            Ok(None) => println!("{node}\tfree"),
            Err(e) => println!("{node}\terror: {e}"),
        }
    }
    ExitCode::SUCCESS
}

async fn release(locker: &Locker, name: &str, owner: &str) -> ExitCode {
    let mut released = 0;
    for (node, r) in locker.force_release(name, owner).await {
        let what = match r {
            Ok(1) => {
                released += 1;
                "released".to_string()
            }
            Ok(0) => "held by another owner".to_string(),
            Ok(_) => "not held".to_string(),
            Err(e) => format!("error: {e}"),
        };
        println!("{node}\t{what}");
    }
    if released > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
