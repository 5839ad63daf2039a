//! Client settings and their builder.

use crate::error::Error;
use std::time::Duration;

/// Settings of a [`crate::Locker`]. Build with [`Builder`].
#[derive(Debug, Clone)]
pub struct Config {
    pub urls: Vec<String>,
    pub ttl: Duration,
    pub retry_count: u32,
    pub retry_delay: (Duration, Duration),
    pub drift_factor: f64,
    pub node_timeout: Duration,
    pub fail_fast: bool,
    pub fencing: bool,
}

/// Builder with documented defaults:
///
/// | setting | default |
/// |---|---|
/// | `ttl` | 10 s |
/// | `retry_count` (rounds of `lock`) | 32 |
/// | `retry_delay` (random in range) | 50–250 ms |
/// | `drift_factor` | 0.01 (+2 ms) |
/// | `node_timeout` | ttl / 20, clamped to 5–500 ms |
/// | `fail_fast` (stop a round once decided) | true |
/// | `fencing` (second round so tokens rise across holders) | true |
#[derive(Debug, Clone)]
pub struct Builder {
    urls: Vec<String>,
    ttl: Duration,
    retry_count: u32,
    retry_delay: (Duration, Duration),
    drift_factor: f64,
    node_timeout: Option<Duration>,
    fail_fast: bool,
    fencing: bool,
}

impl Builder {
    /// `urls`: `redis://[user:password@]host:port[/db]` or `rediss://...`.
    pub fn new<S: AsRef<str>>(urls: &[S]) -> Builder {
        Builder {
            urls: urls.iter().map(|u| u.as_ref().to_string()).collect(),
            ttl: Duration::from_secs(10),
            retry_count: 32,
            retry_delay: (Duration::from_millis(50), Duration::from_millis(250)),
            drift_factor: 0.01,
            node_timeout: None,
            fail_fast: true,
            fencing: true,
        }
    }

    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }
    pub fn retry_count(mut self, n: u32) -> Self {
        self.retry_count = n;
        self
    }
    pub fn retry_delay(mut self, min: Duration, max: Duration) -> Self {
        self.retry_delay = (min, max);
        self
    }
    pub fn drift_factor(mut self, f: f64) -> Self {
        self.drift_factor = f;
        self
    }
    pub fn node_timeout(mut self, t: Duration) -> Self {
        self.node_timeout = Some(t);
        self
    }
    pub fn fail_fast(mut self, on: bool) -> Self {
        self.fail_fast = on;
        self
    }
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    pub fn config(self) -> Result<Config, Error> {
        let bad = |why: &str| Err(Error::Config(why.to_string()));
        if self.urls.is_empty() {
            return bad("at least one server URL is needed");
        }
        for url in &self.urls {
            if let Err(e) = redis::Client::open(url.as_str()) {
                return Err(Error::Config(format!("bad server URL {url:?}: {e}")));
            }
        }
        if self.ttl < Duration::from_millis(10) {
            return bad("ttl must be at least 10ms");
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
            retry_count: self.retry_count.max(1),
            retry_delay: self.retry_delay,
            drift_factor: self.drift_factor,
            node_timeout,
            fail_fast: self.fail_fast,
            fencing: self.fencing,
        })
    }

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
}
