//! Argument parsing for the LOCK.* commands. Pure: bytes in, a request or a
//! one-line error message out. Errors never echo raw user bytes (they could
//! hold CR/LF and break the protocol).

use crate::rules::clock::Millis;

/// Limits that come from the module's configuration.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_ttl: Millis,
    pub max_owner_len: usize,
}

/// Largest `LIMIT`: 2^31 − 1, as a signed 32-bit count allows.
pub const MAX_LIMIT: u32 = i32::MAX as u32;

/// Largest `lock.max-ttl-ms` any server may be configured with (~34 years).
pub const TTL_CEILING: Millis = 1 << 40;
/// Largest `lock.max-owner-len` any server may be configured with (1 MiB).
pub const OWNER_LEN_CEILING: usize = 1 << 20;

impl Limits {
    /// The widest limits any server can have. What a primary decided (a
    /// replicated command, the AOF, an RDB) is checked only against these:
    /// a replica or a reload with smaller limits must apply it as decided,
    /// never drop it.
    pub const CEILING: Limits = Limits {
        max_ttl: TTL_CEILING,
        max_owner_len: OWNER_LEN_CEILING,
    };
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireArgs<'a> {
    pub owner: &'a [u8],
    pub ttl: Millis,
    /// `Some(0)` waits without limit.
    pub wait: Option<Millis>,
    pub reentrant: bool,
    /// `MINTOKEN t`: a new grant's token is at least `t` (0: no floor), so
    /// that a quorum's nodes can hand out the same token and skip the
    /// fencing round (see fencing.rs).
    pub min_token: u64,
    /// `TICKET t` (only with WAIT): the waiter's place in the key's queue,
    /// which is ordered by (ticket, arrival). None: the server's clock in µs
    /// at arrival. A quorum client sends the same ticket to every node, so
    /// that all their queues agree on who is next.
    pub ticket: Option<u64>,
    /// `SHARED`: a shared hold (read-write lock, semaphore; shared.rs).
    pub shared: bool,
    /// `LIMIT n` (only with SHARED): at most n shared holders.
    pub limit: Option<u32>,
}

pub type ArgResult<T> = Result<T, String>;

pub fn owner<'a>(raw: &'a [u8], limits: &Limits) -> ArgResult<&'a [u8]> {
    if raw.is_empty() {
        return Err("ERR owner must not be empty".into());
    }
    if raw.len() > limits.max_owner_len {
        return Err(format!(
            "ERR owner is longer than lock.max-owner-len ({} bytes)",
            limits.max_owner_len
        ));
    }
    Ok(raw)
}

/// A strictly positive decimal integer, at most `max`.
fn positive(raw: &[u8], what: &str, max: Millis) -> ArgResult<Millis> {
    let value = parse_u64(raw).ok_or_else(|| format!("ERR {what} must be a positive integer"))?;
    if value == 0 {
        return Err(format!("ERR {what} must be a positive integer"));
    }
    if value > max {
        return Err(format!("ERR {what} is above the maximum ({max})"));
    }
    Ok(value)
}

pub fn ttl(raw: &[u8], limits: &Limits) -> ArgResult<Millis> {
    positive(raw, "ttl-ms", limits.max_ttl)
}

/// Plain decimal digits only: no sign, no spaces, no overflow.
fn parse_u64(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || raw.len() > 20 {
        return None;
    }
    raw.iter().try_fold(0u64, |acc, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// Longest WAIT accepted: about 24 days, far beyond any sane wait, and small
/// enough to stay a valid Redis timeout.
pub const MAX_WAIT: Millis = i32::MAX as Millis;

/// `owner ttl-ms [SHARED] [LIMIT n] [WAIT timeout-ms] [REENTRANT] [MINTOKEN token]
/// [TICKET ticket]`
/// (argv after the key).
pub fn acquire<'a>(args: &[&'a [u8]], limits: &Limits) -> ArgResult<AcquireArgs<'a>> {
    let [raw_owner, raw_ttl, options @ ..] = args else {
        return Err(wrong_arity("lock.acquire"));
    };
    let mut req = AcquireArgs {
        owner: owner(raw_owner, limits)?,
        ttl: ttl(raw_ttl, limits)?,
        wait: None,
        reentrant: false,
        min_token: 0,
        ticket: None,
        shared: false,
        limit: None,
    };
    let mut rest = options.iter();
    while let Some(opt) = rest.next() {
        if opt.eq_ignore_ascii_case(b"REENTRANT") {
            if req.reentrant {
                return Err("ERR option REENTRANT given more than once".into());
            }
            req.reentrant = true;
        } else if opt.eq_ignore_ascii_case(b"MINTOKEN") {
            if req.min_token != 0 {
                return Err("ERR option MINTOKEN given more than once".into());
            }
            let raw = rest
                .next()
                .ok_or_else(|| "ERR option MINTOKEN needs a token".to_string())?;
            req.min_token = positive(raw, "MINTOKEN token", crate::rules::fencing::MAX_TOKEN)?;
        } else if opt.eq_ignore_ascii_case(b"TICKET") {
            if req.ticket.is_some() {
                return Err("ERR option TICKET given more than once".into());
            }
            let raw = rest
                .next()
                .ok_or_else(|| "ERR option TICKET needs a ticket".to_string())?;
            req.ticket = Some(positive(
                raw,
                "TICKET ticket",
                crate::rules::fencing::MAX_TOKEN,
            )?);
        } else if opt.eq_ignore_ascii_case(b"SHARED") {
            if req.shared {
                return Err("ERR option SHARED given more than once".into());
            }
            req.shared = true;
        } else if opt.eq_ignore_ascii_case(b"LIMIT") {
            if req.limit.is_some() {
                return Err("ERR option LIMIT given more than once".into());
            }
            let raw = rest
                .next()
                .ok_or_else(|| "ERR option LIMIT needs a count".to_string())?;
            let max = Millis::from(MAX_LIMIT);
            let n = parse_u64(raw)
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| format!("ERR LIMIT must be an integer from 1 to {max}"))?;
            req.limit = Some(n as u32);
        } else if opt.eq_ignore_ascii_case(b"WAIT") {
            if req.wait.is_some() {
                return Err("ERR option WAIT given more than once".into());
            }
            let raw = rest
                .next()
                .ok_or_else(|| "ERR option WAIT needs a timeout-ms".to_string())?;
            let timeout = parse_u64(raw).filter(|&t| t <= MAX_WAIT).ok_or_else(|| {
                format!("ERR WAIT timeout-ms must be an integer from 0 to {MAX_WAIT}")
            })?;
            req.wait = Some(timeout);
        } else {
            return Err(format!("ERR unknown option '{}'", printable(opt)));
        }
    }
    if req.ticket.is_some() && req.wait.is_none() {
        return Err("ERR option TICKET needs WAIT (it orders the wait queue)".into());
    }
    if req.limit.is_some() && !req.shared {
        return Err("ERR option LIMIT needs SHARED (it bounds shared holders)".into());
    }
    Ok(req)
}

/// `owner ttl-ms` (argv after the key) for LOCK.EXTEND.
pub fn extend<'a>(args: &[&'a [u8]], limits: &Limits) -> ArgResult<(&'a [u8], Millis)> {
    match args {
        [raw_owner, raw_ttl] => Ok((owner(raw_owner, limits)?, ttl(raw_ttl, limits)?)),
        _ => Err(wrong_arity("lock.extend")),
    }
}

/// `owner token` (argv after the key) for LOCK.FENCE.
pub fn fence<'a>(args: &[&'a [u8]], limits: &Limits) -> ArgResult<(&'a [u8], u64)> {
    match args {
        [raw_owner, raw_token] => Ok((
            owner(raw_owner, limits)?,
            positive(raw_token, "token", crate::rules::fencing::MAX_TOKEN)?,
        )),
        _ => Err(wrong_arity("lock.fence")),
    }
}

/// `owner` (argv after the key) for LOCK.RELEASE.
pub fn release<'a>(args: &[&'a [u8]], limits: &Limits) -> ArgResult<&'a [u8]> {
    match args {
        [raw_owner] => owner(raw_owner, limits),
        _ => Err(wrong_arity("lock.release")),
    }
}

pub fn wrong_arity(command: &str) -> String {
    format!("ERR wrong number of arguments for '{command}' command")
}

/// At most 32 printable ASCII characters of a user-supplied word.
fn printable(raw: &[u8]) -> String {
    raw.iter()
        .take(32)
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '?' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits {
        max_ttl: 1000,
        max_owner_len: 8,
    };

    fn parse(args: &[&str]) -> ArgResult<AcquireArgs<'static>> {
        let v: Vec<&'static [u8]> = args
            .iter()
            .map(|s| -> &'static [u8] { Box::leak(s.as_bytes().to_vec().into_boxed_slice()) })
            .collect();
        acquire(&v, &L)
    }

    #[test]
    fn minimal_acquire() {
        let a = parse(&["alice", "500"]).unwrap();
        assert_eq!(
            (a.owner, a.ttl, a.wait, a.reentrant),
            (&b"alice"[..], 500, None, false)
        );
    }

    #[test]
    fn mintoken_is_a_positive_token_given_once() {
        assert_eq!(parse(&["a", "5", "mintoken", "42"]).unwrap().min_token, 42);
        assert_eq!(parse(&["a", "5"]).unwrap().min_token, 0);
        assert!(parse(&["a", "5", "MINTOKEN"])
            .unwrap_err()
            .contains("needs a token"));
        assert!(parse(&["a", "5", "MINTOKEN", "0"])
            .unwrap_err()
            .contains("positive"));
        assert!(parse(&["a", "5", "MINTOKEN", "9007199254740992"])
            .unwrap_err()
            .contains("maximum"));
        assert!(parse(&["a", "5", "MINTOKEN", "1", "MINTOKEN", "2"])
            .unwrap_err()
            .contains("more than once"));
    }

    #[test]
    fn ticket_is_a_positive_integer_given_once_with_wait() {
        let a = parse(&["a", "5", "WAIT", "10", "ticket", "42"]).unwrap();
        assert_eq!(a.ticket, Some(42));
        let a = parse(&["a", "5", "TiCkEt", "9007199254740991", "wait", "0"]).unwrap();
        assert_eq!((a.ticket, a.wait), (Some(9007199254740991), Some(0)));
        assert_eq!(parse(&["a", "5", "WAIT", "10"]).unwrap().ticket, None);
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert!(err(&["a", "5", "WAIT", "10", "TICKET"]).contains("needs a ticket"));
        for bad in ["0", "-1", "1.5", "x", "", "99999999999999999999999"] {
            let e = err(&["a", "5", "WAIT", "10", "TICKET", bad]);
            assert_eq!(e, "ERR TICKET ticket must be a positive integer", "{bad:?}");
        }
        assert_eq!(
            err(&["a", "5", "WAIT", "10", "TICKET", "9007199254740992"]),
            "ERR TICKET ticket is above the maximum (9007199254740991)"
        );
        assert_eq!(
            err(&["a", "5", "WAIT", "1", "TICKET", "1", "TICKET", "2"]),
            "ERR option TICKET given more than once"
        );
        assert!(err(&["a", "5", "TICKET", "7"]).starts_with("ERR option TICKET needs WAIT"));
        assert!(err(&["a", "5", "TICKET", "7", "REENTRANT"]).contains("needs WAIT"));
    }

    #[test]
    fn shared_and_limit() {
        let a = parse(&["a", "5", "shared"]).unwrap();
        assert_eq!((a.shared, a.limit), (true, None));
        let a = parse(&["a", "5", "LIMIT", "3", "WAIT", "0", "Shared"]).unwrap();
        assert_eq!((a.shared, a.limit, a.wait), (true, Some(3), Some(0)));
        let a = parse(&["a", "5", "SHARED", "LIMIT", "2147483647"]).unwrap();
        assert_eq!(a.limit, Some(2147483647));
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert_eq!(
            err(&["a", "5", "LIMIT", "3"]),
            "ERR option LIMIT needs SHARED (it bounds shared holders)"
        );
        for bad in [
            "0",
            "-1",
            "2147483648",
            "x",
            "",
            "1.5",
            "99999999999999999999999",
        ] {
            assert_eq!(
                err(&["a", "5", "SHARED", "LIMIT", bad]),
                "ERR LIMIT must be an integer from 1 to 2147483647",
                "{bad:?}"
            );
        }
        assert_eq!(
            err(&["a", "5", "SHARED", "LIMIT"]),
            "ERR option LIMIT needs a count"
        );
        assert_eq!(
            err(&["a", "5", "SHARED", "LIMIT", "1", "LIMIT", "1"]),
            "ERR option LIMIT given more than once"
        );
        assert_eq!(
            err(&["a", "5", "SHARED", "shared"]),
            "ERR option SHARED given more than once"
        );
    }

    #[test]
    fn options_any_case_and_order() {
        let a = parse(&["a", "5", "reentrant", "wait", "0"]).unwrap();
        assert!(a.reentrant);
        assert_eq!(a.wait, Some(0));
        let a = parse(&["a", "5", "WAIT", "10", "REENTRANT"]).unwrap();
        assert_eq!(a.wait, Some(10));
    }

    #[test]
    fn bad_ttls_are_rejected() {
        for bad in [
            "0",
            "-1",
            "1.5",
            "abc",
            "",
            " 5",
            "+5",
            "1001",
            "99999999999999999999999",
        ] {
            let e = parse(&["a", bad]).unwrap_err();
            assert!(e.starts_with("ERR ttl-ms"), "{bad:?} gave {e}");
        }
        assert!(parse(&["a", "1000"]).is_ok());
    }

    #[test]
    fn bad_owners_are_rejected() {
        assert_eq!(
            parse(&["", "5"]).unwrap_err(),
            "ERR owner must not be empty"
        );
        assert!(parse(&["123456789", "5"])
            .unwrap_err()
            .contains("max-owner-len"));
        assert!(parse(&["12345678", "5"]).is_ok());
    }

    #[test]
    fn bad_options_are_rejected() {
        assert!(parse(&["a", "5", "FOO"])
            .unwrap_err()
            .contains("unknown option 'FOO'"));
        assert!(parse(&["a", "5", "REENTRANT", "reentrant"])
            .unwrap_err()
            .contains("more than once"));
        assert!(parse(&["a", "5", "WAIT"])
            .unwrap_err()
            .contains("needs a timeout"));
        assert!(parse(&["a", "5", "WAIT", "-1"])
            .unwrap_err()
            .contains("WAIT timeout-ms"));
        assert!(parse(&["a", "5", "WAIT", "1", "WAIT", "2"])
            .unwrap_err()
            .contains("more than once"));
        assert!(parse(&["a"]).unwrap_err().contains("wrong number"));
    }

    #[test]
    fn errors_never_echo_control_bytes() {
        let e = parse(&["a", "5", "x\r\ny"]).unwrap_err();
        assert!(!e.contains('\r') && !e.contains('\n'), "{e}");
    }

    #[test]
    fn fence_token_bounds() {
        assert_eq!(fence(&[b"a", b"7"], &L).unwrap(), (&b"a"[..], 7));
        assert!(fence(&[b"a", b"0"], &L).is_err());
        assert!(fence(&[b"a", b"4611686018427387905"], &L)
            .unwrap_err()
            .contains("above the maximum"));
        assert!(fence(&[b"a"], &L).is_err());
    }

    #[test]
    fn extend_and_release_arity() {
        assert_eq!(extend(&[b"a", b"10"], &L).unwrap(), (&b"a"[..], 10));
        assert!(extend(&[b"a"], &L).is_err());
        assert!(extend(&[b"a", b"0"], &L).is_err());
        assert_eq!(release(&[b"a"], &L).unwrap(), b"a");
        assert!(release(&[b"a", b"b"], &L).is_err());
    }
}
