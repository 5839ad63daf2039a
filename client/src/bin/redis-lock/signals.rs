//! Signals the CLI catches and which of them it passes on to the command.
//!
//! The command starts in the CLI's process group (so it keeps the terminal
//! and can read from it). A signal the kernel sent — a terminal's Ctrl-C,
//! Ctrl-\ or hangup — went to the whole foreground process group, so a
//! command still in it already got it: forwarding it would deliver it
//! twice. A command that left the group (`setsid`, `setpgid`) did not get
//! it, so it is forwarded then. A signal a process sent to the CLI alone
//! (`kill PID`, a supervisor) is forwarded once. A signal received before
//! the command had started (while it was being spawned) is forwarded
//! whatever its origin: the group it went to may not have had the command
//! in it yet (a terminal's Ctrl-C just as the lock was granted was lost in
//! 15 tries of 100, c8f4c87).

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::{Cause, Origin};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Deliveries of handled signals that began (an action registered before
/// the iterator's) and ended (one after it), and how many of the ended
/// ones are on the channel, stamped: see [`caught_up`].
static ENTERED: AtomicUsize = AtomicUsize::new(0);
static LEFT: AtomicUsize = AtomicUsize::new(0);
static SENT: AtomicUsize = AtomicUsize::new(0);

/// The signals `run` handles (everything else keeps its default action).
pub const HANDLED: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

/// One delivered signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub signal: i32,
    /// Sent by the kernel (the terminal), not by a process.
    pub from_kernel: bool,
    /// When the CLI received it.
    pub at: Instant,
}

impl Delivered {
    /// Whether the command needs it from us (see the module comment); the
    /// command's spawn returned at `started`.
    pub fn forward(&self, command_in_our_group: bool, started: Instant) -> bool {
        !self.from_kernel || !command_in_our_group || self.at <= started
    }
}

/// Whether process `pid` is in the CLI's process group (false once it is
/// gone: a signal to a child not yet reaped is harmless).
pub fn in_our_group(pid: u32) -> bool {
    // SAFETY: getpgid(2) and getpgrp(2) only read process attributes.
    unsafe { libc::getpgid(pid as i32) == libc::getpgrp() }
}

/// Whether `signal` is ignored right now (as `nohup`, or a non-interactive
/// shell for `&` jobs, leave SIGHUP / SIGINT / SIGQUIT).
fn ignored(signal: i32) -> bool {
    // SAFETY: sigaction(2) with a null new action only reads the current one
    // into a zeroed struct we own.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// Block or unblock [`HANDLED`] for the calling thread.
fn mask(how: libc::c_int) {
    // SAFETY: pthread_sigmask on the calling thread with a set built here
    // (sigemptyset/sigaddset only write it).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in HANDLED {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// Catch [`HANDLED`] from now on, except the signals our caller chose to
/// ignore: those stay ignored, for us and (inherited through exec) for the
/// command; deliveries arrive on the returned channel.
///
/// Only the thread that reads them takes them: the calling thread (which
/// forks the command) and every thread started from it later block them.
/// So the CLI's handler never runs in the command between fork and exec,
/// where it swallowed a Ctrl-C meant for the command (`reset_in_child`).
/// A delivery is stamped when that thread gets to run, which under load
/// can be well after it happened: see [`caught_up`].
pub fn catch() -> std::io::Result<mpsc::UnboundedReceiver<Delivered>> {
    let caught: Vec<i32> = HANDLED.into_iter().filter(|&s| !ignored(s)).collect();
    count(&caught, &ENTERED)?;
    let mut signals = SignalsInfo::<WithOrigin>::new(&caught)?;
    count(&caught, &LEFT)?;
    let (tx, rx) = mpsc::unbounded_channel();
    mask(libc::SIG_BLOCK);
    std::thread::spawn(move || {
        mask(libc::SIG_UNBLOCK);
        let send = |origin: Origin| {
            let delivered = Delivered {
                signal: origin.signal,
                from_kernel: matches!(origin.cause, Cause::Kernel),
                at: Instant::now(),
            };
            tx.send(delivered).is_ok()
        };
        loop {
            // Every delivery counted here has stored what `pending` reads.
            let left = LEFT.load(SeqCst);
            if !signals.pending().all(send) {
                return;
            }
            SENT.store(left, SeqCst);
            if !signals.wait().all(send) || signals.is_closed() {
                return;
            }
        }
    });
    Ok(rx)
}

/// Count each delivery of `signals` in `counter` (actions run in the order
/// they were registered).
fn count(signals: &[i32], counter: &'static AtomicUsize) -> std::io::Result<()> {
    for &signal in signals {
        // SAFETY: the action only increments an atomic: async-signal-safe.
        unsafe {
            signal_hook::low_level::register(signal, move || _ = counter.fetch_add(1, SeqCst))
        }?;
    }
    Ok(())
}

/// Whether a handled signal is pending for the process: generated, not yet
/// taken by the thread that reads them (the others block them).
fn any_pending() -> bool {
    // SAFETY: sigpending(2) writes the zeroed set we own; sigismember reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigpending(&mut set) == 0 && HANDLED.iter().any(|&s| libc::sigismember(&set, s) == 1)
    }
}

/// Waits (at most 100 ms) until every handled signal generated so far is on
/// the channel with its stamp: none pending, none in a handler, none unsent.
/// Called right after the command's spawn, before its start is stamped: a
/// Ctrl-C generated before the fork went to a group without the command,
/// and under load the reading thread stamped it only after the spawn had
/// returned, so it was never passed on (7f5bf37: 1 try in about 600, on
/// a loaded 2-core box). Left: a delivery between being taken from the
/// pending set and its first action (a thread preempted right there).
pub async fn caught_up() {
    for _ in 0..100 {
        let quiet = !any_pending();
        let (entered, left) = (ENTERED.load(SeqCst), LEFT.load(SeqCst));
        if quiet && entered == left && SENT.load(SeqCst) >= left {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// In the forked command, before exec (async-signal-safe calls only): the
/// CLI's handlers back to the default action (ignored signals stay
/// ignored), then unblock what `catch` blocked (a mask survives exec). A
/// signal already pending then acts on the command as on any process.
pub fn reset_in_child() {
    // SAFETY: sigaction and sigprocmask are async-signal-safe; the structs
    // are zeroed locals.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in HANDLED {
            let mut current: libc::sigaction = std::mem::zeroed();
            libc::sigaction(s, std::ptr::null(), &mut current);
            if current.sa_sigaction != libc::SIG_IGN {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(s, &default, std::ptr::null_mut());
            }
            libc::sigaddset(&mut set, s);
        }
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Give the command `sig` if it needs it from us (see the module comment);
/// its spawn returned at `started`.
pub fn pass_on(sig: Delivered, pid: u32, started: Instant) {
    if sig.forward(in_our_group(pid), started) {
        send(pid, sig.signal);
    }
}

/// kill(2) on our own child.
pub fn send(pid: u32, signal: i32) {
    // SAFETY: plain kill(2); the pid is our child's, reaped only by us.
    unsafe { libc::kill(pid as i32, signal) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_signals_are_not_forwarded_twice() {
        let started = Instant::now();
        let later = started + std::time::Duration::from_millis(1);
        for signal in HANDLED {
            let from = |from_kernel| Delivered {
                signal,
                from_kernel,
                at: later,
            };
            assert!(!from(true).forward(true, started), "the group got it");
            assert!(
                from(true).forward(false, started),
                "the command left the group"
            );
            assert!(from(false).forward(true, started));
            assert!(from(false).forward(false, started));
        }
    }

    #[test]
    fn a_signal_from_before_the_command_started_is_forwarded() {
        // A terminal's Ctrl-C while the command was being spawned went to a
        // group it may not have been in yet.
        let received = Instant::now();
        let started = received + std::time::Duration::from_millis(1);
        let ctrl_c = Delivered {
            signal: SIGINT,
            from_kernel: true,
            at: received,
        };
        assert!(ctrl_c.forward(true, started));
    }

    #[test]
    fn this_process_is_in_its_own_group() {
        assert!(in_our_group(std::process::id()));
    }
}
