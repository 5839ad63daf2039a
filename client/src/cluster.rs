//! A Redis Cluster as one node (`redis+cluster://seed:port`): one vote,
//! whatever its size. The slot map is read from the cluster (`CLUSTER
//! SLOTS`) through the seed or any primary known; each lock's commands go
//! to the primary of its key's slot, each primary a plain [`Node`] of its
//! own (shared connection, dedicated ones for WAIT, server clock, doubts).
//! `MOVED` is followed (and the map read again at the next call), `ASK`
//! answered with `ASKING` and the command on that node, `TRYAGAIN` (a slot
//! being migrated; the module's answer to a waiter whose lock's slot moved
//! away) retried shortly: all within the caller's deadline, which drops
//! this future when it passes. A redirection means the command did not
//! run, so sending it again grants nothing twice.

use crate::node::{classify, Failure, Node, Tagged};
use crate::server_ids::{self, SameServers, ServerTag};
use crate::slots::{self, key_slot, Redirect, SlotMap};
use futures_util::future::BoxFuture;
use redis::Value;
use redis::{AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Redirections (`MOVED`, `ASK`) followed in a row for one command before
/// giving up: a map that keeps changing is an outage for this call.
const MAX_REDIRECTS: u32 = 16;

/// Pause before sending again after `TRYAGAIN`: a migration moves a slot's
/// keys in milliseconds.
const TRY_AGAIN_PAUSE: Duration = Duration::from_millis(10);

/// Why a refusal closure (`Node::query_dedicated`) may stop a request.
pub(crate) type Refuse<'a> = &'a (dyn Fn(Option<&ServerTag>) -> Option<String> + Send + Sync);

/// The plain URL of a cluster seed (`redis+cluster://h:p/` is
/// `redis://h:p/`), `None` for a URL that names no cluster, or why the URL
/// is not a cluster node's.
pub(crate) fn seed_url(url: &str) -> Result<Option<String>, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(None);
    };
    let lower = scheme.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('+').collect();
    if !parts.contains(&"cluster") {
        return Ok(None);
    }
    let base = match parts.as_slice() {
        ["redis", "cluster"] => "redis",
        ["rediss", "cluster"] => "rediss",
        _ => {
            return Err(format!(
                "scheme {scheme:?}: a node is one server (redis://, rediss://), \
                 one cluster (redis+cluster://, rediss+cluster://) or one Sentinel group, \
                 never two at once"
            ))
        }
    };
    let plain = format!("{base}://{rest}");
    if let Ok(info) = plain.as_str().into_connection_info() {
        let db = info.redis_settings().db();
        if db != 0 {
            return Err(format!(
                "a cluster has only database 0, not {db}: write {lower}://host:port/"
            ));
        }
    }
    Ok(Some(plain))
}

/// `host:port` parsed, an IPv6 host without its brackets.
fn host_port(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port.parse().ok()?))
}

/// The identity of a cluster: a tag per node id, all of one cluster's
/// linked as one server (`SameServers`), so two seeds of one cluster are
/// found out as a server listed twice is.
fn cluster_tag(id: &str) -> ServerTag {
    format!("cluster node {id}").into()
}

/// Connections without redis-rs' own time limits: the caller's deadline
/// bounds every request (as `node.rs` does).
fn unbounded() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None)
}

pub(crate) struct Cluster {
    /// The seed's settings (credentials, TLS), used for every primary.
    seed: ConnectionInfo,
    seed_host: String,
    seed_addr: String,
    same: Arc<SameServers>,
    map: RwLock<SlotMap>,
    /// A redirection or a failed primary seen: read the map again before
    /// the next call's first request.
    stale: AtomicBool,
    /// Held while the map is read, so a burst of calls reads it once.
    refreshing: tokio::sync::Mutex<()>,
    /// A plain node per `host:port` met (primaries, the seed).
    nodes: Mutex<HashMap<String, Arc<Node>>>,
    /// This cluster's tag (its first node id seen).
    identity: Mutex<Option<ServerTag>>,
}

impl Cluster {
    pub(crate) fn new(seed: ConnectionInfo, same: Arc<SameServers>) -> Cluster {
        let seed_addr = crate::endpoint::node_name(&seed);
        let seed_host = host_port(&seed_addr).map(|(h, _)| h).unwrap_or_default();
        Cluster {
            seed,
            seed_host,
            seed_addr,
            same,
            map: RwLock::new(SlotMap::default()),
            stale: AtomicBool::new(false),
            refreshing: tokio::sync::Mutex::new(()),
            nodes: Mutex::new(HashMap::new()),
            identity: Mutex::new(None),
        }
    }

    /// The seed's settings at another `host:port`.
    fn info_at(&self, addr: &str) -> Option<ConnectionInfo> {
        let (host, port) = host_port(addr)?;
        let at = match self.seed.addr().clone() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        Some(self.seed.clone().set_addr(at))
    }

    /// The plain node at `addr`, made on first use.
    fn node(&self, addr: &str) -> Result<Arc<Node>, Failure> {
        let mut nodes = self.nodes.lock().expect("cluster nodes");
        if let Some(n) = nodes.get(addr) {
            return Ok(n.clone());
        }
        let info = self
            .info_at(addr)
            .ok_or_else(|| Failure::Transient(format!("cannot reach cluster node {addr:?}")))?;
        let node = Arc::new(Node::at(info, self.same.clone()));
        nodes.insert(addr.to_string(), node.clone());
        Ok(node)
    }

    /// The primaries of the map as read last.
    fn primaries(&self) -> Vec<Arc<Node>> {
        let addrs = self.map.read().expect("slot map").primaries();
        addrs.iter().filter_map(|a| self.node(a).ok()).collect()
    }

    fn map_is_empty(&self) -> bool {
        self.map.read().expect("slot map").is_empty()
    }

    /// Read the slot map (`CLUSTER SLOTS`), asking the seed and every
    /// node the last map named (primaries and replicas) at once and
    /// taking the first map: a primary that failed (or a seed that went
    /// away) must not hold up the reading, and when every primary of the
    /// last map is gone, its promoted replicas still answer. Calls
    /// waiting on one reading use it.
    async fn refresh(&self) -> Result<(), Failure> {
        use futures_util::StreamExt;
        let _refreshing = self.refreshing.lock().await;
        if !self.map_is_empty() && !self.stale.load(Ordering::Acquire) {
            return Ok(()); // read meanwhile by another call
        }
        let mut asked = self.map.read().expect("slot map").nodes();
        asked.retain(|a| *a != self.seed_addr);
        asked.insert(0, self.seed_addr.clone());
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SLOTS");
        let cmd = &cmd;
        let mut readings: futures_util::stream::FuturesUnordered<_> = asked
            .into_iter()
            .map(|addr| async move {
                let (reply, _) = self.node(&addr)?.query_shared(cmd, true).await?;
                match SlotMap::from_cluster_slots(&reply, &self.seed_host) {
                    Ok(map) if !map.is_empty() => Ok(map),
                    Ok(_) => Err(Failure::Transient(format!("{addr}: no slot is served"))),
                    Err(why) => Err(Failure::Transient(format!("{addr}: {why}"))),
                }
            })
            .collect();
        let (mut refused, mut last) = (None, None);
        while let Some(reading) = readings.next().await {
            match reading {
                Ok(map) => {
                    self.learn(&map.ids);
                    *self.map.write().expect("slot map") = map;
                    self.stale.store(false, Ordering::Release);
                    return Ok(());
                }
                // Not a cluster, or not allowed to read its map: said
                // rather than a node that was merely down.
                Err(f @ Failure::Rejected(_)) => refused = Some(f),
                Err(f) => last = Some(f),
            }
        }
        Err(refused
            .or(last)
            .unwrap_or_else(|| Failure::Transient("no cluster node to ask".into())))
    }

    /// Link the node ids of this cluster as one server.
    fn learn(&self, ids: &[String]) {
        let Some(first) = ids.first() else { return };
        let mut identity = self.identity.lock().expect("cluster identity");
        let me = identity.get_or_insert_with(|| cluster_tag(first)).clone();
        for id in ids {
            self.same.moved(&me, &cluster_tag(id));
        }
    }

    /// The cluster's tag, once its map was read.
    pub(crate) fn known_server(&self) -> Option<ServerTag> {
        self.identity.lock().expect("cluster identity").clone()
    }

    /// Every primary's shared connection is open.
    pub(crate) fn is_connected(&self) -> bool {
        !self.map_is_empty() && self.primaries().iter().all(|n| n.is_connected())
    }

    pub(crate) fn is_met(&self) -> bool {
        !self.map_is_empty() && self.primaries().iter().all(|n| n.is_met())
    }

    /// Read the map and connect to every primary.
    /// (Boxed with its type named, here and below: a primary is a node
    /// too, and a future that holds its own kind needs a name for `Send`.)
    pub(crate) fn meet(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.map_is_empty() && self.refresh().await.is_err() {
                return;
            }
            let meets: Vec<_> = self.primaries().into_iter().collect();
            futures_util::future::join_all(meets.iter().map(|n| n.meet())).await;
        })
    }

    /// Changes when a primary's shared connection does (a connection
    /// found dead by a round, `Locker::found_dead`).
    pub(crate) fn shared_id(&self) -> Option<usize> {
        use std::hash::{Hash, Hasher};
        if self.map_is_empty() {
            return None;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let addrs = self.map.read().expect("slot map").primaries();
        for a in addrs {
            a.hash(&mut h);
            self.node(&a).ok().and_then(|n| n.shared_id()).hash(&mut h);
        }
        Some(h.finish() as usize)
    }

    /// Dedicated connections being opened now, to any of its nodes.
    pub(crate) fn opening(&self) -> usize {
        let nodes = self.nodes.lock().expect("cluster nodes");
        nodes.values().map(|n| n.opening()).sum()
    }

    pub(crate) fn in_doubt(&self) -> bool {
        let nodes = self.nodes.lock().expect("cluster nodes");
        nodes.values().any(|n| n.in_doubt())
    }

    pub(crate) fn clock_offset(&self) -> Option<i64> {
        self.primaries().iter().find_map(|n| n.clock_offset())
    }

    pub(crate) fn clock_stale(&self) -> bool {
        self.primaries().iter().any(|n| n.clock_stale())
    }

    pub(crate) fn read_clock_again(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let nodes = self.primaries();
            futures_util::future::join_all(nodes.iter().map(|n| n.read_clock_again())).await;
        })
    }

    /// `cmd` on the primary of its key's slot (`LOCK.* name ...`), on the
    /// shared connection, or on a dedicated one when `dedicated` is
    /// given (its refusal closure). A command without a key
    /// (`LOCK.SERVERID`: a probe, a drain) goes to every primary.
    pub(crate) fn query<'a>(
        &'a self,
        cmd: &'a Cmd,
        resend: bool,
        dedicated: Option<Refuse<'a>>,
    ) -> BoxFuture<'a, Result<Tagged, Failure>> {
        Box::pin(self.route(cmd, resend, dedicated))
    }

    async fn route(
        &self,
        cmd: &Cmd,
        resend: bool,
        dedicated: Option<Refuse<'_>>,
    ) -> Result<Tagged, Failure> {
        let Some(key) = key_of(cmd) else {
            return self.everywhere(cmd, resend).await;
        };
        let slot = key_slot(key);
        let mut ask: Option<String> = None;
        let mut redirects = 0u32;
        let mut first = true;
        loop {
            if self.map_is_empty() || (first && self.stale.load(Ordering::Acquire)) {
                if let Err(f) = self.refresh().await {
                    if self.map_is_empty() || matches!(f, Failure::Rejected(_)) {
                        return Err(f);
                    }
                }
            }
            first = false;
            let mut sent_to = None;
            let reply = match ask.take() {
                Some(addr) => self.asking(&addr, cmd).await,
                None => {
                    let addr = self
                        .map
                        .read()
                        .expect("slot map")
                        .primary(slot)
                        .map(str::to_string);
                    let Some(addr) = addr else {
                        self.stale.store(true, Ordering::Release);
                        let why = format!("slot {slot} is served by no primary (cluster down?)");
                        return Err(Failure::Transient(why));
                    };
                    let node = self.node(&addr)?;
                    sent_to = Some(addr);
                    match dedicated {
                        Some(refuse) => node.query_dedicated(cmd, refuse).await,
                        None => node.query_shared(cmd, resend).await,
                    }
                }
            };
            let cause = match &reply {
                Err(Failure::Transient(cause)) => cause,
                _ => return reply,
            };
            match slots::redirect(cause) {
                Some(Redirect::Moved(s, addr)) => {
                    let addr = slots::at_known_host(&addr, &self.seed_host);
                    self.map.write().expect("slot map").moved(s, &addr);
                    self.stale.store(true, Ordering::Release);
                    redirects += 1;
                }
                Some(Redirect::Ask(_, addr)) => {
                    ask = Some(slots::at_known_host(&addr, &self.seed_host));
                    redirects += 1;
                }
                Some(Redirect::TryAgain) => {
                    self.stale.store(true, Ordering::Release);
                    tokio::time::sleep(TRY_AGAIN_PAUSE).await;
                    // The slot may have moved: read the map again.
                    first = true;
                    continue;
                }
                None if slots::never_sent(cause) && sent_to.is_some() => {
                    // The primary's address refuses connections (gone,
                    // its replica promoted): nothing was sent, so read the
                    // map again and send where it says, if elsewhere.
                    self.stale.store(true, Ordering::Release);
                    let now = match self.refresh().await {
                        Ok(()) => self
                            .map
                            .read()
                            .expect("slot map")
                            .primary(slot)
                            .map(str::to_string),
                        Err(_) => None,
                    };
                    if now.is_none() || now == sent_to {
                        return reply;
                    }
                    redirects += 1;
                }
                None => {
                    // A primary down or failed over: read the map again
                    // before the next call.
                    self.stale.store(true, Ordering::Release);
                    return reply;
                }
            }
            if redirects > MAX_REDIRECTS {
                return reply;
            }
        }
    }

    /// `ASKING` and `cmd` on a connection of their own to `addr` (a slot
    /// being migrated there: rare, and the two must travel together),
    /// with `LOCK.SERVERID` so that the reply counts as that server's.
    async fn asking(&self, addr: &str, cmd: &Cmd) -> Result<Tagged, Failure> {
        let info = self
            .info_at(addr)
            .ok_or_else(|| Failure::Transient(format!("cannot reach cluster node {addr:?}")))?;
        let client = redis::Client::open(info).map_err(classify)?;
        let mut c = client
            .get_multiplexed_async_connection_with_config(&unbounded())
            .await
            .map_err(classify)?;
        let mut pipe = redis::pipe();
        pipe.cmd("LOCK.SERVERID")
            .cmd("ASKING")
            .ignore()
            .add_command(cmd.clone());
        let (id, reply): (Value, Value) = pipe.query_async(&mut c).await.map_err(classify)?;
        let server = match id {
            Value::BulkString(id) => Some(server_ids::tag(&String::from_utf8_lossy(&id), 0)),
            _ => None,
        };
        Ok((reply, server))
    }

    /// A command without a key on every primary; the first failure, or
    /// the first reply as this cluster's.
    async fn everywhere(&self, cmd: &Cmd, resend: bool) -> Result<Tagged, Failure> {
        if self.map_is_empty() || self.stale.load(Ordering::Acquire) {
            if let Err(f) = self.refresh().await {
                if self.map_is_empty() || matches!(f, Failure::Rejected(_)) {
                    return Err(f);
                }
            }
        }
        let nodes = self.primaries();
        let replies =
            futures_util::future::join_all(nodes.iter().map(|n| n.query_shared(cmd, resend))).await;
        let mut first = None;
        for reply in replies {
            let (value, _) = reply?;
            first.get_or_insert(value);
        }
        let value = first.ok_or_else(|| Failure::Transient("no primary known".into()))?;
        Ok((value, self.known_server()))
    }
}

/// The key of a `LOCK.*` command: its first argument.
fn key_of(cmd: &Cmd) -> Option<&[u8]> {
    match cmd.args_iter().nth(1)? {
        redis::Arg::Simple(key) => Some(key),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_and_what_they_are_not() {
        assert_eq!(seed_url("redis://h:1/"), Ok(None));
        assert_eq!(
            seed_url("redis+cluster://u:p@h:1/"),
            Ok(Some("redis://u:p@h:1/".into()))
        );
        assert_eq!(
            seed_url("RedisS+Cluster://h:1"),
            Ok(Some("rediss://h:1".into()))
        );
        for bad in [
            "redis+cluster+sentinel://h:1/",
            "redis+sentinel+cluster://h:1/s",
            "cluster://h:1",
            "unix+cluster:///tmp/s",
        ] {
            assert!(seed_url(bad).unwrap_err().contains("never two"), "{bad}");
        }
        assert!(seed_url("redis+cluster://h:1/2")
            .unwrap_err()
            .contains("only database 0"));
        assert_eq!(
            seed_url("redis+cluster://h:1/0"),
            Ok(Some("redis://h:1/0".into()))
        );
    }

    #[test]
    fn the_key_of_a_lock_command() {
        let mut cmd = redis::cmd("LOCK.ACQUIRE");
        cmd.arg("job").arg("me");
        assert_eq!(key_of(&cmd), Some(&b"job"[..]));
        assert_eq!(key_of(&redis::cmd("LOCK.SERVERID")), None);
    }

    #[test]
    fn addresses() {
        assert_eq!(
            host_port("127.0.0.1:7000"),
            Some(("127.0.0.1".into(), 7000))
        );
        assert_eq!(host_port("[::1]:7000"), Some(("::1".into(), 7000)));
        assert_eq!(host_port("nope"), None);
    }
}
