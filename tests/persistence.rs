//! Restart from RDB and from AOF, replication to a replica, token monotonicity.

use crate::common;
use common::*;
use std::time::Duration;

fn token_after_restart(s: &mut Server, before: i64) -> i64 {
    let mut c = s.conn();
    let t = int(&mut c, &format!("LOCK.ACQUIRE fresh:{before} z 10000"));
    assert!(t > before, "token {t} after restart must exceed {before}");
    t
}

#[test]
fn rdb_restart_restores_owner_token_and_remaining_ttl() {
    let mut s = Server::with(&["--save", "3600 1"], &[]);
    let mut c = s.conn();
    let t = int(&mut c, "LOCK.ACQUIRE job alice 30000 REENTRANT");
    int(&mut c, "LOCK.ACQUIRE job alice 30000 REENTRANT");
    run(&mut c, &[b"LOCK.ACQUIRE", b"bin", b"a\0b", b"30000"]).unwrap();
    let last = int(&mut c, "LOCK.ACQUIRE short x 20000");
    q(&mut c, "SAVE").unwrap();
    s.restart();
    let mut c = s.conn();
    let (owner, token, ttl, holds, _) = status(&mut c, "job").expect("lock restored from RDB");
    assert_eq!((owner.as_slice(), token, holds), (&b"alice"[..], t, 2));
    assert!(ttl > 25_000 && ttl <= 30_000, "remaining ttl kept: {ttl}");
    assert_eq!(status(&mut c, "bin").unwrap().0, b"a\0b");
    assert_eq!(
        int(&mut c, "LOCK.RELEASE job bob"),
        0,
        "still owner-checked"
    );
    assert_eq!(info_field(&mut c, "lock", "lock_held"), "3");
    token_after_restart(&mut s, last);
}

#[test]
fn aof_restart_restores_locks_with_and_without_rewrite() {
    for preamble in ["no", "yes"] {
        let mut s = Server::with(
            &[
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--aof-use-rdb-preamble",
                preamble,
            ],
            &[],
        );
        let mut c = s.conn();
        let t = int(&mut c, "LOCK.ACQUIRE job alice 30000");
        int(&mut c, "LOCK.ACQUIRE gone bob 30000");
        int(&mut c, "LOCK.RELEASE gone bob");
        int(&mut c, "LOCK.ACQUIRE re r 30000 REENTRANT");
        int(&mut c, "LOCK.ACQUIRE re r 30000 REENTRANT");
        int(&mut c, "LOCK.EXTEND job alice 40000");
        let last = int(&mut c, "LOCK.ACQUIRE ex e 30000");
        s.kill(); // no SAVE, no graceful shutdown: only the AOF survives
        s.restart();
        let mut c = s.conn();
        let (owner, token, ttl, ..) = status(&mut c, "job").expect("lock restored from AOF");
        assert_eq!((owner.as_slice(), token), (&b"alice"[..], t));
        assert!(ttl > 35_000, "extended ttl replayed: {ttl}");
        assert_eq!(status(&mut c, "gone"), None, "released lock stays released");
        assert_eq!(status(&mut c, "re").unwrap().3, 2, "hold count replayed");
        token_after_restart(&mut s, last);
        // Rewrite the AOF (LOCK.APPLY per lock, or an RDB preamble) and replay it.
        let mut c = s.conn();
        q(&mut c, "BGREWRITEAOF").unwrap();
        assert!(eventually(Duration::from_secs(10), || info_field(
            &mut c,
            "persistence",
            "aof_rewrite_in_progress"
        ) == "0"
            && info_field(&mut c, "persistence", "aof_rewrite_scheduled")
                == "0"));
        std::thread::sleep(Duration::from_millis(200));
        let last = int(&mut c, "LOCK.ACQUIRE after:rewrite w 30000");
        s.kill();
        s.restart();
        let mut c = s.conn();
        assert_eq!(status(&mut c, "job").unwrap().1, t, "preamble={preamble}");
        assert_eq!(status(&mut c, "re").unwrap().3, 2, "preamble={preamble}");
        token_after_restart(&mut s, last);
    }
}

#[test]
fn tokens_increase_across_restart_without_persistence() {
    let mut s = Server::start();
    let mut c = s.conn();
    let mut last = 0;
    for i in 0..100 {
        last = int(&mut c, &format!("LOCK.ACQUIRE k{i} a 10000"));
    }
    s.restart(); // nothing persisted: the counter is seeded from the clock
    token_after_restart(&mut s, last);
}

#[test]
fn replica_follows_the_primary() {
    let primary = Server::start();
    let replica = Server::replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    let t = int(&mut p, "LOCK.ACQUIRE a alice 30000");
    int(&mut p, "LOCK.ACQUIRE b bob 30000 REENTRANT");
    int(&mut p, "LOCK.ACQUIRE b bob 30000 REENTRANT");
    int(&mut p, "LOCK.ACQUIRE c carol 30000");
    int(&mut p, "LOCK.RELEASE c carol");
    int(&mut p, "LOCK.RELEASE b bob");
    int(&mut p, "LOCK.ACQUIRE short s 60000");
    q(&mut p, "WAIT 1 2000").unwrap();
    let (owner, token, ttl, ..) = status(&mut r, "a").expect("replicated");
    assert_eq!((owner.as_slice(), token), (&b"alice"[..], t));
    assert!(ttl > 25_000);
    assert_eq!(status(&mut r, "b").unwrap().3, 1, "hold count follows");
    assert_eq!(status(&mut r, "c"), None);
    assert!(err(&mut r, "LOCK.ACQUIRE x y 1000").contains("read only replica"));
    // Expiry is the primary's job: pause it, and the replica keeps the key.
    // (300 ms left from here: before, a slow machine could expire it first.)
    assert_eq!(int(&mut p, "LOCK.EXTEND short s 300"), 1);
    q(&mut p, "WAIT 1 2000").unwrap();
    primary.signal("STOP");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        int(&mut r, "EXISTS short"),
        1,
        "a replica never expires on its own"
    );
    assert_eq!(status(&mut r, "short"), None, "but reads it as not held");
    primary.signal("CONT");
    assert!(
        eventually(Duration::from_secs(5), || int(&mut r, "EXISTS short") == 0),
        "primary's expiry reaches the replica"
    );
    // A full resync (RDB transfer) carries locks too.
    let late = Server::replica_of(&primary, &[]);
    let mut l = late.conn();
    assert_eq!(status(&mut l, "a").unwrap().1, t);
}
