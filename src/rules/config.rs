//! Module configuration: `CONFIG SET/GET lock.<name>`, redis.conf `lock.*`
//! lines and `loadmodule <path> <name> <value> ...` arguments. All three
//! follow one table (`SETTINGS`): the same names, the same ranges.
//! Registered in `lib.rs`.

use crate::rules::args::{Limits, OWNER_LEN_CEILING, TTL_CEILING};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

pub static MAX_TTL_MS: AtomicI64 = AtomicI64::new(DEFAULT_MAX_TTL_MS);
pub static MAX_OWNER_LEN: AtomicI64 = AtomicI64::new(DEFAULT_MAX_OWNER_LEN);
pub static RESTART_DELAY_MS: AtomicI64 = AtomicI64::new(RESTART_DELAY_AUTO);

/// Ten minutes: long enough for any lease a client renews, short enough
/// that the restart guard (which defaults to this) is bearable. Longer
/// leases belong in a database, not a lock service.
pub const DEFAULT_MAX_TTL_MS: i64 = 600_000;
/// Room for a UUID plus host/thread ids, as Redisson-style owners use.
pub const DEFAULT_MAX_OWNER_LEN: i64 = 256;
/// `lock.restart-delay-ms -1`: as long as the longest TTL this server may
/// grant (`lock.max-ttl-ms`), unless an always-fsync'd AOF was loaded.
pub const RESTART_DELAY_AUTO: i64 = -1;

/// One setting: its name (without the `lock.` prefix) and its range.
pub struct Setting {
    pub name: &'static str,
    pub value: &'static AtomicI64,
    pub default: i64,
    pub min: i64,
    pub max: i64,
}

pub static SETTINGS: [Setting; 3] = [
    Setting {
        name: "max-ttl-ms",
        value: &MAX_TTL_MS,
        default: DEFAULT_MAX_TTL_MS,
        min: 1,
        max: TTL_CEILING as i64,
    },
    Setting {
        name: "max-owner-len",
        value: &MAX_OWNER_LEN,
        default: DEFAULT_MAX_OWNER_LEN,
        min: 1,
        max: OWNER_LEN_CEILING as i64,
    },
    Setting {
        name: "restart-delay-ms",
        value: &RESTART_DELAY_MS,
        default: RESTART_DELAY_AUTO,
        min: RESTART_DELAY_AUTO,
        max: TTL_CEILING as i64,
    },
];

/// The restart guard's length: the configured delay, or for `auto` the
/// longest TTL this server may grant, and 0 when the data it loaded holds
/// every grant (`complete_persistence`: an AOF fsync'd on every write).
pub fn restart_delay_ms(complete_persistence: bool) -> u64 {
    effective_restart_delay(
        RESTART_DELAY_MS.load(Relaxed),
        MAX_TTL_MS.load(Relaxed),
        complete_persistence,
    )
}

/// Pure form of `restart_delay_ms`, for tests.
pub fn effective_restart_delay(configured: i64, max_ttl: i64, complete_persistence: bool) -> u64 {
    if complete_persistence {
        0
    } else if configured == RESTART_DELAY_AUTO {
        // Long enough for every lock granted before to expire.
        max_ttl.max(0) as u64
    } else {
        configured.max(0) as u64
    }
}

/// The limits new requests are checked against.
pub fn limits() -> Limits {
    Limits {
        max_ttl: MAX_TTL_MS.load(Relaxed) as u64,
        max_owner_len: MAX_OWNER_LEN.load(Relaxed) as usize,
    }
}

/// Parse `loadmodule` arguments (`name value` pairs, name with or without
/// the `lock.` prefix, any case) into (setting index, value). Every error
/// names the argument, so the server can refuse to start with it.
pub fn parse_module_args(args: &[String]) -> Result<Vec<(usize, i64)>, String> {
    if !args.len().is_multiple_of(2) {
        return Err(format!(
            "module arguments must be `name value` pairs; `{}` has no value",
            args[args.len() - 1]
        ));
    }
    let mut out: Vec<(usize, i64)> = Vec::new();
    for pair in args.chunks(2) {
        let (raw_name, raw_value) = (&pair[0], &pair[1]);
        let lower = raw_name.to_ascii_lowercase();
        let name = lower.strip_prefix("lock.").unwrap_or(&lower);
        let index = SETTINGS
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| {
                let known: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
                format!(
                    "unknown module argument `{raw_name}` (known: {})",
                    known.join(", ")
                )
            })?;
        if out.iter().any(|&(i, _)| i == index) {
            return Err(format!("module argument `{raw_name}` given more than once"));
        }
        let setting = &SETTINGS[index];
        let value = config_integer(raw_value)
            .filter(|v| (setting.min..=setting.max).contains(v))
            .ok_or_else(|| {
                format!(
                    "module argument `{raw_name}`: `{raw_value}` is not an integer from {} to {}",
                    setting.min, setting.max
                )
            })?;
        out.push((index, value));
    }
    Ok(out)
}

/// An integer as `CONFIG SET` reads one (Redis's string2ll): an optional
/// `-`, then digits without leading zeros; no `+`, no spaces.
fn config_integer(raw: &str) -> Option<i64> {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| raw.parse().ok()).flatten()
}

/// Whether `maxmemory-policy` may evict a lock key to make room: the
/// `allkeys-*` policies. A lock has no native expiry, so `volatile-*` never
/// picks one; an evicted lock is a second holder's grant.
pub fn policy_evicts_locks(policy: &str) -> bool {
    policy.trim().to_ascii_lowercase().starts_with("allkeys-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allkeys_policies_can_evict_a_lock() {
        for p in [
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "ALLKEYS-LRU",
        ] {
            assert!(policy_evicts_locks(p), "{p}");
        }
        for p in ["noeviction", "volatile-lru", "volatile-ttl", ""] {
            assert!(!policy_evicts_locks(p), "{p}");
        }
    }

    fn parse(args: &[&str]) -> Result<Vec<(usize, i64)>, String> {
        parse_module_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn accepts_names_with_or_without_prefix_in_any_case() {
        assert_eq!(
            parse(&["max-ttl-ms", "5000", "LOCK.Restart-Delay-Ms", "0"]),
            Ok(vec![(0, 5000), (2, 0)])
        );
        assert_eq!(parse(&["restart-delay-ms", "-1"]), Ok(vec![(2, -1)]));
        assert_eq!(parse(&[]), Ok(vec![]));
    }

    #[test]
    fn refuses_what_config_set_would_refuse() {
        let err = |a: &[&str]| parse(a).unwrap_err();
        assert!(err(&["bogus", "1"]).contains("`bogus`"));
        assert!(err(&["max-ttl-ms"]).contains("no value"));
        assert!(err(&["max-ttl-ms", "-5"]).contains("from 1 to"));
        assert!(err(&["max-ttl-ms", "0"]).contains("from 1 to"));
        assert!(err(&["max-owner-len", "99999999999"]).contains("`max-owner-len`"));
        assert!(err(&["max-ttl-ms", "5s"]).contains("`5s`"));
        assert!(err(&["restart-delay-ms", "+5"]).contains("`+5`"));
        assert!(err(&["restart-delay-ms", "05"]).contains("`05`"));
        assert!(err(&["restart-delay-ms", " 5"]).contains("` 5`"));
        assert!(err(&["restart-delay-ms", "-2"]).contains("from -1"));
        assert!(err(&["max-ttl-ms", "5", "lock.max-ttl-ms", "6"]).contains("more than once"));
    }

    #[test]
    fn auto_restart_delay_is_the_longest_ttl_unless_persistence_is_complete() {
        assert_eq!(effective_restart_delay(-1, 600_000, false), 600_000);
        assert_eq!(effective_restart_delay(-1, 600_000, true), 0);
        assert_eq!(effective_restart_delay(-1, 1000, false), 1000);
        assert_eq!(effective_restart_delay(1500, 600_000, false), 1500);
        assert_eq!(effective_restart_delay(0, 600_000, false), 0);
    }
}
