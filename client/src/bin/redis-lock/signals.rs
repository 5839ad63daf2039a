//! Signals the CLI catches and which of them it passes on to the command.
//!
//! The command starts in the CLI's process group (so it keeps the terminal
//! and can read from it). A signal the kernel sent — a terminal's Ctrl-C,
//! Ctrl-\ or hangup — went to the whole foreground process group, so a
//! command still in it already got it: forwarding it would deliver it
//! twice. A command that left the group (`setsid`, `setpgid`) did not get
//! it, so it is forwarded then. A signal a process sent to the CLI alone
//! (`kill PID`, a supervisor) is forwarded once.

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;
use tokio::sync::mpsc;

/// The signals `run` handles (everything else keeps its default action).
pub const HANDLED: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

/// One delivered signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub signal: i32,
    /// Sent by the kernel (the terminal), not by a process.
    pub from_kernel: bool,
}

impl Delivered {
    /// Whether the command needs it from us (see the module comment).
    pub fn forward(&self, command_in_our_group: bool) -> bool {
        !self.from_kernel || !command_in_our_group
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

/// Catch [`HANDLED`] from now on, except the signals our caller chose to
/// ignore: those stay ignored, for us and (inherited through exec) for the
/// command; deliveries arrive on the returned channel.
pub fn catch() -> std::io::Result<mpsc::UnboundedReceiver<Delivered>> {
    let caught: Vec<i32> = HANDLED.into_iter().filter(|&s| !ignored(s)).collect();
    let mut signals = SignalsInfo::<WithOrigin>::new(caught)?;
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for origin in signals.forever() {
            let from_kernel = matches!(origin.cause, Cause::Kernel);
            let delivered = Delivered {
                signal: origin.signal,
                from_kernel,
            };
            if tx.send(delivered).is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

/// Give the command `sig` if it needs it from us (see the module comment).
pub fn pass_on(sig: Delivered, pid: u32) {
    if sig.forward(in_our_group(pid)) {
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
        for signal in HANDLED {
            let from = |from_kernel| Delivered {
                signal,
                from_kernel,
            };
            assert!(!from(true).forward(true), "the group got it");
            assert!(from(true).forward(false), "the command left the group");
            assert!(from(false).forward(true));
            assert!(from(false).forward(false));
        }
    }

    #[test]
    fn this_process_is_in_its_own_group() {
        assert!(in_our_group(std::process::id()));
    }
}
