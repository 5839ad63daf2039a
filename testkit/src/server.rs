//! Real redis-server processes with the module loaded, on free ports, in
//! their own scratch directories, killed when dropped; and small helpers to
//! talk to them.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use redis::Value;

/// The module under test: $REDIS_LOCK_MODULE, or libredis_lock.so in the
/// cargo profile directory of the running binary (target/<profile>/ for a
/// binary, target/<profile>/deps/ for a test).
pub fn module_path() -> PathBuf {
    if let Ok(p) = std::env::var("REDIS_LOCK_MODULE") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("own binary path");
    let dir = exe.parent().expect("binary directory");
    let found = [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join("libredis_lock.so"))
        .find(|p| p.exists());
    found.unwrap_or_else(|| dir.join("libredis_lock.so"))
}

/// The server binary under test: $REDIS_SERVER (e.g. a Valkey
/// `valkey-server`), else `redis-server` from PATH.
pub fn server_binary() -> PathBuf {
    std::env::var_os("REDIS_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("redis-server"))
}

/// Name and version of the server under test, from `INFO server`
/// (`server_name` + `valkey_version` on Valkey, `redis_version` on Redis).
pub fn server_identity(con: &mut redis::Connection) -> (String, String) {
    let text: String = redis::cmd("INFO")
        .arg("server")
        .query(con)
        .unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_string())
    };
    match field("valkey_version") {
        Some(v) => (field("server_name").unwrap_or_else(|| "valkey".into()), v),
        None => ("redis".into(), field("redis_version").unwrap_or_default()),
    }
}

/// Say once per test process which server it runs against, so a run on
/// the wrong binary is visible in every log.
fn announce(con: &mut redis::Connection) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let (name, version) = server_identity(con);
        eprintln!(
            "redis-lock tests: server {name} {version} ({})",
            server_binary().display()
        );
    });
}

/// A binary of this workspace built next to the module (e.g. `redis-lock`).
pub fn workspace_binary(name: &str) -> PathBuf {
    module_path().with_file_name(name)
}

/// A port nobody listens on right now (and whose cluster bus port +10000 is
/// free too). Never 6379. Drawn below Linux's ephemeral range (32768 up),
/// from which the kernel gives outgoing connections their local ports: a
/// port from there could be taken by any test's client before the server
/// binds it.
pub fn free_port() -> u16 {
    use rand::RngExt;
    loop {
        let port = rand::rng().random_range(20000..32000);
        let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
        if port != 6379 && free(port) && free(port + 10000) {
            return port;
        }
    }
}

fn scratch_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "redis-lock-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    args: Vec<String>,
    module_args: Vec<String>,
    env: Vec<(String, String)>,
    /// Module defaults as shipped, without the harness's test settings.
    bare: bool,
    /// Add `--loadmodule`; off when the test's own config loads it.
    load_module: bool,
}

/// Raise every node's fencing-token counter to the highest among them, so
/// that their next grants agree. Since 2026-11-28 every node grants from
/// its clock + 60 s whenever it started, so this only matters after fences
/// or MINTOKENs raised some counters. For benchmarks and profiles.
pub fn align_token_counters(nodes: &[Server]) {
    let last = |n: &Server| -> u64 {
        info_field(&mut n.conn(), "lock", "lock_last_token")
            .parse()
            .unwrap()
    };
    let top = nodes.iter().map(last).max().unwrap_or(0);
    for n in nodes {
        n.raise_token_counter(top);
    }
}

/// The URLs of `servers`, in order: what a Locker is built from.
pub fn urls(servers: &[Server]) -> Vec<String> {
    servers.iter().map(Server::url).collect()
}

impl Server {
    /// A plain server: no persistence, the module with default settings.
    pub fn start() -> Server {
        Server::with(&[], &[])
    }

    /// Raise this server's token counter to at least `token` (a FENCE of
    /// a lock of its own, on a scratch key).
    pub fn raise_token_counter(&self, token: u64) {
        let mut c = self.conn();
        let key = "redis-lock-testkit:raise";
        let _: i64 = redis::cmd("LOCK.ACQUIRE")
            .arg(key)
            .arg("o")
            .arg(10_000)
            .query(&mut c)
            .unwrap();
        let _: i64 = redis::cmd("LOCK.FENCE")
            .arg(key)
            .arg("o")
            .arg(token)
            .query(&mut c)
            .unwrap();
        let _: i64 = redis::cmd("LOCK.RELEASE")
            .arg(key)
            .arg("o")
            .query(&mut c)
            .unwrap();
    }

    /// `n` plain servers: the nodes of a quorum.
    pub fn start_n(n: usize) -> Vec<Server> {
        (0..n).map(|_| Server::start()).collect()
    }

    /// `args` go to redis-server (`--name value` pairs), `module_args` after
    /// the module path on the --loadmodule line.
    pub fn with(args: &[&str], module_args: &[&str]) -> Server {
        Server::with_env(args, module_args, &[])
    }

    /// A replica of `primary` (module loaded with `module_args`), returned
    /// once its replication link is up.
    pub fn replica_of(primary: &Server, module_args: &[&str]) -> Server {
        Server::replica_with(primary, &[], module_args)
    }

    /// `replica_of` with more server arguments; returns once the link is
    /// up (a loaded machine's full sync can take longer than a WAIT's
    /// timeout: CI failed `WAIT 1 5000` right after a bare `--replicaof`).
    pub fn replica_with(primary: &Server, args: &[&str], module_args: &[&str]) -> Server {
        let port = primary.port.to_string();
        let mut all = vec!["--replicaof", "127.0.0.1", &port];
        all.extend_from_slice(args);
        let replica = Server::with(&all, module_args);
        let mut c = replica.conn();
        let up = eventually(Duration::from_secs(20), || {
            info_field(&mut c, "replication", "master_link_status") == "up"
        });
        assert!(up, "replica link did not come up");
        replica
    }

    /// A server whose module gets exactly `module_args`: the shipped
    /// defaults (the restart guard on), where `with` turns the guard off
    /// unless a test sets `restart-delay-ms` itself.
    pub fn bare(args: &[&str], module_args: &[&str]) -> Server {
        Server::build(args, module_args, &[], true).started()
    }

    pub fn with_env(args: &[&str], module_args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::build(args, module_args, env, false).started()
    }

    /// A server whose own configuration (`args`, e.g. `--include file`)
    /// loads the module: the harness adds no `--loadmodule`.
    pub fn configured(args: &[&str]) -> Server {
        let mut s = Server::build(args, &[], &[], true);
        s.load_module = false;
        s.started()
    }

    /// Spawned and answering. A port taken between `free_port` and the
    /// server's bind (another test's server) is given up for a new one.
    fn started(mut self) -> Server {
        for _ in 0..5 {
            match self.try_spawn() {
                Ok(()) => return self,
                Err(why) if why.contains("Address already in use") => self.port = free_port(),
                Err(why) => panic!("{why}"),
            }
        }
        panic!("no free port for redis-server after 5 tries");
    }

    fn build(args: &[&str], module_args: &[&str], env: &[(&str, &str)], bare: bool) -> Server {
        Server {
            child: None,
            port: free_port(),
            dir: scratch_dir(),
            args: args.iter().map(|a| a.to_string()).collect(),
            module_args: module_args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            bare,
            load_module: true,
        }
    }

    fn spawn(&mut self) {
        if let Err(why) = self.try_spawn() {
            panic!("{why}");
        }
    }

    fn try_spawn(&mut self) -> Result<(), String> {
        let mut load = vec![module_path().display().to_string()];
        load.extend(self.module_args.iter().cloned());
        // Test servers run without persistence, where the shipped default
        // refuses new locks for lock.max-ttl-ms after start (the restart
        // guard); tests that are not about the guard start without it.
        let sets_delay = self
            .module_args
            .iter()
            .any(|a| a.to_ascii_lowercase().ends_with("restart-delay-ms"));
        if !self.bare && !sets_delay {
            load.extend(["restart-delay-ms".to_string(), "0".to_string()]);
        }
        if !self.load_module {
            load.clear();
        }
        let mut cmd = Command::new(server_binary());
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--save")
            .arg("")
            .arg("--appendonly")
            .arg("no")
            .args(if load.is_empty() {
                None
            } else {
                Some("--loadmodule")
            })
            .args(&load)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd.arg("--logfile").arg(self.dir.join("redis.log"));
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().expect("spawn redis-server"));
        self.wait_ready()
    }

    /// Until our server answers on the port (one answering with another
    /// process id is another test's that took the port: ours then exits
    /// with "Address already in use") and has loaded its data (INFO answers
    /// while loading, other commands get LOADING: seen under load).
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let pid = format!("process_id:{}", self.pid());
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                return Err(format!(
                    "redis-server exited early ({status}); log:\n{}",
                    self.log()
                        .lines()
                        .rev()
                        .take(8)
                        .collect::<Vec<_>>()
                        .join("\n")
                ));
            }
            if let Ok(mut c) = self.try_conn() {
                let info = redis::cmd("INFO").query::<String>(&mut c);
                let ours_and_loaded = |text: String| {
                    let has = |line: &str| text.lines().any(|l| l.trim() == line);
                    has(&pid) && has("loading:0")
                };
                if info.is_ok_and(ours_and_loaded) {
                    announce(&mut c);
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "redis-server did not answer PING; log:\n{}",
            self.log()
        ))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        client.get_connection_with_timeout(Duration::from_secs(2))
    }

    pub fn conn(&self) -> redis::Connection {
        let c = self.try_conn().expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGKILL and wait: nothing is saved.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start again with the same port, directory and arguments.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Start again on the same port and directory (so with its RDB/AOF)
    /// with other arguments: a reload under a different configuration.
    pub fn restart_with(&mut self, args: &[&str], module_args: &[&str]) {
        self.args = args.iter().map(|a| a.to_string()).collect();
        self.module_args = module_args.iter().map(|a| a.to_string()).collect();
        self.restart();
    }

    /// Wait (up to 10 s) until no AOF rewrite runs or is scheduled: a
    /// replica rewrites its AOF after a full sync, and a kill in the middle
    /// leaves the AOF from before it, whatever the module does.
    pub fn await_aof_rewrite(&self) {
        let mut c = self.conn();
        let done = eventually(Duration::from_secs(10), || {
            let mut field = |f| info_field(&mut c, "persistence", f);
            field("aof_rewrite_in_progress") == "0" && field("aof_rewrite_scheduled") == "0"
        });
        assert!(done, "AOF rewrite still running after 10 s");
    }

    /// Waits (up to 10 s) until a connection to this server holds bytes it
    /// has not read: a request sent to it while it is stopped has arrived.
    /// Sleeping a fixed time instead was not enough on a loaded CI box.
    pub fn await_unread_request(&self) {
        let arrived = eventually(Duration::from_secs(10), || unread_bytes_at(self.port));
        assert!(arrived, "no request reached port {} within 10 s", self.port);
    }

    /// Sends `sig`; a STOP returns once the server has stopped. Under load
    /// a server signalled in `epoll_wait` may be scheduled only after a
    /// request arrived: it stops holding that event and, continued, answers
    /// the request alone, before what was queued behind it.
    pub fn signal(&self, sig: &str) {
        Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        if sig == "STOP" {
            let stat = format!("/proc/{}/stat", self.pid());
            let stopped = || {
                let line = std::fs::read_to_string(&stat).unwrap_or_default();
                // "pid (comm) S ...": the state follows the last ')'.
                let state = line.rsplit(')').next().unwrap_or("").trim_start();
                state.starts_with('T') || line.is_empty()
            };
            assert!(
                eventually(Duration::from_secs(10), stopped),
                "SIGSTOP not taken"
            );
        }
    }
}

/// Destroy every TCP socket on this machine whose peer is 127.0.0.1:`port`
/// (`ss -K`, root only), dropping what they had received and not read: a
/// stopped replica's link to a primary just killed loses the replication
/// stream still in its socket, as a link cut by the network would, instead
/// of reading it all when continued. False if `ss` could not.
pub fn cut_connections_to(port: u16) -> bool {
    let filter = format!("( dport = :{port} )");
    Command::new("ss")
        .args(["-K", "-tn"])
        .arg(filter)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill(); // SIGKILL also ends a SIGSTOPped server
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts `binary` with the module and `module_args`, expects it to refuse
/// to start (exit non-zero within 10 s) and returns its log.
pub fn refused_start(binary: &std::path::Path, module_args: &[&str]) -> String {
    let dir = std::env::temp_dir().join(format!(
        "redis-lock-refused-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("redis.log");
    let mut child = Command::new(binary)
        .args(["--port", &free_port().to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .arg("--logfile")
        .arg(&log)
        .arg("--loadmodule")
        .arg(module_path())
        .args(module_args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        matches!(status, Some(s) if !s.success()),
        "server started with {module_args:?}"
    );
    text
}

/// Run a command given as words; panics on transport errors only.
pub fn run(con: &mut redis::Connection, words: &[&[u8]]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(std::str::from_utf8(words[0]).unwrap());
    for w in &words[1..] {
        cmd.arg(*w);
    }
    cmd.query(con)
}

/// Shorthand: a command from space-separated words.
pub fn q(con: &mut redis::Connection, line: &str) -> redis::RedisResult<Value> {
    let words: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
    run(con, &words)
}

pub fn int(con: &mut redis::Connection, line: &str) -> i64 {
    match q(con, line) {
        Ok(Value::Int(i)) => i,
        other => panic!("{line}: expected an integer, got {other:?}"),
    }
}

pub fn err(con: &mut redis::Connection, line: &str) -> String {
    match q(con, line) {
        // Codes redis-rs had no name for before 1.0 as `CODE: detail`, as it
        // displayed them then (1.x quotes unknown codes, `"WRONGTYPE": ...`,
        // and names NOPERM `NoPerm`); the others as it displays them
        // (`TryAgain: ...`).
        Err(e)
            if matches!(
                e.kind(),
                redis::ErrorKind::Extension
                    | redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
            ) =>
        {
            format!("{}: {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
        }
        Err(e) => e.to_string(),
        Ok(v) => panic!("{line}: expected an error, got {v:?}"),
    }
}

/// LOCK.STATUS as (owner, token, ttl, holds, waiters), None when not held.
pub fn status(con: &mut redis::Connection, key: &str) -> Option<(Vec<u8>, i64, i64, i64, i64)> {
    let v = q(con, &format!("LOCK.STATUS {key}")).unwrap();
    let items = match v {
        Value::Nil => return None,
        Value::Array(items) => items,
        other => panic!("LOCK.STATUS: unexpected {other:?}"),
    };
    let field = |name: &str| -> &Value {
        let i = items
            .iter()
            .position(|v| matches!(v, Value::BulkString(b) if b == name.as_bytes()))
            .unwrap_or_else(|| panic!("no {name} in {items:?}"));
        &items[i + 1]
    };
    let num = |name: &str| match field(name) {
        Value::Int(i) => *i,
        other => panic!("{name}: {other:?}"),
    };
    let owner = match field("owner") {
        Value::BulkString(b) => b.clone(),
        other => panic!("owner: {other:?}"),
    };
    Some((
        owner,
        num("token"),
        num("ttl"),
        num("holds"),
        num("waiters"),
    ))
}

/// Poll `f` until it returns true or `limit` passes.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How many times `command` (lower case, e.g. `lock.fence`) has run on the
/// server behind `con` (INFO commandstats; 0 if never).
pub fn command_calls(con: &mut redis::Connection, command: &str) -> u64 {
    let text: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

pub fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> String {
    let text: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}:\n{text}"))
        .trim()
        .to_string()
}

/// Whether an established IPv4 socket bound to local `port` has unread
/// bytes (the rx_queue column of /proc/net/tcp: `local rem st tx:rx`).
fn unread_bytes_at(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let local_port = f.get(1).and_then(|a| a.rsplit(':').next());
        let rx = f.get(4).and_then(|q| q.split(':').nth(1));
        local_port.and_then(|p| u16::from_str_radix(p, 16).ok()) == Some(port)
            && f.get(3) == Some(&"01")
            && rx.and_then(|r| u64::from_str_radix(r, 16).ok()) > Some(0)
    })
}
