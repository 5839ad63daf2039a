//! The command contract against a real redis-server with the module.

use crate::common;
use common::*;
use std::time::Duration;

#[test]
fn acquire_renew_busy_release() {
    let s = Server::start();
    let mut c = s.conn();
    let token = int(&mut c, "LOCK.ACQUIRE res alice 10000");
    assert!(token > 0);
    assert_eq!(
        int(&mut c, "LOCK.ACQUIRE res alice 20000"),
        token,
        "same owner: same token"
    );
    let (_, _, ttl, holds, _) = status(&mut c, "res").unwrap();
    assert!(
        ttl > 19_000 && ttl <= 20_000,
        "TTL refreshed to 20s, got {ttl}"
    );
    assert_eq!(holds, 1, "a plain retry is idempotent, not reentrant");
    assert_eq!(q(&mut c, "LOCK.ACQUIRE res bob 10000").unwrap(), Value::Nil);
    assert_eq!(int(&mut c, "LOCK.RELEASE res bob"), 0);
    assert_eq!(
        status(&mut c, "res").unwrap().0,
        b"alice",
        "wrong owner changed nothing"
    );
    assert_eq!(int(&mut c, "LOCK.RELEASE res alice"), 1);
    assert_eq!(int(&mut c, "LOCK.RELEASE res alice"), -1);
    assert_eq!(int(&mut c, "EXISTS res"), 0);
    let next = int(&mut c, "LOCK.ACQUIRE res bob 10000");
    assert!(next > token, "a new holder gets a larger token");
}

#[test]
fn reentrant_holds() {
    let s = Server::start();
    let mut c = s.conn();
    let t = int(&mut c, "LOCK.ACQUIRE r a 10000 REENTRANT");
    assert_eq!(int(&mut c, "LOCK.ACQUIRE r a 10000 REENTRANT"), t);
    assert_eq!(int(&mut c, "LOCK.ACQUIRE r a 10000 reentrant"), t);
    assert_eq!(status(&mut c, "r").unwrap().3, 3);
    assert_eq!(int(&mut c, "LOCK.RELEASE r a"), 1);
    assert_eq!(int(&mut c, "LOCK.RELEASE r a"), 1);
    assert_eq!(status(&mut c, "r").unwrap().3, 1);
    assert_eq!(int(&mut c, "LOCK.RELEASE r a"), 1);
    assert_eq!(status(&mut c, "r"), None);
}

#[test]
fn extend_contract() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(int(&mut c, "LOCK.EXTEND e a 5000"), -1);
    int(&mut c, "LOCK.ACQUIRE e a 1000");
    assert_eq!(int(&mut c, "LOCK.EXTEND e b 5000"), 0);
    assert!(status(&mut c, "e").unwrap().2 <= 1000);
    assert_eq!(int(&mut c, "LOCK.EXTEND e a 50000"), 1);
    assert!(status(&mut c, "e").unwrap().2 > 49_000);
}

#[test]
fn binary_owner_with_nul_bytes() {
    let s = Server::start();
    let mut c = s.conn();
    let owner: &[u8] = b"own\0er\r\n\xff";
    let t = run(&mut c, &[b"LOCK.ACQUIRE", b"bin", owner, b"10000"]).unwrap();
    assert!(matches!(t, Value::Int(i) if i > 0));
    assert_eq!(status(&mut c, "bin").unwrap().0, owner);
    // A prefix (what a C string would see) is another owner.
    assert_eq!(
        run(&mut c, &[b"LOCK.RELEASE", b"bin", b"own"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        run(&mut c, &[b"LOCK.RELEASE", b"bin", owner]).unwrap(),
        Value::Int(1)
    );
}

#[test]
fn wrongtype_both_ways_and_type_name() {
    let s = Server::start();
    let mut c = s.conn();
    q(&mut c, "SET str v").unwrap();
    for cmd in [
        "LOCK.ACQUIRE str a 100",
        "LOCK.RELEASE str a",
        "LOCK.EXTEND str a 100",
        "LOCK.STATUS str",
    ] {
        assert!(err(&mut c, cmd).starts_with("WRONGTYPE"), "{cmd}");
    }
    assert_eq!(
        q(&mut c, "GET str").unwrap(),
        Value::BulkString(b"v".to_vec()),
        "unchanged"
    );
    int(&mut c, "LOCK.ACQUIRE l a 10000");
    assert_eq!(
        q(&mut c, "TYPE l").unwrap(),
        Value::SimpleString("redislock".into())
    );
    assert!(err(&mut c, "GET l").starts_with("WRONGTYPE"));
    assert_eq!(
        int(&mut c, "PTTL l"),
        -1,
        "Redis expiry is not used (documented)"
    );
}

#[test]
fn del_unlink_flushall_free_the_lock() {
    let s = Server::start();
    let mut c = s.conn();
    for (i, delete) in ["DEL k", "UNLINK k", "FLUSHALL", "FLUSHALL ASYNC", "FLUSHDB"]
        .iter()
        .enumerate()
    {
        int(&mut c, "LOCK.ACQUIRE k a 10000");
        q(&mut c, delete).unwrap();
        assert_eq!(status(&mut c, "k"), None, "{delete}");
        assert!(
            int(&mut c, "LOCK.ACQUIRE k b 10000") > 0,
            "{delete}: free again"
        );
        q(&mut c, "DEL k").unwrap();
        assert!(
            eventually(Duration::from_secs(2), || info_field(
                &mut c,
                "lock",
                "lock_held"
            ) == "0"),
            "round {i}"
        );
    }
}

#[test]
fn copy_and_rename_keep_the_lock() {
    let s = Server::start();
    let mut c = s.conn();
    let t = int(&mut c, "LOCK.ACQUIRE a alice 300");
    assert_eq!(int(&mut c, "COPY a b"), 1);
    let (owner, token, ..) = status(&mut c, "b").unwrap();
    assert_eq!((owner.as_slice(), token), (&b"alice"[..], t));
    q(&mut c, "RENAME a c").unwrap();
    assert_eq!(status(&mut c, "c").unwrap().1, t);
    assert_eq!(
        int(&mut c, "LOCK.RELEASE c alice"),
        1,
        "renamed lock still owner-checked"
    );
    // The copy is an independent lock that expires on its own, untouched.
    assert!(eventually(Duration::from_secs(2), || int(
        &mut c, "EXISTS b"
    ) == 0));
    int(&mut c, "LOCK.ACQUIRE d bob 300");
    q(&mut c, "RENAME d e").unwrap();
    assert!(
        eventually(Duration::from_secs(2), || int(&mut c, "EXISTS e") == 0),
        "renamed lock expires actively"
    );
    int(&mut c, "LOCK.ACQUIRE m bob 300");
    assert_eq!(int(&mut c, "MOVE m 3"), 1);
    q(&mut c, "SELECT 3").unwrap();
    assert!(
        eventually(Duration::from_secs(2), || int(&mut c, "EXISTS m") == 0),
        "moved lock expires actively"
    );
}

#[test]
fn memory_usage_is_reported() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE m a 10000");
    let small = int(&mut c, "MEMORY USAGE m");
    let long_owner = "x".repeat(200);
    int(&mut c, &format!("LOCK.ACQUIRE n {long_owner} 10000"));
    let big = int(&mut c, "MEMORY USAGE n");
    assert!(small > 0 && big >= small + 199, "{small} {big}");
}

#[test]
fn bad_input_is_rejected_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = int(&mut c, "LOCK.ACQUIRE k a 10000");
    let cases = [
        ("LOCK.ACQUIRE", "wrong number"),
        ("LOCK.ACQUIRE k", "wrong number"),
        ("LOCK.ACQUIRE k b", "wrong number"),
        ("LOCK.ACQUIRE k b 0", "ttl-ms must be a positive integer"),
        ("LOCK.ACQUIRE k b -5", "ttl-ms must be a positive integer"),
        ("LOCK.ACQUIRE k b 1.5", "ttl-ms must be a positive integer"),
        ("LOCK.ACQUIRE k b ten", "ttl-ms must be a positive integer"),
        ("LOCK.ACQUIRE k b 86400001", "above the maximum"),
        ("LOCK.ACQUIRE k b 100 FOO", "unknown option 'FOO'"),
        ("LOCK.ACQUIRE k b 100 REENTRANT REENTRANT", "more than once"),
        ("LOCK.ACQUIRE k b 100 WAIT", "needs a timeout"),
        ("LOCK.ACQUIRE k b 100 WAIT x", "WAIT timeout-ms"),
        ("LOCK.RELEASE k", "wrong number"),
        ("LOCK.RELEASE k a extra", "wrong number"),
        ("LOCK.EXTEND k a", "wrong number"),
        ("LOCK.EXTEND k a 0", "ttl-ms must be a positive integer"),
        ("LOCK.EXTEND k a 99999999999", "above the maximum"),
        ("LOCK.STATUS", "wrong number"),
        ("LOCK.STATUS k x", "wrong number"),
        ("LOCK.APPLY k a 1 1 1", "internal"),
    ];
    for (cmd, expect) in cases {
        let e = err(&mut c, cmd);
        assert!(e.contains(expect), "{cmd}: {e}");
    }
    let empty = run(&mut c, &[b"LOCK.ACQUIRE", b"k", b"", b"100"])
        .unwrap_err()
        .to_string();
    assert!(empty.contains("owner must not be empty"), "{empty}");
    let long = vec![b'o'; 257];
    let e = run(&mut c, &[b"LOCK.ACQUIRE", b"k", &long, b"100"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("max-owner-len"), "{e}");
    let huge = vec![b'9'; 1 << 20];
    assert!(run(&mut c, &[b"LOCK.ACQUIRE", b"k", b"b", &huge]).is_err());
    let (owner, token, _, holds, _) = status(&mut c, "k").unwrap();
    assert_eq!(
        (owner.as_slice(), token, holds),
        (&b"a"[..], t, 1),
        "nothing changed"
    );
    assert_eq!(int(&mut c, "DBSIZE"), 1);
    assert_eq!(info_field(&mut c, "lock", "lock_acquired"), "1");
}

#[test]
fn configs_via_config_set_and_loadmodule_args() {
    let s = Server::with(&[], &["max-ttl-ms", "5000", "max-owner-len", "4"]);
    let mut c = s.conn();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("lock.max-ttl-ms")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, vec!["lock.max-ttl-ms", "5000"]);
    assert!(err(&mut c, "LOCK.ACQUIRE k abc 5001").contains("above the maximum (5000)"));
    assert!(err(&mut c, "LOCK.ACQUIRE k abcde 100").contains("max-owner-len (4 bytes)"));
    q(&mut c, "CONFIG SET lock.max-ttl-ms 60000").unwrap();
    q(&mut c, "CONFIG SET lock.max-owner-len 64").unwrap();
    assert!(int(&mut c, "LOCK.ACQUIRE k abcde 60000") > 0);
    assert!(err(&mut c, "CONFIG SET lock.max-ttl-ms 0").contains("must be between 1"));
    assert!(err(&mut c, "CONFIG SET lock.max-ttl-ms abc").contains("parsed"));
}

#[test]
fn info_section_counts_events() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE a x 10000");
    int(&mut c, "LOCK.ACQUIRE b x 100");
    q(&mut c, "LOCK.ACQUIRE a y 10000").unwrap();
    int(&mut c, "LOCK.RELEASE a y");
    int(&mut c, "LOCK.EXTEND a x 10000");
    int(&mut c, "LOCK.RELEASE a x");
    let t = int(&mut c, "LOCK.ACQUIRE c x 10000");
    assert!(eventually(Duration::from_secs(2), || info_field(
        &mut c,
        "lock",
        "lock_expired"
    ) == "1"));
    let f = |c: &mut redis::Connection, name: &str| info_field(c, "lock", name);
    assert_eq!(f(&mut c, "lock_held"), "1");
    assert_eq!(f(&mut c, "lock_acquired"), "3");
    assert_eq!(f(&mut c, "lock_contended"), "1");
    assert_eq!(f(&mut c, "lock_released"), "1");
    assert_eq!(f(&mut c, "lock_extended"), "1");
    assert_eq!(f(&mut c, "lock_wrong_owner"), "1");
    assert_eq!(f(&mut c, "lock_last_token"), t.to_string());
}

#[test]
fn command_flags_and_key_positions() {
    let s = Server::start();
    let mut c = s.conn();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("LOCK.ACQUIRE")
        .arg("thekey")
        .arg("a")
        .arg("100")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, vec!["thekey"]);
    let info = format!(
        "{:?}",
        q(&mut c, "COMMAND INFO lock.status lock.acquire").unwrap()
    );
    assert!(
        info.contains("readonly") && info.contains("denyoom") && info.contains("fast"),
        "{info}"
    );
    assert!(
        info.contains(r#"simple-string("RO"), simple-string("access")"#),
        "status is read-only for ACLs: {info}"
    );
}

#[test]
fn acl_key_patterns_apply() {
    let s = Server::start();
    let mut c = s.conn();
    q(&mut c, "ACL SETUSER app on >pw ~app:* +@all").unwrap();
    let mut app = redis::Client::open(format!("redis://app:pw@127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    assert!(int(&mut app, "LOCK.ACQUIRE app:job a 1000") > 0);
    let denied = err(&mut app, "LOCK.ACQUIRE other:job a 1000");
    assert!(denied.contains("NOPERM"), "{denied}");
    assert_eq!(int(&mut c, "EXISTS other:job"), 0);
}

#[test]
fn expired_lock_is_replaced_lazily_and_actively() {
    let s = Server::start();
    let mut c = s.conn();
    let t1 = int(&mut c, "LOCK.ACQUIRE k a 50");
    std::thread::sleep(Duration::from_millis(80));
    let t2 = int(&mut c, "LOCK.ACQUIRE k b 10000");
    assert!(t2 > t1);
    assert_eq!(status(&mut c, "k").unwrap().0, b"b");
    // Active expiry: 1000 locks vanish without being touched.
    for i in 0..1000 {
        int(&mut c, &format!("LOCK.ACQUIRE many:{i} a {}", 100 + i % 50));
    }
    assert!(
        eventually(Duration::from_secs(3), || int(&mut c, "DBSIZE") == 1),
        "only k is left"
    );
    assert_eq!(info_field(&mut c, "lock", "lock_held"), "1");
    assert_eq!(info_field(&mut c, "lock", "lock_expired"), "1001");
}

#[test]
fn release_and_extend_of_expired_lock_say_not_held() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k a 30");
    std::thread::sleep(Duration::from_millis(40));
    // Either the reaper or the command removes it; both answer "not held".
    assert_eq!(int(&mut c, "LOCK.EXTEND k a 1000"), -1);
    int(&mut c, "LOCK.ACQUIRE j a 30");
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(int(&mut c, "LOCK.RELEASE j a"), -1);
    assert_eq!(int(&mut c, "DBSIZE"), 0);
}

#[test]
fn fence_raises_token_and_counter_for_the_owner_only() {
    let s = Server::start();
    let mut c = s.conn();
    let t = int(&mut c, "LOCK.ACQUIRE f a 10000");
    // A fresh server counts from its clock + 60 s, the most FENCE accepts:
    // the room above its counter is the time since it started.
    std::thread::sleep(Duration::from_millis(20));
    let high = t + 5_000;
    assert_eq!(int(&mut c, &format!("LOCK.FENCE f b {high}")), 0);
    assert_eq!(int(&mut c, &format!("LOCK.FENCE f a {high}")), high);
    assert_eq!(
        int(&mut c, &format!("LOCK.FENCE f a {t}")),
        high,
        "never lowered"
    );
    assert_eq!(status(&mut c, "f").unwrap().1, high);
    assert_eq!(
        int(&mut c, "LOCK.ACQUIRE f a 10000"),
        high,
        "a retry sees the fenced token"
    );
    assert!(
        int(&mut c, "LOCK.ACQUIRE g a 10000") > high,
        "the server counter was raised"
    );
    assert_eq!(int(&mut c, "LOCK.FENCE none a 5"), -1);
    assert!(err(&mut c, "LOCK.FENCE f a 0").contains("positive integer"));
    assert!(err(&mut c, "LOCK.FENCE f a 4611686018427387905").contains("above the maximum"));
}
