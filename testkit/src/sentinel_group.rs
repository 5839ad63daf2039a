//! A Sentinel group on free ports: a primary and one replica (both with the
//! module) and three sentinels (`redis-server --sentinel`, or Valkey's),
//! every process killed when the group is dropped. Fast timings: a
//! sentinel calls a primary down after 1 s.

use crate::server::{eventually, free_port, info_field, q, server_binary, Server};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The name the sentinels know the group by.
pub const SERVICE: &str = "locks";

/// One `--sentinel` process, killed when dropped.
pub struct Sentinel {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

impl Sentinel {
    /// A sentinel monitoring `primary_port` as `SERVICE` (quorum 2).
    fn start(primary_port: u16) -> Sentinel {
        for _ in 0..5 {
            let port = free_port();
            let dir = std::env::temp_dir()
                .join(format!("redis-lock-sentinel-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let conf = dir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {log}\n\
                     sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n\
                     sentinel down-after-milliseconds {SERVICE} 1000\n\
                     sentinel failover-timeout {SERVICE} 3000\n\
                     sentinel parallel-syncs {SERVICE} 1\n",
                    dir = dir.display(),
                    log = dir.join("sentinel.log").display(),
                ),
            )
            .unwrap();
            let child = Command::new(server_binary())
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn a sentinel");
            let mut s = Sentinel { child, port, dir };
            let up = eventually(Duration::from_secs(10), || {
                s.child.try_wait().ok().flatten().is_none() && s.try_conn().is_ok()
            });
            if up {
                return s;
            }
            // The port was taken meanwhile (the sentinel exited): another.
        }
        panic!("no sentinel started after 5 tries");
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?;
        let mut c = client.get_connection_with_timeout(Duration::from_secs(2))?;
        redis::cmd("PING").query::<String>(&mut c)?;
        Ok(c)
    }

    pub fn conn(&self) -> redis::Connection {
        let c = self.try_conn().expect("connect to a sentinel");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c
    }

    /// The primary's port as this sentinel names it.
    pub fn primary_port(&self) -> Option<u16> {
        let mut c = self.try_conn().ok()?;
        let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(SERVICE)
            .query(&mut c)
            .ok()?;
        addr.map(|(_, port)| port)
    }

    /// Send `sig` (`STOP`, `CONT`) to this sentinel: a stopped one accepts
    /// connections (the kernel does) and answers nothing.
    pub fn signal(&self, sig: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{sig} failed");
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sentinel.log")).unwrap_or_default()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A primary, its replica and three sentinels that agree on them.
pub struct SentinelGroup {
    /// The data servers: `data[0]` started as the primary, `data[1]` as its
    /// replica (see `primary()` for which is the primary now).
    pub data: Vec<Server>,
    pub sentinels: Vec<Sentinel>,
}

impl SentinelGroup {
    /// A group whose data servers' module gets `module_args` (e.g.
    /// `restart-delay-ms 3000`: the promotion guard), returned once every
    /// sentinel names the primary and knows the replica and the two other
    /// sentinels.
    pub fn start(module_args: &[&str]) -> SentinelGroup {
        SentinelGroup::start_with(&[], module_args)
    }

    /// [`SentinelGroup::start`] with server arguments for the data servers
    /// (e.g. `--min-replicas-to-write 1`).
    pub fn start_with(args: &[&str], module_args: &[&str]) -> SentinelGroup {
        let primary = Server::with(args, module_args);
        let replica = Server::replica_with(&primary, args, module_args);
        let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(primary.port)).collect();
        let group = SentinelGroup {
            data: vec![primary, replica],
            sentinels,
        };
        group.await_agreement(0);
        group
    }

    /// `redis+sentinel://127.0.0.1:P/locks` through sentinel `i`.
    pub fn url(&self, i: usize) -> String {
        format!(
            "redis+sentinel://127.0.0.1:{}/{SERVICE}",
            self.sentinels[i].port
        )
    }

    /// Which of `data` the sentinels name as the primary now (the first
    /// sentinel's word).
    pub fn primary(&self) -> usize {
        let port = self.sentinels[0].primary_port();
        self.data
            .iter()
            .position(|s| Some(s.port) == port)
            .expect("the sentinels name one of the group's servers")
    }

    /// Until every sentinel names `data[primary]`, knows a replica and the
    /// two other sentinels (up to 20 s: sentinels meet through hello
    /// messages every 2 s).
    pub fn await_agreement(&self, primary: usize) {
        let port = self.data[primary].port;
        let agreed = eventually(Duration::from_secs(20), || {
            self.sentinels.iter().all(|s| {
                let Ok(mut c) = s.try_conn() else {
                    return false;
                };
                let mut count = |what: &str| -> usize {
                    let reply = q(&mut c, &format!("SENTINEL {what} {SERVICE}"));
                    match reply {
                        Ok(redis::Value::Array(v)) => v.len(),
                        _ => 0,
                    }
                };
                s.primary_port() == Some(port) && count("REPLICAS") >= 1 && count("SENTINELS") >= 2
            })
        });
        assert!(
            agreed,
            "the sentinels do not agree on 127.0.0.1:{port}; first sentinel's log:\n{}",
            self.sentinels[0].log()
        );
    }

    /// Data server `new` made the primary by hand, the other its replica
    /// (`REPLICAOF`, which closes no client: connections to the old
    /// primary stay open and it answers READONLY), and every sentinel
    /// pointed at `new` (`SENTINEL REMOVE` / `MONITOR`).
    pub fn promote_by_hand(&self, new: usize) {
        let (old, new) = (&self.data[1 - new], &self.data[new]);
        q(&mut new.conn(), "REPLICAOF NO ONE").unwrap();
        q(
            &mut old.conn(),
            &format!("REPLICAOF 127.0.0.1 {}", new.port),
        )
        .unwrap();
        for s in &self.sentinels {
            let mut c = s.conn();
            q(&mut c, &format!("SENTINEL REMOVE {SERVICE}")).unwrap();
            let monitor = format!("SENTINEL MONITOR {SERVICE} 127.0.0.1 {} 2", new.port);
            q(&mut c, &monitor).unwrap();
        }
    }

    /// `SENTINEL FAILOVER`: the replica becomes the primary. Returns the
    /// new primary's index once every sentinel names it (the old primary
    /// may still think it is one: the sentinels demote it seconds later).
    pub fn failover(&self) -> usize {
        self.try_failover().unwrap_or_else(|why| panic!("{why}"))
    }

    /// [`SentinelGroup::failover`], saying why it did not happen instead
    /// of panicking.
    pub fn try_failover(&self) -> Result<usize, String> {
        let old = self.primary();
        let new = 1 - old;
        // Refused ("NOGOODSLAVE") until the sentinel has read the replica's
        // INFO: retried.
        let asked = eventually(Duration::from_secs(10), || {
            let Ok(mut c) = self.sentinels[0].try_conn() else {
                return false;
            };
            q(&mut c, &format!("SENTINEL FAILOVER {SERVICE}")).is_ok()
        });
        if !asked {
            return Err(format!(
                "SENTINEL FAILOVER refused:\n{}",
                self.sentinels[0].log()
            ));
        }
        if !self.await_named(new, Duration::from_secs(20)) {
            return Err(format!("no failover:\n{}", self.sentinels[0].log()));
        }
        Ok(new)
    }

    /// Until every sentinel names `data[i]` as the primary (up to `limit`).
    pub fn await_named(&self, i: usize, limit: Duration) -> bool {
        let port = self.data[i].port;
        eventually(limit, || {
            self.sentinels
                .iter()
                .all(|s| s.primary_port() == Some(port))
        })
    }

    /// Whether the group is whole: every sentinel names one primary, the
    /// other data server replicates it with its link up, and every sentinel
    /// sees that replica up (not down, not disconnected). Returns the
    /// primary's index.
    pub fn whole(&self) -> Option<usize> {
        let port = self.sentinels[0].primary_port()?;
        let primary = self.data.iter().position(|s| s.port == port)?;
        let replica = &self.data[1 - primary];
        if !self
            .sentinels
            .iter()
            .all(|s| s.primary_port() == Some(port))
        {
            return None;
        }
        let info = crate::cluster::redis_cli(replica.port, &["INFO", "replication"]);
        let linked = info.contains("role:slave")
            && info.contains(&format!("master_port:{port}"))
            && info.contains("master_link_status:up");
        let seen = self.sentinels.iter().all(|s| {
            let Ok(mut c) = s.try_conn() else {
                return false;
            };
            let Ok(redis::Value::Array(replicas)) =
                q(&mut c, &format!("SENTINEL REPLICAS {SERVICE}"))
            else {
                return false;
            };
            replicas.iter().any(|r| {
                let fields = fields(r);
                let field = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
                field("port") == Some(replica.port.to_string().as_str())
                    && field("flags")
                        .is_some_and(|f| !f.contains("s_down") && !f.contains("disconnected"))
                    && field("master-link-status") == Some("ok")
            })
        });
        (linked && seen).then_some(primary)
    }

    /// Until `data[i]` says it is a replica (up to 30 s).
    pub fn await_replica(&self, i: usize) {
        let mut c = self.data[i].conn();
        let demoted = eventually(Duration::from_secs(30), || {
            info_field(&mut c, "replication", "role") == "slave"
        });
        assert!(
            demoted,
            "127.0.0.1:{} is still a primary",
            self.data[i].port
        );
    }
}

/// A sentinel's flat `[name, value, ...]` reply as pairs.
fn fields(v: &redis::Value) -> Vec<(String, String)> {
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    match v {
        redis::Value::Array(items) => items
            .chunks(2)
            .filter(|p| p.len() == 2)
            .map(|p| (text(&p[0]), text(&p[1])))
            .collect(),
        _ => Vec::new(),
    }
}
