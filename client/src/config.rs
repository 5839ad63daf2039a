//! Client settings and their builder. A [`Config`] only exists validated:
//! its fields are private and [`Builder::config`] is the only way to make one.

use crate::endpoint::{self, Endpoint};
use crate::error::Error;
use std::time::Duration;

/// The shortest lock TTL accepted (by [`Builder::config`] and per lock).
pub const MIN_TTL: Duration = Duration::from_millis(10);

/// Validated settings of a [`crate::Locker`]. Build with [`Builder`].
///
/// The fields are private so that a `Config` cannot skip validation:
///
/// ```compile_fail
/// let c = redis_lock_client::Config { urls: vec![], ..todo!() };
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) urls: Vec<String>,
    pub(crate) ttl: Duration,
    pub(crate) retry_count: Option<u32>,
    pub(crate) retry_delay: (Duration, Duration),
    pub(crate) drift_factor: f64,
    pub(crate) node_timeout: Duration,
    pub(crate) fail_fast: bool,
    pub(crate) fencing: bool,
}

impl Config {
    /// Server URLs, one per node (never empty, no two reaching the same server).
    pub fn urls(&self) -> &[String] {
        &self.urls
    }
    /// Default TTL of a lock (per-lock: [`crate::LockOptions::ttl`]).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
    /// Cap on the rounds of one `lock` call; `None`: rounds go on until the wait runs out.
    pub fn retry_count(&self) -> Option<u32> {
        self.retry_count
    }
    /// Range of the random pause between rounds.
    pub fn retry_delay(&self) -> (Duration, Duration) {
        self.retry_delay
    }
    /// Clock drift allowance as a fraction of the TTL (plus 2 ms).
    pub fn drift_factor(&self) -> f64 {
        self.drift_factor
    }
    /// Deadline of one request to one node (a `WAIT` call gets its wait on top).
    pub fn node_timeout(&self) -> Duration {
        self.node_timeout
    }
    /// Whether a round returns as soon as its outcome is certain.
    pub fn fail_fast(&self) -> bool {
        self.fail_fast
    }
    /// Whether the fencing round runs (tokens rise across holders).
    pub fn fencing(&self) -> bool {
        self.fencing
    }
}

/// Builder with documented defaults:
///
/// | setting | default |
/// |---|---|
/// | `ttl` | 10 s |
/// | `retry_count` (cap on rounds of `lock`; set, it polls instead of queuing) | none: until the wait runs out |
/// | `retry_delay` (random in range) | 50–250 ms |
/// | `drift_factor` | 0.01 (+2 ms) |
/// | `node_timeout` | ttl / 20, clamped to 5–500 ms |
/// | `fail_fast` (stop a round once decided) | true |
/// | `fencing` (second round so tokens rise across holders) | true |
#[derive(Debug, Clone)]
pub struct Builder {
    urls: Vec<String>,
    ttl: Duration,
    retry_count: Option<u32>,
    retry_delay: (Duration, Duration),
    drift_factor: f64,
    node_timeout: Option<Duration>,
    fail_fast: bool,
    fencing: bool,
}

impl Builder {
    /// `urls`: `redis://[user:password@]host:port[/db]` or `rediss://...`
    /// (TLS needs the `tls` feature).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), redis_lock_client::Error> {
    /// use redis_lock_client::Builder;
    /// use std::time::Duration;
    /// let locker = Builder::new(&["redis://10.0.0.1:6379/", "redis://10.0.0.2:6379/", "redis://10.0.0.3:6379/"])
    ///     .ttl(Duration::from_secs(30))
    ///     .node_timeout(Duration::from_millis(200))
    ///     .build()?;
    /// # drop(locker);
    /// # Ok(()) }
    /// ```
    pub fn new<S: AsRef<str>>(urls: &[S]) -> Builder {
        Builder {
            urls: urls.iter().map(|u| u.as_ref().to_string()).collect(),
            ttl: Duration::from_secs(10),
            retry_count: None,
            retry_delay: (Duration::from_millis(50), Duration::from_millis(250)),
            drift_factor: 0.01,
            node_timeout: None,
            fail_fast: true,
            fencing: true,
        }
    }

    /// Default TTL of locks (at least 10 ms).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }
    /// At most `n` rounds per `lock` call even if the wait is not over.
    /// Setting it makes `lock` poll in rounds on several servers instead of
    /// queuing in their WAIT queues.
    pub fn retry_count(mut self, n: u32) -> Self {
        self.retry_count = Some(n.max(1));
        self
    }
    /// Pause between rounds: random in `min..=max`.
    pub fn retry_delay(mut self, min: Duration, max: Duration) -> Self {
        self.retry_delay = (min, max);
        self
    }
    /// Clock drift allowance, a fraction of the TTL in `[0, 0.5)`.
    pub fn drift_factor(mut self, f: f64) -> Self {
        self.drift_factor = f;
        self
    }
    /// Deadline of one request to one node.
    pub fn node_timeout(mut self, t: Duration) -> Self {
        self.node_timeout = Some(t);
        self
    }
    /// Return from a round as soon as its outcome is certain.
    pub fn fail_fast(mut self, on: bool) -> Self {
        self.fail_fast = on;
        self
    }
    /// Run the fencing round (see "Fencing tokens" in the repository's
    /// docs/fencing.md).
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    /// Validate and return the settings. Two URLs that reach the same server
    /// (same resolved address and port, same db) are refused: one server
    /// must not vote twice.
    ///
    /// ```
    /// use redis_lock_client::{Builder, Error};
    /// let config = Builder::new(&["redis://127.0.0.1:7001/", "redis://127.0.0.1:7002/"]).config().unwrap();
    /// assert_eq!(config.urls().len(), 2);
    /// // localhost and 127.0.0.1 are one server: refused.
    /// let twice = Builder::new(&["redis://127.0.0.1:7001/", "redis://localhost:7001/"]).config();
    /// assert!(matches!(twice, Err(Error::Config(_))));
    /// ```
    pub fn config(self) -> Result<Config, Error> {
        let bad = |why: &str| Err(Error::Config(why.to_string()));
        if self.urls.is_empty() {
            return bad("at least one server URL is needed");
        }
        let mut endpoints: Vec<(&str, Endpoint)> = Vec::new();
        let mut groups = crate::sentinel::Groups::default();
        for url in &self.urls {
            if crate::sentinel::is_sentinel(url) {
                groups.add(url).map_err(Error::Config)?;
                continue;
            }
            // A cluster is checked as its seed (`cluster.rs`).
            let seed = crate::cluster::seed_url(url)
                .map_err(|why| Error::Config(format!("bad server URL {url:?}: {why}")))?;
            let plain = seed.as_deref().unwrap_or(url);
            let info = match redis::Client::open(plain) {
                // Port 0 parses, and then never connects: a server down
                // for good, counted against the quorum.
                Ok(client) if endpoint::port(client.get_connection_info()) == Some(0) => {
                    let why = "port 0 is not a port number (1-65535)";
                    return Err(Error::Config(format!("bad server URL {url:?}: {why}")));
                }
                Ok(client) => client.get_connection_info().clone(),
                Err(e) => {
                    let why =
                        crate::url_problem::url_problem(plain).unwrap_or_else(|| e.to_string());
                    return Err(Error::Config(format!("bad server URL {url:?}: {why}")));
                }
            };
            let here = Endpoint::of(&info);
            if let Some((other, _)) = endpoints.iter().find(|(_, e)| e.same_server(&here)) {
                return Err(Error::Config(format!(
                    "servers {other:?} and {url:?} reach the same server ({}): \
                     one server must not vote twice",
                    endpoint::describe(&info)
                )));
            }
            endpoints.push((url, here));
        }
        if self.ttl < MIN_TTL {
            return Err(Error::Config(format!("ttl must be at least {MIN_TTL:?}")));
        }
        if !(0.0..0.5).contains(&self.drift_factor) {
            return bad("drift factor must be in [0, 0.5)");
        }
        if self.retry_delay.0 > self.retry_delay.1 {
            return bad("retry delay: min must not exceed max");
        }
        let node_timeout = self.node_timeout.unwrap_or_else(|| {
            (self.ttl / 20).clamp(Duration::from_millis(5), Duration::from_millis(500))
        });
        if node_timeout.is_zero() || node_timeout >= self.ttl {
            return bad("node timeout must be positive and below the ttl");
        }
        Ok(Config {
            urls: self.urls,
            ttl: self.ttl,
            retry_count: self.retry_count,
            retry_delay: self.retry_delay,
            drift_factor: self.drift_factor,
            node_timeout,
            fail_fast: self.fail_fast,
            fencing: self.fencing,
        })
    }

    /// Validate and make a [`crate::Locker`]. No connection is opened
    /// until the first operation.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), redis_lock_client::Error> {
    /// let locker = redis_lock_client::Builder::new(&["redis://127.0.0.1:7379/"]).build()?;
    /// let lock = locker.try_lock("lock:job").await?;
    /// locker.unlock(&lock).await?;
    /// # Ok(()) }
    /// ```
    pub fn build(self) -> Result<crate::Locker, Error> {
        Ok(crate::Locker::new(self.config()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        let c = Builder::new(&["redis://127.0.0.1:1/"]).config().unwrap();
        assert_eq!(c.ttl, Duration::from_secs(10));
        assert_eq!(c.node_timeout, Duration::from_millis(500));
        assert_eq!(c.retry_count, None);
        let c = Builder::new(&["redis://127.0.0.1:1/"])
            .ttl(Duration::from_millis(200))
            .config()
            .unwrap();
        assert_eq!(c.node_timeout, Duration::from_millis(10));
    }

    #[test]
    fn invalid_settings_are_config_errors() {
        let url = ["redis://127.0.0.1:1/"];
        let cases = [
            Builder::new::<&str>(&[]),
            Builder::new(&["http://nope"]),
            Builder::new(&url).ttl(Duration::from_millis(1)),
            Builder::new(&url).drift_factor(0.9),
            Builder::new(&url).retry_delay(Duration::from_secs(2), Duration::from_secs(1)),
            Builder::new(&url).node_timeout(Duration::from_secs(60)),
        ];
        for b in cases {
            assert!(matches!(b.config(), Err(Error::Config(_))));
        }
    }

    /// Port 0 parses (and then never connects), and the parser named a
    /// database that is not a number only as "InvalidClientConfig".
    #[test]
    fn port_zero_and_a_bad_database_are_refused_saying_what_is_wrong() {
        for (url, words) in [
            ("redis://127.0.0.1:0", "port 0 is not a port number"),
            ("rediss://127.0.0.1:0/", "port 0 is not a port number"),
            ("redis://127.0.0.1:7001/x", "database \"x\" is not a number"),
        ] {
            match Builder::new(&[url]).config() {
                Err(Error::Config(why)) => {
                    assert!(why.contains(words), "{url}: {why}");
                    assert!(!why.contains("InvalidClientConfig"), "{url}: {why}");
                }
                other => panic!("{url}: {:?}", other.map(|c| c.urls)),
            }
        }
    }

    #[test]
    fn cluster_urls_are_checked_as_their_seeds() {
        let ok = [
            "redis+cluster://127.0.0.1:7001/",
            "redis+cluster://u:p@127.0.0.1:7001",
            "redis+cluster://127.0.0.1:7001/0",
        ];
        for url in ok {
            assert!(Builder::new(&[url]).config().is_ok(), "{url}");
        }
        for (url, words) in [
            ("redis+cluster://127.0.0.1:7001/1", "only database 0"),
            (
                "redis+cluster+sentinel://127.0.0.1:7001/",
                "never two at once",
            ),
            ("redis+cluster://127.0.0.1:0/", "port 0"),
            ("redis+cluster://:7001/", "no host"),
        ] {
            match Builder::new(&[url]).config() {
                Err(Error::Config(why)) => assert!(why.contains(words), "{url}: {why}"),
                other => panic!("{url}: {:?}", other.map(|c| c.urls)),
            }
        }
        // Two seeds at one address: one cluster listed twice.
        let twice = [
            "redis+cluster://127.0.0.1:7001/",
            "redis+cluster://localhost:7001",
        ];
        let err = Builder::new(&twice).config().unwrap_err().to_string();
        assert!(err.contains("same server"), "{err}");
    }

    #[test]
    fn the_same_server_twice_is_refused_naming_both() {
        let same = [
            ["redis://127.0.0.1:7001/", "redis://127.0.0.1:7001"],
            ["redis://127.0.0.1:7001/", "redis://localhost:7001/"],
            ["redis://127.0.0.1:7001/0", "redis://u:p@127.0.0.1:7001/"],
        ];
        for pair in same {
            let err = Builder::new(&pair).config().unwrap_err().to_string();
            assert!(
                err.contains(pair[0]) && err.contains(pair[1]),
                "{pair:?}: {err}"
            );
        }
        let distinct = [
            ["redis://127.0.0.1:7001/", "redis://127.0.0.1:7002/"],
            ["redis://127.0.0.1:7001/0", "redis://127.0.0.1:7001/1"],
        ];
        for pair in distinct {
            assert!(Builder::new(&pair).config().is_ok(), "{pair:?}");
        }
    }
}
