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
//! `--topology cluster` locks on one Redis Cluster instead (3 primaries, a
//! replica each: one vote), through slot migrations of the contended
//! names, `CLUSTER FAILOVER` (and `TAKEOVER`) and kill -9 of a primary
//! (also with its replica lagging: the grants it missed are lost);
//! `--topology sentinel` on one Sentinel group, through kill -9 (also with
//! the replica lagging) and SIGSTOP of the primary and `SENTINEL FAILOVER`
//! (testkit::chaos_cluster,
//! testkit::chaos_sentinel). Client pauses in both. The same workers,
//! resource and checker; the table also says what followed each kind of
//! fault.
//!
//! `--unsafe no-guard` crash-restarts a majority with the restart guard off
//! (in a cluster or a group: a lagging replica promoted after its primary
//! was killed, and `SENTINEL FAILOVER`, with the promotion guard off);
//! `--unsafe setnx-clock` uses plain `SET NX PX` locks on one server whose
//! clock jumps ahead. Both must be caught.

use clap::{Parser, ValueEnum};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use redis_lock_client::{Builder, Error, LockOptions};
use redis_lock_testkit::chaos::{self, Hold, Record, Write, WriteResult};
use redis_lock_testkit::chaos_cluster::ChaosCluster;
use redis_lock_testkit::chaos_sentinel::ChaosSentinel;
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

/// What the workers lock on.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
enum Topology {
    /// `--nodes` independent servers (Redlock).
    Servers,
    /// One Redis Cluster: 3 primaries with a replica each, one vote.
    Cluster,
    /// One Sentinel group: a primary, a replica, 3 sentinels, one vote.
    Sentinel,
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
    #[arg(long, value_enum, default_value_t = Topology::Servers)]
    topology: Topology,
    /// Independent servers (`--topology servers`).
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// The faults' order and timing (printed with the results; the workers'
    /// timing is the machine's).
    #[arg(long)]
    seed: Option<u64>,
    /// `lock.restart-delay-ms` (the restart and promotion guard); twice the
    /// TTL unless given.
    #[arg(long)]
    guard_ms: Option<u64>,
    /// Sentinel data servers' `min-replicas-to-write` (with
    /// `min-replicas-max-lag 1`, as docs/production.md says); 0: off.
    #[arg(long, default_value_t = 1)]
    min_replicas: u32,
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
    /// Share of holds in which the worker stalls for twice the TTL between
    /// its two operations (a GC pause inside the critical section), so that
    /// its second one is stale and fencing must turn it away. Default 0 on
    /// independent servers (whose runs pause whole workers instead), 0.02
    /// in a cluster or a Sentinel group.
    #[arg(long)]
    paused_holds: Option<f64>,
    /// Share of holds that last half to nine tenths of the validity left
    /// (the others up to a fifth of the TTL): holders still inside their
    /// lock when a failover's outage ends, as the promotion guard assumes.
    #[arg(long, default_value_t = 0.0)]
    long_holds: f64,
    /// Keep the worker logs, nemeses.log and the servers' logs even when
    /// the run is clean.
    #[arg(long)]
    keep_logs: bool,
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
        #[arg(long, default_value_t = 0.0)]
        paused_holds: f64,
        #[arg(long, default_value_t = 0.0)]
        long_holds: f64,
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
            paused_holds,
            long_holds,
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
                paused_holds,
                long_holds,
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
    paused_holds: f64,
    long_holds: f64,
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
        let hold_ms = if rng.random_bool(run.paused_holds) {
            2 * ttl.as_millis() as u64
        } else if rng.random_bool(run.long_holds) {
            let left = valid_until.saturating_sub(mono_ns()) / 1_000_000;
            (left as f64 * rng.random_range(0.5..0.9)) as u64
        } else {
            rng.random_range(1..=(ttl.as_millis() as u64 / 5).max(2))
        };
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
    /// A contended name's slot moved to another primary, locks and all.
    SlotMigration,
    /// `CLUSTER FAILOVER` of a contended name's primary.
    ClusterFailover,
    /// `CLUSTER FAILOVER TAKEOVER` of a contended name's primary.
    ClusterTakeover,
    /// kill -9 of the primary (a contended name's, in a cluster).
    KillPrimary,
    /// kill -9 of the primary after its replica was stopped 0.2-1 s (it
    /// misses the last grants), then the replica promoted (at once by
    /// `TAKEOVER` in a cluster): the guard's case.
    KillPrimaryLagging,
    /// SIGSTOP of the Sentinel group's primary past the down-after time.
    PausePrimary,
    SentinelFailover,
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

/// What the workers lock on, and the faults it can be put through.
enum Deployment {
    /// Independent servers, each one vote (Redlock).
    Servers(Vec<Node>),
    /// One Redis Cluster, one vote.
    Cluster(ChaosCluster),
    /// One Sentinel group, one vote.
    Sentinel(ChaosSentinel),
}

impl Deployment {
    fn start(args: &Args, guard_ms: u64, dir: &std::path::Path) -> Deployment {
        let guard_arg = guard_ms.to_string();
        let module_args = ["restart-delay-ms", guard_arg.as_str()];
        match args.topology {
            Topology::Servers => {
                let n = if args.r#unsafe == Unsafe::SetnxClock {
                    1
                } else {
                    args.nodes
                };
                Deployment::Servers(
                    (0..n)
                        .map(|i| {
                            let node_dir = dir.join(format!("node{i}"));
                            std::fs::create_dir_all(&node_dir).unwrap();
                            let clock = ClockOffset::new(&node_dir);
                            let env = clock.env();
                            let env: Vec<(&str, &str)> =
                                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                            let server = Server::with_env(&[], &module_args, &env);
                            Node {
                                server,
                                clock,
                                offset: 0,
                                peak: 0,
                            }
                        })
                        .collect(),
                )
            }
            Topology::Cluster => Deployment::Cluster(ChaosCluster::start(&module_args)),
            Topology::Sentinel => {
                // As docs/production.md#sentinel says to configure it: a
                // primary cut off from its replica stops taking writes.
                let n = args.min_replicas.to_string();
                let server_args: Vec<&str> = if args.min_replicas > 0 {
                    vec![
                        "--min-replicas-to-write",
                        n.as_str(),
                        "--min-replicas-max-lag",
                        "1",
                    ]
                } else {
                    Vec::new()
                };
                Deployment::Sentinel(ChaosSentinel::start(&server_args, &module_args))
            }
        }
    }

    fn urls(&self) -> Vec<String> {
        match self {
            Deployment::Servers(nodes) => nodes.iter().map(|n| n.server.url()).collect(),
            Deployment::Cluster(c) => vec![c.url()],
            Deployment::Sentinel(s) => vec![s.url()],
        }
    }

    fn describe(&self) -> String {
        match self {
            Deployment::Servers(nodes) => format!("{} independent server(s)", nodes.len()),
            Deployment::Cluster(_) => {
                "one Redis Cluster (3 primaries, a replica each, node timeout 2 s)".into()
            }
            Deployment::Sentinel(_) => {
                "one Sentinel group (a primary, a replica, 3 sentinels, down after 1 s)".into()
            }
        }
    }

    /// Every server's log (and every sentinel's) into `dir`, for a
    /// post-mortem: promotions, guards, demotions and when.
    fn save_logs(&self, dir: &std::path::Path) {
        let servers: Vec<&Server> = match self {
            Deployment::Servers(nodes) => nodes.iter().map(|n| &n.server).collect(),
            Deployment::Cluster(c) => c.nodes.iter().collect(),
            Deployment::Sentinel(s) => s.group.data.iter().collect(),
        };
        for s in servers {
            let _ = std::fs::write(dir.join(format!("server-{}.log", s.port)), s.log());
        }
        if let Deployment::Sentinel(s) = self {
            for sentinel in &s.group.sentinels {
                let path = dir.join(format!("sentinel-{}.log", sentinel.port));
                let _ = std::fs::write(path, sentinel.log());
            }
        }
    }

    fn kinds(&self, unsafe_mode: Unsafe) -> Vec<Nemesis> {
        use Nemesis::*;
        match (self, unsafe_mode) {
            (Deployment::Servers(_), Unsafe::None) => {
                vec![PauseClient, PauseServers, CrashRestart, ClockJump]
            }
            (Deployment::Servers(_), Unsafe::NoGuard) => vec![CrashRestart],
            (Deployment::Servers(_), Unsafe::SetnxClock) => vec![ClockJump],
            // Without the promotion guard, the faults where the old
            // primary can still grant when the new one starts to.
            (Deployment::Cluster(_), Unsafe::NoGuard) => vec![KillPrimaryLagging],
            (Deployment::Sentinel(_), Unsafe::NoGuard) => {
                vec![KillPrimaryLagging, SentinelFailover]
            }
            (Deployment::Cluster(_), _) => vec![
                PauseClient,
                SlotMigration,
                ClusterFailover,
                ClusterTakeover,
                KillPrimary,
                KillPrimaryLagging,
            ],
            (Deployment::Sentinel(_), _) => vec![
                PauseClient,
                KillPrimary,
                KillPrimaryLagging,
                PausePrimary,
                SentinelFailover,
            ],
        }
    }

    /// One fault on the servers: what it did, or why it did not complete.
    fn strike(
        &mut self,
        nemesis: Nemesis,
        rng: &mut StdRng,
        args: &Args,
        names: &[&str],
    ) -> Result<String, String> {
        let ttl = Duration::from_millis(args.ttl);
        let name = *names.choose(rng).unwrap();
        let lag = Duration::from_millis(rng.random_range(200..1000));
        match self {
            Deployment::Servers(nodes) => Ok(strike_servers(nodes, nemesis, rng, args)),
            Deployment::Cluster(c) => match nemesis {
                Nemesis::SlotMigration => {
                    let r: u64 = rng.random();
                    c.migrate_slot_of(name, |n| (r % n as u64) as usize)
                }
                Nemesis::ClusterFailover => c.failover(name, None),
                Nemesis::ClusterTakeover => c.failover(name, Some("TAKEOVER")),
                Nemesis::KillPrimary => c.kill_primary(name),
                Nemesis::KillPrimaryLagging => c.kill_primary_lagging(name, lag),
                other => Err(format!("{other:?} is not a cluster fault")),
            },
            Deployment::Sentinel(s) => match nemesis {
                Nemesis::KillPrimary => s.kill_primary(),
                Nemesis::KillPrimaryLagging => s.kill_primary_lagging(lag),
                Nemesis::PausePrimary => {
                    // Past the sentinels' down-after time (1 s): a failover
                    // may or may not complete before the primary is back.
                    let pause = ttl.max(Duration::from_millis(1000))
                        + Duration::from_millis(rng.random_range(200..4000));
                    s.pause_primary(pause)
                }
                Nemesis::SentinelFailover => s.failover(),
                other => Err(format!("{other:?} is not a Sentinel fault")),
            },
        }
    }
}

/// One fault on independent servers.
fn strike_servers(nodes: &mut [Node], nemesis: Nemesis, rng: &mut StdRng, args: &Args) -> String {
    let n = nodes.len();
    let ttl = Duration::from_millis(args.ttl);
    let setnx = args.r#unsafe == Unsafe::SetnxClock;
    match nemesis {
        Nemesis::PauseServers => {
            let k = rng.random_range(1..=((n - 1) / 2).max(1));
            let victims = pick(rng, n, k);
            for &v in &victims {
                nodes[v].server.signal("STOP");
            }
            let pause = ttl.mul_f64(rng.random_range(0.2..2.0));
            std::thread::sleep(pause);
            for &v in &victims {
                nodes[v].server.signal("CONT");
            }
            format!("servers {victims:?} paused {} ms", pause.as_millis())
        }
        Nemesis::CrashRestart => {
            // A minority normally; a majority in the deliberately unsafe run.
            let k = if args.r#unsafe == Unsafe::NoGuard {
                n / 2 + 1
            } else {
                1
            };
            let victims = pick(rng, n, k);
            for &v in &victims {
                // The clock does not come back behind where it was.
                let node = &mut nodes[v];
                if node.offset < node.peak {
                    node.offset = node.peak;
                    node.clock.set(node.offset);
                }
                node.server.restart(); // kill -9, start again with no data
            }
            format!("servers {victims:?} restarted")
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
                *others.choose(rng).unwrap()
            };
            nodes[v].peak = nodes[v].peak.max(nodes[v].offset);
            nodes[v].clock.set(nodes[v].offset);
            format!("server {v}'s clock at {:+} s", nodes[v].offset)
        }
        other => format!("{other:?}: not a fault of independent servers"),
    }
}

fn orchestrate(args: &Args) -> ExitCode {
    if args.topology != Topology::Servers && args.r#unsafe == Unsafe::SetnxClock {
        eprintln!("--unsafe setnx-clock runs on one plain server: --topology servers");
        return ExitCode::from(2);
    }
    let setnx = args.r#unsafe == Unsafe::SetnxClock;
    // A restart delay of twice the TTL lets every pre-crash grant expire.
    let guard_ms = match args.r#unsafe {
        Unsafe::None => args.guard_ms.unwrap_or(2 * args.ttl),
        _ => 0,
    };
    let seed = args.seed.unwrap_or_else(|| rand::rng().random());
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = std::env::temp_dir().join(format!("redis-lock-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut deployment = Deployment::start(args, guard_ms, &dir);
    std::thread::sleep(Duration::from_millis(guard_ms)); // the start-up guard
    let fenced = fenced_resource();
    let urls = deployment.urls();
    let queued_share =
        args.queued_share
            .map(|s| s.clamp(0.0, 1.0))
            .unwrap_or(match args.r#unsafe {
                Unsafe::None => 0.5,
                _ => 0.0,
            });
    let paused_holds = args.paused_holds.map(|s| s.clamp(0.0, 1.0)).unwrap_or(
        if args.topology == Topology::Servers {
            0.0
        } else {
            0.02
        },
    );
    let exe = std::env::current_exe().unwrap();
    // Readers and semaphore workers beside the writers (none in the
    // SET NX PX run: a plain string has no shared holds).
    let (readers, limited) = if setnx {
        (0, 0)
    } else {
        (args.readers, args.limited)
    };
    // The contended names the cluster's faults aim at.
    let names: Vec<&str> = if limited > 0 {
        vec!["chaos", "chaos:pool"]
    } else {
        vec!["chaos"]
    };
    let holds = std::iter::repeat_n(Hold::Exclusive, args.workers)
        .chain(std::iter::repeat_n(Hold::Shared, readers))
        .chain(std::iter::repeat_n(Hold::Limited(args.limit), limited));
    let run_start = mono_ns();
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
                .arg("--paused-holds")
                .arg(paused_holds.to_string())
                .arg("--long-holds")
                .arg(args.long_holds.clamp(0.0, 1.0).to_string())
                .arg("--hold")
                .arg(hold.word());
            if setnx {
                cmd.arg("--setnx");
            }
            (cmd.spawn().expect("spawn worker"), log)
        })
        .collect();

    let kinds = deployment.kinds(args.r#unsafe);
    let ttl = Duration::from_millis(args.ttl);
    let mut strikes: Vec<(chaos::Strike, String)> = Vec::new();
    let secs = |t: u64| t.saturating_sub(run_start) as f64 / 1e9;
    let end = Instant::now() + Duration::from_secs(args.seconds);
    while Instant::now() + ttl * 3 < end {
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        let nemesis = *kinds.choose(&mut rng).unwrap();
        let start = mono_ns();
        let outcome = match nemesis {
            Nemesis::PauseClient => {
                let pid = workers.choose(&mut rng).unwrap().0.id() as i32;
                signal(pid, libc::SIGSTOP);
                std::thread::sleep(ttl * 2);
                signal(pid, libc::SIGCONT);
                Ok(format!("worker {pid} paused {} ms", (ttl * 2).as_millis()))
            }
            _ => deployment.strike(nemesis, &mut rng, args, &names),
        };
        let strike = chaos::Strike {
            kind: format!("{nemesis:?}"),
            start,
            end: mono_ns(),
            failed: outcome.is_err(),
        };
        let what = match outcome {
            Ok(what) => what,
            Err(why) => {
                eprintln!(
                    "+{:.3} s {nemesis:?} did not complete: {why}",
                    secs(strike.start)
                );
                format!("FAILED: {why}")
            }
        };
        strikes.push((strike, what));
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
    let only: Vec<chaos::Strike> = strikes.iter().map(|(s, _)| s.clone()).collect();
    let rows = chaos::by_nemesis(lines.iter().map(String::as_str), &report, &only);
    let timeline: String = strikes
        .iter()
        .map(|(s, what)| {
            format!(
                "+{:.3} s .. +{:.3} s {}: {what}\n",
                secs(s.start),
                secs(s.end),
                s.kind
            )
        })
        .collect();
    std::fs::write(dir.join("nemeses.log"), &timeline).unwrap();
    println!(
        "redis-lock chaos: {} s, {}, {} writers, {} readers, {} semaphore workers (LIMIT {}), ttl {} ms, mode {:?}, restart-delay-ms {}, queued share {}, paused holds {}, long holds {}, seed {seed}",
        args.seconds, deployment.describe(), args.workers, readers, limited, args.limit, args.ttl, args.r#unsafe, guard_ms, queued_share, paused_holds, args.long_holds
    );
    let counts: std::collections::BTreeMap<&str, usize> = rows
        .iter()
        .filter(|r| r.strikes > 0)
        .map(|r| (r.kind.as_str(), r.strikes))
        .collect();
    println!("nemeses: {counts:?}");
    println!(
        "| {:<48} | {:>8} |\n|{}|{}|",
        "metric",
        "count",
        "-".repeat(50),
        "-".repeat(10)
    );
    println!("{report}");
    println!(
        "\nper nemesis (grants and violations from each strike's start to the next strike's):"
    );
    println!("{}", chaos::nemesis_table(&rows));
    // Kept for a post-mortem: which windows overlapped, and when, the
    // fault each followed, and what the servers logged; also when a fault
    // did not complete.
    let failed = strikes.iter().filter(|(s, _)| s.failed).count();
    let keep = report.violations() > 0 || failed > 0 || args.keep_logs;
    if keep {
        deployment.save_logs(&dir);
    }
    drop(deployment);
    if report.violations() > 0 {
        println!("\nviolations (s since the workers started), after the fault before each:");
        for e in report.events.iter().take(50) {
            let before = strikes
                .iter()
                .rev()
                .find(|(s, _)| s.start <= e.at)
                .map(|(s, what)| format!("{} at +{:.3} s: {what}", s.kind, secs(s.start)))
                .unwrap_or_else(|| "no fault yet".into());
            println!("+{:.3} s {}; after {before}", secs(e.at), e.what);
        }
    }
    if failed > 0 {
        println!("{failed} fault(s) did not complete (see nemeses.log)");
    }
    if keep {
        println!(
            "worker logs, nemeses.log and the servers' logs kept in {}",
            dir.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if report.violations() > 0 {
        ExitCode::from(1)
    } else {
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
