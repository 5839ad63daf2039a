//! `redis-lock`: run a command while holding a quorum lock; inspect and
//! release locks.

/// `eprintln!` that cannot panic: with stderr a closed pipe (`2>&1 | head`,
/// a supervisor whose log reader went away) `eprintln!` panicked, and the
/// CLI exited 101 with the lock held and its command never started or
/// never stopped (an attack run, 5d8fbc4). A lost message is the lesser harm.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `println!` that cannot panic (stdout a closed pipe: `status | head -0`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod args;
mod child;
mod exit;
mod signals;

use args::{Cmd, Run};
use redis_lock_client::quorum::majority;
use redis_lock_client::{
    escape_owner, quorum_state, AutoLock, Builder, Error, Failure, LockOptions, Locker, QuorumState,
};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::process::Child;
use tokio::sync::mpsc::UnboundedReceiver;

fn main() -> ExitCode {
    // First of all: a handled signal that came before its handler was
    // installed killed the CLI by the signal itself (2 of 359 random
    // SIGINT/SIGTERM sent at its start, 2026-11-28), where a signal while
    // waiting exits 128+N. From here on one is queued and read below.
    let mut signals = match signals::catch() {
        Ok(rx) => rx,
        Err(e) => {
            say!("redis-lock: cannot install signal handlers: {e}");
            return ExitCode::from(exit::UNAVAILABLE);
        }
    };
    let cli = match args::parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let ttl = match &cli.command {
        Cmd::Run(run) => run.ttl,
        _ => Duration::from_secs(10),
    };
    let locker = match Builder::new(&cli.servers).ttl(ttl).build() {
        Ok(l) => l,
        Err(e) => {
            say!("redis-lock: {e}");
            return ExitCode::from(exit::CONFIG);
        }
    };
    if let Some(host) = redis_lock_client::unknown_host(&cli.servers) {
        say!("redis-lock: server host {host:?} does not exist (the resolver knows no such name)");
        return ExitCode::from(exit::CONFIG);
    }
    // One thread: the command is forked from the main thread, which lives
    // as long as the CLI (see child::spawn on PR_SET_PDEATHSIG).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let code = match cli.command {
            Cmd::Run(run) => run_command(&locker, run, cli.verbose, &mut signals).await,
            Cmd::Status { name } => until_signal(status(&locker, &name), &mut signals).await,
            Cmd::Release { name, owner } => {
                until_signal(release(&locker, &name, &owner), &mut signals).await
            }
        };
        // A wait given up (a signal, --wait ran out) may still have requests
        // travelling to a slow server: what they take is given back as their
        // replies come, if the process is still there (d992c16: exiting at
        // once left the lock held for its TTL).
        let _ = tokio::time::timeout(CLEAN_UP_FOR, locker.background_done()).await;
        code
    })
}

/// How long the CLI stays, before exiting, for its background clean-up.
const CLEAN_UP_FOR: Duration = Duration::from_secs(2);

/// `status` or `release`, ended by a handled signal (128+N, as a shell
/// reports a command a signal ended): the CLI catches them from its start.
async fn until_signal(
    work: impl std::future::Future<Output = ExitCode>,
    signals: &mut UnboundedReceiver<signals::Delivered>,
) -> ExitCode {
    tokio::select! {
        code = work => code,
        Some(sig) = signals.recv() => ExitCode::from(128u8.wrapping_add(sig.signal as u8)),
    }
}

async fn run_command(
    locker: &Locker,
    run: Run,
    verbose: bool,
    signals: &mut UnboundedReceiver<signals::Delivered>,
) -> ExitCode {
    let name = run.name.as_str();
    let mut opts = LockOptions::new().ttl(run.ttl).wait(run.wait);
    // An owner made for this call (the default) lets the library take back
    // what a wait given up still gets; a caller's own owner is left alone
    // (another run of it may hold the lock by then).
    if let Some(owner) = &run.owner {
        opts = opts.owner(owner.clone());
    }
    if run.shared {
        opts = opts.shared_hold(true);
    }
    if let Some(n) = run.limit {
        opts = opts.limit(n);
    }
    let started = Instant::now();
    let acquired = tokio::select! {
        r = locker.acquire_auto(name, &opts) => r,
        Some(sig) = signals.recv() => {
            // Interrupted while waiting: a grant may have landed already.
            // Dropping the acquisition releases it (made-up owner; main
            // waits for that); an --owner's is released here.
            if let Some(owner) = &run.owner {
                let _ = locker.force_release(name, owner).await;
            }
            return gave_up(name, sig);
        }
    };
    let mut guard = match acquired {
        Ok(g) => g,
        Err(e) => {
            // No majority because one server is listed twice: bad settings,
            // as a wait says at once (22529f6: 69 here, 78 with --wait).
            let e = match (&e, locker.listed_twice()) {
                (Error::NoQuorum { .. }, Some(twice)) => twice,
                _ => e,
            };
            let code = exit::for_error(&e, run.conflict_exit_code);
            let waited = started.elapsed();
            say!("redis-lock: lock {name:?} not acquired after waiting {waited:.1?}: {e}");
            return ExitCode::from(code);
        }
    };
    say!(
        "redis-lock: acquired {name:?} token {} owner {}",
        guard.token(),
        guard.owner()
    );
    // A signal that came with the grant, before the command exists: the
    // caller gave up while waiting, as far as it can tell.
    if let Ok(sig) = signals.try_recv() {
        let _ = guard.unlock().await;
        return gave_up(name, sig);
    }
    let env = [
        ("REDIS_LOCK_NAME", name.to_string()),
        ("REDIS_LOCK_TOKEN", guard.token().to_string()),
        ("REDIS_LOCK_OWNER", guard.owner().to_string()),
    ];
    let mut child = match child::spawn(&run.command, &env) {
        Ok(c) => c,
        Err(e) => {
            say!("redis-lock: cannot start {:?}: {e}", run.command[0]);
            let _ = guard.unlock().await;
            return ExitCode::from(exit::of_spawn_error(&e));
        }
    };
    let pid = child.id().expect("a just-spawned child has a pid");
    // What came before the fork must be stamped before the start (see
    // `signals::caught_up`).
    signals::caught_up().await;
    let started = Instant::now();
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = guard.lost() => {
                say!("redis-lock: lock {name:?} lost; stopping the command");
                return stop_after_loss(&mut child, pid, started, run.grace, guard, signals).await;
            }
            Some(sig) = signals.recv() => {
                signals::pass_on(sig, pid, started);
            }
        }
    };
    match guard.unlock().await {
        Ok(()) if verbose => say!("redis-lock: released {name:?}"),
        Ok(()) => {}
        // Answered, and not ours on a majority: lost while the command ran
        // (taken over, flushed), between two renewals. Exiting with the
        // command's code said all went well (22529f6).
        Err(Error::Expired) => {
            say!(
                "redis-lock: lock {name:?} was lost while the command ran: \
                 its release found it no longer held (another client may have held it meanwhile)"
            );
            return ExitCode::from(exit::LOST);
        }
        // Held as far as is known, but the release did not reach a
        // majority: it stays until its TTL.
        Err(e) => say!("redis-lock: release of {name:?}: {e}"),
    }
    match status {
        Ok(s) => ExitCode::from(exit::of_status(s)),
        Err(e) => {
            say!("redis-lock: waiting for the command: {e}");
            ExitCode::from(exit::NOT_EXECUTABLE)
        }
    }
}

/// A signal while waiting for `name`: say so, exit 128+N.
fn gave_up(name: &str, sig: signals::Delivered) -> ExitCode {
    say!(
        "redis-lock: got signal {} while waiting for {name:?}; gave up",
        sig.signal
    );
    ExitCode::from(128u8.wrapping_add(sig.signal as u8))
}

async fn stop_after_loss(
    child: &mut Child,
    pid: u32,
    started: Instant,
    grace: Duration,
    guard: AutoLock,
    signals: &mut UnboundedReceiver<signals::Delivered>,
) -> ExitCode {
    signals::send(pid, libc::SIGTERM);
    // Signals keep reaching the command during the grace period (a
    // supervisor's SIGTERM or SIGINT used to be swallowed here).
    let stopped = tokio::time::timeout(grace, async {
        loop {
            tokio::select! {
                _ = child.wait() => return,
                Some(sig) = signals.recv() => {
                    signals::pass_on(sig, pid, started);
                }
            }
        }
    });
    if stopped.await.is_err() {
        let _ = child.kill().await;
    }
    // Release whatever is left on the nodes that still answer, before the
    // runtime (and with it any background task) is gone; bounded, since a
    // lost lock usually means unreachable nodes.
    let _ = tokio::time::timeout(Duration::from_secs(1), guard.unlock()).await;
    ExitCode::from(exit::LOST)
}

async fn status(locker: &Locker, name: &str) -> ExitCode {
    let reports = locker.status(name).await;
    for (node, st) in &reports {
        match st {
            Ok(Some(s)) if s.shared => {
                let limit = match s.limit {
                    0 => "none".to_string(),
                    n => n.to_string(),
                };
                out!(
                    "{node}\tshared\tlimit={limit}\tholders={}\twaiters={}",
                    s.holders.len(),
                    s.waiters
                );
                for h in &s.holders {
                    out!(
                        "{node}\tholder\towner={}\ttoken={}\tttl={}ms\tholds={}",
                        escape_owner(&h.owner),
                        h.token,
                        h.ttl_ms,
                        h.holds
                    );
                }
            }
            Ok(Some(s)) => out!(
                "{node}\towner={}\ttoken={}\tttl={}ms\tholds={}\twaiters={}",
                escape_owner(&s.owner),
                s.token,
                s.ttl_ms,
                s.holds,
                s.waiters
            ),
            Ok(None) => out!("{node}\tfree"),
            Err(e) => out!("{node}\terror: {e}"),
        }
    }
    let verdict = quorum_state(&reports);
    out!("quorum\t{verdict}");
    match verdict {
        QuorumState::Unreachable { .. } => unavailable_or_listed_twice(locker),
        _ => ExitCode::SUCCESS,
    }
}

/// 0 when OWNER's lock was released on at least one server; 1 when a
/// majority answered and none held it for OWNER. Otherwise there is no
/// answer to rely on: 78 when refusals alone leave no majority possible
/// (retrying will not help; as in `run`), else 69.
async fn release(locker: &Locker, name: &str, owner: &str) -> ExitCode {
    let replies = locker.force_release(name, owner).await;
    let (mut released, mut answered, mut refused) = (0, 0, 0);
    for (node, r) in &replies {
        let what = match r {
            Ok(1) => "released".to_string(),
            Ok(0) => "held by another owner".to_string(),
            Ok(_) => "not held".to_string(),
            Err(e) => format!("error: {e}"),
        };
        out!("{node}\t{what}");
        match r {
            Ok(n) => {
                answered += 1;
                released += usize::from(*n == 1);
            }
            Err(Failure::Rejected(_)) => refused += 1,
            Err(Failure::Transient(_)) => {}
        }
    }
    let need = majority(replies.len());
    if released > 0 {
        ExitCode::SUCCESS
    } else if answered >= need {
        ExitCode::from(exit::NOT_HELD)
    } else if refused > replies.len() - need {
        ExitCode::from(exit::CONFIG)
    } else {
        unavailable_or_listed_twice(locker)
    }
}

/// No majority answered: 69, or 78 when a server is listed twice (its
/// second URL gives no answer of its own, so the servers are not down:
/// 22529f6 got 69 for a socket and a TCP URL of one server).
fn unavailable_or_listed_twice(locker: &Locker) -> ExitCode {
    match locker.listed_twice() {
        Some(e) => {
            say!("redis-lock: {e}");
            ExitCode::from(exit::CONFIG)
        }
        None => ExitCode::from(exit::UNAVAILABLE),
    }
}
