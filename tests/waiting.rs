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
