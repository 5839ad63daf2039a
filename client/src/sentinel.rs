//! A Sentinel group as one node (one vote): `redis+sentinel://[user:pass@]
//! host:port/service-name` (`rediss+sentinel://` for TLS). The node's
//! server is the group's primary, looked up through the sentinels each
//! time the node opens a connection, never on the request path: a request
//! costs one atomic load more than on a plain node.
//!
//! The primary is found anew after a failover, seen as
//! - a broken or refused connection (the old primary died, or the sentinels
//!   closed its clients when they reconfigured it: `CLIENT KILL TYPE normal`);
//! - a `-READONLY` reply (a connection that reached the old primary after
//!   it was demoted): nothing ran, so the request is sent again at once;
//! - the `+switch-master` event, to which each node subscribes on one
//!   sentinel: the old primary may stay writable for seconds after the
//!   switch (until the sentinels convert it), and a grant there would be
//!   lost when it becomes a replica.
//!
//! An address a sentinel names is used only once the server there says it
//! is a primary (`ROLE`): a sentinel that has not yet learnt of a failover
//! names the old one. The sentinels are asked together, and the addresses
//! they name checked as the answers come (a hung server one names does not
//! hold up the others'): the first that is a primary wins, after the
//! address the last `+switch-master` announced, if it is one.
//!
//! Credentials: `user:pass` authenticate the data servers (where `LOCK.*`
//! runs). The sentinels are asked without credentials, and with the same
//! ones if a sentinel answers `NOAUTH` (a sentinel with `requirepass` set
//! to the data servers' password, as `sentinel auth-pass` usually is).

use crate::error::describe;
use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::aio::MultiplexedConnection;
use redis::io::tcp::{socket2::TcpKeepalive, TcpSettings};
use redis::{AsyncConnectionConfig, Client, ErrorKind, IntoConnectionInfo, RedisError};
use redis::{RedisResult, ServerErrorKind, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::oneshot;

/// Sentinels listen here unless the URL says otherwise.
const SENTINEL_PORT: u16 = 26379;

/// A sentinel URL, split into what every derived URL is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentinelUrl {
    /// `redis` or `rediss`: the scheme of the sentinels and the data servers.
    scheme: &'static str,
    /// `user:pass@`, or empty (as written: percent-encoding kept).
    userinfo: String,
    /// `host:port` of the sentinel the URL names.
    host_port: String,
    /// The group's name in the sentinels' configuration.
    pub(crate) service: String,
    /// A `?query` or `#fragment` after the name, carried to every derived
    /// URL (e.g. `#insecure` for TLS).
    tail: String,
}

/// Whether `url` has a sentinel scheme (whatever else is wrong with it).
pub(crate) fn is_sentinel(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| {
        let scheme = scheme.to_ascii_lowercase();
        scheme == "redis+sentinel" || scheme == "rediss+sentinel"
    })
}

impl SentinelUrl {
    /// Parse a URL with a sentinel scheme; Err says what is wrong, in words.
    pub(crate) fn parse(url: &str) -> Result<SentinelUrl, String> {
        let (scheme, rest) = url.split_once("://").ok_or("no scheme")?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "redis+sentinel" => "redis",
            "rediss+sentinel" => "rediss",
            other => return Err(format!("scheme {other:?} is not a sentinel scheme")),
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let after = &rest[authority.len()..];
        let path_end = after.find(['?', '#']).unwrap_or(after.len());
        let (path, tail) = after.split_at(path_end);
        let (userinfo, host_port) = match authority.rsplit_once('@') {
            Some((user, host)) => (format!("{user}@"), host),
            None => (String::new(), authority),
        };
        // A port after the host (or after an IPv6 address's ']'), else 26379.
        let has_port = match host_port.rsplit_once(']') {
            Some((_, after)) => after.starts_with(':'),
            None => host_port.contains(':'),
        };
        let host_port = if has_port || host_port.is_empty() {
            host_port.to_string()
        } else {
            format!("{host_port}:{SENTINEL_PORT}")
        };
        let service = path.strip_prefix('/').unwrap_or(path);
        let form = "write redis+sentinel://[user:pass@]host:port/service-name";
        if service.is_empty() {
            return Err(format!("no service name: {form}"));
        }
        if service.contains('/') {
            return Err(format!(
                "{service:?} is not one service name (a Sentinel group's lock space is \
                 its primary's db 0; no db can be given): {form}"
            ));
        }
        // Percent-decoded, as a URL's parts are: a name with `#`, `?`, `/`
        // or `%` in it can only be written encoded.
        let service = percent_decode(service)
            .ok_or_else(|| format!("{service:?} is not a percent-encoded UTF-8 name: {form}"))?;
        let parsed = SentinelUrl {
            scheme,
            userinfo,
            host_port,
            service,
            tail: tail.to_string(),
        };
        // The sentinel's address and the credentials, as the redis crate
        // reads them (the same problems named as for a plain URL).
        let sentinel = parsed.data_url(&parsed.host_port);
        if let Err(e) = sentinel.as_str().into_connection_info() {
            let why = crate::url_problem::url_problem(&sentinel).unwrap_or_else(|| e.to_string());
            return Err(why.replace(&parsed.userinfo, ""));
        }
        if crate::endpoint::port(&parsed.sentinel_info(&parsed.host_port, false)) == Some(0) {
            return Err("port 0 is not a port number (1-65535)".into());
        }
        Ok(parsed)
    }

    /// The URL of the data server at `addr` (db 0, with the credentials).
    fn data_url(&self, addr: &str) -> String {
        format!("{}://{}{addr}/0{}", self.scheme, self.userinfo, self.tail)
    }

    /// The URL of the sentinel at `addr`, with or without the URL's
    /// credentials.
    fn sentinel_url(&self, addr: &str, with_credentials: bool) -> String {
        let user = if with_credentials { &self.userinfo } else { "" };
        format!("{}://{user}{addr}{}", self.scheme, self.tail)
    }

    /// The connection settings of the sentinel at `addr`, with or without
    /// the URL's credentials.
    fn sentinel_info(&self, addr: &str, with_credentials: bool) -> redis::ConnectionInfo {
        self.sentinel_url(addr, with_credentials)
            .as_str()
            .into_connection_info()
            .expect("checked when parsed or learned")
    }

    /// Whether `addr` makes a sentinel URL (with the credentials too): a
    /// sentinel's report of another may not (see `Group::learn`).
    fn takes(&self, addr: &str) -> bool {
        [false, true].into_iter().all(|with_credentials| {
            let url = self.sentinel_url(addr, with_credentials);
            url.as_str().into_connection_info().is_ok()
        })
    }

    /// The sentinel named in the URL, for the builder's check that a group
    /// is not listed twice.
    pub(crate) fn first_sentinel(&self) -> redis::ConnectionInfo {
        self.sentinel_info(&self.host_port, false)
    }

    /// `host:port/service`, the name the node goes by in messages.
    pub(crate) fn name(&self) -> String {
        format!("{}/{}", self.host_port, self.service)
    }
}

/// The connection settings of the sentinel a Sentinel URL names (None:
/// another scheme, or a URL that does not parse).
pub(crate) fn first_sentinel_of(url: &str) -> Option<redis::ConnectionInfo> {
    is_sentinel(url).then(|| SentinelUrl::parse(url).ok().map(|u| u.first_sentinel()))?
}

/// `%XX` escapes decoded (None: a bad escape, or not UTF-8).
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `ip:port` as a URL writes it (an IPv6 address in brackets).
fn join(ip: &str, port: &str) -> String {
    if ip.contains(':') && !ip.starts_with('[') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// A short text as the sentinels send them.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// A sentinel asked for credentials it was not given.
fn wants_credentials(e: &RedisError) -> bool {
    e.code() == Some("NOAUTH") || e.kind() == ErrorKind::AuthenticationFailed
}

/// The server refused the client (wrong password, an ACL without ROLE).
fn refused(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::InvalidClientConfig | ErrorKind::AuthenticationFailed
    ) || matches!(e.code(), Some("WRONGPASS" | "NOPERM"))
}

/// A failure to find the primary (a transient one: the next connect asks again).
fn no_primary(detail: String) -> RedisError {
    RedisError::from((ErrorKind::Client, "no primary found", detail))
}

/// One step of a primary lookup: a sentinel's answer, or the ROLE check of
/// an address (with the sentinel that named it; None: `+switch-master`).
enum Step {
    Asked(String, RedisResult<Option<String>>),
    Opened(String, Option<String>, RedisResult<MultiplexedConnection>),
}

type Pending<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Step> + Send + 'a>>;

/// The group behind one sentinel node.
pub(crate) struct Group {
    url: SentinelUrl,
    /// The sentinels known (`host:port`): the URL's, and those the sentinels
    /// named (`SENTINEL SENTINELS`).
    sentinels: Mutex<Vec<String>>,
    /// Bumped whenever the primary is known to have moved: connections
    /// opened before are dropped rather than used.
    generation: AtomicU64,
    /// The new primary's address, as the last `+switch-master` gave it:
    /// tried first (a sentinel asked may not know yet).
    hint: Mutex<Option<String>>,
    /// The `+switch-master` watcher, if one runs.
    watcher: Mutex<Option<Watcher>>,
}

/// A running watcher: alive while its task is (the task holds the Arc,
/// and a runtime that shuts down drops it); stopped when dropped.
struct Watcher {
    alive: Weak<()>,
    _stop: oneshot::Sender<()>,
}

impl Group {
    pub(crate) fn new(url: SentinelUrl) -> Group {
        Group {
            sentinels: Mutex::new(vec![url.host_port.clone()]),
            url,
            generation: AtomicU64::new(0),
            hint: Mutex::new(None),
            watcher: Mutex::new(None),
        }
    }

    pub(crate) fn name(&self) -> String {
        self.url.name()
    }

    /// The current generation: a connection opened in an older one is stale.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The primary moved (READONLY, `+switch-master`): every connection
    /// opened so far is stale.
    pub(crate) fn moved(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// A connection to the group's primary, and the generation it belongs
    /// to (read before the lookup: a switch announced meanwhile makes it
    /// stale at once). Bounded by the caller's deadline, as any connect.
    pub(crate) async fn open_primary(
        self: &Arc<Self>,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<(MultiplexedConnection, u64)> {
        self.watch();
        let generation = self.generation();
        let mut why = Vec::new();
        let hint = self.hint.lock().expect("hint").clone();
        let sentinels = self.sentinels.lock().expect("sentinels").clone();
        // The sentinels' answers and the ROLE checks of the addresses they
        // name, all at once: a server that hangs (one a stale sentinel
        // still names, SIGSTOPped or cut off) must not keep the answers of
        // the others unread until the call's deadline.
        let mut steps: FuturesUnordered<Pending<'_>> = FuturesUnordered::new();
        let mut tried = Vec::new();
        let mut hint_pending = hint.is_some();
        let mut found = None;
        if let Some(addr) = hint {
            tried.push(addr.clone());
            steps.push(self.try_primary(addr, None, config));
        }
        for s in &sentinels {
            steps.push(Box::pin(async move {
                Step::Asked(s.clone(), self.ask_primary(s).await)
            }));
        }
        let mut unknown = 0;
        let mut refusal = None;
        while let Some(step) = steps.next().await {
            match step {
                Step::Asked(sentinel, Ok(Some(addr))) => {
                    if !tried.contains(&addr) {
                        tried.push(addr.clone());
                        steps.push(self.try_primary(addr, Some(sentinel), config));
                    }
                }
                Step::Asked(sentinel, Ok(None)) => {
                    unknown += 1;
                    why.push(format!("sentinel {sentinel} does not know it"));
                }
                Step::Asked(sentinel, Err(e)) => {
                    why.push(format!("sentinel {sentinel}: {}", describe(&e)))
                }
                Step::Opened(_, None, Ok(c)) => return Ok((c, generation)),
                // While the address `+switch-master` announced is being
                // checked, a primary named by a sentinel waits: that
                // sentinel may not know of the switch yet, and the old
                // primary says master until it is demoted (a grant there
                // would be lost).
                Step::Opened(_, Some(_), Ok(c)) if hint_pending => {
                    found.get_or_insert(c);
                }
                Step::Opened(_, Some(_), Ok(c)) => return Ok((c, generation)),
                // A server named refused these credentials or this user:
                // retrying will not help, unless another sentinel names
                // another server (this one's may be stale: an old primary
                // without this user). Kept until every answer is in.
                Step::Opened(addr, Some(sentinel), Err(e)) if refused(&e) => {
                    why.push(format!("{addr} (named by sentinel {sentinel}): {e}"));
                    refusal.get_or_insert(e);
                }
                Step::Opened(addr, Some(sentinel), Err(e)) => {
                    why.push(format!("{addr} (named by sentinel {sentinel}): {e}"))
                }
                Step::Opened(addr, None, Err(e)) => {
                    why.push(format!("{addr} (announced by +switch-master): {e}"));
                    hint_pending = false;
                    if let Some(c) = found.take() {
                        return Ok((c, generation));
                    }
                }
            }
        }
        if let Some(e) = refusal {
            return Err(e);
        }
        let service = &self.url.service;
        if unknown == sentinels.len() {
            // Every sentinel answered, none knows the name: a configuration
            // error, not an outage (a retry would only wait out the call).
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "unknown service",
                format!(
                    "the sentinels ({}) monitor no service named {service:?}",
                    sentinels.join(", ")
                ),
            )));
        }
        Err(no_primary(format!(
            "no primary of {service:?} found: {}",
            why.join("; ")
        )))
    }

    /// A connection to `addr` if it is the primary, as a step of a lookup
    /// (`by`: the sentinel that named it; None: `+switch-master` did).
    fn try_primary<'a>(
        &'a self,
        addr: String,
        by: Option<String>,
        config: &'a AsyncConnectionConfig,
    ) -> Pending<'a> {
        Box::pin(async move {
            let opened = self.open_if_primary(&addr, config).await;
            Step::Opened(addr, by, opened)
        })
    }

    /// The primary's `host:port` as the sentinel at `addr` names it (None:
    /// it does not know the service). The group's other sentinels are
    /// asked for in the same round trip (`SENTINEL SENTINELS`) and learned
    /// at once: learned in a task of its own after the lookup, they were
    /// not yet known when the first sentinel went away right after the
    /// first lock (Valkey, a fresh-clone make test of 28688ae).
    async fn ask_primary(&self, addr: &str) -> RedisResult<Option<String>> {
        let mut asked = redis::pipe();
        asked.ignore_errors();
        let service = &self.url.service;
        asked
            .cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(service);
        asked.cmd("SENTINEL").arg("SENTINELS").arg(service);
        let mut replies = ask(&self.url, addr, &asked).await?.into_iter();
        let primary = replies.next().unwrap_or(Value::Nil).extract_error()?;
        // Refused (an ACL without `sentinel|sentinels`) or unknown: the
        // sentinels known stay as they are.
        if let Some(Value::Array(others)) = replies.next() {
            self.learn(others);
        }
        match primary {
            Value::Array(v) if v.len() == 2 => match (text(&v[0]), text(&v[1])) {
                (Some(ip), Some(port)) => Ok(Some(join(&ip, &port))),
                _ => Err(no_primary(format!("unexpected reply {v:?}"))),
            },
            Value::Nil => Ok(None),
            other => Err(no_primary(format!("unexpected reply {other:?}"))),
        }
    }

    /// Add the sentinels of a `SENTINEL SENTINELS` reply to those known.
    fn learn(&self, others: Vec<Value>) {
        for fields in others {
            let fields = match fields {
                Value::Array(f) => f.iter().map(text).collect::<Vec<_>>(),
                Value::Map(m) => m.iter().flat_map(|(k, v)| [text(k), text(v)]).collect(),
                _ => continue,
            };
            let field = |name: &str| {
                let at = fields.iter().position(|f| f.as_deref() == Some(name))?;
                fields.get(at + 1).cloned().flatten()
            };
            if let (Some(ip), Some(port)) = (field("ip"), field("port")) {
                let addr = join(&ip, &port);
                // An address that makes no URL is left out: Sentinel lists
                // an announced hostname as given (`announce-hostnames`),
                // e.g. an IPv6 address with a zone (`::1%lo`), and made
                // into a sentinel's URL it panicked the next lookup
                // (2026-11-28).
                if !self.url.takes(&addr) {
                    continue;
                }
                let mut known = self.sentinels.lock().expect("sentinels");
                if !known.contains(&addr) {
                    known.push(addr);
                }
            }
        }
    }

    /// A connection to `addr` if the server there says it is a primary.
    async fn open_if_primary(
        &self,
        addr: &str,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<MultiplexedConnection> {
        // TCP keepalive, as on a plain node (`Node::new`).
        let info = self
            .url
            .data_url(addr)
            .as_str()
            .into_connection_info()?
            .set_tcp_settings(TcpSettings::default().set_keepalive(TcpKeepalive::new()));
        let mut c = Client::open(info)?
            .get_multiplexed_async_connection_with_config(config)
            .await?;
        let role = match redis::cmd("ROLE").query_async::<Value>(&mut c).await {
            // Every connect asks it: without it no lock is ever granted.
            Err(e) if e.code() == Some("NOPERM") => {
                return Err(RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "ROLE refused",
                    format!(
                        "grant this user +role (a Sentinel node checks that the server \
                         the sentinels name is the primary): {}",
                        describe(&e)
                    ),
                )))
            }
            reply => reply?,
        };
        match role {
            Value::Array(v) if v.first().and_then(text).as_deref() == Some("master") => Ok(c),
            Value::Array(v) => Err(no_primary(format!(
                "ROLE says {}, not master",
                v.first().and_then(text).unwrap_or_default()
            ))),
            other => Err(no_primary(format!("ROLE answered {other:?}"))),
        }
    }

    /// Start the `+switch-master` watcher on this runtime unless one runs.
    fn watch(self: &Arc<Self>) {
        let mut watcher = self.watcher.lock().expect("watcher");
        if watcher.as_ref().is_some_and(|w| w.alive.strong_count() > 0) {
            return;
        }
        let alive = Arc::new(());
        let (stop, stopped) = oneshot::channel();
        *watcher = Some(Watcher {
            alive: Arc::downgrade(&alive),
            _stop: stop,
        });
        tokio::spawn(watch(Arc::downgrade(self), stopped, alive));
    }

    /// `+switch-master <name> <old ip> <old port> <new ip> <new port>`.
    fn switched(&self, payload: &str) {
        // Read from the end: a service's name may hold spaces (the
        // sentinels take `SENTINEL MONITOR "a b" ...`).
        let mut words = payload.rsplitn(5, ' ');
        let mut next = || words.next();
        if let (Some(port), Some(ip), Some(_), Some(_), Some(name)) =
            (next(), next(), next(), next(), next())
        {
            if name == self.url.service {
                *self.hint.lock().expect("hint") = Some(join(ip, port));
                self.moved();
            }
        }
    }
}

/// Follow `+switch-master` on one of the group's sentinels, moving to the
/// next when it goes away, until `stop` (the group dropped or a new
/// watcher started). Holds the group only while handling an event.
async fn watch(group: Weak<Group>, mut stop: oneshot::Receiver<()>, _alive: Arc<()>) {
    let mut subscribed_before = false;
    loop {
        let Some(g) = group.upgrade() else { return };
        let sentinels = g.sentinels.lock().expect("sentinels").clone();
        let url = g.url.clone();
        drop(g);
        for addr in sentinels {
            let Some(pubsub) = subscribe(&url, &addr).await else {
                continue;
            };
            if subscribed_before {
                // An event may have passed while no sentinel was followed.
                match group.upgrade() {
                    Some(g) => g.moved(),
                    None => return,
                }
            }
            subscribed_before = true;
            let mut events = pubsub.into_on_message();
            loop {
                tokio::select! {
                    _ = &mut stop => return,
                    event = events.next() => match event {
                        Some(msg) => match group.upgrade() {
                            Some(g) => g.switched(&String::from_utf8_lossy(msg.get_payload_bytes())),
                            None => return,
                        },
                        None => break,
                    },
                }
            }
        }
        tokio::select! {
            _ = &mut stop => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

/// Commands to the sentinel at `addr`, one reply each (an error reply in
/// place, `ignore_errors`, but the first's is the call's error): without
/// credentials, and with the URL's if it asks for them.
async fn ask(url: &SentinelUrl, addr: &str, asked: &redis::Pipeline) -> RedisResult<Vec<Value>> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None);
    let mut first = true;
    loop {
        let with_credentials = !first;
        let info = url.sentinel_info(addr, with_credentials);
        let reply = async {
            let client = Client::open(info)?;
            let mut c = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            let replies: Vec<Value> = asked.query_async(&mut c).await?;
            match replies.first() {
                Some(Value::ServerError(e)) => Err(e.clone().into()),
                _ => Ok(replies),
            }
        }
        .await;
        match reply {
            Err(e) if first && wants_credentials(&e) && !url.userinfo.is_empty() => {
                first = false;
            }
            reply => return reply,
        }
    }
}

/// A subscription to `+switch-master` on the sentinel at `addr`, with the
/// URL's credentials if it asks for them.
async fn subscribe(url: &SentinelUrl, addr: &str) -> Option<redis::aio::PubSub> {
    for with_credentials in [false, true] {
        let client = Client::open(url.sentinel_info(addr, with_credentials)).ok()?;
        let attempt = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            Ok::<_, RedisError>(pubsub)
        };
        let limit = Duration::from_secs(2);
        match tokio::time::timeout(limit, attempt).await {
            Ok(Ok(pubsub)) => return Some(pubsub),
            Ok(Err(e)) if wants_credentials(&e) && !url.userinfo.is_empty() => continue,
            _ => return None,
        }
    }
    None
}

/// The Sentinel URLs of one list, for the builder: a group listed twice
/// (the same service through the same sentinel, under any spelling of its
/// address) would vote twice. Two sentinels of one group cannot be told
/// apart from two groups of one name without asking them: the primary
/// reached twice then says so itself (`LOCK.SERVERID`, `server_ids.rs`),
/// and its yes is counted once.
#[derive(Default)]
pub(crate) struct Groups {
    seen: Vec<(String, crate::endpoint::Endpoint, String)>,
}

impl Groups {
    /// Check `url` (a sentinel scheme) and add it; Err: a configuration
    /// error's text.
    pub(crate) fn add(&mut self, url: &str) -> Result<(), String> {
        let parsed =
            SentinelUrl::parse(url).map_err(|why| format!("bad server URL {url:?}: {why}"))?;
        let here = crate::endpoint::Endpoint::of(&parsed.first_sentinel());
        let twice = self.seen.iter().find(|(_, sentinel, service)| {
            *service == parsed.service && sentinel.same_server(&here)
        });
        if let Some((other, ..)) = twice {
            return Err(format!(
                "servers {other:?} and {url:?} reach the same Sentinel group ({}): \
                 one group must not vote twice",
                parsed.name()
            ));
        }
        self.seen.push((url.to_string(), here, parsed.service));
        Ok(())
    }
}

/// A reply that says the connection reached a replica: the primary moved.
pub(crate) fn is_readonly(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_split_into_their_parts() {
        let u = SentinelUrl::parse("redis+sentinel://u:p%40ss@127.0.0.1:26380/mymaster").unwrap();
        assert_eq!(u.service, "mymaster");
        assert_eq!(u.name(), "127.0.0.1:26380/mymaster");
        assert_eq!(
            u.data_url("10.0.0.1:7000"),
            "redis://u:p%40ss@10.0.0.1:7000/0"
        );
        if cfg!(feature = "tls") {
            let tls = SentinelUrl::parse("rediss+sentinel://h/svc#insecure").unwrap();
            assert_eq!(tls.name(), "h:26379/svc");
            assert_eq!(tls.data_url("[::1]:7000"), "rediss://[::1]:7000/0#insecure");
        }
        let plain = SentinelUrl::parse("redis+sentinel://h/svc?protocol=resp3").unwrap();
        assert_eq!(
            plain.data_url("[::1]:7000"),
            "redis://[::1]:7000/0?protocol=resp3"
        );
        assert_eq!(
            SentinelUrl::parse("REDIS+SENTINEL://[::1]/s")
                .unwrap()
                .name(),
            "[::1]:26379/s"
        );
        assert!(is_sentinel("Redis+Sentinel://h:1/s") && !is_sentinel("redis://h:1/0"));
        let encoded = SentinelUrl::parse("redis+sentinel://h/a%23b%2Fc%25%20d").unwrap();
        assert_eq!(encoded.service, "a#b/c% d");
        for bad in [
            "redis+sentinel://h/a%2",
            "redis+sentinel://h/a%zz",
            "redis+sentinel://h/%ff",
        ] {
            let why = SentinelUrl::parse(bad).unwrap_err();
            assert!(why.contains("percent-encoded"), "{bad}: {why}");
        }
    }

    #[test]
    fn bad_sentinel_urls_say_what_is_wrong() {
        for (url, words) in [
            ("redis+sentinel://127.0.0.1:26379", "no service name"),
            ("redis+sentinel://127.0.0.1:26379/", "no service name"),
            (
                "redis+sentinel://127.0.0.1:26379/mymaster/1",
                "no db can be given",
            ),
            ("redis+sentinel://127.0.0.1:0/mymaster", "port 0"),
            ("redis+sentinel://127.0.0.1:99999/mymaster", "port 99999"),
            ("redis+sentinel://:26379/mymaster", "no host"),
        ] {
            let why = SentinelUrl::parse(url).unwrap_err();
            assert!(why.contains(words), "{url}: {why}");
        }
    }

    #[test]
    fn a_group_listed_twice_is_refused_naming_both() {
        let mut g = Groups::default();
        g.add("redis+sentinel://127.0.0.1:26379/a").unwrap();
        g.add("redis+sentinel://127.0.0.1:26379/b").unwrap();
        g.add("redis+sentinel://127.0.0.1:26380/a").unwrap();
        let twice = "redis+sentinel://u:p@localhost:26379/a";
        let why = g.add(twice).unwrap_err();
        assert!(
            why.contains("\"redis+sentinel://127.0.0.1:26379/a\"") && why.contains(twice),
            "{why}"
        );
        assert!(g
            .add("redis+sentinel://h:1")
            .unwrap_err()
            .contains("no service name"));
    }

    #[test]
    fn a_switch_of_another_service_is_not_ours() {
        let g = Group::new(SentinelUrl::parse("redis+sentinel://h:1/mine").unwrap());
        g.switched("other 127.0.0.1 1 127.0.0.1 2");
        assert_eq!(g.generation(), 0);
        g.switched("mine 127.0.0.1 1 ::1 2");
        assert_eq!(g.generation(), 1);
        assert_eq!(g.hint.lock().unwrap().as_deref(), Some("[::1]:2"));
    }

    #[test]
    fn a_switch_of_a_service_whose_name_has_spaces_is_read() {
        let g = Group::new(SentinelUrl::parse("redis+sentinel://h:1/a%20b").unwrap());
        g.switched("b 127.0.0.1 1 127.0.0.1 2");
        assert_eq!(g.generation(), 0);
        g.switched("a b 127.0.0.1 1 127.0.0.1 2");
        assert_eq!(g.generation(), 1);
        assert_eq!(g.hint.lock().unwrap().as_deref(), Some("127.0.0.1:2"));
    }
}
