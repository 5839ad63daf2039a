//! A Redis Cluster's slot map, pure: which slot a key hashes to (CRC16
//! with hash tags, as the servers compute it) and which primary serves a
//! slot, read from `CLUSTER SLOTS`.

use redis::Value;

/// Slots in a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), the cluster's key
/// hash.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of `key`: only the part between the first `{` and the next
/// `}` is hashed when that part is not empty (a hash tag), so that
/// `{user1}.a` and `{user1}.b` share a slot.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % SLOTS
}

/// One range of slots and the primary serving it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) first: u16,
    pub(crate) last: u16,
    /// `host:port` of the primary.
    pub(crate) primary: String,
}

/// What `CLUSTER SLOTS` said: the ranges, the node ids of every node it
/// named (primaries and replicas): the cluster's identity, and their
/// addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SlotMap {
    ranges: Vec<Range>,
    pub(crate) ids: Vec<String>,
    /// `host:port` of every node named, primaries first.
    nodes: Vec<String>,
}

impl SlotMap {
    /// Whether no slot is known (not read yet, or a cluster with none).
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The primary serving `slot`, if known.
    pub(crate) fn primary(&self, slot: u16) -> Option<&str> {
        (self.ranges.iter())
            .find(|r| r.first <= slot && slot <= r.last)
            .map(|r| r.primary.as_str())
    }

    /// Every primary, each once.
    pub(crate) fn primaries(&self) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        for r in &self.ranges {
            if !all.contains(&r.primary) {
                all.push(r.primary.clone());
            }
        }
        all
    }

    /// Every node named, primaries first, each once: where the map can be
    /// read again. A replica is promoted when its primary fails; when
    /// every primary of this map (the seed among them) has been replaced,
    /// the replicas it named are the only way back to the cluster.
    pub(crate) fn nodes(&self) -> Vec<String> {
        let mut all = self.primaries();
        for n in &self.nodes {
            if !all.contains(n) {
                all.push(n.clone());
            }
        }
        all
    }

    /// `slot` is served by `primary` now (a `MOVED` said so): the range
    /// holding it is split around it.
    pub(crate) fn moved(&mut self, slot: u16, primary: &str) {
        let mut ranges = Vec::with_capacity(self.ranges.len() + 2);
        for r in self.ranges.drain(..) {
            if r.first <= slot && slot <= r.last {
                if r.first < slot {
                    ranges.push(Range {
                        last: slot - 1,
                        ..r.clone()
                    });
                }
                if slot < r.last {
                    ranges.push(Range {
                        first: slot + 1,
                        ..r.clone()
                    });
                }
            } else {
                ranges.push(r);
            }
        }
        ranges.push(Range {
            first: slot,
            last: slot,
            primary: primary.to_string(),
        });
        self.ranges = ranges;
    }

    /// Parse a `CLUSTER SLOTS` reply. A primary whose endpoint is empty or
    /// `?` (the server does not know how it is reached) is taken at
    /// `seed_host`, the host the seed was reached at.
    pub(crate) fn from_cluster_slots(reply: &Value, seed_host: &str) -> Result<SlotMap, String> {
        let Value::Array(entries) = reply else {
            return Err(format!("CLUSTER SLOTS: not an array: {reply:?}"));
        };
        let mut map = SlotMap::default();
        for entry in entries {
            let Value::Array(fields) = entry else {
                return Err("CLUSTER SLOTS: an entry is not an array".into());
            };
            let (first, last) = match (fields.first().and_then(int), fields.get(1).and_then(int)) {
                (Some(f), Some(l)) if f <= l && l < i64::from(SLOTS) && f >= 0 => {
                    (f as u16, l as u16)
                }
                _ => return Err("CLUSTER SLOTS: a range is not two slots".into()),
            };
            let mut primary = None;
            for node in &fields[2..] {
                let Value::Array(node) = node else {
                    return Err("CLUSTER SLOTS: a node is not an array".into());
                };
                let host = node.first().and_then(text).unwrap_or_default();
                let port = node.get(1).and_then(int).unwrap_or(0);
                if let Some(id) = node.get(2).and_then(text) {
                    if !id.is_empty() && !map.ids.contains(&id) {
                        map.ids.push(id);
                    }
                }
                let host = if host.is_empty() || host == "?" {
                    seed_host.to_string()
                } else {
                    host
                };
                let addr = address(&host, port);
                if !map.nodes.contains(&addr) {
                    map.nodes.push(addr.clone());
                }
                primary.get_or_insert(addr);
            }
            let primary = primary.ok_or("CLUSTER SLOTS: a range without a primary")?;
            map.ranges.push(Range {
                first,
                last,
                primary,
            });
        }
        Ok(map)
    }
}

/// `host:port`, an IPv6 host in brackets.
pub(crate) fn address(host: &str, port: i64) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A redirection's `host:port` with `seed_host` for a host the server does
/// not know (`MOVED 3999 :7001`, `?:7001` under
/// `cluster-preferred-endpoint-type unknown-endpoint`), as
/// [`SlotMap::from_cluster_slots`] takes such a primary.
pub(crate) fn at_known_host(addr: &str, seed_host: &str) -> String {
    match addr.rsplit_once(':') {
        Some((host, port)) if host.is_empty() || host == "?" => match port.parse() {
            Ok(port) => address(seed_host, port),
            Err(_) => addr.to_string(),
        },
        _ => addr.to_string(),
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// A redirection a cluster node answered instead of running a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Redirect {
    /// `MOVED slot host:port`: the slot is served there now.
    Moved(u16, String),
    /// `ASK slot host:port`: this once, ask there (after `ASKING`).
    Ask(u16, String),
    /// `TRYAGAIN`: the slot is being migrated (or the module refused a
    /// waiter whose lock's slot moved away): retry shortly.
    TryAgain,
}

/// The redirection a failure's text names (as `node::describe` spells a
/// server error: `CODE: detail`), if any.
pub(crate) fn redirect(cause: &str) -> Option<Redirect> {
    let (code, detail) = cause.split_once(':').unwrap_or((cause, ""));
    let target = || {
        let mut words = detail.split_whitespace();
        let slot = words.next()?.parse::<u16>().ok().filter(|s| *s < SLOTS)?;
        Some((slot, words.next()?.to_string()))
    };
    match code.trim() {
        "MOVED" => target().map(|(s, a)| Redirect::Moved(s, a)),
        "ASK" => target().map(|(s, a)| Redirect::Ask(s, a)),
        // Not the module's start-up or promotion guard (also TRYAGAIN): it
        // lasts seconds, and its message is the caller's to read.
        "TRYAGAIN" if detail.contains("slot") => Some(Redirect::TryAgain),
        _ => None,
    }
}

/// A failure's text says the connection was refused: the request was
/// never sent (as redis-rs spells an `ECONNREFUSED`).
pub(crate) fn never_sent(cause: &str) -> bool {
    cause.to_ascii_lowercase().contains("connection refused")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hash_to_the_slots_the_servers_compute() {
        assert_eq!(crc16(b"123456789"), 0x31c3);
        // Values from CLUSTER KEYSLOT.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"job"), key_slot(b"{job}:x"));
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn hash_tags() {
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{bar"), crc16(b"foo{bar") % SLOTS);
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn slots_reply() -> Value {
        let node =
            |host: &str, port, id: &str| Value::Array(vec![bulk(host), Value::Int(port), bulk(id)]);
        Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("127.0.0.1", 7000, "a"),
                node("127.0.0.1", 7003, "r"),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(10922),
                node("", 7001, "b"),
            ]),
            Value::Array(vec![
                Value::Int(10923),
                Value::Int(16383),
                node("::1", 7002, "c"),
            ]),
        ])
    }

    #[test]
    fn a_cluster_slots_reply_maps_each_slot_to_its_primary() {
        let map = SlotMap::from_cluster_slots(&slots_reply(), "seed.example").unwrap();
        assert_eq!(map.primary(0), Some("127.0.0.1:7000"));
        assert_eq!(map.primary(5460), Some("127.0.0.1:7000"));
        assert_eq!(map.primary(5461), Some("seed.example:7001"));
        assert_eq!(map.primary(16383), Some("[::1]:7002"));
        assert_eq!(map.ids, ["a", "r", "b", "c"]);
        assert_eq!(map.primaries().len(), 3);
        assert_eq!(
            map.nodes(),
            [
                "127.0.0.1:7000",
                "seed.example:7001",
                "[::1]:7002",
                "127.0.0.1:7003"
            ]
        );
        assert!(SlotMap::from_cluster_slots(&Value::Int(1), "h").is_err());
    }

    #[test]
    fn a_moved_slot_is_split_out_of_its_range() {
        let mut map = SlotMap::from_cluster_slots(&slots_reply(), "h").unwrap();
        map.moved(100, "127.0.0.1:7002");
        assert_eq!(map.primary(99), Some("127.0.0.1:7000"));
        assert_eq!(map.primary(100), Some("127.0.0.1:7002"));
        assert_eq!(map.primary(101), Some("127.0.0.1:7000"));
        map.moved(0, "x:1");
        assert_eq!(map.primary(0), Some("x:1"));
        assert_eq!(map.primary(1), Some("127.0.0.1:7000"));
    }

    #[test]
    fn redirections_as_node_describe_spells_them() {
        assert_eq!(
            redirect("MOVED: 3999 127.0.0.1:6381"),
            Some(Redirect::Moved(3999, "127.0.0.1:6381".into()))
        );
        assert_eq!(
            redirect("ASK: 3999 127.0.0.1:6381"),
            Some(Redirect::Ask(3999, "127.0.0.1:6381".into()))
        );
        assert_eq!(
            redirect("TRYAGAIN: the lock's key is served by another cluster node now (slot migrated); retry"),
            Some(Redirect::TryAgain)
        );
        assert_eq!(
            redirect("TRYAGAIN: Multiple keys request during rehashing of slot"),
            Some(Redirect::TryAgain)
        );
        let guard = "TRYAGAIN: lock server restarted or was promoted: new locks refused";
        assert_eq!(redirect(guard), None);
        assert_eq!(redirect("MOVED: x"), None);
        assert_eq!(redirect("ERR: MOVED 1 h:1"), None);
        assert_eq!(redirect("broken pipe"), None);
        assert_eq!(at_known_host(":7001", "seed"), "seed:7001");
        assert_eq!(at_known_host("?:7001", "::1"), "[::1]:7001");
        assert_eq!(at_known_host("h:7001", "seed"), "h:7001");
        assert_eq!(at_known_host("[::1]:7001", "seed"), "[::1]:7001");
        assert!(never_sent("Connection refused (os error 111)"));
        assert!(!never_sent("Connection reset by peer (os error 104)"));
        assert!(!never_sent("broken pipe"));
    }
}
