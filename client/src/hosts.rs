//! Server host names that do not exist, caught before connecting.
//!
//! The client takes a failed lookup for a server that is down (a name may
//! resolve later), which makes a typo in a server list look like an
//! outage: the CLI's `--servers` exited 69 "unavailable", and a Python
//! `Locker` locked on 2 of 3 without a word. A name the resolver says does
//! not exist is bad settings, worth refusing even when the other servers
//! would make a majority, like a server listed twice: the CLI (exit 78) and
//! the Python binding (ValueError) ask here. The builder does not (a
//! long-lived program may list a name that is registered later). A lookup
//! that merely failed (no DNS server answered) stays an outage: the
//! connection reports it.

use redis::{ConnectionAddr, IntoConnectionInfo};
use std::ffi::CString;

/// The host of the first URL whose name does not exist (the resolver
/// answers EAI_NONAME); `None` when every name exists or may (a lookup that
/// failed otherwise). Blocks on the system resolver.
pub fn unknown_host<S: AsRef<str>>(urls: &[S]) -> Option<String> {
    urls.iter().find_map(|url| {
        // A Sentinel URL's host is its sentinel's; a cluster is looked up
        // by its seed.
        let sentinel = crate::sentinel::first_sentinel_of(url.as_ref());
        let seed = crate::cluster::seed_url(url.as_ref()).ok().flatten();
        let info = match sentinel {
            Some(info) => info,
            None => seed
                .as_deref()
                .unwrap_or(url.as_ref())
                .into_connection_info()
                .ok()?,
        };
        let host = match info.addr() {
            ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
            _ => return None,
        };
        does_not_exist(&host).then_some(host)
    })
}

/// Whether getaddrinfo(3) answers EAI_NONAME for `host`. Called directly
/// because std's lookup error hides that code: a temporary failure
/// (EAI_AGAIN) must not count. The hints are the ones std (and so the
/// connection) uses.
fn does_not_exist(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(node) = CString::new(bare) else {
        return false;
    };
    // SAFETY: an all-zero addrinfo is a valid "no preference" hint.
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_socktype = libc::SOCK_STREAM;
    let mut found: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name, no service, valid hints and out
    // pointer; the list it returns on success is freed once.
    let rc = unsafe { libc::getaddrinfo(node.as_ptr(), std::ptr::null(), &hints, &mut found) };
    if rc == 0 {
        // SAFETY: `found` is the list getaddrinfo just returned, freed once.
        unsafe { libc::freeaddrinfo(found) };
    }
    rc == libc::EAI_NONAME
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_do_not_exist() {
        let urls = |u: &[&str]| u.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            unknown_host(&urls(&["redis://127.0.0.1:1/", "redis://[::1]:2/"])),
            None
        );
        assert_eq!(unknown_host(&urls(&["redis://localhost:1/"])), None);
        assert_eq!(
            unknown_host(&urls(&[
                "redis://127.0.0.1:1/",
                "redis://no-such.invalid:2/"
            ])),
            Some("no-such.invalid".to_string())
        );
        assert_eq!(
            unknown_host(&urls(&["redis+cluster://no-such.invalid:2/"])),
            Some("no-such.invalid".to_string())
        );
        assert_eq!(
            unknown_host(&urls(&["redis+sentinel://no-such.invalid:2/locks"])),
            Some("no-such.invalid".to_string())
        );
    }
}
