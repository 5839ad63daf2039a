//! The chaos checker's Sentinel group: a primary and a replica with the
//! module (promotion guard on), three sentinels (down after 1 s), one vote
//! (`redis+sentinel://`), and the faults it is put through:
//! - kill -9 of the primary: the sentinels promote the replica, and the
//!   killed server is started again with no data as the new primary's
//!   replica (as its configuration, rewritten by the sentinels, would say);
//! - the same with the replica lagging: stopped for a while before the
//!   kill (it misses every grant made meanwhile, as asynchronous
//!   replication can: its link is cut with the unread stream in it) and
//!   continued after it;
//! - SIGSTOP of the primary past the down-after time, then SIGCONT: the
//!   sentinels may promote the replica meanwhile, and the old primary comes
//!   back still a primary until they demote it, seconds later;
//! - `SENTINEL FAILOVER`.
//!
//! Every fault ends with the group whole again (one primary named by every
//! sentinel, the other server its replica with the link up) or an error.

use crate::sentinel_group::SentinelGroup;
use crate::server::{cut_connections_to, eventually};
use std::time::Duration;

/// How long the group may take to be whole again: an old primary that
/// comes back is demoted by the sentinels only after it has looked sane
/// for 8 s and they have read its INFO (every 10 s outside a failover).
const HEAL: Duration = Duration::from_secs(60);

pub struct ChaosSentinel {
    pub group: SentinelGroup,
    args: Vec<String>,
    module_args: Vec<String>,
}

impl ChaosSentinel {
    /// A group whose data servers get `args` and the module `module_args`.
    pub fn start(args: &[&str], module_args: &[&str]) -> ChaosSentinel {
        ChaosSentinel {
            group: SentinelGroup::start_with(args, module_args),
            args: args.iter().map(|a| a.to_string()).collect(),
            module_args: module_args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// The group as one node, through its first sentinel.
    pub fn url(&self) -> String {
        self.group.url(0)
    }

    /// Until the group is whole, and still so with the same primary 2 s
    /// later (a failover the sentinels had begun would show by then); its
    /// primary's index.
    pub fn await_whole(&self) -> Result<usize, String> {
        let mut primary = None;
        let whole = eventually(HEAL, || {
            primary = self.group.whole();
            std::thread::sleep(Duration::from_millis(if primary.is_some() {
                2000
            } else {
                100
            }));
            primary.is_some() && self.group.whole() == primary
        });
        match (whole, primary) {
            (true, Some(p)) => Ok(p),
            _ => Err(format!(
                "not whole after {HEAL:?}; first sentinel's log:\n{}",
                self.group.sentinels[0].log()
            )),
        }
    }

    fn port(&self, i: usize) -> u16 {
        self.group.data[i].port
    }

    /// kill -9 of the primary, until the sentinels name the replica; the
    /// killed server then starts again, empty, as its replica (or as the
    /// primary again if no failover came).
    pub fn kill_primary(&mut self) -> Result<String, String> {
        self.kill_primary_lagging(Duration::ZERO)
    }

    /// [`ChaosSentinel::kill_primary`] with the replica stopped for `lag`
    /// before the kill and continued after it: the grants made meanwhile
    /// are lost with the primary.
    pub fn kill_primary_lagging(&mut self, lag: Duration) -> Result<String, String> {
        let old = self.group.primary();
        let new = 1 - old;
        if !lag.is_zero() {
            self.group.data[new].signal("STOP");
            std::thread::sleep(lag);
        }
        self.group.data[old].kill();
        if !lag.is_zero() {
            // What the replica had received but not read goes with its link.
            cut_connections_to(self.port(old));
            self.group.data[new].signal("CONT");
        }
        let promoted = self.group.await_named(new, Duration::from_secs(30));
        let mut args: Vec<String> = self.args.clone();
        if promoted {
            args.extend(["--replicaof".into(), "127.0.0.1".into()]);
            args.push(self.port(new).to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let module_args: Vec<&str> = self.module_args.iter().map(String::as_str).collect();
        self.group.data[old].restart_with(&args, &module_args);
        if !promoted {
            return Err(format!(
                "127.0.0.1:{} not promoted 30 s after 127.0.0.1:{} was killed",
                self.port(new),
                self.port(old)
            ));
        }
        self.await_whole()?;
        Ok(format!(
            "killed 127.0.0.1:{}, 127.0.0.1:{} promoted",
            self.port(old),
            self.port(new)
        ))
    }

    /// SIGSTOP of the primary for `pause`, then SIGCONT, until the group
    /// is whole again (with either server the primary).
    pub fn pause_primary(&self, pause: Duration) -> Result<String, String> {
        let old = self.group.primary();
        self.group.data[old].signal("STOP");
        std::thread::sleep(pause);
        self.group.data[old].signal("CONT");
        let now = self.await_whole()?;
        Ok(format!(
            "paused 127.0.0.1:{} for {} ms; the primary is 127.0.0.1:{}",
            self.port(old),
            pause.as_millis(),
            self.port(now)
        ))
    }

    /// `SENTINEL FAILOVER`, until the old primary is the new one's replica.
    pub fn failover(&self) -> Result<String, String> {
        let old = self.group.primary();
        let new = self.group.try_failover()?;
        let now = self.await_whole()?;
        if now != new {
            return Err(format!(
                "the primary went back to 127.0.0.1:{}",
                self.port(now)
            ));
        }
        Ok(format!(
            "127.0.0.1:{} -> 127.0.0.1:{}",
            self.port(old),
            self.port(new)
        ))
    }
}
