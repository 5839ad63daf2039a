//! Read-write locks and semaphores on the lock type (issue 28):
//! `LOCK.ACQUIRE key owner ttl-ms SHARED [LIMIT n] ...` on real servers.

use crate::common;
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One command sent on its own connection, its reply read later: lets one
/// test thread hold many blocked clients.
struct Pending {
    reader: BufReader<TcpStream>,
}

impl Pending {
    fn connect(port: u16) -> Pending {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Pending {
            reader: BufReader::new(s),
        }
    }

    fn send(port: u16, line: &str) -> Pending {
        let mut p = Pending::connect(port);
        p.write(line);
        p
    }

    fn write(&mut self, line: &str) {
        let words: Vec<&str> = line.split(' ').collect();
        let mut cmd = format!("*{}\r\n", words.len());
        for w in words {
            cmd.push_str(&format!("${}\r\n{w}\r\n", w.len()));
        }
        self.reader.get_mut().write_all(cmd.as_bytes()).unwrap();
    }

    /// The reply line: `:token`, `$-1` (nil) or `-ERR ...`.
    fn reply(&mut self) -> String {
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .expect("a reply within the read timeout");
        line.trim_end().to_string()
    }

    fn token(mut self) -> i64 {
        let r = self.reply();
        r.strip_prefix(':')
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("expected a token, got {r:?}"))
    }
}

/// A shared key's LOCK.STATUS: (limit, [(owner, token, ttl, holds)], waiters).
#[derive(Debug, PartialEq)]
struct SharedStatus {
    limit: i64,
    holders: Vec<(String, i64, i64, i64)>,
    waiters: i64,
}

fn fields(v: &Value) -> Vec<(String, Value)> {
    let Value::Array(items) = v else {
        panic!("expected a map, got {v:?}")
    };
    items
        .chunks(2)
        .map(|kv| match &kv[0] {
            Value::BulkString(k) => (String::from_utf8(k.clone()).unwrap(), kv[1].clone()),
            other => panic!("field name {other:?}"),
        })
        .collect()
}

fn num(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn shared_status(c: &mut redis::Connection, key: &str) -> Option<SharedStatus> {
    let v = q(c, &format!("LOCK.STATUS {key}")).unwrap();
    if v == Value::Nil {
        return None;
    }
    let f = fields(&v);
    let names: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["mode", "limit", "holders", "waiters"], "{v:?}");
    assert_eq!(f[0].1, Value::BulkString(b"shared".to_vec()));
    let Value::Array(holders) = &f[2].1 else {
        panic!("holders: {:?}", f[2].1)
    };
    let holders = holders
        .iter()
        .map(|h| {
            let h = fields(h);
            let owner = match &h[0].1 {
                Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
                other => panic!("owner {other:?}"),
            };
            assert_eq!(
                (
                    h[0].0.as_str(),
                    h[1].0.as_str(),
                    h[2].0.as_str(),
                    h[3].0.as_str()
                ),
                ("owner", "token", "ttl", "holds")
            );
            (owner, num(&h[1].1), num(&h[2].1), num(&h[3].1))
        })
        .collect();
    Some(SharedStatus {
        limit: num(&f[1].1),
        holders,
        waiters: num(&f[3].1),
    })
}

fn owners(c: &mut redis::Connection, key: &str) -> Vec<String> {
    shared_status(c, key).map_or(Vec::new(), |s| s.holders.into_iter().map(|h| h.0).collect())
}

fn waiters(c: &mut redis::Connection, key: &str) -> i64 {
    match q(c, &format!("LOCK.STATUS {key}")).unwrap() {
        Value::Nil => 0,
        v => {
            let f = fields(&v);
            num(&f.iter().find(|(k, _)| k == "waiters").unwrap().1)
        }
    }
}

fn wait_for_waiters(c: &mut redis::Connection, key: &str, n: i64) {
    assert!(
        eventually(Duration::from_secs(10), || waiters(c, key) == n),
        "expected {n} waiters on {key}, have {}",
        waiters(c, key)
    );
}

fn nil(c: &mut redis::Connection, line: &str) {
    assert_eq!(q(c, line).unwrap(), Value::Nil, "{line}");
}

#[test]
fn readers_hold_together_and_a_writer_waits_for_all_of_them() {
    let s = Server::start();
    let mut c = s.conn();
    let a = int(&mut c, "LOCK.ACQUIRE k a 30000 SHARED");
    let b = int(&mut c, "LOCK.ACQUIRE k b 30000 shared");
    assert!(b > a, "every grant gets a token above the last");
    nil(&mut c, "LOCK.ACQUIRE k w 30000");
    let st = shared_status(&mut c, "k").unwrap();
    assert_eq!(st.limit, 0, "created without LIMIT: unlimited");
    assert_eq!(
        st.holders
            .iter()
            .map(|h| (h.0.as_str(), h.1, h.3))
            .collect::<Vec<_>>(),
        [("a", a, 1), ("b", b, 1)]
    );
    assert!(st.holders.iter().all(|h| h.2 > 25_000 && h.2 <= 30_000));
    // RELEASE and EXTEND act on that owner's hold alone.
    assert_eq!(int(&mut c, "LOCK.EXTEND k a 90000"), 1);
    assert_eq!(int(&mut c, "LOCK.EXTEND k w 90000"), 0, "not a holder");
    let st = shared_status(&mut c, "k").unwrap();
    assert!(st.holders[0].2 > 85_000 && st.holders[1].2 <= 30_000);
    assert_eq!(int(&mut c, "LOCK.RELEASE k a"), 1);
    assert_eq!(int(&mut c, "LOCK.RELEASE k a"), 0, "b still holds");
    nil(&mut c, "LOCK.ACQUIRE k w 30000");
    assert_eq!(int(&mut c, "LOCK.RELEASE k b"), 1);
    assert_eq!(int(&mut c, "LOCK.RELEASE k b"), -1, "nobody holds");
    let w = int(&mut c, "LOCK.ACQUIRE k w 30000");
    assert!(
        w > b,
        "an exclusive grant's token is above every token before"
    );
    // The exclusive reply of LOCK.STATUS is as it was.
    let (owner, token, _, holds, waiting) = status(&mut c, "k").unwrap();
    assert_eq!(
        (owner.as_slice(), token, holds, waiting),
        (&b"w"[..], w, 1, 0)
    );
    nil(&mut c, "LOCK.ACQUIRE k a 30000 SHARED");
}

#[test]
fn a_writer_is_not_starved_by_a_stream_of_readers() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k r0 30000 SHARED");
    let writer = Pending::send(s.port, "LOCK.ACQUIRE k w 30000 WAIT 0");
    wait_for_waiters(&mut c, "k", 1);
    // Readers keep coming: none gets past the queued writer.
    let mut readers = Vec::new();
    for i in 1..=5 {
        nil(&mut c, &format!("LOCK.ACQUIRE k r{i} 30000 SHARED"));
        readers.push(Pending::send(
            s.port,
            &format!("LOCK.ACQUIRE k q{i} 30000 SHARED WAIT 0"),
        ));
        wait_for_waiters(&mut c, "k", 1 + i);
    }
    assert_eq!(owners(&mut c, "k"), ["r0"]);
    assert_eq!(int(&mut c, "LOCK.RELEASE k r0"), 1);
    let w = writer.token();
    assert_eq!(status(&mut c, "k").unwrap().1, w, "the writer has it alone");
    // When it leaves, the readers queued behind it come in together.
    assert_eq!(int(&mut c, "LOCK.RELEASE k w"), 1);
    let tokens: Vec<i64> = readers.into_iter().map(Pending::token).collect();
    assert!(tokens.windows(2).all(|t| t[0] < t[1]), "in queue order");
    assert!(tokens[0] > w);
    assert_eq!(owners(&mut c, "k"), ["q1", "q2", "q3", "q4", "q5"]);
}

#[test]
fn shared_waiters_at_the_head_come_in_together_up_to_the_limit() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k x 30000");
    let mut first = Vec::new();
    for i in 0..3 {
        first.push(Pending::send(
            s.port,
            &format!("LOCK.ACQUIRE k s{i} 30000 SHARED LIMIT 2 WAIT 0"),
        ));
        wait_for_waiters(&mut c, "k", i + 1);
    }
    let writer = Pending::send(s.port, "LOCK.ACQUIRE k w 30000 WAIT 0");
    wait_for_waiters(&mut c, "k", 4);
    let late = Pending::send(s.port, "LOCK.ACQUIRE k late 30000 SHARED WAIT 0");
    wait_for_waiters(&mut c, "k", 5);
    assert_eq!(int(&mut c, "LOCK.RELEASE k x"), 1);
    let mut third = first.pop().unwrap();
    for p in first {
        p.token();
    }
    let st = shared_status(&mut c, "k").unwrap();
    assert_eq!((st.limit, st.holders.len(), st.waiters), (2, 2, 3));
    // A place frees: the third shared waiter takes it; the writer then
    // holds back `late` though the key has room for it.
    assert_eq!(int(&mut c, "LOCK.RELEASE k s0"), 1);
    assert!(third.reply().starts_with(':'));
    assert_eq!(owners(&mut c, "k"), ["s1", "s2"]);
    assert_eq!(int(&mut c, "LOCK.RELEASE k s1"), 1);
    wait_for_waiters(&mut c, "k", 2);
    assert_eq!(owners(&mut c, "k"), ["s2"]);
    assert_eq!(int(&mut c, "LOCK.RELEASE k s2"), 1);
    let w = writer.token();
    assert_eq!(status(&mut c, "k").unwrap().1, w);
    assert_eq!(int(&mut c, "LOCK.RELEASE k w"), 1);
    assert!(late.token() > w);
}

#[test]
fn the_limit_holds_while_holders_expire_and_each_place_is_handed_on() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE sem a 300 SHARED LIMIT 2");
    int(&mut c, "LOCK.ACQUIRE sem b 60000 SHARED LIMIT 2");
    nil(&mut c, "LOCK.ACQUIRE sem c 60000 SHARED");
    let c_wait = Pending::send(s.port, "LOCK.ACQUIRE sem c 60000 SHARED LIMIT 2 WAIT 0");
    let d_wait = Pending::send(s.port, "LOCK.ACQUIRE sem d 60000 SHARED WAIT 0");
    wait_for_waiters(&mut c, "sem", 2);
    // a's deadline frees a's place only: c gets it, d still waits, b stays.
    let t = c_wait.token();
    let st = shared_status(&mut c, "sem").unwrap();
    assert_eq!(
        st.holders.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(),
        ["b", "c"]
    );
    assert_eq!((st.holders[1].1, st.limit, st.waiters), (t, 2, 1));
    assert_eq!(info_field(&mut c, "lock", "lock_expired"), "1");
    // An expired holder with nobody waiting is taken out too, alone.
    assert_eq!(int(&mut c, "LOCK.EXTEND sem c 200"), 1);
    assert!(d_wait.token() > t);
    assert_eq!(owners(&mut c, "sem"), ["b", "d"]);
    assert_eq!(int(&mut c, "LOCK.EXTEND sem b 100"), 1);
    assert_eq!(int(&mut c, "LOCK.EXTEND sem d 100"), 1);
    assert!(eventually(Duration::from_secs(5), || int(
        &mut c,
        "EXISTS sem"
    ) == 0));
}

#[test]
fn the_exclusive_holder_downgrades_and_lets_the_readers_in() {
    let s = Server::start();
    let mut c = s.conn();
    let t = int(&mut c, "LOCK.ACQUIRE k w 30000");
    let r1 = Pending::send(s.port, "LOCK.ACQUIRE k r1 30000 SHARED WAIT 0");
    let r2 = Pending::send(s.port, "LOCK.ACQUIRE k r2 30000 SHARED WAIT 0");
    wait_for_waiters(&mut c, "k", 2);
    assert_eq!(
        int(&mut c, "LOCK.ACQUIRE k w 40000 SHARED LIMIT 3"),
        t,
        "keeps its token"
    );
    assert!(r1.token() > t);
    assert!(r2.token() > t);
    let st = shared_status(&mut c, "k").unwrap();
    assert_eq!(st.limit, 3);
    assert_eq!(
        st.holders
            .iter()
            .map(|h| (h.0.as_str(), h.3))
            .collect::<Vec<_>>(),
        [("w", 1), ("r1", 1), ("r2", 1)]
    );
    assert!(st.holders[0].1 == t && st.holders[0].2 > 35_000);
    assert_eq!(info_field(&mut c, "lock", "lock_downgraded"), "1");
    // No way back up: a shared holder asking for the exclusive lock.
    let e = err(&mut c, "LOCK.ACQUIRE k w 30000");
    assert!(e.contains("no upgrade"), "{e}");
    assert_eq!(shared_status(&mut c, "k").unwrap().holders.len(), 3);
}

#[test]
fn every_bad_argument_is_refused_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let bad = [
        ("LOCK.ACQUIRE k a 1000 LIMIT 2", "option LIMIT needs SHARED"),
        (
            "LOCK.ACQUIRE k a 1000 SHARED LIMIT",
            "option LIMIT needs a count",
        ),
        (
            "LOCK.ACQUIRE k a 1000 SHARED LIMIT 0",
            "LIMIT must be an integer from 1 to 2147483647",
        ),
        (
            "LOCK.ACQUIRE k a 1000 SHARED LIMIT -1",
            "LIMIT must be an integer",
        ),
        (
            "LOCK.ACQUIRE k a 1000 SHARED LIMIT 2147483648",
            "LIMIT must be an integer",
        ),
        (
            "LOCK.ACQUIRE k a 1000 SHARED LIMIT x",
            "LIMIT must be an integer",
        ),
        (
            "LOCK.ACQUIRE k a 1000 SHARED LIMIT 1 LIMIT 1",
            "option LIMIT given more than once",
        ),
        (
            "LOCK.ACQUIRE k a 1000 SHARED SHARED",
            "option SHARED given more than once",
        ),
        (
            "LOCK.ACQUIRE k a 0 SHARED",
            "ttl-ms must be a positive integer",
        ),
    ];
    for (line, want) in bad {
        let e = err(&mut c, line);
        assert!(e.contains(want), "{line}: {e}");
        assert_eq!(int(&mut c, "EXISTS k"), 0, "{line} left a key");
    }
    assert!(int(&mut c, "LOCK.ACQUIRE k a 1000 SHARED LIMIT 2147483647") > 0);
    int(&mut c, "LOCK.ACQUIRE sem a 30000 SHARED LIMIT 2");
    let before = shared_status(&mut c, "sem").unwrap();
    for line in [
        "LOCK.ACQUIRE sem b 30000 SHARED LIMIT 3",
        "LOCK.ACQUIRE sem a 30000 SHARED LIMIT 1",
        "LOCK.ACQUIRE sem b 30000 SHARED LIMIT 3 WAIT 100",
    ] {
        let e = err(&mut c, line);
        assert!(e.contains("LIMIT differs"), "{line}: {e}");
    }
    let e = err(&mut c, "LOCK.ACQUIRE sem a 30000");
    assert!(e.contains("no upgrade"), "{e}");
    let after = shared_status(&mut c, "sem").unwrap();
    assert_eq!(before.holders.len(), after.holders.len());
    assert_eq!(before.holders[0].1, after.holders[0].1);
    assert_eq!(after.waiters, 0);
    // Readers' key (no LIMIT): naming one is another limit.
    int(&mut c, "LOCK.ACQUIRE rw a 30000 SHARED");
    assert!(err(&mut c, "LOCK.ACQUIRE rw b 30000 SHARED LIMIT 5").contains("LIMIT differs"));
    // SHARED without LIMIT joins under the key's limit.
    int(&mut c, "LOCK.ACQUIRE sem b 30000 SHARED");
    nil(&mut c, "LOCK.ACQUIRE sem c 30000 SHARED");
    // A waiter whose LIMIT differs once it reaches the head is told so.
    int(&mut c, "LOCK.ACQUIRE x w 30000");
    let mut odd = Pending::send(s.port, "LOCK.ACQUIRE x r 30000 SHARED LIMIT 4 WAIT 0");
    wait_for_waiters(&mut c, "x", 1);
    assert_eq!(
        int(&mut c, "LOCK.ACQUIRE x w 30000 SHARED LIMIT 3"),
        int(&mut c, "LOCK.ACQUIRE x w 30000 SHARED")
    );
    assert!(odd.reply().contains("LIMIT differs"));
    assert_eq!(owners(&mut c, "x"), ["w"]);
    // The internal command is refused to clients.
    assert!(err(&mut c, "LOCK.APPLYSHARED k 0 a 5 1000 1").contains("internal"));
}

fn used_memory(c: &mut redis::Connection) -> i64 {
    info_field(c, "memory", "used_memory").parse().unwrap()
}

#[test]
fn shared_waiters_that_time_out_or_disconnect_give_their_memory_back() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE sem h 600000 SHARED LIMIT 1");
    let round = |c: &mut redis::Connection, n: usize| {
        for _ in 0..n / 100 {
            let timing_out: Vec<Pending> = (0..50)
                .map(|i| {
                    Pending::send(s.port, &format!("LOCK.ACQUIRE sem t{i} 1000 SHARED WAIT 1"))
                })
                .collect();
            for mut p in timing_out {
                assert_eq!(p.reply(), "$-1");
            }
            let leaving: Vec<Pending> = (0..50)
                .map(|i| {
                    Pending::send(s.port, &format!("LOCK.ACQUIRE sem d{i} 1000 SHARED WAIT 0"))
                })
                .collect();
            wait_for_waiters(c, "sem", 50);
            drop(leaving);
            wait_for_waiters(c, "sem", 0);
        }
    };
    round(&mut c, 200);
    std::thread::sleep(Duration::from_millis(1500));
    let before = used_memory(&mut c);
    round(&mut c, 2000);
    let mut after = 0;
    let settled = eventually(Duration::from_secs(15), || {
        after = used_memory(&mut c);
        after - before < 1 << 20
    });
    eprintln!("used_memory {before} before, {after} after 2,000 shared waiters left");
    assert!(settled, "used_memory {before} before, {after} after");
    assert_eq!(owners(&mut c, "sem"), ["h"]);
}

/// Two shared keys as every restart must bring them back.
fn shared_keys(c: &mut redis::Connection) -> (SharedStatus, SharedStatus) {
    int(c, "LOCK.ACQUIRE sem a 60000 SHARED LIMIT 3");
    int(c, "LOCK.ACQUIRE sem b 60000 SHARED LIMIT 3 REENTRANT");
    int(c, "LOCK.ACQUIRE sem b 60000 SHARED REENTRANT");
    int(c, "LOCK.ACQUIRE sem gone 60000 SHARED");
    int(c, "LOCK.RELEASE sem gone");
    int(c, "LOCK.ACQUIRE rw w 60000");
    int(c, "LOCK.ACQUIRE rw w 60000 SHARED");
    int(c, "LOCK.ACQUIRE rw r 60000 SHARED");
    (
        shared_status(c, "sem").unwrap(),
        shared_status(c, "rw").unwrap(),
    )
}

fn assert_same(before: &SharedStatus, after: &SharedStatus) {
    assert_eq!(before.limit, after.limit);
    let strip = |s: &SharedStatus| -> Vec<(String, i64, i64)> {
        s.holders.iter().map(|h| (h.0.clone(), h.1, h.3)).collect()
    };
    assert_eq!(strip(before), strip(after));
    assert!(after.holders.iter().all(|h| h.2 > 30_000), "{after:?}");
}

#[test]
fn shared_keys_survive_a_restart_from_rdb_and_from_aof() {
    let mut s = Server::with(&["--save", "3600 1"], &[]);
    let mut c = s.conn();
    let (sem, rw) = shared_keys(&mut c);
    q(&mut c, "SAVE").unwrap();
    s.restart();
    let mut c = s.conn();
    assert_same(&sem, &shared_status(&mut c, "sem").unwrap());
    assert_same(&rw, &shared_status(&mut c, "rw").unwrap());
    int(&mut c, "LOCK.ACQUIRE sem c 1000 SHARED LIMIT 3");
    nil(&mut c, "LOCK.ACQUIRE sem d 1000 SHARED");
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
        let (sem, rw) = shared_keys(&mut c);
        s.kill(); // only the AOF survives
        s.restart();
        let mut c = s.conn();
        assert_same(&sem, &shared_status(&mut c, "sem").unwrap());
        assert_same(&rw, &shared_status(&mut c, "rw").unwrap());
        q(&mut c, "BGREWRITEAOF").unwrap();
        s.await_aof_rewrite();
        std::thread::sleep(Duration::from_millis(200));
        s.kill();
        s.restart();
        let mut c = s.conn();
        assert_same(&sem, &shared_status(&mut c, "sem").unwrap());
        assert_same(&rw, &shared_status(&mut c, "rw").unwrap());
        let t = int(&mut c, "LOCK.ACQUIRE fresh z 1000");
        assert!(
            sem.holders.iter().chain(&rw.holders).all(|h| h.1 < t),
            "preamble={preamble}"
        );
    }
}

#[test]
fn a_replica_follows_shared_holds() {
    let debug = ["--enable-debug-command", "yes"];
    let p = Server::with(&debug, &[]);
    let r = Server::replica_with(&p, &debug, &[]);
    let mut c = p.conn();
    let mut rc = r.conn();
    let sync = |c: &mut redis::Connection| assert_eq!(int(c, "WAIT 1 5000"), 1);
    let (sem, rw) = shared_keys(&mut c);
    int(&mut c, "LOCK.ACQUIRE sem short 200 SHARED");
    sync(&mut c);
    assert_same(&rw, &shared_status(&mut rc, "rw").unwrap());
    assert_eq!(owners(&mut rc, "sem"), ["a", "b", "short"]);
    // The primary's expiry of one holder reaches the replica as that
    // holder's removal; the others stay.
    assert!(eventually(Duration::from_secs(5), || {
        owners(&mut c, "sem") == ["a", "b"] && {
            sync(&mut c);
            owners(&mut rc, "sem") == ["a", "b"]
        }
    }));
    assert_same(&sem, &shared_status(&mut rc, "sem").unwrap());
    let digest = |c: &mut redis::Connection| q(c, "DEBUG DIGEST-VALUE sem rw").unwrap();
    assert_eq!(digest(&mut c), digest(&mut rc));
    int(&mut c, "LOCK.RELEASE sem b");
    int(&mut c, "LOCK.RELEASE sem a");
    int(&mut c, "LOCK.RELEASE rw w");
    int(&mut c, "LOCK.EXTEND rw r 90000");
    sync(&mut c);
    assert_eq!(owners(&mut rc, "sem"), ["b"]);
    let st = shared_status(&mut rc, "rw").unwrap();
    assert_eq!(st.holders.len(), 1);
    assert!(st.holders[0].2 > 85_000);
    int(&mut c, "LOCK.RELEASE sem b");
    sync(&mut c);
    assert_eq!(int(&mut rc, "EXISTS sem"), 0);
    let e = err(&mut rc, "LOCK.ACQUIRE x a 1000 SHARED");
    assert!(e.contains("replica"), "{e}");
}

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

#[test]
fn a_restored_payload_with_more_holders_than_its_limit_is_refused() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE sem a 60000 SHARED LIMIT 3");
    int(&mut c, "LOCK.ACQUIRE sem b 60000 SHARED");
    int(&mut c, "LOCK.ACQUIRE sem c 60000 SHARED");
    let dump: Vec<u8> = redis::cmd("DUMP").arg("sem").query(&mut c).unwrap();
    let restore = |c: &mut redis::Connection, payload: &[u8]| {
        redis::cmd("RESTORE")
            .arg("copy")
            .arg(0)
            .arg(payload)
            .arg("REPLACE")
            .query::<Value>(c)
    };
    restore(&mut c, &dump).expect("the real payload loads");
    assert_eq!(owners(&mut c, "copy"), ["a", "b", "c"]);
    // After the 10-byte type header: the empty owner that marks shared
    // holds (string type, length 0), then the limit (uint type, 3).
    let body = &dump[..dump.len() - 8];
    assert_eq!(&body[10..14], &[5, 0, 2, 3], "layout as documented");
    for limit in [2u8, 1] {
        let mut forged = body.to_vec();
        forged[13] = limit;
        forged.extend_from_slice(&crc64(&forged).to_le_bytes());
        assert!(
            restore(&mut c, &forged).is_err(),
            "limit {limit} with 3 holders"
        );
    }
    assert_eq!(
        owners(&mut c, "copy"),
        ["a", "b", "c"],
        "REPLACE refused: unchanged"
    );
    assert!(s.log().contains("more holders than the limit"));
}

#[test]
fn the_restart_guard_refuses_new_shared_holders_but_not_holders() {
    let mut s = Server::with(&["--save", "3600 1"], &["restart-delay-ms", "1500"]);
    let mut c = s.conn();
    assert!(eventually(Duration::from_secs(3), || q(
        &mut c,
        "LOCK.ACQUIRE sem a 30000 SHARED LIMIT 3"
    )
    .is_ok()));
    int(&mut c, "LOCK.ACQUIRE rw w 30000");
    q(&mut c, "SAVE").unwrap();
    s.restart();
    let mut c = s.conn();
    for line in [
        "LOCK.ACQUIRE sem b 30000 SHARED",
        "LOCK.ACQUIRE fresh b 30000 SHARED",
    ] {
        let e = err(&mut c, line);
        assert!(e.contains("new locks refused for another"), "{line}: {e}");
    }
    // Holders renew, extend and downgrade: nothing new is granted.
    assert!(int(&mut c, "LOCK.ACQUIRE sem a 30000 SHARED") > 0);
    assert_eq!(int(&mut c, "LOCK.EXTEND sem a 30000"), 1);
    assert!(int(&mut c, "LOCK.ACQUIRE rw w 30000 SHARED") > 0);
    assert_eq!(owners(&mut c, "sem"), ["a"]);
    assert_eq!(owners(&mut c, "rw"), ["w"]);
}

/// The keyspace events of a shared key, read from a SUBSCRIBE connection.
#[test]
fn shared_holds_announce_their_keyspace_events() {
    let s = Server::start();
    let mut c = s.conn();
    q(&mut c, "CONFIG SET notify-keyspace-events Kd").unwrap();
    let mut sub = Pending::send(s.port, "SUBSCRIBE __keyspace@0__:k");
    // *3 $9 subscribe $n channel :1
    let subscribed: Vec<String> = (0..6).map(|_| sub.reply()).collect();
    assert_eq!(subscribed[5], ":1", "{subscribed:?}");
    let mut event = move || -> String {
        // *3 $7 message $n channel $m event: the event is the last line.
        let lines: Vec<String> = (0..7).map(|_| sub.reply()).collect();
        lines[6].clone()
    };
    int(&mut c, "LOCK.ACQUIRE k w 30000");
    int(&mut c, "LOCK.ACQUIRE k w 30000 SHARED");
    int(&mut c, "LOCK.ACQUIRE k r 100 SHARED");
    int(&mut c, "LOCK.RELEASE k w");
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(event());
    }
    assert_eq!(
        seen,
        [
            "lock.acquire",
            "lock.downgrade",
            "lock.acquire",
            "lock.release",
            "lock.expire"
        ]
    );
}

/// As `a_grant_to_a_client_that_just_left_is_passed_on` (waiting.rs) for a
/// semaphore's place: the hold handed to a waiter that hung up before its
/// reply is taken back alone, and the place goes to the next waiter.
#[test]
fn a_shared_place_handed_to_a_client_that_just_left_is_passed_on() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE sem a 30000 SHARED LIMIT 2");
    int(&mut c, "LOCK.ACQUIRE sem b 30000 SHARED");
    let gone = Pending::send(s.port, "LOCK.ACQUIRE sem gone 30000 SHARED WAIT 0");
    wait_for_waiters(&mut c, "sem", 1);
    let next = Pending::send(s.port, "LOCK.ACQUIRE sem next 30000 SHARED WAIT 0");
    wait_for_waiters(&mut c, "sem", 2);
    // Release and hang up in one event-loop turn (the server stopped).
    let mut release = Pending::connect(s.port);
    q(&mut c, "PING").unwrap();
    s.signal("STOP");
    release.write("LOCK.RELEASE sem a");
    drop(gone);
    std::thread::sleep(Duration::from_millis(50));
    s.signal("CONT");
    assert_eq!(release.reply(), ":1");
    next.token();
    assert_eq!(info_field(&mut c, "lock", "lock_handoffs"), "2");
    assert_eq!(owners(&mut c, "sem"), ["b", "next"]);
}

/// RDB encoding 2 stores an exclusive lock byte for byte as version 1 did,
/// so a version-1 payload (the same bytes under a type id ending in
/// encoding 1, as every RDB and AOF preamble written before shared holds)
/// still loads; shared holds under encoding 1 do not exist and are refused.
#[test]
fn payloads_of_encoding_version_1_still_load() {
    let s = Server::start();
    let mut c = s.conn();
    let t = int(&mut c, "LOCK.ACQUIRE ex alice 60000 REENTRANT");
    int(&mut c, "LOCK.ACQUIRE ex alice 60000 REENTRANT");
    int(&mut c, "LOCK.ACQUIRE sem a 60000 SHARED LIMIT 2");
    let as_version_1 = |c: &mut redis::Connection, key: &str| -> Vec<u8> {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(c).unwrap();
        // Module value (7), then the type id as a 64-bit length (0x81 + 8
        // bytes, big-endian): name in the high 54 bits, encoding in the low 10.
        assert_eq!(
            (dump[0], dump[1], dump[9] & 0x03),
            (7, 0x81, 2),
            "encoding 2"
        );
        let mut body = dump[..dump.len() - 8].to_vec();
        body[9] = (body[9] & !0x03) | 1;
        body.extend_from_slice(&crc64(&body).to_le_bytes());
        body
    };
    let restore = |c: &mut redis::Connection, key: &str, payload: &[u8]| {
        redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(payload)
            .query::<Value>(c)
    };
    let old = as_version_1(&mut c, "ex");
    restore(&mut c, "old", &old).expect("a version-1 lock loads");
    let (owner, token, ttl, holds, _) = status(&mut c, "old").unwrap();
    assert_eq!((owner.as_slice(), token, holds), (&b"alice"[..], t, 2));
    assert!(ttl > 50_000);
    let shared = as_version_1(&mut c, "sem");
    assert!(restore(&mut c, "old-sem", &shared).is_err());
    assert_eq!(int(&mut c, "EXISTS old-sem"), 0);
}

/// Many clients at once, readers and writers through one queue with WAIT:
/// inside the lock a counter shows how many hold it. Never more than the
/// limit of readers, a writer always alone, and every writer served while
/// readers keep coming.
#[test]
fn under_concurrent_waiters_the_limit_and_the_writer_hold() {
    let s = Server::start();
    let port = s.port;
    let worker = move |id: usize, exclusive: bool, rounds: usize| {
        std::thread::spawn(move || {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
            let mut c = client.get_connection().unwrap();
            let owner = format!("w{id}");
            for _ in 0..rounds {
                let mut acquire = redis::cmd("LOCK.ACQUIRE");
                acquire.arg("sem").arg(&owner).arg(30_000);
                if !exclusive {
                    acquire.arg("SHARED").arg("LIMIT").arg(3);
                }
                let token: Option<i64> = acquire.arg("WAIT").arg(20_000).query(&mut c).unwrap();
                assert!(token.is_some(), "{owner}: not served within 20 s");
                let inside: i64 = redis::cmd("INCR").arg("inside").query(&mut c).unwrap();
                if exclusive {
                    assert_eq!(inside, 1, "{owner}: a writer beside another holder");
                } else {
                    assert!(inside <= 3, "{owner}: {inside} holders under LIMIT 3");
                }
                let _: i64 = redis::cmd("DECR").arg("inside").query(&mut c).unwrap();
                let released: i64 = redis::cmd("LOCK.RELEASE")
                    .arg("sem")
                    .arg(&owner)
                    .query(&mut c)
                    .unwrap();
                assert_eq!(released, 1);
            }
        })
    };
    let mut threads: Vec<_> = (0..6).map(|i| worker(i, false, 40)).collect();
    threads.extend((6..8).map(|i| worker(i, true, 15)));
    for t in threads {
        t.join().unwrap();
    }
    let mut c = s.conn();
    assert_eq!(int(&mut c, "EXISTS sem"), 0);
    assert_eq!(info_field(&mut c, "lock", "lock_acquired"), "270");
}

#[test]
fn a_key_that_had_many_holders_gives_their_places_back() {
    // 2026-11-28: 5,000 holders joined and 4,999 left; the one left kept
    // every place (MEMORY USAGE 360,628 bytes for one holder).
    let s = Server::start();
    let mut c = s.conn();
    let mut joins = redis::pipe();
    for i in 0..2000 {
        joins
            .cmd("LOCK.ACQUIRE")
            .arg("sem")
            .arg(format!("h{i}"))
            .arg(60000)
            .arg("SHARED");
    }
    let _: Vec<i64> = joins.query(&mut c).unwrap();
    let full = int(&mut c, "MEMORY USAGE sem");
    let mut leaves = redis::pipe();
    for i in 1..2000 {
        leaves.cmd("LOCK.RELEASE").arg("sem").arg(format!("h{i}"));
    }
    let released: Vec<i64> = leaves.query(&mut c).unwrap();
    assert!(released.iter().all(|&r| r == 1));
    assert_eq!(owners(&mut c, "sem"), ["h0"]);
    let one = int(&mut c, "MEMORY USAGE sem");
    assert!(one < 1024, "{one} bytes for one holder ({full} for 2,000)");
}
