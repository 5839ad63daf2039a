//! Starting the command so that it cannot outlive the CLI.

use std::io;
use tokio::process::{Child, Command};

/// Start `argv` with the lock's environment. On Linux the child gets
/// `PR_SET_PDEATHSIG(SIGKILL)`: if the CLI dies without stopping it (SIGKILL,
/// a crash), nobody renews the lock any more, so the command must not run
/// on. SIGKILL rather than SIGTERM: a command that ignored SIGTERM would
/// keep running unprotected, and there is no CLI left to escalate.
/// (Only the direct child is covered; processes it forks are its business.)
///
/// The death signal fires when the *thread* that forked exits, so the
/// caller must spawn from a thread that lives as long as the CLI (the CLI
/// runs a current-thread runtime on the main thread).
pub fn spawn(argv: &[String], env: &[(&str, String)]) -> io::Result<Child> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    #[cfg(target_os = "linux")]
    // SAFETY: getpid is async-signal-safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs between fork and exec and calls only
    // async-signal-safe functions (sigaction, sigprocmask, prctl, getppid).
    unsafe {
        cmd.pre_exec(move || {
            crate::signals::reset_in_child();
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The CLI may have died between fork and prctl: then the
                // death signal will never come, so don't start at all.
                if libc::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            Ok(())
        });
    }
    cmd.spawn()
}
