//! redis-lock-chaos: mutual exclusion under faults, checked.
//!
//! Starts N servers with the module (each under the clock shim), a fenced
//! resource that rejects tokens below the highest it accepted, and worker
//! processes that loop acquire -> write -> hold -> write -> release with the
//! quorum client, logging every window: writers take `chaos` exclusively,
//! readers take it shared (a read-write lock: a reader reads the resource
//! instead of writing it), and limited workers take `chaos:pool` shared
//! under `LIMIT n` (a semaphore). Meanwhile nemeses pause clients past
//! their TTL, pause a minority of servers, crash-restart a minority without
//! persistence, and jump one server's wall clock. At the end the logs are
//! analysed (testkit::chaos) and the run exits 1 on any violation.
//!
//! `--unsafe no-guard` crash-restarts a majority with the restart guard off;
//! `--unsafe setnx-clock` uses plain `SET NX PX` locks on one server whose
//! clock jumps ahead. Both must be caught.

use clap::{Parser, ValueEnum};
use rand::seq::IndexedRandom;
use rand::RngExt;
use redis_lock_client::{Builder, Error, LockOptions};
use redis_lock_testkit::chaos::{self, Hold, Record, Write, WriteResult};
use redis_lock_testkit::shim::ClockOffset;
use redis_lock_testkit::Server;
use std::io::{BufRead, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
enum Unsafe {
    None,
    NoGuard,
    SetnxClock,
}

#[derive(Parser, Debug)]
#[command(
    about = "Chaos checker for redis-lock: proves (or disproves) mutual exclusion under faults"
)]
struct Args {
    /// How long the workers run.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Writers: exclusive holders of `chaos`.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Readers: shared holders of `chaos`, beside the writers.
    #[arg(long, default_value_t = 2)]
    readers: usize,
    /// Semaphore workers: shared holders of `chaos:pool` under `--limit`.
    #[arg(long, default_value_t = 3)]
    limited: usize,
    /// The semaphore's `LIMIT`.
    #[arg(long, default_value_t = 2)]
    limit: u32,
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// Lock TTL in ms.
    #[arg(long, default_value_t = 1000)]
    ttl: u64,
    #[arg(long, value_enum, default_value_t = Unsafe::None)]
    r#unsafe: Unsafe,
    /// Share of acquisitions that wait in the servers' queues (the rest try
    /// once and poll). Queued waiters rarely overlap a holder even when a
    /// majority loses its state, so the unsafe runs default to polling only.
    #[arg(long)]
    queued_share: Option<f64>,
    #[command(subcommand)]
    worker: Option<Worker>,
}

#[derive(clap::Subcommand, Debug)]
enum Worker {
    /// (internal) one worker process
    Worker {
        #[arg(long, value_delimiter = ',')]
        servers: Vec<String>,
        #[arg(long)]
        fenced: u16,
        #[arg(long)]
        log: PathBuf,
        #[arg(long)]
        ttl: u64,
        #[arg(long)]
        seconds: u64,
        #[arg(long)]
        setnx: bool,
        #[arg(long)]
        queued_share: f64,
        /// `x` (exclusive), `s` (shared) or `l<n>` (shared under LIMIT n).
        #[arg(long, default_value = "x")]
        hold: String,
    },
}

/// Machine-wide monotonic nanoseconds (comparable across processes).
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: plain clock_gettime into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.worker {
        Some(Worker::Worker {
            servers,
            fenced,
            log,
            ttl,
            seconds,
            setnx,
            queued_share,
            hold,
        }) => {
            let Some(hold) = Hold::parse(&hold) else {
                eprintln!("--hold x|s|l<n>, not {hold}");
                return ExitCode::from(2);
            };
            let run = Run {
                ttl,
                seconds,
                setnx,
                queued_share,
                hold,
            };
            worker(&servers, fenced, &log, &run);
            ExitCode::SUCCESS
        }
        None => orchestrate(&args),
    }
}

// ---------------------------------------------------------------- fenced resource

/// A resource fenced for a read-write lock: `W <token>\n` (a write) is
/// accepted only if its token is >= every token it has accepted, read or
/// write; `R <token>\n` (a read) only if its token is >= the highest write's
/// (readers do not fence each other out). Reply `OK\n` | `STALE\n`.
fn fenced_resource() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let highest = Arc::new(Highest::default());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let highest = highest.clone();
            std::thread::spawn(move || serve_fenced(conn, &highest));
        }
    });
    port
}

/// The highest tokens the resource accepted: (any operation, writes).
#[derive(Default)]
struct Highest(Mutex<(u64, u64)>);

impl Highest {
    fn accept(&self, write: bool, token: u64) -> bool {
        let mut h = self.0.lock().unwrap();
        let (any, writes) = &mut *h;
        let accepted = token >= if write { *any } else { *writes };
        if accepted {
            *any = (*any).max(token);
            if write {
                *writes = token;
            }
        }
        accepted
    }
}

fn serve_fenced(conn: TcpStream, highest: &Highest) {
    let mut out = conn.try_clone().unwrap();
    for line in BufReader::new(conn).lines().map_while(Result::ok) {
        let (op, token) = line.split_once(' ').unwrap_or(("W", "0"));
        let token: u64 = token.trim().parse().unwrap_or(0);
        let accepted = highest.accept(op != "R", token);
        if out
            .write_all(if accepted { b"OK\n" } else { b"STALE\n" })
            .is_err()
        {
            return;
        }
    }
}

// ---------------------------------------------------------------- worker

struct Fenced {
    out: TcpStream,
    input: BufReader<TcpStream>,
}

impl Fenced {
    fn connect(port: u16) -> Fenced {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        Fenced {
            out: s.try_clone().unwrap(),
            input: BufReader::new(s),
        }
    }

    /// A write (`W`) or a read (`R`) with `token`.
    fn op(&mut self, op: char, token: u64) -> Write {
        let at = mono_ns();
        self.out
            .write_all(format!("{op} {token}\n").as_bytes())
            .unwrap();
        let mut reply = String::new();
        self.input.read_line(&mut reply).unwrap();
        let result = if reply.starts_with("OK") {
            WriteResult::Accepted
        } else {
            WriteResult::Rejected
        };
        Write { at, result }
    }
}

/// What a worker holds: a quorum lock, or a plain SET NX PX owner and the
/// end of its validity.
enum Held {
    Quorum(redis_lock_client::Lock),
    Plain(String, Instant),
}

impl Held {
    /// How much validity is left now.
    fn validity(&self) -> Duration {
        match self {
            Held::Quorum(lock) => lock.validity(),
            Held::Plain(_, until) => until.saturating_duration_since(Instant::now()),
        }
    }
}

/// What one worker process does.
struct Run {
    ttl: u64,
    seconds: u64,
    setnx: bool,
    queued_share: f64,
    hold: Hold,
}

impl Run {
    /// The name this worker's kind of hold is taken on.
    fn name(&self) -> &'static str {
        match self.hold {
            Hold::Limited(_) => "chaos:pool",
            Hold::Exclusive | Hold::Shared => "chaos",
        }
    }

    /// The options of one acquisition, before the owner and wait.
    fn options(&self) -> LockOptions {
        match self.hold {
            Hold::Exclusive => LockOptions::new(),
            Hold::Shared => LockOptions::shared(),
            Hold::Limited(n) => LockOptions::new().limit(n),
        }
    }
}

fn worker(servers: &[String], fenced_port: u16, log: &PathBuf, run: &Run) {
    let (seconds, setnx, queued_share) = (run.seconds, run.setnx, run.queued_share);
    let name = run.name();
    let mut log = std::fs::File::create(log).unwrap();
    let mut fenced = Fenced::connect(fenced_port);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ttl = Duration::from_millis(run.ttl);
    let locker = Builder::new(servers)
        .ttl(ttl)
        .node_timeout(ttl / 10)
        .build()
        .unwrap();
    let mut plain = setnx.then(|| {
        redis::Client::open(servers[0].as_str())
            .unwrap()
            .get_connection()
            .unwrap()
    });
    let stop = Instant::now() + Duration::from_secs(seconds);
    let mut rng = rand::rng();
    let own = format!("chaos-worker-{}", std::process::id());
    while Instant::now() < stop {
        let requested = mono_ns();
        let acquired = match plain.as_mut() {
            Some(con) => {
                setnx_lock(con, ttl).map(|(owner, token, until)| (Held::Plain(owner, until), token))
            }
            // Some acquisitions wait in the servers' queues, the others try
            // once and poll: both kinds meet on the same key. A third use
            // the worker's own owner, the same in every call (what a
            // RELEASE left travelling by one call must not take from a
            // later one); the rest a generated one.
            None => rt
                .block_on(async {
                    let mut opts = run.options();
                    if rng.random_bool(1.0 / 3.0) {
                        opts = opts.owner(own.as_str());
                    }
                    if rng.random_bool(queued_share) {
                        locker.acquire(name, &opts.wait(ttl)).await
                    } else {
                        let got = locker.acquire(name, &opts).await;
                        if got.is_err() {
                            // A polling client's pause (rslock, redsync: ~50-250 ms).
                            let pause = rng.random_range(20..=200);
                            tokio::time::sleep(Duration::from_millis(pause)).await;
                        }
                        got
                    }
                })
                .map(|l| {
                    let token = l.token();
                    (Held::Quorum(l), token)
                }),
        };
        let (held, token) = match acquired {
            Ok(got) => got,
            Err(e) => {
                let kind = match e {
                    Error::NoQuorum { .. } => "no-quorum",
                    Error::Taken => "taken",
                    _ => "other",
                };
                writeln!(log, "ERR {kind} {e}").unwrap();
                continue;
            }
        };
        // The clock first, the validity left after: a worker descheduled
        // (or SIGSTOPped) between the two then shortens its window instead
        // of stretching it past the lock's real end. Read the other way
        // round, a 40 s run on a loaded machine logged an overlap and a
        // token regression that never happened.
        let acquired_at = mono_ns();
        let valid_until = acquired_at + held.validity().as_nanos() as u64;
        // Writers write, readers read; a semaphore's permit guards no
        // shared resource here (its check is the count of holders).
        let touch = |fenced: &mut Fenced| match run.hold {
            Hold::Exclusive => fenced.op('W', token),
            Hold::Shared => fenced.op('R', token),
            Hold::Limited(_) => Write {
                at: mono_ns(),
                result: WriteResult::Skipped,
            },
        };
        let first = touch(&mut fenced);
        let hold_ms = rng.random_range(1..=(ttl.as_millis() as u64 / 5).max(2));
        std::thread::sleep(Duration::from_millis(hold_ms));
        // A worker paused here past its TTL comes back and writes anyway.
        let last = touch(&mut fenced);
        let released = mono_ns();
        let owner = match held {
            Held::Plain(owner, _) => {
                setnx_unlock(plain.as_mut().unwrap(), &owner);
                owner
            }
            Held::Quorum(lock) => {
                let _ = rt.block_on(locker.unlock(&lock));
                lock.owner().to_string()
            }
        };
        let record = Record {
            owner,
            token,
            requested,
            acquired: acquired_at,
            valid_until,
            released,
            writes: [first, last],
            hold: run.hold,
            name: name.to_string(),
        };
        writeln!(log, "{}", record.to_line()).unwrap();
    }
}

/// A plain `SET NX PX` lock: its owner, a token from `INCR`, and the end
/// of its validity.
fn setnx_lock(con: &mut redis::Connection, ttl: Duration) -> Result<(String, u64, Instant), Error> {
    let owner = redis_lock_client::random_owner();
    let start = Instant::now();
    loop {
        let ok: Option<String> = redis::cmd("SET")
            .arg("chaos")
            .arg(&owner)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis() as u64)
            .query(con)?;
        if ok.is_some() {
            let token: u64 = redis::cmd("INCR").arg("chaos:token").query(con)?;
            let until = start + ttl.saturating_sub(ttl / 100 + Duration::from_millis(2));
            return Ok((owner, token, until));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn setnx_unlock(con: &mut redis::Connection, owner: &str) {
    let script = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    let _: redis::RedisResult<i64> = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("chaos")
        .arg(owner)
        .query(con);
}

// ---------------------------------------------------------------- orchestrator

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Nemesis {
    PauseClient,
    PauseServers,
    CrashRestart,
    ClockJump,
}

/// How far (s) a node's clock may be from the true time. The fencing
/// argument assumes the nodes' clocks within 60 s of each other and none
/// going back across a restart (README, Safety model): the jumps stay in
/// ±25 s, and a node restarts with its clock at the highest it has shown
/// (`Node::peak`), as a rebooted machine comes back NTP-synced. An
/// unbounded walk of ±40 s jumps broke both within minutes: a node
/// restarted 80 s behind granted tokens below earlier holders', and the
/// checker counted regressions the design does not claim to prevent (every
/// client version tried, 6af418c included).
const CLOCK_BAND: i64 = 25;

struct Node {
    server: Server,
    clock: ClockOffset,
    offset: i64,
    /// The highest offset this node's clock has had.
    peak: i64,
}

fn orchestrate(args: &Args) -> ExitCode {
    let setnx = args.r#unsafe == Unsafe::SetnxClock;
    let n = if setnx { 1 } else { args.nodes };
    // A restart delay of twice the TTL lets every pre-crash grant expire.
    let guard_ms = if args.r#unsafe == Unsafe::None {
        2 * args.ttl
    } else {
        0
    };
    let dir = std::env::temp_dir().join(format!("redis-lock-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let guard_arg = guard_ms.to_string();
    let mut nodes: Vec<Node> = (0..n)
        .map(|i| {
            let node_dir = dir.join(format!("node{i}"));
            std::fs::create_dir_all(&node_dir).unwrap();
            let clock = ClockOffset::new(&node_dir);
            let env = clock.env();
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let server = Server::with_env(&[], &["restart-delay-ms", &guard_arg], &env);
            Node {
                server,
                clock,
                offset: 0,
                peak: 0,
            }
        })
        .collect();
    std::thread::sleep(Duration::from_millis(guard_ms)); // the start-up guard
    let fenced = fenced_resource();
    let urls: Vec<String> = nodes.iter().map(|n| n.server.url()).collect();
    let queued_share =
        args.queued_share
            .map(|s| s.clamp(0.0, 1.0))
            .unwrap_or(match args.r#unsafe {
                Unsafe::None => 0.5,
                _ => 0.0,
            });
    let exe = std::env::current_exe().unwrap();
    // Readers and semaphore workers beside the writers (none in the
    // SET NX PX run: a plain string has no shared holds).
    let (readers, limited) = if setnx {
        (0, 0)
    } else {
        (args.readers, args.limited)
    };
    let holds = std::iter::repeat_n(Hold::Exclusive, args.workers)
        .chain(std::iter::repeat_n(Hold::Shared, readers))
        .chain(std::iter::repeat_n(Hold::Limited(args.limit), limited));
    let mut workers: Vec<(Child, PathBuf)> = holds
        .enumerate()
        .map(|(i, hold)| {
            let log = dir.join(format!("worker{i}.log"));
            let mut cmd = Command::new(&exe);
            cmd.arg("worker")
                .arg("--servers")
                .arg(urls.join(","))
                .arg("--fenced")
                .arg(fenced.to_string())
                .arg("--log")
                .arg(&log)
                .arg("--ttl")
                .arg(args.ttl.to_string())
                .arg("--seconds")
                .arg(args.seconds.to_string())
                .arg("--queued-share")
                .arg(queued_share.to_string())
                .arg("--hold")
                .arg(hold.word());
            if setnx {
                cmd.arg("--setnx");
            }
            (cmd.spawn().expect("spawn worker"), log)
        })
        .collect();

    let kinds: &[Nemesis] = match args.r#unsafe {
        Unsafe::None => &[
            Nemesis::PauseClient,
            Nemesis::PauseServers,
            Nemesis::CrashRestart,
            Nemesis::ClockJump,
        ],
        Unsafe::NoGuard => &[Nemesis::CrashRestart],
        Unsafe::SetnxClock => &[Nemesis::ClockJump],
    };
    let ttl = Duration::from_millis(args.ttl);
    let mut rng = rand::rng();
    let mut counts = std::collections::BTreeMap::new();
    let end = Instant::now() + Duration::from_secs(args.seconds);
    while Instant::now() + ttl * 3 < end {
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        let nemesis = *kinds.choose(&mut rng).unwrap();
        *counts.entry(format!("{nemesis:?}")).or_insert(0) += 1;
        match nemesis {
            Nemesis::PauseClient => {
                let pid = workers.choose(&mut rng).unwrap().0.id() as i32;
                signal(pid, libc::SIGSTOP);
                std::thread::sleep(ttl * 2);
                signal(pid, libc::SIGCONT);
            }
            Nemesis::PauseServers => {
                let k = rng.random_range(1..=((n - 1) / 2).max(1));
                let victims = pick(&mut rng, n, k);
                for &v in &victims {
                    nodes[v].server.signal("STOP");
                }
                std::thread::sleep(ttl.mul_f64(rng.random_range(0.2..2.0)));
                for &v in &victims {
                    nodes[v].server.signal("CONT");
                }
            }
            Nemesis::CrashRestart => {
                // A minority normally; a majority in the deliberately unsafe run.
                let k = if args.r#unsafe == Unsafe::NoGuard {
                    n / 2 + 1
                } else {
                    1
                };
                let victims = pick(&mut rng, n, k);
                for &v in &victims {
                    // The clock does not come back behind where it was.
                    let node = &mut nodes[v];
                    if node.offset < node.peak {
                        node.offset = node.peak;
                        node.clock.set(node.offset);
                    }
                    node.server.restart(); // kill -9, start again with no data
                }
            }
            Nemesis::ClockJump => {
                let v = rng.random_range(0..n);
                nodes[v].offset = if setnx {
                    nodes[v].offset + 2 * args.ttl.div_ceil(1000) as i64
                } else {
                    // 25 or 50 s forward or back, every clock within
                    // CLOCK_BAND of the true time (see CLOCK_BAND).
                    let others = [-CLOCK_BAND, 0, CLOCK_BAND].into_iter();
                    let others: Vec<i64> = others.filter(|&o| o != nodes[v].offset).collect();
                    *others.choose(&mut rng).unwrap()
                };
                nodes[v].peak = nodes[v].peak.max(nodes[v].offset);
                nodes[v].clock.set(nodes[v].offset);
            }
        }
    }
    for (child, _) in &mut workers {
        let _ = child.wait();
    }
    let mut lines = Vec::new();
    for (_, log) in &workers {
        lines.extend(
            std::fs::read_to_string(log)
                .unwrap_or_default()
                .lines()
                .map(String::from),
        );
    }
    let report = chaos::analyse(lines.iter().map(String::as_str));
    println!(
        "redis-lock chaos: {} s, {} node(s), {} writers, {} readers, {} semaphore workers (LIMIT {}), ttl {} ms, mode {:?}, restart-delay-ms {}, queued share {}",
        args.seconds, n, args.workers, readers, limited, args.limit, args.ttl, args.r#unsafe, guard_ms, queued_share
    );
    println!("nemeses: {counts:?}");
    println!(
        "| {:<48} | {:>8} |\n|{}|{}|",
        "metric",
        "count",
        "-".repeat(50),
        "-".repeat(10)
    );
    println!("{report}");
    drop(nodes);
    if report.violations() > 0 {
        // Kept for a post-mortem: which windows overlapped, and when.
        println!("worker logs kept in {}", dir.display());
        ExitCode::from(1)
    } else {
        let _ = std::fs::remove_dir_all(&dir);
        ExitCode::SUCCESS
    }
}

/// `k` distinct node indexes out of `n`, at random.
fn pick(rng: &mut impl rand::Rng, n: usize, k: usize) -> Vec<usize> {
    (0..n).collect::<Vec<_>>().sample(rng, k).copied().collect()
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) on a worker process this orchestrator started.
    unsafe { libc::kill(pid, sig) };
}
