//! Exit codes (sysexits.h where one fits, shell conventions for the command).

use redis_lock_client::Error;
use std::process::ExitStatus;

/// `release`: a majority of the servers answered and none held the lock
/// for that owner.
pub const NOT_HELD: u8 = 1;
/// Bad command line: unknown option, bad duration, `--ttl` below the
/// minimum, missing `--`.
pub const USAGE: u8 = 64;
/// No majority of servers could be reached.
pub const UNAVAILABLE: u8 = 69;
/// Default for `--conflict-exit-code`: held by another owner past `--wait`.
pub const CONFLICT: u8 = 75;
/// The lock was lost while the command ran; the command was stopped.
pub const LOST: u8 = 76;
/// Bad settings or a server refusing for good (URLs, a server listed twice,
/// a host name that does not exist, TTL above the server's maximum, NOPERM,
/// wrong password).
pub const CONFIG: u8 = 78;
/// The command exists but could not be executed.
pub const NOT_EXECUTABLE: u8 = 126;
/// The command was not found.
pub const NOT_FOUND: u8 = 127;

/// The text of `run --help`'s exit code table.
pub const TABLE: &str = "\
Exit codes:
  CMD's own  the command ran under the lock (128+N if killed by signal N)
  75         the lock is held by another owner and did not come free within
             --wait (change with --conflict-exit-code)
  76         the lock was lost while the command ran; it got SIGTERM, then
             SIGKILL after --grace (or it had ended, and the release found
             the lock gone)
  69         no majority of the servers could be reached
  78         bad settings, or the servers refused the request (TTL above
             lock.max-ttl-ms, NOPERM, wrong password, a server listed twice,
             a server host name that does not exist)
  64         bad command line (e.g. a bad duration, a --ttl below 10ms, a
             missing --)
  126        the command is not executable
  127        the command was not found
  128+N      redis-lock got signal N while waiting for the lock";

/// The text of `release --help`'s exit code table.
pub const RELEASE_TABLE: &str = "\
Exit codes:
  0   released on at least one server
  1   a majority of the servers answered and none held the lock for OWNER
  69  fewer than a majority of the servers answered
  78  bad settings, or the servers refused (NOPERM, wrong password) so that
      no majority can answer";

/// The exit code for an acquisition that failed with `e`.
pub fn for_error(e: &Error, conflict: u8) -> u8 {
    match e {
        Error::Taken | Error::Expired => conflict,
        Error::Config(_) | Error::Rejected { .. } => CONFIG,
        _ => UNAVAILABLE,
    }
}

/// Like a shell: the command's code, or 128 + the signal that killed it.
pub fn of_status(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        (None, None) => NOT_EXECUTABLE,
    }
}

/// Like a shell: 127 when the command does not exist, 126 when it exists
/// but cannot be run (permissions, a directory, a bad format).
pub fn of_spawn_error(e: &std::io::Error) -> u8 {
    match e.kind() {
        std::io::ErrorKind::NotFound => NOT_FOUND,
        _ => NOT_EXECUTABLE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn shell_conventions() {
        assert_eq!(of_status(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(of_status(ExitStatus::from_raw(libc::SIGTERM)), 143);
        let denied = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(of_spawn_error(&denied), 126);
        let missing = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(of_spawn_error(&missing), 127);
    }

    #[test]
    fn errors_map_to_classes() {
        assert_eq!(for_error(&Error::Taken, 3), 3);
        assert_eq!(for_error(&Error::Config("x".into()), 3), CONFIG);
        let rejected = Error::Rejected {
            node: "n".into(),
            message: "NOPERM".into(),
        };
        assert_eq!(for_error(&rejected, 3), CONFIG);
        let nq = Error::NoQuorum {
            granted: 0,
            needed: 2,
            failures: vec![],
        };
        assert_eq!(for_error(&nq, 3), UNAVAILABLE);
    }
}
