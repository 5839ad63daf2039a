//! Hostile input: crafted and mutated RESTORE payloads, stored values that
//! would break the lock invariants, bad `loadmodule` arguments, and the
//! shipped defaults.

use crate::common;
use common::*;
use std::time::Duration;

/// CRC-64/Jones as Redis computes it for DUMP payloads (reflected, init 0).
fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x95AC_9329_AC4B_C9B5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// A DUMP payload with its trailer (RDB version, CRC) made valid again.
fn seal(body_and_version: &[u8]) -> Vec<u8> {
    let mut p = body_and_version.to_vec();
    p.extend_from_slice(&crc64(&p).to_le_bytes());
    p
}

fn unsealed(payload: &[u8]) -> &[u8] {
    &payload[..payload.len() - 8]
}

fn restore(c: &mut redis::Connection, key: &str, payload: &[u8]) -> redis::RedisResult<Value> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .arg("REPLACE")
        .query(c)
}

fn dump(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

/// RDB length encoding (rdbSaveLen).
fn rdb_len(v: u64) -> Vec<u8> {
    if v < 64 {
        vec![v as u8]
    } else if v < 16384 {
        vec![0x40 | (v >> 8) as u8, v as u8]
    } else if v <= u64::from(u32::MAX) {
        let mut out = vec![0x80];
        out.extend_from_slice(&(v as u32).to_be_bytes());
        out
    } else {
        let mut out = vec![0x81];
        out.extend_from_slice(&v.to_be_bytes());
        out
    }
}

/// A lock value as the module stores it, in a DUMP payload: the type
/// header (taken from a real DUMP), then owner, token, remaining, holds.
fn lock_payload(header: &[u8], owner: &[u8], token: u64, ttl: u64, holds: u64) -> Vec<u8> {
    const STRING: u8 = 5;
    const UINT: u8 = 2;
    let mut p = header.to_vec();
    p.push(STRING);
    p.extend(rdb_len(owner.len() as u64));
    p.extend_from_slice(owner);
    for v in [token, ttl, holds] {
        p.push(UINT);
        p.extend(rdb_len(v));
    }
    p.push(0); // EOF opcode
    p.extend_from_slice(&[10, 0]); // RDB version 10 (Redis 7.0)
    seal(&p)
}

/// The type byte plus the module type id (1 + 9 bytes) of a real lock DUMP.
fn lock_header(c: &mut redis::Connection) -> Vec<u8> {
    int(c, "LOCK.ACQUIRE model alice 60000");
    let d = dump(c, "model");
    assert_eq!(d[0], 7, "module type, encoding 2");
    d[..10].to_vec()
}

#[test]
fn the_crc_matches_what_redis_computes() {
    let s = Server::start();
    let mut c = s.conn();
    q(&mut c, "SET plain hello").unwrap();
    let d = dump(&mut c, "plain");
    assert_eq!(seal(unsealed(&d)), d);
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    let header = lock_header(&mut c);
    let real = dump(&mut c, "model");
    let (_, token, _, _, _) = status(&mut c, "model").unwrap();
    // Our own encoder reproduces a real lock's DUMP except for the ttl.
    let ours = lock_payload(&header, b"alice", token as u64, 60000, 1);
    assert_eq!(ours.len(), real.len());
}

#[test]
fn a_header_without_a_body_is_an_error_not_a_crash() {
    let s = Server::start();
    let mut c = s.conn();
    let hex = "0781ade762b25a1c90010a007c2e291c17e4e6a4";
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    assert!(restore(&mut c, "x", &bytes).is_err());
    assert_eq!(
        q(&mut c, "PING").unwrap(),
        Value::SimpleString("PONG".into())
    );
    assert_eq!(int(&mut c, "EXISTS x"), 0);
}

#[test]
fn stored_values_that_break_the_invariants_are_refused() {
    let s = Server::start();
    let mut c = s.conn();
    let h = lock_header(&mut c);
    let max = (1u64 << 53) - 1;
    let refused: [(&str, Vec<u8>); 6] = [
        ("token 2^64-1", lock_payload(&h, b"a", u64::MAX, 1000, 1)),
        ("token 0", lock_payload(&h, b"a", 0, 1000, 1)),
        ("ttl 2^64-1", lock_payload(&h, b"a", 7, u64::MAX, 1)),
        ("empty owner", lock_payload(&h, b"", 7, 1000, 1)),
        (
            "1 MB owner",
            lock_payload(&h, &vec![b'o'; 1 << 20], 7, 1000, 1),
        ),
        ("holds 2^40", lock_payload(&h, b"a", 7, 1000, 1 << 40)),
    ];
    for (what, payload) in refused {
        assert!(restore(&mut c, "bad", &payload).is_err(), "{what} accepted");
        assert_eq!(int(&mut c, "EXISTS bad"), 0, "{what} left a key");
    }
    // A ttl above this server's lock.max-ttl-ms is refused like a grant.
    let over = lock_payload(&h, b"a", 7, 600_001, 1);
    assert!(restore(&mut c, "bad", &over).is_err());
    // Within bounds it loads, owner-checked as usual.
    restore(&mut c, "good", &lock_payload(&h, b"bob", 42, 5000, 2)).unwrap();
    let (owner, token, ttl, holds, _) = status(&mut c, "good").unwrap();
    assert_eq!((owner.as_slice(), token, holds), (&b"bob"[..], 42, 2));
    assert!(ttl > 0 && ttl <= 5000);
    // A client's RESTORE is a grant: its token obeys the fencing rule (at
    // most 60 s above the clock), so no payload can push the counter out of
    // reach of a restart; the largest token is refused, one near now is not.
    assert!(restore(&mut c, "top", &lock_payload(&h, b"a", max, 5000, 1)).is_err());
    let now_us = redis_lock_client::quorum::unix_micros();
    let hour_ahead = lock_payload(&h, b"a", now_us + 3_600_000_000, 5000, 1);
    assert!(restore(&mut c, "top", &hour_ahead).is_err());
    restore(
        &mut c,
        "top",
        &lock_payload(&h, b"a", now_us + 10_000_000, 5000, 1),
    )
    .unwrap();
    assert!(int(&mut c, "LOCK.ACQUIRE next n 1000") as u64 > now_us + 10_000_000);
    // A TTL of 0 is an expired lock: restored as it is (MIGRATE moves locks
    // that expired but were not reaped yet), it reads as free and is taken.
    restore(&mut c, "zero", &lock_payload(&h, b"a", 9, 0, 1)).unwrap();
    assert_eq!(status(&mut c, "zero"), None);
    assert!(int(&mut c, "LOCK.ACQUIRE zero n 1000") > 0);
}

/// A client's RESTORE on a writable replica cannot tell itself from the
/// primary's replicated RESTORE, so it gets the primary's widest limits, but
/// not a token that would exhaust the counter (an attack run pushed it to
/// 2^53 - 1 there, and the promoted replica refused every lock for good).
#[test]
fn a_restore_on_a_writable_replica_cannot_exhaust_the_counter() {
    let primary = Server::start();
    let replica = Server::replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    let h = lock_header(&mut p);
    q(&mut r, "CONFIG SET replica-read-only no").unwrap();
    let max = (1u64 << 53) - 1;
    let now_us = redis_lock_client::quorum::unix_micros();
    let day_ahead = now_us + 86_400_000_000;
    for token in [max, day_ahead] {
        let payload = lock_payload(&h, b"abcd", token, 60_000, 1);
        let refused = restore(&mut r, "forged", &payload).unwrap_err();
        assert!(refused.to_string().contains("Bad data format"), "{refused}");
        assert_eq!(int(&mut r, "EXISTS forged"), 0);
    }
    let last = info_field(&mut r, "lock", "lock_last_token");
    assert!(
        last.parse::<u64>().unwrap() < day_ahead,
        "counter at {last}"
    );
    // What a primary legitimately replicates still lands: a RESTORE there
    // (a token near the clock) reaches the replica.
    let near = lock_payload(&h, b"abcd", now_us + 10_000_000, 60_000, 1);
    restore(&mut p, "moved", &near).unwrap();
    let landed = eventually(Duration::from_secs(5), || {
        status(&mut r, "moved").is_some_and(|s| s.1 as u64 == now_us + 10_000_000)
    });
    assert!(landed, "the primary's RESTORE reached the replica");
}

/// ≥ 10,000 mutated DUMP payloads with a valid CRC: every one is either
/// refused or loads a lock that obeys the invariants; the server never dies.
#[test]
fn mutated_dump_payloads_never_crash_the_server() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE seed-a alice 60000");
    int(
        &mut c,
        "LOCK.ACQUIRE seed-b some-much-longer-owner-value-0123456789 60000 REENTRANT",
    );
    int(
        &mut c,
        "LOCK.ACQUIRE seed-b some-much-longer-owner-value-0123456789 60000 REENTRANT",
    );
    let seeds = [dump(&mut c, "seed-a"), dump(&mut c, "seed-b")];
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut accepted, mut refused) = (0, 0);
    for i in 0..10_000u64 {
        let seed = unsealed(&seeds[(i % 2) as usize]);
        let mut body = seed[..seed.len() - 2].to_vec(); // without the RDB version
        match next() % 4 {
            0 | 1 => {
                for _ in 0..1 + next() % 3 {
                    let at = (next() as usize) % body.len();
                    body[at] ^= 1 << (next() % 8);
                }
            }
            2 => body.truncate(1 + (next() as usize) % (body.len() - 1)),
            _ => {
                let at = (next() as usize) % body.len();
                body[at] = next() as u8;
            }
        }
        if next() % 8 == 0 {
            body[0] = 7; // keep the module type often, to reach our loader
        }
        body.extend_from_slice(&seed[seed.len() - 2..]);
        match restore(&mut c, "fuzz", &seal(&body)) {
            Ok(_) => {
                accepted += 1;
                if let Ok(Value::Array(_)) = q(&mut c, "LOCK.STATUS fuzz") {
                    let (owner, token, ttl, holds, _) = status(&mut c, "fuzz").unwrap();
                    assert!(!owner.is_empty() && owner.len() <= 256);
                    assert!(token > 0 && token < (1 << 53));
                    assert!((0..=600_000).contains(&ttl) && holds >= 1);
                }
            }
            Err(_) => refused += 1,
        }
        if i % 1000 == 999 {
            assert!(
                matches!(q(&mut c, "PING"), Ok(Value::SimpleString(_))),
                "server died after {} payloads:\n{}",
                i + 1,
                s.log()
            );
        }
    }
    assert_eq!(accepted + refused, 10_000);
    assert!(
        refused > 1000 && accepted > 0,
        "{accepted} accepted, {refused} refused"
    );
    assert_eq!(
        q(&mut c, "PING").unwrap(),
        Value::SimpleString("PONG".into())
    );
}

#[test]
fn bad_loadmodule_arguments_stop_the_server_with_a_message() {
    for (args, named) in [
        (&["bogus", "1"][..], "`bogus`"),
        (&["max-ttl-ms"][..], "`max-ttl-ms` has no value"),
        (&["max-ttl-ms", "-5"][..], "`max-ttl-ms`"),
        (&["max-ttl-ms", "0"][..], "`max-ttl-ms`"),
        (&["max-owner-len", "99999999999"][..], "`max-owner-len`"),
        (&["restart-delay-ms", "soon"][..], "`restart-delay-ms`"),
        (&["restart-delay-ms", "+5"][..], "`restart-delay-ms`"),
        (&["max-ttl-ms", "05"][..], "`max-ttl-ms`"),
    ] {
        let log = refused_start(&server_binary(), args);
        assert!(log.contains(named), "{args:?}: log lacks {named}:\n{log}");
    }
}

#[test]
fn loadmodule_arguments_take_the_config_set_names() {
    let s = Server::with(
        &[],
        &["LOCK.MAX-TTL-MS", "5000", "lock.restart-delay-ms", "4000"],
    );
    let mut c = s.conn();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("lock.*")
        .query(&mut c)
        .unwrap();
    let pairs: Vec<(String, String)> = got
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    assert!(
        pairs.contains(&("lock.max-ttl-ms".into(), "5000".into())),
        "{pairs:?}"
    );
    assert!(
        pairs.contains(&("lock.restart-delay-ms".into(), "4000".into())),
        "{pairs:?}"
    );
    assert!(err(&mut c, "LOCK.ACQUIRE k a 1000").contains("TryAgain"));
    assert!(err(&mut c, "CONFIG SET lock.restart-delay-ms -2").contains("between"));
}

/// Shipped defaults: a server that did not load an always-fsync'd AOF
/// (a first start, a wiped disk, RDB only) refuses new locks for
/// lock.max-ttl-ms and says why in its log; one that loaded such an AOF
/// grants at once. RESTORE is refused like a grant meanwhile.
#[test]
fn the_default_restart_guard_is_safe_and_explained() {
    let s = Server::bare(&[], &[]);
    let mut c = s.conn();
    let e = err(&mut c, "LOCK.ACQUIRE k a 1000");
    assert!(e.contains("TryAgain"), "{e}");
    let left: u64 = info_field(&mut c, "lock", "lock_restart_guard_ms_left")
        .parse()
        .unwrap();
    assert!(left > 590_000 && left <= 600_000, "guard {left} ms");
    assert!(s.log().contains("restart guard on"), "{}", s.log());
    let h = {
        let helper = Server::start();
        let mut hc = helper.conn();
        lock_header(&mut hc)
    };
    assert!(restore(&mut c, "r", &lock_payload(&h, b"m", 5, 5000, 1)).is_err());

    // With an always-fsync'd AOF (and a short max TTL, to keep this quick):
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let started = std::time::Instant::now();
    let mut safe = Server::bare(&aof, &["max-ttl-ms", "2000"]);
    let mut c = safe.conn();
    assert!(
        err(&mut c, "LOCK.ACQUIRE k a 1000").contains("TryAgain"),
        "first start: no AOF loaded"
    );
    // Restarted within that guard: the AOF loads, but the guard is kept
    // (it is remembered in redis-lock.guard next to the data).
    safe.restart();
    let mut c = safe.conn();
    if started.elapsed() < std::time::Duration::from_millis(1500) {
        assert!(
            err(&mut c, "LOCK.ACQUIRE k a 1000").contains("TryAgain"),
            "guard lost by a restart"
        );
    }
    // Until the guard's end as the server reports it (it runs from the end
    // of the first start's load, which a loaded machine makes late).
    let left: u64 = info_field(&mut c, "lock", "lock_restart_guard_ms_left")
        .parse()
        .unwrap();
    assert!(left <= 2000, "guard {left} ms");
    std::thread::sleep(std::time::Duration::from_millis(left + 50));
    assert!(int(&mut c, "LOCK.ACQUIRE k a 1000") > 0);
    // Once it has passed, a restart that loads the AOF needs no guard.
    safe.restart();
    let mut c = safe.conn();
    assert!(int(&mut c, "LOCK.ACQUIRE k2 a 1000") > 0);
    assert!(safe.log().contains("restart guard off"));

    // Without the RDB preamble a rewrite drops the token counter: guard on.
    let plain = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        "no",
    ];
    let mut no_preamble = Server::bare(&plain, &[]);
    no_preamble.restart();
    let mut c = no_preamble.conn();
    assert!(err(&mut c, "LOCK.ACQUIRE k a 1000").contains("TryAgain"));
}

/// An RDB-only server switched to appendfsync always loads no AOF at its
/// next start (Redis ignores the RDB then): the guard stays on.
#[test]
fn turning_the_aof_on_over_an_rdb_keeps_the_guard() {
    let mut s = Server::with(&["--save", "3600 1"], &[]);
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE job alice 300000");
    q(&mut c, "SAVE").unwrap();
    s.restart_with(
        &["--appendonly", "yes", "--appendfsync", "always"],
        &["restart-delay-ms", "-1"],
    );
    let mut c = s.conn();
    assert!(err(&mut c, "LOCK.ACQUIRE job bob 300000").contains("TryAgain"));
}

/// Persistence made incomplete at run time (`CONFIG SET appendonly no`)
/// leaves an AOF that lacks grants: the next load is guarded, whatever the
/// config says by then.
#[test]
fn an_aof_left_stale_by_config_set_is_not_trusted() {
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut s = Server::with(&aof, &["restart-delay-ms", "1000"]);
    std::thread::sleep(std::time::Duration::from_millis(1100)); // the first start's guard
    s.restart();
    let mut c = s.conn();
    assert!(
        int(&mut c, "LOCK.ACQUIRE k alice 50000") > 0,
        "a complete AOF: no guard"
    );
    q(&mut c, "CONFIG SET appendonly no").unwrap();
    int(&mut c, "LOCK.ACQUIRE k2 alice 50000"); // not in the AOF
    s.restart(); // the command line still says appendonly yes + always
    let mut c = s.conn();
    assert!(
        err(&mut c, "LOCK.ACQUIRE k2 bob 50000").contains("TryAgain"),
        "stale AOF trusted"
    );
}
