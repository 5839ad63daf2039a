//! Section 6: what a client waiting in `LOCK.ACQUIRE ... WAIT` costs the
//! server, beside one waiting in `BLPOP` and one merely connected, and how
//! long that memory takes to come back once the waiters leave.
//!
//! `used_memory` deltas over `n` clients on a fresh server: once every
//! client is blocked (its query and reply buffers still at their first
//! size) and again after `SETTLE` (the server's client cron has trimmed the
//! idle buffers). Then the clients disconnect, and the time until
//! `used_memory` is back within `BACK_WITHIN` of the baseline is taken,
//! bounded by `GIVE_UP`, and what is left `DRAINED` later.

use redis_lock_testkit::Server;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Idle query buffers are freed after 2 s, and reply buffers shrunk on a
/// 5 s peak window (Redis 7.0 `clientsCron`, every client once a second).
const SETTLE: Duration = Duration::from_secs(7);
/// Back means within 1 MB of the baseline.
const BACK_WITHIN: i64 = 1 << 20;
/// Looked at again this long after it was back, for what stays.
const DRAINED: Duration = Duration::from_secs(3);
/// Longest wait for memory to come back.
const GIVE_UP: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    /// Connected, one `PING` answered, nothing else.
    Idle,
    /// Blocked in `BLPOP list 0`.
    Blpop,
    /// Blocked in `LOCK.ACQUIRE held owner 60000 WAIT 0`.
    LockWait,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Idle => "connected, idle",
            Kind::Blpop => "BLPOP waiter",
            Kind::LockWait => "LOCK.ACQUIRE ... WAIT waiter",
        }
    }
}

pub struct Row {
    pub kind: Kind,
    pub clients: usize,
    /// Bytes of `used_memory` per client once all are blocked (idle: answered).
    pub blocked: f64,
    /// The same after `SETTLE`.
    pub settled: f64,
    /// From the last disconnect until `used_memory` was back within
    /// `BACK_WITHIN` of the baseline; None if not within `GIVE_UP`.
    pub back_after: Option<Duration>,
    /// `used_memory` above the baseline `DRAINED` after it was back (or
    /// after `GIVE_UP`).
    pub left_bytes: i64,
}

fn info(c: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let text: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

fn used(c: &mut redis::Connection) -> i64 {
    info(c, "memory", "used_memory")
}

fn resp(words: &[&str]) -> String {
    let mut cmd = format!("*{}\r\n", words.len());
    for w in words {
        cmd += &format!("${}\r\n{w}\r\n", w.len());
    }
    cmd
}

/// `n` clients of `kind`, each on its own connection, all of them blocked
/// (or, idle, answered) when this returns.
fn clients(port: u16, c: &mut redis::Connection, kind: Kind, n: usize) -> Vec<TcpStream> {
    let conns: Vec<TcpStream> = (0..n)
        .map(|i| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let owner = format!("w{i}");
            let cmd = match kind {
                Kind::Idle => resp(&["PING"]),
                Kind::Blpop => resp(&["BLPOP", "list", "0"]),
                Kind::LockWait => resp(&["LOCK.ACQUIRE", "held", &owner, "60000", "WAIT", "0"]),
            };
            s.write_all(cmd.as_bytes()).unwrap();
            s
        })
        .collect();
    let (section, field) = match kind {
        Kind::Idle => {
            for mut s in &conns {
                let mut pong = [0u8; 7]; // +PONG\r\n
                s.read_exact(&mut pong).unwrap();
            }
            return conns;
        }
        Kind::Blpop => ("clients", "blocked_clients"),
        Kind::LockWait => ("lock", "lock_waiters"),
    };
    let started = Instant::now();
    while info(c, section, field) < n as i64 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "clients did not block"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    conns
}

fn measure(kind: Kind, n: usize) -> Row {
    // A fresh server per kind: nothing pooled from the one before.
    let server = Server::with(&["--maxclients", "20100"], &[]);
    let mut c = server.conn();
    if kind == Kind::LockWait {
        redis::cmd("LOCK.ACQUIRE")
            .arg("held")
            .arg("holder")
            .arg(600_000)
            .query::<i64>(&mut c)
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    let base = used(&mut c);
    let conns = clients(server.port, &mut c, kind, n);
    let blocked = (used(&mut c) - base) as f64 / n as f64;
    std::thread::sleep(SETTLE);
    let settled = (used(&mut c) - base) as f64 / n as f64;
    drop(conns);
    let left = Instant::now();
    let mut now_used = used(&mut c);
    while now_used - base > BACK_WITHIN && left.elapsed() < GIVE_UP {
        std::thread::sleep(Duration::from_millis(100));
        now_used = used(&mut c);
    }
    let back_after = (now_used - base <= BACK_WITHIN).then(|| left.elapsed());
    // What stays for good: the server's pool drains on for a moment.
    std::thread::sleep(DRAINED);
    Row {
        kind,
        clients: n,
        blocked,
        settled,
        back_after,
        left_bytes: used(&mut c) - base,
    }
}

pub fn run(n: usize) -> Vec<Row> {
    [Kind::Idle, Kind::Blpop, Kind::LockWait]
        .into_iter()
        .map(|kind| measure(kind, n))
        .collect()
}
