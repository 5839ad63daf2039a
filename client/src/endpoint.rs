//! Which server a URL reaches, so the builder can refuse a server listed
//! twice (`127.0.0.1:P` and `localhost:P` are one vote, not two).

use redis::{ConnectionAddr, ConnectionInfo};
use std::net::{SocketAddr, ToSocketAddrs};

/// Where a URL connects: the resolved socket addresses (or, when the name
/// does not resolve now, the lower-cased name), and the db.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    addrs: Vec<SocketAddr>,
    name: String,
    db: i64,
}

impl Endpoint {
    pub(crate) fn of(info: &ConnectionInfo) -> Endpoint {
        let (name, addrs) = match info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let addrs = (host, *port)
                    .to_socket_addrs()
                    .map(|a| a.map(canonical).collect())
                    .unwrap_or_default();
                (format!("{}:{port}", host.to_ascii_lowercase()), addrs)
            }
            other => (other.to_string(), Vec::new()),
        };
        Endpoint {
            addrs,
            name,
            db: info.redis_settings().db(),
        }
    }

    /// Same db, and either a shared resolved address or the same name.
    pub(crate) fn same_server(&self, other: &Endpoint) -> bool {
        self.db == other.db
            && (self.name == other.name || self.addrs.iter().any(|a| other.addrs.contains(a)))
    }
}

/// One spelling per reachable server: IPv4-mapped IPv6 as IPv4, and every
/// loopback or unspecified address (`127.x`, `::1`, and a name resolving to
/// `0.0.0.0` or `::`, which all reach this machine) as `127.0.0.1`, so a
/// dual-stack or wildcard-bound server cannot be listed twice under two
/// spellings. (A machine's own LAN
/// address is not recognised: the README says so.)
fn canonical(addr: SocketAddr) -> SocketAddr {
    use std::net::{IpAddr, Ipv4Addr};
    let ip = match addr.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    let ip = if ip.is_loopback() || ip.is_unspecified() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        ip
    };
    SocketAddr::new(ip, addr.port())
}

/// The TCP port a URL names (None: a Unix socket).
pub(crate) fn port(info: &ConnectionInfo) -> Option<u16> {
    match info.addr() {
        ConnectionAddr::Tcp(_, port) | ConnectionAddr::TcpTls { port, .. } => Some(*port),
        _ => None,
    }
}

/// `host:port db N`, for messages (never the password).
pub(crate) fn describe(info: &ConnectionInfo) -> String {
    format!("{} db {}", info.addr(), info.redis_settings().db())
}

/// `host:port`, the name a node goes by in messages.
pub(crate) fn node_name(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(h, p)
        | ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => {
            format!("{h}:{p}")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::IntoConnectionInfo;

    fn ep(url: &str) -> Endpoint {
        Endpoint::of(&url.into_connection_info().unwrap())
    }

    #[test]
    fn names_and_addresses() {
        assert!(ep("redis://127.0.0.1:1/").same_server(&ep("redis://localhost:1/")));
        assert!(ep("redis://nowhere.invalid:1/").same_server(&ep("redis://NOWHERE.invalid:1")));
        assert!(!ep("redis://nowhere.invalid:1/").same_server(&ep("redis://nowhere.invalid:2")));
        assert!(!ep("redis://127.0.0.1:1/2").same_server(&ep("redis://127.0.0.1:1/3")));
        assert_eq!(
            describe(
                &"redis://u:secret@127.0.0.1:5/3"
                    .into_connection_info()
                    .unwrap()
            ),
            "127.0.0.1:5 db 3"
        );
    }

    #[test]
    fn aliases_of_this_machine_are_one_server() {
        let a = ep("redis://127.0.0.1:7000/");
        for alias in [
            "redis://[::ffff:127.0.0.1]:7000/",
            "redis://[::1]:7000/",
            "redis://127.0.0.2:7000/",
        ] {
            assert!(a.same_server(&ep(alias)), "{alias}");
        }
        // A wildcard host is no server at all: redis-rs (since 1.0) refuses
        // the URL, so the builder reports it as a bad server URL.
        for wildcard in ["redis://0.0.0.0:7000/", "redis://[::]:7000/"] {
            assert!(wildcard.into_connection_info().is_err(), "{wildcard}");
        }
        assert!(!a.same_server(&ep("redis://127.0.0.1:7001/")));
        assert!(
            !a.same_server(&ep("redis://127.0.0.1:7000/1")),
            "another db"
        );
    }
}
