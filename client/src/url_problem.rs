//! What is wrong with a server URL, in words: the redis crate says only
//! "Redis URL did not parse" (`InvalidClientConfig`) for a missing scheme,
//! a port out of range or an empty host alike, and a user of the CLI or the
//! Python binding had to guess which.

/// Schemes the redis crate connects to.
const SCHEMES: [&str; 4] = ["redis", "rediss", "unix", "redis+unix"];

/// The first problem found in `url`, or `None` when none of these is there
/// (the caller then shows the parser's own message).
pub(crate) fn url_problem(url: &str) -> Option<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some("no scheme: write redis://host:port (rediss:// for TLS)".into());
    };
    if !SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) {
        return Some(format!(
            "scheme {scheme:?} is not one of redis://, rediss://, unix://, \
             redis+cluster://, rediss+cluster://, redis+sentinel://, rediss+sentinel://"
        ));
    }
    if scheme.contains("unix") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // Credentials may hold ':' and '@': the host starts after the last '@'.
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let (host, port) = match host_port.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => return Some("an IPv6 address without its closing ']'".into()),
        },
        None => match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    if host.is_empty() {
        return Some("no host".into());
    }
    match port {
        Some("") => return Some("an empty port after ':'".into()),
        Some(p) if !matches!(p.parse::<u32>(), Ok(1..=65535)) => {
            return Some(format!("port {p} is not a port number (1-65535)"))
        }
        _ => {}
    }
    // The database: the parser said "Invalid database number-
    // InvalidClientConfig" for `redis://h:1/x`.
    let path = rest[authority.len()..]
        .split(['?', '#'])
        .next()
        .unwrap_or("");
    let db = path.trim_start_matches('/');
    if !db.is_empty() && db.parse::<i64>().is_err() {
        return Some(format!(
            "database {db:?} is not a number (redis://host:port/0)"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_named() {
        let problem = |u: &str| url_problem(u).unwrap_or_default();
        assert!(problem("127.0.0.1:6390").contains("no scheme"));
        assert!(problem("http://127.0.0.1:6390").contains("\"http\""));
        assert!(problem("http://127.0.0.1:6390").contains("redis+cluster://"));
        assert!(problem("http://127.0.0.1:6390").contains("redis+sentinel://"));
        assert!(problem("redis://127.0.0.1:99999").contains("port 99999"));
        assert!(problem("redis://h:0").contains("port 0"));
        assert!(problem("redis://h:abc/0").contains("port abc"));
        assert!(problem("redis://:6390").contains("no host"));
        assert!(problem("redis://u:p@[::1").contains("']'"));
        assert!(problem("redis://h:1/x").contains("database \"x\""));
        for fine in [
            "redis://127.0.0.1:6390",
            "redis://u:p:q@h:1/0",
            "rediss://[::1]:6390/2",
            "redis://host",
            "unix:///tmp/redis.sock",
        ] {
            assert_eq!(url_problem(fine), None, "{fine}");
        }
    }
}
