//! LOCK.ACQUIRE ... WAIT: FIFO hand-off inside the server.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A client that sends one command on its own socket and reads the reply
/// later: lets one test thread hold many blocked clients.
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

    fn write(&mut self, words: &[&str]) {
        let mut cmd = format!("*{}\r\n", words.len());
        for w in words {
            cmd.push_str(&format!("${}\r\n{w}\r\n", w.len()));
        }
        self.reader.get_mut().write_all(cmd.as_bytes()).unwrap();
    }

    fn send(port: u16, words: &[&str]) -> Pending {
        let mut p = Pending::connect(port);
        p.write(words);
        p
    }

    fn with_timeout(self, limit: Duration) -> Pending {
        self.reader.get_ref().set_read_timeout(Some(limit)).unwrap();
        self
    }

    /// The next reply as one line: `:1`, `$-1`, `-ERR ...`, or `$` followed
    /// by a bulk string's content. Panics when none arrives in time.
    fn reply(&mut self) -> String {
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .expect("a reply within the read timeout");
        let line = line.trim_end().to_string();
        if line.starts_with('$') && line != "$-1" {
            let mut bulk = String::new();
            self.reader.read_line(&mut bulk).unwrap();
            return format!("${}", bulk.trim_end());
        }
        line
    }

    /// The reply: Some(token) or None for nil.
    fn token(mut self) -> Option<i64> {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        match line.trim_end() {
            "$-1" | "_" => None,
            l if l.starts_with(':') => Some(l[1..].parse().unwrap()),
            other => panic!("unexpected reply {other:?}"),
        }
    }
}

fn waiters(c: &mut redis::Connection, key: &str) -> i64 {
    status(c, key).map_or(-1, |s| s.4)
}

fn wait_for_waiters(c: &mut redis::Connection, key: &str, n: i64) {
    assert!(
        eventually(Duration::from_secs(5), || waiters(c, key) == n),
        "expected {n} waiters"
    );
}

fn owner(c: &mut redis::Connection, key: &str) -> Option<String> {
    status(c, key).map(|s| String::from_utf8(s.0).unwrap())
}

#[test]
fn fifo_order_with_ten_waiters_released_one_by_one() {
    let s = Server::start();
    let mut c = s.conn();
    let first = int(&mut c, "LOCK.ACQUIRE k holder 30000");
    let mut pending = Vec::new();
    for i in 0..10 {
        pending.push(Pending::send(
            s.port,
            &[
                "LOCK.ACQUIRE",
                "k",
                &format!("w{i}"),
                "30000",
                "WAIT",
                "20000",
            ],
        ));
        wait_for_waiters(&mut c, "k", i + 1);
    }
    // Newcomers without WAIT do not barge ahead of the queue.
    assert_eq!(
        q(&mut c, "LOCK.ACQUIRE k barger 30000").unwrap(),
        Value::Nil
    );
    let mut last = first;
    let mut releaser = "holder".to_string();
    for (i, p) in pending.into_iter().enumerate() {
        assert_eq!(int(&mut c, &format!("LOCK.RELEASE k {releaser}")), 1);
        let token = p.token().expect("granted");
        assert!(token > last, "fresh, larger token");
        releaser = format!("w{i}");
        assert_eq!(
            owner(&mut c, "k").as_deref(),
            Some(releaser.as_str()),
            "FIFO"
        );
        assert_eq!(status(&mut c, "k").unwrap().1, token);
        last = token;
    }
    assert_eq!(info_field(&mut c, "lock", "lock_handoffs"), "10");
    assert_eq!(info_field(&mut c, "lock", "lock_waiters"), "0");
}

#[test]
fn timeout_replies_nil_and_leaves_the_queue() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k a 30000");
    let started = Instant::now();
    assert_eq!(
        q(&mut c, "LOCK.ACQUIRE k b 1000 WAIT 150").unwrap(),
        Value::Nil
    );
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(waiters(&mut c, "k"), 0);
    assert_eq!(info_field(&mut c, "lock", "lock_wait_timeouts"), "1");
    assert_eq!(int(&mut c, "LOCK.RELEASE k a"), 1);
    assert_eq!(status(&mut c, "k"), None, "nobody left to hand it to");
}

#[test]
fn a_disconnected_waiter_is_skipped() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k a 30000");
    let w0 = Pending::send(s.port, &["LOCK.ACQUIRE", "k", "w0", "30000", "WAIT", "0"]);
    wait_for_waiters(&mut c, "k", 1);
    let w1 = Pending::send(s.port, &["LOCK.ACQUIRE", "k", "w1", "30000", "WAIT", "0"]);
    wait_for_waiters(&mut c, "k", 2);
    let w2 = Pending::send(s.port, &["LOCK.ACQUIRE", "k", "w2", "30000", "WAIT", "0"]);
    wait_for_waiters(&mut c, "k", 3);
    drop(w1); // the middle of the queue hangs up
    wait_for_waiters(&mut c, "k", 2);
    int(&mut c, "LOCK.RELEASE k a");
    assert!(w0.token().is_some());
    int(&mut c, "LOCK.RELEASE k w0");
    assert!(w2.token().is_some());
    assert_eq!(owner(&mut c, "k").as_deref(), Some("w2"));
}

#[test]
fn a_grant_to_a_client_that_just_left_is_passed_on() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k a 30000");
    let gone = Pending::send(s.port, &["LOCK.ACQUIRE", "k", "gone", "30000", "WAIT", "0"]);
    wait_for_waiters(&mut c, "k", 1);
    let next = Pending::send(s.port, &["LOCK.ACQUIRE", "k", "next", "30000", "WAIT", "0"]);
    wait_for_waiters(&mut c, "k", 2);
    // Release and hang up in the same event-loop turn: with the server
    // stopped, both are pending when it resumes. The RELEASE connection
    // exists already, so the server reads it first and hands the lock to
    // `gone` before it sees `gone` hang up.
    let mut release = Pending::connect(s.port);
    q(&mut c, "PING").unwrap();
    s.signal("STOP");
    release.write(&["LOCK.RELEASE", "k", "a"]);
    drop(gone);
    std::thread::sleep(Duration::from_millis(50));
    s.signal("CONT");
    assert_eq!(release.token(), Some(1));
    assert!(
        next.token().is_some(),
        "the lock reaches the next live waiter"
    );
    assert_eq!(
        info_field(&mut c, "lock", "lock_handoffs"),
        "2",
        "handed to `gone`, taken back, handed to `next`"
    );
    assert_eq!(owner(&mut c, "k").as_deref(), Some("next"));
}

#[test]
fn expiry_hands_off_on_the_module_timer() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k a 300");
    let acquired = Instant::now();
    let (tx, rx) = mpsc::channel();
    let port = s.port;
    std::thread::spawn(move || {
        let t = Pending::send(port, &["LOCK.ACQUIRE", "k", "b", "30000", "WAIT", "5000"]).token();
        tx.send((t, Instant::now())).unwrap();
    });
    let (token, at) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let waited = at - acquired;
    assert!(token.is_some());
    assert!(
        waited >= Duration::from_millis(295),
        "not before the deadline: {waited:?}"
    );
    assert!(
        waited < Duration::from_millis(400),
        "promptly after it: {waited:?}"
    );
}

#[test]
fn del_flushall_and_overwrite_wake_the_queue() {
    let s = Server::start();
    let mut c = s.conn();
    for (round, free) in ["DEL k", "UNLINK k", "FLUSHALL", "FLUSHDB ASYNC"]
        .iter()
        .enumerate()
    {
        int(&mut c, &format!("LOCK.ACQUIRE k holder{round} 30000"));
        let w = Pending::send(
            s.port,
            &["LOCK.ACQUIRE", "k", "next", "30000", "WAIT", "5000"],
        );
        wait_for_waiters(&mut c, "k", 1);
        q(&mut c, free).unwrap();
        assert!(w.token().is_some(), "{free}");
        assert_eq!(owner(&mut c, "k").as_deref(), Some("next"), "{free}");
        q(&mut c, "DEL k").unwrap();
    }
    int(&mut c, "LOCK.ACQUIRE k holder 30000");
    let w = Pending::send(
        s.port,
        &["LOCK.ACQUIRE", "k", "next", "30000", "WAIT", "5000"],
    );
    wait_for_waiters(&mut c, "k", 1);
    q(&mut c, "SET k plain").unwrap();
    let mut line = String::new();
    let mut r = w.reader;
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("-WRONGTYPE"), "{line}");
}

#[test]
fn reentrant_holder_keeps_the_lock_until_its_last_release() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k a 30000 REENTRANT");
    let w = Pending::send(s.port, &["LOCK.ACQUIRE", "k", "b", "30000", "WAIT", "5000"]);
    wait_for_waiters(&mut c, "k", 1);
    int(&mut c, "LOCK.ACQUIRE k a 30000 REENTRANT"); // the holder may re-enter
    assert_eq!(int(&mut c, "LOCK.RELEASE k a"), 1);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(owner(&mut c, "k").as_deref(), Some("a"), "one hold left");
    assert_eq!(int(&mut c, "LOCK.RELEASE k a"), 1);
    assert!(w.token().is_some());
    assert_eq!(owner(&mut c, "k").as_deref(), Some("b"));
}

#[test]
fn wait_inside_multi_is_a_plain_try() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k a 30000");
    let started = Instant::now();
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("b")
        .arg(1000)
        .arg("WAIT")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(replies, vec![Value::Nil]);
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(waiters(&mut c, "k"), 0);
}

#[test]
fn a_thousand_waiters_are_each_served_exactly_once() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k w-1 30000");
    let n = 1000;
    let mut pending: Vec<Option<Pending>> = (0..n)
        .map(|i| {
            Some(Pending::send(
                s.port,
                &["LOCK.ACQUIRE", "k", &format!("w{i}"), "30000", "WAIT", "0"],
            ))
        })
        .collect();
    wait_for_waiters(&mut c, "k", n as i64);
    // PING stays fast with a thousand clients blocked.
    let t = Instant::now();
    q(&mut c, "PING").unwrap();
    assert!(t.elapsed() < Duration::from_millis(50));
    let mut holder = "w-1".to_string();
    let mut served = std::collections::HashSet::new();
    for _ in 0..n {
        assert_eq!(int(&mut c, &format!("LOCK.RELEASE k {holder}")), 1);
        holder = owner(&mut c, "k").expect("handed to a waiter");
        let i: usize = holder[1..].parse().unwrap();
        let token = pending[i].take().expect("served once").token().unwrap();
        assert_eq!(status(&mut c, "k").unwrap().1, token);
        assert!(served.insert(i));
    }
    assert_eq!(served.len(), n);
    assert_eq!(info_field(&mut c, "lock", "lock_waiters"), "0");
}

#[test]
fn replica_matches_primary_after_hand_offs() {
    let primary = Server::start();
    let replica = Server::replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    int(&mut p, "LOCK.ACQUIRE k w0 30000");
    let pending: Vec<Pending> = (1..=5)
        .map(|i| {
            let w = Pending::send(
                primary.port,
                &["LOCK.ACQUIRE", "k", &format!("w{i}"), "30000", "WAIT", "0"],
            );
            wait_for_waiters(&mut p, "k", i);
            w
        })
        .collect();
    for (i, w) in pending.into_iter().enumerate() {
        int(&mut p, &format!("LOCK.RELEASE k w{i}"));
        w.token().unwrap();
    }
    q(&mut p, "WAIT 1 2000").unwrap();
    let (po, pt, ..) = status(&mut p, "k").unwrap();
    let (ro, rt, ..) = status(&mut r, "k").unwrap();
    assert_eq!((po.as_slice(), pt), (ro.as_slice(), rt));
    assert_eq!(po, b"w5");
}

/// Ids of the clients blocked in LOCK.ACQUIRE.
fn blocked_waiter_ids(c: &mut redis::Connection) -> Vec<String> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(c).unwrap();
    list.lines()
        .filter(|l| l.contains("cmd=lock.acquire") && l.contains("flags=b"))
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .map(str::to_string)
        .collect()
}

fn used_memory(c: &mut redis::Connection) -> i64 {
    info_field(c, "memory", "used_memory").parse().unwrap()
}

/// Queue `n` waiters on `key` (WAIT 0), each on its own connection.
fn queue_waiters(port: u16, c: &mut redis::Connection, key: &str, n: usize) -> Vec<Pending> {
    let before = waiters(c, key);
    let pending = (0..n)
        .map(|i| {
            Pending::send(
                port,
                &["LOCK.ACQUIRE", key, &format!("q{i}"), "1000", "WAIT", "0"],
            )
        })
        .collect();
    wait_for_waiters(c, key, before + n as i64);
    pending
}

/// Item 8 of issue #10: every way a waiter leaves without the lock
/// (timeout, disconnect, CLIENT KILL, CLIENT UNBLOCK) used to leak its
/// blocked-client handle and two temporary clients (~35 KB).
#[test]
fn waiters_that_leave_without_the_lock_give_their_memory_back() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k holder 600000");
    let round = |c: &mut redis::Connection, timeouts: usize, per_kind: usize| {
        // Timeouts: 50 connections, each pipelining its WAIT 1 requests.
        let mut conns: Vec<Pending> = (0..50).map(|_| Pending::connect(s.port)).collect();
        for p in conns.iter_mut() {
            for _ in 0..timeouts / 50 {
                p.write(&["LOCK.ACQUIRE", "k", "w", "1000", "WAIT", "1"]);
            }
        }
        for p in conns.iter_mut() {
            for _ in 0..timeouts / 50 {
                assert_eq!(p.reply(), "$-1", "a timed-out WAIT replies nil");
            }
        }
        // Disconnects, in batches of 200.
        for _ in 0..per_kind.div_ceil(200) {
            drop(queue_waiters(s.port, c, "k", 200));
            wait_for_waiters(c, "k", 0);
        }
        // CLIENT KILL, CLIENT UNBLOCK (TIMEOUT and ERROR).
        for kind in ["KILL", "UNBLOCK-TIMEOUT", "UNBLOCK-ERROR"] {
            let pending = queue_waiters(s.port, c, "k", per_kind / 2);
            for id in blocked_waiter_ids(c) {
                let cmd = match kind {
                    "KILL" => format!("CLIENT KILL ID {id}"),
                    "UNBLOCK-TIMEOUT" => format!("CLIENT UNBLOCK {id} TIMEOUT"),
                    _ => format!("CLIENT UNBLOCK {id} ERROR"),
                };
                assert_eq!(int(c, &cmd), 1, "{cmd}");
            }
            wait_for_waiters(c, "k", 0);
            for mut p in pending {
                match kind {
                    "UNBLOCK-TIMEOUT" => assert_eq!(p.reply(), "$-1"),
                    "UNBLOCK-ERROR" => assert!(p.reply().starts_with("-UNBLOCKED")),
                    _ => {}
                }
            }
        }
    };
    // Warm up (client pools, allocator classes), then measure.
    round(&mut c, 100, 200);
    std::thread::sleep(Duration::from_millis(1500));
    let before = used_memory(&mut c);
    round(&mut c, 5000, 2000); // 5000 + 2000 + 3 x 1000 = 10,000 waiters
    assert_eq!(waiters(&mut c, "k"), 0);
    // Redis trims its pool of spare temporary clients on its cron (50 per
    // tick), so allow it a few seconds to settle.
    let mut after = 0;
    let settled = eventually(Duration::from_secs(15), || {
        after = used_memory(&mut c);
        after - before < 1 << 20
    });
    eprintln!("used_memory {before} before, {after} after 10,000 waiters left");
    assert!(
        settled,
        "used_memory {before} before, {after} after 10,000 waiters left"
    );
    assert_eq!(owner(&mut c, "k").as_deref(), Some("holder"));
}

/// Item 7 of issue #10: the lock is freed and the WAIT times out while the
/// server is stopped, so both are due in one event-loop pass. The waiter
/// gets exactly one reply (the token or nil), before the pipelined ECHO.
#[test]
fn a_hand_off_and_a_wait_timeout_in_one_pass_give_exactly_one_reply() {
    let s = Server::start();
    let mut c = s.conn();
    for round in 0..3 {
        let key = format!("s{round}");
        int(&mut c, &format!("LOCK.ACQUIRE {key} holder 200"));
        let mut w = Pending::connect(s.port).with_timeout(Duration::from_secs(5));
        w.write(&["LOCK.ACQUIRE", &key, "waiter", "5000", "WAIT", "400"]);
        w.write(&["ECHO", "after"]);
        wait_for_waiters(&mut c, &key, 1);
        s.signal("STOP");
        std::thread::sleep(Duration::from_millis(800));
        s.signal("CONT");
        let first = w.reply();
        assert_eq!(w.reply(), "$after", "round {round}: then the ECHO");
        match first.strip_prefix(':') {
            Some(token) => {
                let (o, t, ..) = status(&mut c, &key).expect("granted");
                assert_eq!((o.as_slice(), t), (&b"waiter"[..], token.parse().unwrap()));
            }
            None => {
                assert_eq!(first, "$-1", "round {round}: token or nil");
                assert_eq!(status(&mut c, &key), None, "round {round}: no lost grant");
            }
        }
    }
    assert_eq!(info_field(&mut c, "lock", "lock_waiters"), "0");
}

/// WAIT timeouts used to fire only when the event loop woke up, at the
/// server's `hz` (every 100 ms at hz 10).
#[test]
fn wait_timeouts_fire_on_time_not_on_the_hz_tick() {
    let s = Server::with(&["--hz", "10"], &[]);
    let mut c = s.conn();
    let mut w = s.conn();
    int(&mut c, "LOCK.ACQUIRE k a 60000");
    let started = Instant::now();
    for _ in 0..10 {
        let t = Instant::now();
        assert_eq!(
            q(&mut w, "LOCK.ACQUIRE k b 1000 WAIT 20").unwrap(),
            Value::Nil
        );
        assert!(
            t.elapsed() >= Duration::from_millis(20),
            "{:?}",
            t.elapsed()
        );
    }
    let total = started.elapsed();
    eprintln!("10 x WAIT 20 at hz 10 took {total:?}");
    // On time: ~10 x 21 ms. On the hz tick it was ~10 x 100 ms.
    assert!(
        total < Duration::from_millis(600),
        "10 x WAIT 20 took {total:?}"
    );
    assert_eq!(info_field(&mut c, "lock", "lock_wait_timeouts"), "10");
}

/// SWAPDB swaps whole databases under the waiters: each waiter keeps its db
/// index and is settled at once, not at the old lock's deadline.
#[test]
fn swapdb_settles_the_waiters_of_both_databases() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k holder0 60000");
    let w0 = Pending::send(s.port, &["LOCK.ACQUIRE", "k", "w0", "60000", "WAIT", "0"])
        .with_timeout(Duration::from_secs(5));
    wait_for_waiters(&mut c, "k", 1);
    q(&mut c, "SELECT 1").unwrap();
    int(&mut c, "LOCK.ACQUIRE j holder1 60000");
    let mut w1 = Pending::connect(s.port).with_timeout(Duration::from_secs(5));
    w1.write(&["SELECT", "1"]);
    assert_eq!(w1.reply(), "+OK");
    w1.write(&["LOCK.ACQUIRE", "j", "w1", "60000", "WAIT", "0"]);
    wait_for_waiters(&mut c, "j", 1);

    let started = Instant::now();
    q(&mut c, "SWAPDB 0 1").unwrap();
    let t0 = w0.token().expect("w0 granted after the swap");
    let t1 = w1.token().expect("w1 granted after the swap");
    assert!(started.elapsed() < Duration::from_secs(2));
    // db 1 now holds the old db 0 (holder0's k) plus w1's grant of j.
    assert_eq!(status(&mut c, "j").unwrap().0, b"w1");
    assert_eq!(status(&mut c, "j").unwrap().1, t1);
    assert_eq!(owner(&mut c, "k").as_deref(), Some("holder0"));
    q(&mut c, "SELECT 0").unwrap();
    assert_eq!(status(&mut c, "k").unwrap().0, b"w0");
    assert_eq!(status(&mut c, "k").unwrap().1, t0);
    assert_eq!(owner(&mut c, "j").as_deref(), Some("holder1"));
    // Newcomers are not turned away by a stale queue.
    int(&mut c, "LOCK.RELEASE k w0");
    assert!(int(&mut c, "LOCK.ACQUIRE k new 1000") > t0);
}

/// While writes are paused nothing may be propagated (Redis asserts and
/// dies, with an AOF or a replica): the hand-off waits for the pause.
#[test]
fn a_write_pause_defers_the_hand_off_and_the_server_survives() {
    let primary = Server::with(&["--appendonly", "yes"], &[]);
    let replica = Server::replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    int(&mut p, "LOCK.ACQUIRE k holder 300");
    let w = Pending::send(
        primary.port,
        &["LOCK.ACQUIRE", "k", "waiter", "30000", "WAIT", "10000"],
    )
    .with_timeout(Duration::from_secs(10));
    wait_for_waiters(&mut p, "k", 1);
    let paused = Instant::now();
    q(&mut p, "CLIENT PAUSE 1500 WRITE").unwrap();
    let token = w.token().expect("granted once the pause is over");
    let waited = paused.elapsed();
    assert!(
        waited >= Duration::from_millis(1450),
        "not during the pause: {waited:?}"
    );
    assert!(
        waited < Duration::from_millis(3000),
        "promptly after: {waited:?}"
    );
    assert_eq!(
        q(&mut p, "PING").unwrap(),
        Value::SimpleString("PONG".into())
    );
    q(&mut p, "WAIT 1 2000").unwrap();
    let (po, pt, ..) = status(&mut p, "k").unwrap();
    assert_eq!((po.as_slice(), pt), (&b"waiter"[..], token));
    let (ro, rt, ..) = status(&mut r, "k").expect("replica has the grant");
    assert_eq!((ro.as_slice(), rt), (&b"waiter"[..], token));
}

/// A grant whose client left is taken back on a timer; while writes are
/// paused that take-back (a DEL, propagated) waits for the pause to end.
#[test]
fn a_take_back_during_a_write_pause_waits_for_its_end() {
    let s = Server::with(&["--appendonly", "yes"], &[]);
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k a 30000");
    let gone = Pending::send(s.port, &["LOCK.ACQUIRE", "k", "gone", "30000", "WAIT", "0"]);
    wait_for_waiters(&mut c, "k", 1);
    let next = Pending::send(s.port, &["LOCK.ACQUIRE", "k", "next", "30000", "WAIT", "0"])
        .with_timeout(Duration::from_secs(10));
    wait_for_waiters(&mut c, "k", 2);
    // In one event-loop pass (server stopped): the release hands the lock
    // to `gone`, `gone` hangs up, and writes get paused. The take-back then
    // runs while paused.
    let mut release = Pending::connect(s.port);
    let mut pause = Pending::connect(s.port);
    q(&mut c, "PING").unwrap();
    s.signal("STOP");
    release.write(&["LOCK.RELEASE", "k", "a"]);
    drop(gone);
    pause.write(&["CLIENT", "PAUSE", "1000", "WRITE"]);
    std::thread::sleep(Duration::from_millis(50));
    let resumed = Instant::now();
    s.signal("CONT");
    assert_eq!(release.reply(), ":1");
    assert_eq!(pause.reply(), "+OK");
    assert!(
        next.token().is_some(),
        "the lock reaches the next live waiter"
    );
    let waited = resumed.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "after the pause: {waited:?}"
    );
    assert_eq!(
        q(&mut c, "PING").unwrap(),
        Value::SimpleString("PONG".into())
    );
    assert_eq!(owner(&mut c, "k").as_deref(), Some("next"));
    assert_eq!(info_field(&mut c, "lock", "lock_handoffs"), "2");
}
