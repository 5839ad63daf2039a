//! The module under real operations: write pauses and failover, replicas
//! and AOF reloads with other limits, slow loads and the restart guard,
//! restarts after LOCK.FENCE, DEBUG DIGEST.

use crate::common;
use common::*;
use std::time::{Duration, Instant};

fn alive(c: &mut redis::Connection) -> bool {
    matches!(q(c, "PING"), Ok(Value::SimpleString(s)) if s == "PONG")
}

#[test]
fn expiry_waits_for_the_end_of_a_write_pause_with_aof() {
    let s = Server::with(&["--appendonly", "yes"], &[]);
    let mut c = s.conn();
    // 100 ms left from the pause on: one write, no expiry before it.
    let mut shorten = redis::pipe();
    for i in 0..50 {
        int(&mut c, &format!("LOCK.ACQUIRE k{i} a 60000"));
        shorten
            .cmd("LOCK.EXTEND")
            .arg(format!("k{i}"))
            .arg("a")
            .arg(100);
    }
    shorten.cmd("CLIENT").arg("PAUSE").arg(1500).arg("WRITE");
    shorten.query::<Vec<Value>>(&mut c).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    // Deadlines passed during the pause: the server is alive, nothing was
    // deleted (nothing may be propagated), yet the locks read as free.
    assert!(alive(&mut c), "server died during the pause:\n{}", s.log());
    assert_eq!(int(&mut c, "DBSIZE"), 50, "nothing deleted while paused");
    assert_eq!(q(&mut c, "LOCK.STATUS k0").unwrap(), Value::Nil);
    // After the pause, active expiry catches up.
    assert!(eventually(Duration::from_secs(5), || int(&mut c, "DBSIZE") == 0));
    assert!(alive(&mut c));
}

#[test]
fn a_replica_follows_expiry_after_a_write_pause() {
    let primary = Server::with(&[], &[]);
    let replica = Server::replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    int(&mut p, "LOCK.ACQUIRE k a 60000");
    // 100 ms left from the pause on: one write, no expiry before it.
    redis::pipe()
        .cmd("LOCK.EXTEND")
        .arg("k")
        .arg("a")
        .arg(100)
        .cmd("CLIENT")
        .arg("PAUSE")
        .arg(1200)
        .arg("WRITE")
        .query::<Vec<Value>>(&mut p)
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert!(alive(&mut p), "primary died:\n{}", primary.log());
    assert!(eventually(Duration::from_secs(5), || int(
        &mut r, "EXISTS k"
    ) == 0));
    assert!(alive(&mut p));
}

#[test]
fn failover_with_locks_expiring_keeps_both_servers_up() {
    let primary = Server::with(&["--appendonly", "yes"], &[]);
    let replica = Server::replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    for i in 0..2000 {
        int(&mut p, &format!("LOCK.ACQUIRE k{i} a {}", 1 + i % 150));
    }
    // FAILOVER pauses writes until the replica has caught up, then swaps.
    q(&mut p, "FAILOVER TIMEOUT 3000").unwrap();
    let swapped = eventually(Duration::from_secs(10), || {
        info_field(&mut r, "replication", "role") == "master"
    });
    assert!(swapped, "failover did not complete");
    assert!(alive(&mut p), "old primary died:\n{}", primary.log());
    assert!(alive(&mut r));
    // The new primary expires what is due; the old one follows it.
    assert!(eventually(Duration::from_secs(10), || int(
        &mut p, "DBSIZE"
    ) == 0));
}

/// Replicas and AOF reloads apply what the primary decided, whatever their
/// own limits: a lock is never dropped because a limit is smaller there.
#[test]
fn a_replica_with_smaller_limits_keeps_the_primarys_locks() {
    let primary = Server::with(&[], &[]);
    let replica = Server::replica_of(&primary, &["max-ttl-ms", "5000", "max-owner-len", "8"]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    let long_owner = "o".repeat(100);
    int(&mut p, "LOCK.ACQUIRE k alice 2000");
    assert_eq!(int(&mut p, "LOCK.EXTEND k alice 60000"), 1);
    int(&mut p, &format!("LOCK.ACQUIRE k2 {long_owner} 2000"));
    int(&mut p, &format!("LOCK.ACQUIRE k2 {long_owner} 60000")); // a renewal
    std::thread::sleep(Duration::from_millis(2500));
    let (owner, _, ttl, _, _) = status(&mut r, "k").expect("replica dropped the extended lock");
    assert_eq!(owner, b"alice");
    assert!(ttl > 50_000, "replica ttl {ttl}");
    assert!(
        status(&mut r, "k2").is_some(),
        "replica dropped the renewed lock"
    );
    q(&mut r, "REPLICAOF NO ONE").unwrap();
    assert_eq!(q(&mut r, "LOCK.ACQUIRE k bob 1000").unwrap(), Value::Nil);
}

#[test]
fn a_replicas_own_aof_keeps_every_lock_it_was_sent() {
    // ed160dd: the LOCK.APPLY lines a replica received (grants, hand-offs,
    // fences) were applied but never written to its own AOF. Restarted from
    // that AOF as a primary, it had none of them (its renewals, releases
    // and DELs were there): a second owner got a lock the first held.
    let primary = Server::with(&[], &[]);
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut replica = Server::replica_with(&primary, &aof, &[]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    replica.await_aof_rewrite();
    int(&mut p, "LOCK.ACQUIRE job eve 60000");
    int(&mut p, "LOCK.ACQUIRE re eve 60000 REENTRANT");
    int(&mut p, "LOCK.ACQUIRE re eve 60000 REENTRANT"); // a second hold
    int(&mut p, "LOCK.ACQUIRE gone eve 60000");
    assert_eq!(int(&mut p, "LOCK.RELEASE gone eve"), 1);
    let top = int(&mut p, "LOCK.ACQUIRE fenced eve 60000");
    assert_eq!(
        int(&mut p, &format!("LOCK.FENCE fenced eve {}", top + 1000)),
        top + 1000
    );
    assert_eq!(int(&mut p, "WAIT 1 5000"), 1);
    let expected: Vec<_> = ["job", "re", "gone", "fenced"]
        .iter()
        .map(|k| status(&mut p, k).map(|(owner, token, _, holds, _)| (owner, token, holds)))
        .collect();
    let seen = |c: &mut redis::Connection| -> Vec<_> {
        ["job", "re", "gone", "fenced"]
            .iter()
            .map(|k| status(c, k).map(|(owner, token, _, holds, _)| (owner, token, holds)))
            .collect()
    };
    assert_eq!(seen(&mut r), expected, "the replica applied them");
    // Counted as changes there too (`save N M` snapshots of a replica).
    let changes = info_field(&mut r, "persistence", "rdb_changes_since_last_save");
    assert!(changes.parse::<u64>().unwrap() >= 4, "{changes}");
    replica.restart_with(&aof, &[]); // a primary now, from its own AOF
    let mut r = replica.conn();
    assert_eq!(
        seen(&mut r),
        expected,
        "lost from the replica's AOF:\n{}",
        replica.log()
    );
    assert_eq!(
        q(&mut r, "LOCK.ACQUIRE job mallory 60000").unwrap(),
        Value::Nil
    );
}

#[test]
fn an_aof_reload_with_smaller_limits_keeps_the_locks() {
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut s = Server::with(&aof, &[]);
    let mut c = s.conn();
    let long_owner = "o".repeat(100);
    int(&mut c, "LOCK.ACQUIRE k alice 2000");
    assert_eq!(int(&mut c, "LOCK.EXTEND k alice 60000"), 1);
    int(&mut c, &format!("LOCK.ACQUIRE k2 {long_owner} 60000"));
    int(&mut c, &format!("LOCK.ACQUIRE k2 {long_owner} 60000"));
    s.restart_with(&aof, &["max-ttl-ms", "5000", "max-owner-len", "8"]);
    let mut c = s.conn();
    let (_, _, ttl, _, _) = status(&mut c, "k").expect("lock lost on AOF reload");
    assert!(ttl > 50_000, "ttl after reload {ttl}");
    assert!(
        status(&mut c, "k2").is_some(),
        "long-owner lock lost on reload"
    );
    // New requests do obey the new limits.
    assert!(err(&mut c, "LOCK.ACQUIRE n x 6000").contains("maximum"));
}

/// With a restart delay, the guard counts from the end of loading: a slow
/// load must not eat it.
#[test]
fn the_restart_guard_counts_from_the_end_of_loading() {
    let mut s = Server::with(&["--save", "3600 1"], &["restart-delay-ms", "1500"]);
    std::thread::sleep(Duration::from_millis(1600)); // the first start's guard
    let mut c = s.conn();
    for i in 0..2000 {
        int(&mut c, &format!("LOCK.ACQUIRE k{i} a 600000"));
    }
    q(&mut c, "SAVE").unwrap();
    // key-load-delay (µs per key) makes loading 2000 keys take ~2 s.
    s.restart_with(
        &["--save", "3600 1", "--key-load-delay", "1000"],
        &["restart-delay-ms", "1500"],
    );
    let loaded = Instant::now();
    let mut c = s.conn();
    assert_eq!(int(&mut c, "DBSIZE"), 2000, "RDB loaded");
    let e = err(&mut c, "LOCK.ACQUIRE free x 1000");
    assert!(
        e.contains("TryAgain"),
        "a free key was granted right after a slow load: {e}"
    );
    assert!(loaded.elapsed() < Duration::from_millis(1400));
}

/// Tokens follow the clock + 60 s and a fence never takes them more than
/// 120 s above it, and a server starts counting at its clock + 60 s:
/// LOCK.FENCE to a peer's token (its clock up to the restart's duration
/// ahead) cannot make tokens go backwards across a restart without data,
/// even with no guard.
#[test]
fn tokens_increase_across_a_restart_without_data_after_fence() {
    let mut s = Server::with(&[], &[]); // restart-delay-ms 0: no guard to wait for
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE f a 10000");
    let now_us = redis_lock_client::quorum::unix_micros() as i64;
    let too_far = now_us + 180_000_000;
    assert!(err(&mut c, &format!("LOCK.FENCE f a {too_far}")).contains("above this server's clock"));
    let ahead = now_us + 60_000_000; // a peer's token, its clock as this one
    let fenced = int(&mut c, &format!("LOCK.FENCE f a {ahead}"));
    assert!(fenced >= ahead);
    assert_eq!(int(&mut c, "LOCK.RELEASE f a"), 1);
    let t = int(&mut c, "LOCK.ACQUIRE g b 10000");
    assert!(t > fenced);
    s.restart(); // kill -9, no persistence, granting again at once
    let mut c = s.conn();
    let after = int(&mut c, "LOCK.ACQUIRE h c 10000");
    assert!(after > t, "token went backwards: {after} after {t}");
    assert!(after < (1 << 53), "tokens stay exact in a double: {after}");
}

/// Forged or corrupt LOCK.APPLY lines in the AOF are refused one by one:
/// the server starts, and no lock that breaks the invariants exists.
#[test]
fn forged_apply_lines_in_the_aof_are_refused() {
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut s = Server::with(&aof, &[]);
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE good a 60000");
    let incr = std::fs::read_dir(s.dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("an incr AOF file");
    let resp = |words: &[&str]| -> String {
        let mut out = format!("*{}\r\n", words.len());
        for w in words {
            out += &format!("${}\r\n{}\r\n", w.len(), w);
        }
        out
    };
    let forged = [
        resp(&["LOCK.APPLY", "k1", "a", "18446744073709551615", "1000", "1"]),
        resp(&["LOCK.APPLY", "k2", "", "5", "1000", "1"]),
        resp(&["LOCK.APPLY", "k3", "a", "5", "9223372036854775807", "1"]),
        resp(&["LOCK.APPLY", "k4", "a", "5", "1000", "0"]),
        resp(&["LOCK.APPLY", "k5", "a", "9007199254740991", "1", "1"]),
        // ed160dd: a FENCE line skipped every ceiling on replay, and this
        // one left the counter at 2^53 - 1: no new lock, ever.
        resp(&["LOCK.FENCE", "good", "a", "9007199254740991"]),
    ]
    .concat();
    let mut text = std::fs::read(&incr).unwrap();
    text.extend_from_slice(forged.as_bytes());
    std::fs::write(&incr, text).unwrap();
    s.restart();
    let mut c = s.conn();
    assert!(status(&mut c, "good").is_some());
    for key in ["k1", "k2", "k3", "k4", "k5"] {
        assert_eq!(
            int(&mut c, &format!("EXISTS {key}")),
            0,
            "{key} was applied"
        );
    }
    let last: u64 = info_field(&mut c, "lock", "lock_last_token")
        .parse()
        .unwrap();
    assert!(last < 1 << 53);
    assert!(
        int(&mut c, "LOCK.ACQUIRE new b 1000") > 0,
        "the counter was exhausted"
    );
    // A rewrite and another restart still load.
    q(&mut c, "BGREWRITEAOF").unwrap();
    s.await_aof_rewrite(); // a rewrite killed midway reloads the old AOF
    s.restart();
    assert!(status(&mut s.conn(), "good").is_some());
}

/// A holder keeps its lock through a smaller lock.max-owner-len set since.
#[test]
fn a_smaller_owner_limit_does_not_lock_the_holder_out() {
    let s = Server::with(&[], &[]);
    let mut c = s.conn();
    let owner = "owner-with-a-long-name-0123456789";
    int(&mut c, &format!("LOCK.ACQUIRE job {owner} 60000"));
    let token = status(&mut c, "job").unwrap().1;
    q(&mut c, "CONFIG SET lock.max-owner-len 8").unwrap();
    assert_eq!(int(&mut c, &format!("LOCK.EXTEND job {owner} 60000")), 1);
    // Its own lock: a renewal by ACQUIRE, and one more hold by REENTRANT.
    assert_eq!(
        int(&mut c, &format!("LOCK.ACQUIRE job {owner} 60000")),
        token
    );
    let reentered = int(&mut c, &format!("LOCK.ACQUIRE job {owner} 60000 REENTRANT"));
    assert_eq!(reentered, token);
    assert_eq!(status(&mut c, "job").unwrap().3, 2, "two holds");
    // Anyone else that long is refused, held key or free key, and nothing
    // is queued or changed.
    let other = "another-long-owner-name";
    let refused = err(&mut c, &format!("LOCK.ACQUIRE job {other} 60000 WAIT 10"));
    assert!(refused.contains("max-owner-len"), "{refused}");
    let refused = err(&mut c, &format!("LOCK.ACQUIRE free {other} 60000"));
    assert!(refused.contains("max-owner-len"), "{refused}");
    assert_eq!(int(&mut c, "EXISTS free"), 0);
    assert_eq!(int(&mut c, &format!("LOCK.RELEASE job {owner}")), 1);
    assert_eq!(int(&mut c, &format!("LOCK.RELEASE job {owner}")), 1);
    // Released: a new grant to that owner is refused like any other.
    assert!(err(&mut c, &format!("LOCK.ACQUIRE job {owner} 60000")).contains("max-owner-len"));
}

#[test]
fn the_digest_covers_owner_token_and_holds_and_replicas_agree() {
    let debug = ["--enable-debug-command", "yes"];
    let primary = Server::with(&debug, &[]);
    let replica = Server::replica_with(&primary, &debug, &[]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    let digest = |c: &mut redis::Connection, key: &str| -> String {
        redis::cmd("DEBUG")
            .arg("DIGEST-VALUE")
            .arg(key)
            .query::<Vec<String>>(c)
            .unwrap()[0]
            .clone()
    };
    int(&mut p, "LOCK.ACQUIRE k alice 60000");
    let first = digest(&mut p, "k");
    assert_ne!(first, "0".repeat(40), "the lock type has a digest");
    int(&mut p, "LOCK.ACQUIRE k alice 60000 REENTRANT");
    let second = digest(&mut p, "k");
    assert_ne!(first, second, "holds are part of the digest");
    assert_eq!(int(&mut p, "WAIT 1 5000"), 1, "replica linked");
    assert!(eventually(Duration::from_secs(5), || digest(&mut r, "k") == second));
    let whole: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut p).unwrap();
    assert!(eventually(Duration::from_secs(5), || {
        redis::cmd("DEBUG")
            .arg("DIGEST")
            .query::<String>(&mut r)
            .unwrap()
            == whole
    }));
}

/// Redis 7.0 has no module API for ACL categories; newer servers do. Either
/// way the commands behave as documented for ACL users.
#[test]
fn acl_categories_where_the_server_supports_them() {
    let s = Server::with(&[], &[]);
    let mut c = s.conn();
    let info: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("lock.acquire")
        .query(&mut c)
        .unwrap();
    let text = format!("{info:?}");
    let version = info_field(&mut c, "server", "redis_version");
    let major_minor: Vec<u32> = version
        .split('.')
        .take(2)
        .map(|n| n.parse().unwrap())
        .collect();
    if major_minor < vec![7, 2] {
        assert!(
            !text.contains("@write"),
            "7.0 cannot carry categories: {text}"
        );
        assert!(s.log().contains("no module ACL-category API"));
        // Granting by name works on every server.
        q(&mut c, "ACL SETUSER reader on nopass ~* +lock.status").unwrap();
        let mut reader = s.conn();
        q(&mut reader, "AUTH reader x").unwrap();
        assert_eq!(q(&mut reader, "LOCK.STATUS k").unwrap(), Value::Nil);
        assert!(q(&mut reader, "LOCK.ACQUIRE k a 1000").is_err());
    } else {
        assert!(text.contains("@write") && text.contains("@fast"), "{text}");
        q(&mut c, "ACL SETUSER ro on nopass ~* +@all -@write").unwrap();
        let mut ro = s.conn();
        q(&mut ro, "AUTH ro x").unwrap();
        assert!(q(&mut ro, "LOCK.ACQUIRE k a 1000").is_err());
        assert_eq!(q(&mut ro, "LOCK.STATUS k").unwrap(), Value::Nil);
    }
}

/// A promoted replica that missed the old primary's last (fenced) grants
/// still hands out larger tokens: promotion counts on from clock + 60 s.
#[test]
fn tokens_increase_across_a_promotion_that_missed_grants() {
    let mut primary = Server::with(&[], &[]);
    let replica = Server::replica_of(&primary, &[]);
    let mut p = primary.conn();
    replica.signal("STOP");
    int(&mut p, "LOCK.ACQUIRE k alice 100000");
    let now_us = redis_lock_client::quorum::unix_micros() as i64;
    let fenced = int(
        &mut p,
        &format!("LOCK.FENCE k alice {}", now_us + 59_000_000),
    );
    primary.kill();
    replica.signal("CONT");
    let mut r = replica.conn();
    q(&mut r, "REPLICAOF NO ONE").unwrap();
    let bob = int(&mut r, "LOCK.ACQUIRE other bob 100000");
    assert!(
        bob > fenced,
        "token went backwards across the promotion: {bob} after {fenced}"
    );
}

/// A replica that accepts writes (`replica-read-only no`) still refuses
/// lock commands from clients: a lock granted there is invisible to the
/// primary.
#[test]
fn a_writable_replica_refuses_client_lock_commands() {
    let primary = Server::with(&[], &[]);
    let replica = Server::replica_with(&primary, &["--replica-read-only", "no"], &[]);
    let mut r = replica.conn();
    let mut p = primary.conn();
    int(&mut p, "LOCK.ACQUIRE k alice 60000");
    assert_eq!(int(&mut p, "WAIT 1 5000"), 1);
    for cmd in [
        "LOCK.ACQUIRE x bob 1000",
        "LOCK.RELEASE k alice",
        "LOCK.EXTEND k alice 1000",
        "LOCK.FENCE k alice 5",
    ] {
        assert!(err(&mut r, cmd).contains("replica"), "{cmd}");
    }
    assert!(status(&mut r, "k").is_some(), "replication still applies");
}

/// MOVE and COPY ... DB leave the client in the database it selected (on
/// Valkey 8.1 a module's keyspace-event subscription used to switch it), and
/// a lock moved away from waiters is handed to them at once.
#[test]
fn move_and_copy_keep_the_selected_database_and_wake_waiters() {
    let s = Server::with(&[], &[]);
    let mut c = s.conn();
    q(&mut c, "SET a 1").unwrap();
    assert_eq!(int(&mut c, "MOVE a 1"), 1);
    q(&mut c, "SET b 2").unwrap();
    q(&mut c, "SET c 3").unwrap();
    assert_eq!(int(&mut c, "COPY c c2 DB 2"), 1);
    q(&mut c, "SET d 4").unwrap();
    assert_eq!(
        int(&mut c, "EXISTS b d"),
        2,
        "writes after MOVE/COPY went elsewhere"
    );
    let client: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
    assert!(client.contains(" db=0 "), "{client}");

    int(&mut c, "LOCK.ACQUIRE job holder 60000");
    let port = s.port;
    let waiter = std::thread::spawn(move || {
        let mut w = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        q(&mut w, "LOCK.ACQUIRE job waiter 5000 WAIT 5000")
    });
    assert!(eventually(Duration::from_secs(5), || {
        status(&mut c, "job").is_some_and(|s| s.4 == 1)
    }));
    assert_eq!(int(&mut c, "MOVE job 3"), 1);
    let got = waiter.join().unwrap().unwrap();
    assert!(
        matches!(got, Value::Int(t) if t > 0),
        "the waiter got {got:?}"
    );
    assert_eq!(status(&mut c, "job").unwrap().0, b"waiter");
}

/// 2026-11-28: `INFO lock` on a replica counted the releases it was sent
/// (replicated as they were sent) but not the grants (sent as LOCK.APPLY):
/// acquired 0, released 100 after 50 cycles. Every counter now counts what
/// the server decided for its own clients; a change from the primary's
/// stream, or replayed from the AOF at a restart, counts once, in
/// `lock_applied`. A promoted replica counts its own decisions from then on.
#[test]
fn a_replica_counts_what_it_applies_not_what_its_primary_decided() {
    let primary = Server::start();
    let replica = Server::replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    for _ in 0..50 {
        int(&mut p, "LOCK.ACQUIRE k a 60000");
        assert_eq!(int(&mut p, "LOCK.EXTEND k a 60000"), 1);
        assert_eq!(int(&mut p, "LOCK.RELEASE k a"), 1);
    }
    assert_eq!(int(&mut p, "WAIT 1 5000"), 1);
    let counters = |c: &mut redis::Connection| -> Vec<String> {
        ["acquired", "extended", "released", "applied"]
            .iter()
            .map(|name| info_field(c, "lock", &format!("lock_{name}")))
            .collect()
    };
    assert_eq!(counters(&mut p), ["50", "50", "50", "0"], "the primary");
    assert_eq!(counters(&mut r), ["0", "0", "0", "150"], "the replica");
    q(&mut r, "REPLICAOF NO ONE").unwrap();
    int(&mut r, "LOCK.ACQUIRE k b 60000");
    assert_eq!(counters(&mut r), ["1", "0", "0", "150"], "promoted");
    // A restart replays the AOF: applied again, not counted as decided.
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut s = Server::with(&aof, &[]);
    let mut c = s.conn();
    for _ in 0..5 {
        int(&mut c, "LOCK.ACQUIRE k a 60000");
        assert_eq!(int(&mut c, "LOCK.RELEASE k a"), 1);
    }
    s.restart();
    let mut c = s.conn();
    assert_eq!(counters(&mut c), ["0", "0", "0", "10"], "after the replay");
}
