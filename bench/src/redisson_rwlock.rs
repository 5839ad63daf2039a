//! Redisson's RReadWriteLock as its clients drive it, without the JVM: the
//! Lua of RedissonReadLock / RedissonWriteLock (tryLockInnerAsync,
//! unlockInnerAsync) read from the Java sources at the tag redisson-4.7.0
//! (commit 0c286e86eb813a26222b3dc281f0ca368dd46561), which
//! bench/peers/setup.sh fetches hash-checked into bench/peers/redisson/
//! (git-ignored: the scripts are Redisson's, not this repository's).
//! The keys and arguments are built as those classes build them.

use std::path::Path;

/// Where setup.sh puts the two sources.
pub fn sources_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/redisson")
}

/// Redisson's default lease (the watchdog's `lockWatchdogTimeout`), ms.
pub const LEASE_MS: u64 = 30_000;
/// The unlock latch's timeout: (timeout 3000 ms + retry delay 1500 ms) x 3
/// retry attempts, Redisson's defaults in `unlockInnerAsync`.
pub const LATCH_MS: u64 = 13_500;

pub struct Scripts {
    pub read_lock: redis::Script,
    pub read_unlock: redis::Script,
    pub write_lock: redis::Script,
    pub write_unlock: redis::Script,
}

/// The Lua of the Java method whose signature contains `method`: its string
/// literals, concatenated, up to the `Arrays.` line that lists the keys.
pub fn lua_of(java: &str, method: &str) -> Option<String> {
    let start = java.find(method)?;
    let mut lua = String::new();
    for line in java[start..].lines().skip(1) {
        let line = line.trim();
        if line.starts_with("Arrays.") {
            return (!lua.is_empty()).then_some(lua);
        }
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(open) = rest.find('"') {
            let close = open + 1 + rest[open + 1..].find('"')?;
            lua += &rest[open + 1..close];
            rest = &rest[close + 1..];
        }
    }
    None
}

impl Scripts {
    /// The four scripts, or why they are not there.
    pub fn load() -> Result<Scripts, String> {
        let read = |name: &str| {
            let path = sources_dir().join(format!("{name}.java"));
            std::fs::read_to_string(&path)
                .map_err(|e| format!("{}: {e} (bench/peers/setup.sh)", path.display()))
        };
        let (r, w) = (read("RedissonReadLock")?, read("RedissonWriteLock")?);
        let lua = |java: &str, method: &str| {
            lua_of(java, method).ok_or_else(|| format!("no Lua found after {method}"))
        };
        let lock = "tryLockInnerAsync(long waitTime";
        let unlock = "unlockInnerAsync(long threadId, String requestId, long timeout)";
        Ok(Scripts {
            read_lock: redis::Script::new(&lua(&r, lock)?),
            read_unlock: redis::Script::new(&lua(&r, unlock)?),
            write_lock: redis::Script::new(&lua(&w, lock)?),
            write_unlock: redis::Script::new(&lua(&w, unlock)?),
        })
    }
}

/// One Redisson client (one JVM's id, one thread) on one lock name.
pub struct Client {
    name: String,
    /// `id:threadId`, Redisson's lock name of this thread.
    lock_name: String,
}

impl Client {
    pub fn new(name: &str, id: &str, thread: u64) -> Client {
        Client {
            name: name.to_string(),
            lock_name: format!("{id}:{thread}"),
        }
    }

    fn write_name(&self) -> String {
        format!("{}:write", self.lock_name)
    }

    /// `suffixName(name, lockName) + ":rwlock_timeout"`.
    fn timeout_prefix(&self) -> String {
        format!("{{{}}}:{}:rwlock_timeout", self.name, self.lock_name)
    }

    fn channel(&self) -> String {
        format!("redisson_rwlock:{{{}}}", self.name)
    }

    fn latch(&self, request: &str) -> String {
        format!("redisson_unlock_latch:{{{}}}:{request}", self.name)
    }

    /// One try: true if granted (the script returns nil), false with the
    /// holder's pttl otherwise.
    pub async fn try_lock(
        &self,
        s: &Scripts,
        con: &mut redis::aio::MultiplexedConnection,
        write: bool,
    ) -> bool {
        let reply: Option<i64> = if write {
            s.write_lock
                .key(&self.name)
                .arg(LEASE_MS)
                .arg(self.write_name())
                .invoke_async(con)
                .await
                .unwrap()
        } else {
            s.read_lock
                .key(&self.name)
                .key(self.timeout_prefix())
                .arg(LEASE_MS)
                .arg(&self.lock_name)
                .arg(self.write_name())
                .invoke_async(con)
                .await
                .unwrap()
        };
        reply.is_none()
    }

    /// The unlock script, then the latch's `DEL`, as `unlockInnerAsync` does.
    pub async fn unlock(
        &self,
        s: &Scripts,
        con: &mut redis::aio::MultiplexedConnection,
        write: bool,
        request: &str,
    ) {
        let latch = self.latch(request);
        let _: Option<i64> = if write {
            s.write_unlock
                .key(&self.name)
                .key(self.channel())
                .key(&latch)
                .arg(1) // READ_UNLOCK_MESSAGE
                .arg(LEASE_MS)
                .arg(self.write_name())
                .arg("publish")
                .arg(LATCH_MS)
                .invoke_async(con)
                .await
                .unwrap()
        } else {
            s.read_unlock
                .key(&self.name)
                .key(self.channel())
                .key(self.timeout_prefix())
                .key(format!("{{{}}}", self.name)) // getKeyPrefix
                .key(&latch)
                .arg(0) // UNLOCK_MESSAGE
                .arg(&self.lock_name)
                .arg("publish")
                .arg(LATCH_MS)
                .invoke_async(con)
                .await
                .unwrap()
        };
        let _: i64 = redis::cmd("DEL")
            .arg(&latch)
            .query_async(con)
            .await
            .unwrap();
    }
}
