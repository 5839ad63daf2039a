//! One Redis server: a long-lived multiplexed connection shared by every
//! short operation, (re)connected on demand after a failure, and a small
//! pool of dedicated connections for blocking calls (`LOCK.ACQUIRE ... WAIT`).

use crate::error::describe;
use crate::sentinel::{self, Group};
use crate::server_clock::ServerClock;
use crate::server_ids::{self, SameServers, ServerTag};
use redis::aio::MultiplexedConnection;
use redis::io::tcp::{socket2::TcpKeepalive, TcpSettings};
use redis::RedisError;
use redis::{AsyncConnectionConfig, Client, Cmd, ConnectionInfo, ErrorKind, IntoConnectionInfo};
use redis::{ServerErrorKind, Value};

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, Mutex};

/// Idle dedicated connections kept per node; more concurrent waiters open
/// more, and the surplus is closed when they finish.
const IDLE_DEDICATED: usize = 8;

/// Why one request to one node did not produce a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Timeout, transport error, or a server state that may pass
    /// (`TRYAGAIN`, `LOADING`, too many clients...): worth retrying.
    Transient(String),
    /// The server refused the request and would refuse it again.
    Rejected(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Transient(s) | Failure::Rejected(s) => f.write_str(s),
        }
    }
}

/// A server error that retrying cannot fix: bad arguments (`ERR ...`, e.g.
/// a TTL above `lock.max-ttl-ms`, the module not loaded), `WRONGTYPE`,
/// missing permissions, wrong credentials.
pub(crate) fn is_deterministic(e: &RedisError) -> bool {
    match e.kind() {
        // A replica (READONLY) listed by mistake will not turn into a primary
        // by retrying within one wait.
        ErrorKind::AuthenticationFailed
        | ErrorKind::InvalidClientConfig
        | ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::NoPerm) => true,
        // "max number of clients reached" is also an ERR, and it passes; so
        // does a FENCE token too far above a node whose clock is behind (its
        // clock catches up; meanwhile that node is just not fenced).
        ErrorKind::Server(ServerErrorKind::ResponseError) => {
            let text = describe(e);
            !(text.contains("max number of clients") || text.contains("above this server's clock"))
        }
        ErrorKind::Extension => matches!(e.code(), Some("WRONGTYPE" | "WRONGPASS" | "NOAUTH")),
        _ => false,
    }
}

pub(crate) fn classify(e: RedisError) -> Failure {
    if is_deterministic(&e) {
        Failure::Rejected(describe(&e))
    } else {
        Failure::Transient(describe(&e))
    }
}

/// `LOCK.SERVERID` unknown: a module from before it. Every URL of such a
/// server cannot say, so it cannot pass for two servers.
fn cannot_say(e: &RedisError) -> bool {
    describe(e).to_ascii_lowercase().contains("unknown command")
}

/// `LOCK.SERVERID` refused by an ACL: a refusal, not "cannot say". Another
/// URL of the same server, with a user allowed it, would say, and the
/// server would vote twice (an attack run, 269c0e3).
fn not_allowed_to_say(e: RedisError) -> RedisError {
    if e.code() != Some("NOPERM") {
        return e;
    }
    RedisError::from((
        ErrorKind::InvalidClientConfig,
        "LOCK.SERVERID refused",
        format!(
            "grant this user +lock.serverid (each server's vote is counted once by it): {}",
            describe(&e)
        ),
    ))
}

/// Connections without redis-rs' own time limits (since 1.0: 1 s to connect,
/// 500 ms per reply): every request here is bounded by its round's deadline
/// (node_timeout), and a `LOCK.ACQUIRE ... WAIT` blocks as long as it waits.
fn unbounded() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None)
}

/// One request on a multiplexed connection (shared or dedicated), a server
/// error as an `Err`, as `cmd.query_async::<Value>` returns it. Awaited in
/// place, not through `ConnectionLike::req_packed_command`, which boxes
/// redis-rs 1.x's request future (1,152 bytes) in an allocation of its own:
/// one allocation and one copy of it fewer per request. The future still
/// makes each request's box larger than glibc malloc's per-thread cache
/// (1,032 bytes), which 0.27's fit (redis-lock-allocs, 2026-11-28).
async fn request(c: &mut MultiplexedConnection, cmd: &Cmd) -> redis::RedisResult<Value> {
    c.send_packed_command(cmd).await?.extract_error()
}

/// `cmd`'s reply, with `then` run once the request is on the connection's
/// queue: `join` polls the request first, and its first poll queues it
/// (unconstrained: tokio's budget could leave it unsent, and `then`, which
/// lets other requests onto the connection, would run ahead of it).
async fn sent_before(
    c: &mut MultiplexedConnection,
    cmd: &Cmd,
    then: impl Future<Output = ()>,
) -> redis::RedisResult<Value> {
    let reply = tokio::task::unconstrained(request(c, cmd));
    futures_util::future::join(reply, then).await.0
}

fn broken(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
}

/// The shared connection: a handle, its id, and the server it reached.
type SharedConn = (MultiplexedConnection, usize, Option<ServerTag>);

pub struct Node {
    /// host:port, for messages (never the password).
    pub name: String,
    client: Client,
    /// A Sentinel group's node: its server is the group's primary, looked
    /// up at each connect (`sentinel.rs`); `client` then names the sentinel.
    group: Option<Arc<Group>>,
    /// The shared connection; a plain mutex held only to clone it (every
    /// request passes here, an async mutex costs more).
    conn: std::sync::Mutex<Option<Driven>>,
    /// Held while (re)connecting, so a burst of requests opens one connection.
    connecting: Mutex<()>,
    idle: std::sync::Mutex<Vec<Driven>>,
    /// Dedicated connections being opened now: a wait that ends with no
    /// reply says so, since then its request may never have left.
    opening: AtomicUsize,
    /// Shared connections opened so far (their ids).
    opened: AtomicUsize,
    /// The server this URL reached last, and the tags of servers that
    /// restarted under the Locker's URLs (`server_ids.rs`).
    last_server: std::sync::Mutex<Option<ServerTag>>,
    same: Arc<SameServers>,
    /// Not 0: a request on the shared connection was given up (its caller's
    /// deadline passed) before its reply, so it may still be on its way (a
    /// stalled server, a slow path); the value tells that doubt from a later
    /// one. Cleared by the reply to a request sent after it: replies come
    /// in order. See `Locker::drain`.
    doubt: AtomicU64,
    /// The server's clock, read when the shared connection opened.
    clock: ServerClock,
}

/// Doubts are told apart by a process-wide count.
static DOUBTS: AtomicU64 = AtomicU64::new(1);

/// Armed while a request may be on the shared connection: dropped armed
/// (its caller stopped waiting), it leaves its node in doubt.
struct Unanswered<'a>(Option<&'a AtomicU64>);

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if let Some(doubt) = self.0 {
            doubt.store(DOUBTS.fetch_add(1, Ordering::Relaxed), Ordering::Release);
        }
    }
}

/// Counts a dedicated connection as being opened until dropped (also when
/// the wait that opens it ends first and drops it half-way).
struct Opening<'a>(&'a AtomicUsize);

impl<'a> Opening<'a> {
    fn count(opening: &'a AtomicUsize) -> Opening<'a> {
        opening.fetch_add(1, Ordering::Relaxed);
        Opening(opening)
    }
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A shared connection just opened, not yet shared, and the node's
/// `connecting` lock, held until its clock is read (`Node::share`).
struct Opened<'a> {
    driven: Driven,
    _connecting: tokio::sync::MutexGuard<'a, ()>,
}

/// A request's turn on a connection that was being opened when it came:
/// the connection it opened (`Opened`), or the node's `connecting` lock,
/// waited for behind the opener and held until the request is on the
/// connection, so that requests made later go out after it.
enum Turn<'a> {
    Opened(Opened<'a>),
    Waited(tokio::sync::MutexGuard<'a, ()>),
}

/// A reply, and the server whose connection carried it (`server_ids.rs`).
pub(crate) type Tagged = (Value, Option<ServerTag>);

/// A connection and a watch on the runtime its driver task runs on
/// (redis-rs spawns it on the runtime that opened it). When that runtime
/// shuts down, the connection is dead before any request failed on it: a
/// Locker that outlives a runtime (a static used by one `#[tokio::test]`
/// after another) would fail its next request on every node.
struct Driven {
    conn: MultiplexedConnection,
    runtime: RuntimeWatch,
    /// Which shared connection of this node this is (a count, never
    /// reused): a failed request drops the shared connection only if it is
    /// still the one it failed on.
    id: usize,
    /// The server it reached, as it said (None: it cannot say).
    server: Option<ServerTag>,
    /// A Sentinel node's: the group's generation when it was opened (a
    /// connection opened before the primary moved is not used).
    generation: u64,
}

impl Driven {
    /// Opened on the current runtime.
    fn here(
        (conn, generation): (MultiplexedConnection, u64),
        id: usize,
        server: Option<ServerTag>,
    ) -> Driven {
        Driven {
            conn,
            runtime: RuntimeWatch::here(),
            id,
            server,
            generation,
        }
    }
}

/// Whether the runtime it was made on is still up: a task parked there
/// holds `up`, and a runtime that shuts down drops its tasks. The task ends
/// when the watch is dropped.
struct RuntimeWatch {
    up: Weak<()>,
    _stop: oneshot::Sender<()>,
}

impl RuntimeWatch {
    fn here() -> RuntimeWatch {
        let up = Arc::new(());
        let watch = Arc::downgrade(&up);
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _up = up;
            let _ = stopped.await;
        });
        RuntimeWatch {
            up: watch,
            _stop: stop,
        }
    }

    fn is_up(&self) -> bool {
        self.up.strong_count() > 0
    }
}

impl Node {
    /// A server (or a Sentinel group) at `url`, of a Locker whose nodes
    /// share `same` (a cluster URL is a `Member::Cluster`).
    pub(crate) fn new(url: &str, same: Arc<SameServers>) -> Node {
        if sentinel::is_sentinel(url) {
            let parsed = sentinel::SentinelUrl::parse(url).expect("URL validated by the builder");
            let client = Client::open(parsed.first_sentinel()).expect("URL validated");
            let group = Arc::new(Group::new(parsed));
            return Node {
                name: group.name(),
                group: Some(group),
                ..Node::of(client, same)
            };
        }
        Node::at(
            url.into_connection_info()
                .expect("URL validated by the builder"),
            same,
        )
    }

    /// A node of one server at `info`.
    pub(crate) fn at(info: ConnectionInfo, same: Arc<SameServers>) -> Node {
        // TCP keepalive with the system's timings, as redis-rs 0.27's
        // keep-alive feature set it: a server gone without a FIN is found
        // on connections that wait long (a WAIT).
        let info = info.set_tcp_settings(TcpSettings::default().set_keepalive(TcpKeepalive::new()));
        let client = Client::open(info).expect("URL validated by the builder");
        Node::of(client, same)
    }

    fn of(client: Client, same: Arc<SameServers>) -> Node {
        Node {
            name: crate::endpoint::node_name(client.get_connection_info()),
            client,
            group: None,
            conn: std::sync::Mutex::new(None),
            connecting: Mutex::new(()),
            idle: std::sync::Mutex::new(Vec::new()),
            opening: AtomicUsize::new(0),
            opened: AtomicUsize::new(0),
            last_server: std::sync::Mutex::new(None),
            same,
            doubt: AtomicU64::new(0),
            clock: ServerClock::default(),
        }
    }

    /// A request given up on the shared connection may still be on its way
    /// (see `doubt`).
    pub(crate) fn in_doubt(&self) -> bool {
        self.doubt.load(Ordering::Acquire) != 0
    }

    /// The server this URL's connections reached last, if it said.
    pub(crate) fn known_server(&self) -> Option<ServerTag> {
        self.last_server.lock().expect("last server").clone()
    }

    /// The shared connection, unless none is open or its runtime is gone
    /// (then it is dropped, and the next request opens a new one).
    fn cached(&self) -> Option<SharedConn> {
        let mut slot = self.conn.lock().expect("connection slot");
        match slot.as_ref() {
            Some(open) if open.runtime.is_up() && self.current(open) => {
                Some((open.conn.clone(), open.id, open.server.clone()))
            }
            Some(_) => {
                *slot = None;
                None
            }
            None => None,
        }
    }

    /// The id of the shared connection if one is open: a later look that
    /// finds another (or none) knows it was dropped meanwhile.
    pub(crate) fn shared_id(&self) -> Option<usize> {
        let slot = self.conn.lock().expect("connection slot");
        slot.as_ref()
            .filter(|open| open.runtime.is_up() && self.current(open))
            .map(|open| open.id)
    }

    /// The shared connection is open (as far as this side knows). Asked
    /// for every node of every round: looks, without cloning it.
    pub(crate) fn is_connected(&self) -> bool {
        let slot = self.conn.lock().expect("connection slot");
        slot.as_ref()
            .is_some_and(|open| open.runtime.is_up() && self.current(open))
    }

    /// Not opened before its Sentinel group's primary moved.
    fn current(&self, open: &Driven) -> bool {
        (self.group.as_ref()).is_none_or(|g| g.generation() == open.generation)
    }

    /// A new connection to the server: the URL's, or a Sentinel group's
    /// primary (with the group's generation; 0 for a plain node).
    async fn open(&self) -> redis::RedisResult<(MultiplexedConnection, u64)> {
        match &self.group {
            None => (self.client)
                .get_multiplexed_async_connection_with_config(&unbounded())
                .await
                .map(|c| (c, 0)),
            Some(group) => group.open_primary(&unbounded()).await,
        }
    }

    /// `e` says a Sentinel node's connection reached a replica: the
    /// group's primary moved (a failover), so every connection opened so
    /// far is stale. Nothing ran: the request may be sent again.
    fn moved_away(&self, e: &RedisError) -> bool {
        let group = self.group.as_ref().filter(|_| sentinel::is_readonly(e));
        group.inspect(|g| g.moved()).is_some()
    }

    /// `e` as a failure; a READONLY of a Sentinel node passes (the next
    /// connect finds the new primary).
    fn classify(&self, e: RedisError) -> Failure {
        match &self.group {
            Some(g) if sentinel::is_readonly(&e) => Failure::Transient(format!(
                "{} (the primary of {} moved: asking the sentinels again)",
                describe(&e),
                g.name()
            )),
            _ => classify(e),
        }
    }

    /// The shared connection, opened if needed. Opening is boxed apart:
    /// its future is kilobytes, and inlined it would size (and cost a copy
    /// of) every request's future, though nearly every request finds the
    /// connection open. A connection this call opened comes back not yet
    /// shared, and one another call opened while this one waited with the
    /// `connecting` lock still held (`Turn`): the caller's request goes out
    /// on it before the next request's. The open connection is taken as
    /// it is only while no request waits for that lock: one made while a
    /// request that came during the connect still waited for its turn (the
    /// opener's clock reading) went out ahead of it, and an unlock's
    /// RELEASE overtook the ACQUIRE it undid (an attack run, 2026-11-28).
    async fn connection(&self) -> redis::RedisResult<(SharedConn, Option<Turn<'_>>)> {
        if let Ok(_nobody_waits) = self.connecting.try_lock() {
            if let Some(c) = self.cached() {
                return Ok((c, None));
            }
        }
        Box::pin(self.connect()).await
    }

    /// Open the shared connection if it is not, and so learn which server
    /// this URL reaches (`known_server`). Errors are the next request's.
    /// Also waits out a connect still reading the server's clock: the
    /// connection is kept before that reading (see `connect`), and a
    /// queued wait takes its ticket from the readings once its nodes are met.
    pub(crate) async fn meet(&self) {
        if !self.is_connected() {
            if let Ok(((c, ..), Some(Turn::Opened(opened)))) = self.connection().await {
                self.share(opened, c).await;
            }
        } else if !self.is_met() {
            let _reading = self.connecting.lock().await;
        }
    }

    /// Connected, and no connect still reading the server's clock.
    pub(crate) fn is_met(&self) -> bool {
        self.is_connected() && self.connecting.try_lock().is_ok()
    }

    async fn connect(&self) -> redis::RedisResult<(SharedConn, Option<Turn<'_>>)> {
        let connecting = self.connecting.lock().await;
        if let Some(open) = self.cached() {
            return Ok((open, Some(Turn::Waited(connecting))));
        }
        let (mut c, generation) = self.open().await?;
        let server = self.identify(&mut c).await?;
        let id = self.opened.fetch_add(1, Ordering::Relaxed);
        let driven = Driven::here((c.clone(), generation), id, server.clone());
        let opened = Opened {
            driven,
            _connecting: connecting,
        };
        Ok(((c, id, server), Some(Turn::Opened(opened))))
    }

    /// Share a connection just opened, then read the server's clock on it
    /// (`connecting` stays held until then: `meet` waits for the reading).
    /// Shared before the reading: a request's timeout cuts this short, and
    /// a connection opened whose TIME reply came after the node timeout (a
    /// slow link) was thrown away and opened again, with the same end, on
    /// every request. The reading is only a ticket's scale.
    async fn share(&self, opened: Opened<'_>, mut c: MultiplexedConnection) {
        let Opened {
            driven,
            _connecting,
        } = opened;
        *self.conn.lock().expect("connection slot") = Some(driven);
        self.read_clock(&mut c).await;
    }

    /// The first request on a connection it opened, put on the connection
    /// before the connection is shared: a request made meanwhile (an
    /// unlock's RELEASE while this ACQUIRE's connection opened) went out
    /// ahead of it when the opener sent it only after the clock reading,
    /// and the grant then landed after the release (CI on e6093a3). The
    /// reading follows it, pipelined.
    async fn first_request(
        &self,
        opened: Opened<'_>,
        c: &mut MultiplexedConnection,
        cmd: &Cmd,
    ) -> redis::RedisResult<Value> {
        let clock = c.clone();
        sent_before(c, cmd, self.share(opened, clock)).await
    }

    /// A request whose turn (`Turn::Waited`) came on a connection another
    /// request opened: put on the connection before the turn passes on.
    async fn after_waiting(
        turn: tokio::sync::MutexGuard<'_, ()>,
        c: &mut MultiplexedConnection,
        cmd: &Cmd,
    ) -> redis::RedisResult<Value> {
        sent_before(c, cmd, async move { drop(turn) }).await
    }

    /// Read the server's clock (`TIME`) for queued waits' tickets
    /// (`server_clock.rs`). Refused (an ACL without `+time`) or failed, the
    /// last reading stays; a broken connection fails the next request.
    async fn read_clock(&self, c: &mut MultiplexedConnection) {
        let sent = Instant::now();
        if let Ok((secs, micros)) = redis::cmd("TIME").query_async::<(u64, u64)>(c).await {
            let server = secs.saturating_mul(1_000_000).saturating_add(micros);
            let own = crate::quorum::unix_micros();
            self.clock.read(sent, Instant::now(), server, own);
        }
    }

    /// Whether the server's clock should be read again (see
    /// `ServerClock::stale`).
    pub(crate) fn clock_stale(&self) -> bool {
        let own = crate::quorum::unix_micros();
        self.clock.stale(Instant::now(), own)
    }

    /// Read the server's clock again on the shared connection, if open.
    pub(crate) async fn read_clock_again(&self) {
        if let Some((mut conn, ..)) = self.cached() {
            self.read_clock(&mut conn).await;
        }
    }

    /// The server's clock minus this process's monotonic one, in µs, as
    /// read last (`server_clock.rs`).
    pub(crate) fn clock_offset(&self) -> Option<i64> {
        self.clock.offset()
    }

    /// Which server a new connection reached (`LOCK.SERVERID`), so that a
    /// round counts one yes per server. None for a server that cannot say
    /// (a module before `LOCK.SERVERID`): counted as distinct, the
    /// builder's URL check is all there is then. Any other error (an ACL
    /// without it, BUSY, a broken connection) fails the connection.
    async fn identify(
        &self,
        c: &mut MultiplexedConnection,
    ) -> redis::RedisResult<Option<ServerTag>> {
        match redis::cmd("LOCK.SERVERID").query_async::<Value>(c).await {
            Ok(Value::BulkString(id)) => {
                let db = self.client.get_connection_info().redis_settings().db();
                let server = server_ids::tag(&String::from_utf8_lossy(&id), db);
                let mut last = self.last_server.lock().expect("last server");
                if let Some(before) = last.replace(server.clone()) {
                    self.same.moved(&before, &server);
                }
                Ok(Some(server))
            }
            Ok(_) => Ok(None),
            Err(e) if cannot_say(&e) => Ok(None),
            Err(e) => Err(not_allowed_to_say(e)),
        }
    }

    /// Run a blocking command on a connection of its own, so it does not
    /// stall the shared one. Connections come from and go back to a pool; a
    /// call that is dropped (its deadline passed) or breaks drops its
    /// connection (a reply may still be on its way), and a pooled
    /// connection found broken is replaced once. No deadline of its own:
    /// the caller's round has one.
    ///
    /// `refuse` sees the server the connection reached before anything is
    /// sent, and a reason it gives stops the request there (a transient
    /// failure): a WAIT through a second URL of a server must not be sent
    /// at all (see `Locker::send`).
    pub async fn query_dedicated(
        &self,
        cmd: &Cmd,
        refuse: impl Fn(Option<&ServerTag>) -> Option<String> + Send + Sync,
    ) -> Result<Tagged, Failure> {
        let open = || async {
            let _opening = Opening::count(&self.opening);
            let (mut c, generation) = Box::pin(self.open()).await?;
            let server = Box::pin(self.identify(&mut c)).await?;
            Ok::<_, RedisError>(Driven::here((c, generation), 0, server))
        };
        let mut conn = match self.pooled() {
            Some(c) => c,
            None => open().await.map_err(classify)?,
        };
        let mut fresh = false;
        let reply = loop {
            if let Some(why) = refuse(conn.server.as_ref()) {
                self.give_back(conn);
                return Err(Failure::Transient(why));
            }
            let reply = request(&mut conn.conn, cmd).await;
            match reply {
                Err(e) if broken(&e) && !fresh => {
                    conn = open().await.map_err(classify)?;
                    fresh = true;
                }
                reply => break reply,
            }
        };
        let server = conn.server.clone();
        if !matches!(&reply, Err(e) if broken(e) || self.moved_away(e)) {
            self.give_back(conn);
        }
        reply.map(|v| (v, server)).map_err(|e| self.classify(e))
    }

    /// Dedicated connections to this node being opened now.
    pub(crate) fn opening(&self) -> usize {
        self.opening.load(Ordering::Relaxed)
    }

    /// A dedicated connection back to the pool (closed if it is full).
    fn give_back(&self, conn: Driven) {
        let mut idle = self.idle.lock().expect("pool lock");
        if idle.len() < IDLE_DEDICATED {
            idle.push(conn);
        }
    }

    /// An idle dedicated connection whose runtime is still up (those of a
    /// runtime that is gone are dropped).
    fn pooled(&self) -> Option<Driven> {
        let mut idle = self.idle.lock().expect("pool lock");
        while let Some(c) = idle.pop() {
            if c.runtime.is_up() && self.current(&c) {
                return Some(c);
            }
        }
        None
    }

    /// Run `cmd` on the shared connection. A transport error drops the
    /// connection so the next call reconnects; a deadline that passes (the
    /// caller drops this future) keeps it: a paused server answers later,
    /// and the multiplexer matches replies in order. No deadline of its
    /// own: the caller's round has one.
    ///
    /// With `resend`, a connection found broken is replaced and the request
    /// sent once more: after a server restart the cached connection is
    /// dead, and failing there left, say, an unlock's RELEASE undone, the
    /// node held for a TTL. Only for requests that repeat harmlessly,
    /// whenever and on whichever connection the repeat lands (the reply of
    /// the first may have been lost with the connection after it ran):
    /// EXTEND and FENCE (they never grant), and the RELEASE of an owner
    /// made for one call (it can only take that call's own grants, which it
    /// is letting go). Never an ACQUIRE (a repeat landing after the unlock's
    /// RELEASE would grant again; with REENTRANT it adds a hold), nor a
    /// caller's own owner's RELEASE (on a REENTRANT lock a repeat drops a
    /// hold another handle still counts on: two holders).
    pub async fn query_shared(&self, cmd: &Cmd, resend: bool) -> Result<Tagged, Failure> {
        let mut resent = false;
        let mut moved = false;
        loop {
            let mut used = None;
            // Read before sending: only a reply to a request sent after the
            // doubt arose shows that what was given up has been answered.
            let doubt = self.doubt.load(Ordering::Acquire);
            let attempt = async {
                let ((mut c, id, server), turn) = self.connection().await?;
                used = Some(id);
                let mut unanswered = Unanswered(Some(&self.doubt));
                let reply = match turn {
                    None => request(&mut c, cmd).await,
                    Some(Turn::Opened(opened)) => {
                        Box::pin(self.first_request(opened, &mut c, cmd)).await
                    }
                    Some(Turn::Waited(turn)) => {
                        Box::pin(Node::after_waiting(turn, &mut c, cmd)).await
                    }
                };
                unanswered.0 = None;
                reply.map(|v| (v, server))
            };
            match attempt.await {
                Ok(tagged) => {
                    if doubt != 0 {
                        let (set, clear) = (Ordering::AcqRel, Ordering::Relaxed);
                        let _ = self.doubt.compare_exchange(doubt, 0, set, clear);
                    }
                    if resent && is_release(cmd) && matches!(tagged.0, Value::Int(-1)) {
                        return Err(Failure::Transient(RELEASED_OR_LOST.into()));
                    }
                    return Ok(tagged);
                }
                Err(e) if broken(&e) => {
                    if let Some(dead) = used {
                        self.forget(dead);
                    }
                    if resent || !resend || e.is_connection_refusal() {
                        return Err(self.classify(e));
                    }
                    resent = true;
                }
                // A Sentinel node's primary was demoted: the request did
                // not run, so it goes once more, to the new primary.
                Err(e) if !moved && self.moved_away(&e) => moved = true,
                Err(e) => return Err(self.classify(e)),
            }
        }
    }

    /// Drop the shared connection if it is still `dead` (not one another
    /// request has opened since: requests on one connection keep their
    /// order, and throwing a fresh one away would split them).
    fn forget(&self, dead: usize) {
        let mut slot = self.conn.lock().expect("connection slot");
        if slot.as_ref().is_some_and(|open| open.id == dead) {
            *slot = None;
        }
    }
}

/// A RELEASE sent again answered "not held": the first may have run (its
/// reply lost with the connection) or the lock was gone before. Not proof
/// of a loss: counted as "not ours" it made an unlock that released the
/// lock say `Expired` (the CLI's "lost while the command ran", 3f191a0).
/// "Held by another owner" (0) stays a loss: the first would have had to
/// run and another client take the lock within one round trip, while a
/// connection closed idle (server `timeout`) before a takeover is common,
/// and it hid that takeover from the CLI (4dd471c).
const RELEASED_OR_LOST: &str = "the RELEASE's reply was lost with its connection, and sent again \
     it found the lock not held: released by the first, or gone before";

fn is_release(cmd: &Cmd) -> bool {
    cmd.args_iter()
        .next()
        .is_some_and(|a| matches!(a, redis::Arg::Simple(b) if b == b"LOCK.RELEASE"))
}

/// `query`'s reply, or a timeout failure once `timeout` has passed.
pub(crate) async fn within<T>(
    timeout: Duration,
    query: impl std::future::Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    tokio::time::timeout(timeout, query)
        .await
        .unwrap_or_else(|_| Err(timed_out(timeout)))
}

/// The failure of a request whose deadline passed.
pub(crate) fn timed_out(timeout: Duration) -> Failure {
    Failure::Transient(format!("{TIMED_OUT} {timeout:?}"))
}

const TIMED_OUT: &str = "timed out after";

/// A failure's cause says the request's deadline passed: unlike a refused
/// or broken connection, the request may still reach the server later.
pub(crate) fn is_timeout(cause: &str) -> bool {
    cause.starts_with(TIMED_OUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_errors() {
        let e = |kind, text: &'static str| RedisError::from((kind, text));
        assert!(is_deterministic(&e(
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "ttl-ms is above the maximum (1000)"
        )));
        assert!(is_deterministic(&e(ErrorKind::AuthenticationFailed, "x")));
        assert!(!is_deterministic(&e(
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "max number of clients reached"
        )));
        assert!(!is_deterministic(&e(
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "token is more than 60 s above this server's clock in microseconds (at most 5)"
        )));
        assert!(!is_deterministic(&e(
            ErrorKind::Server(ServerErrorKind::TryAgain),
            "guard"
        )));
        assert!(!is_deterministic(&e(ErrorKind::Io, "reset")));
    }

    #[test]
    fn a_server_that_cannot_say_who_it_is() {
        let e = |kind, text: &'static str| RedisError::from((kind, text));
        let unknown = e(
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "unknown command 'LOCK.SERVERID', with args beginning with: ",
        );
        assert!(cannot_say(&unknown));
        assert!(!cannot_say(&e(
            ErrorKind::Server(ServerErrorKind::BusyLoading),
            "loading"
        )));
        assert!(!cannot_say(&e(ErrorKind::Io, "reset")));
    }
}
