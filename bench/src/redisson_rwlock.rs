//! Redisson's RReadWriteLock as its clients drive it, without the JVM: Lua
//! written here, modeled on Redisson 4.7.0 (tag redisson-4.7.0, commit
//! 0c286e86eb813a26222b3dc281f0ca368dd46561: RedissonReadLock,
//! RedissonWriteLock, RedissonLock), speaking the same protocol on the same
//! keys with the same replies, so the server does the same work per call.
//! The keys and arguments are built as those classes build them.
//!
//! The protocol, in short. A lock `name` is one hash. Its `mode` field is
//! `read` or `write`; every other field is an owner (`id:threadId` for a
//! reader, `id:threadId:write` for the writer) mapped to how many times that
//! owner holds it.
//!
//! - Read lock: on a free name, set mode `read`, count the owner 1, and give
//!   the hold a timeout key `{name}:id:threadId:rwlock_timeout:1` living the
//!   lease, and the hash the lease. While the mode is `read` (any reader
//!   holds), or the mode is `write` and this thread is the writer, count one
//!   more hold, add the timeout key with that count as its suffix, and
//!   stretch the hash's life to the longer of what it has left and the lease.
//!   Granted is a nil reply; refused is the hash's pttl.
//! - Write lock: on a free name, set mode `write`, count the writer 1, the
//!   hash lives the lease. If this thread already writes, count one more and
//!   add the lease to the time the hash has left. Otherwise refuse: the pttl.
//! - Both unlocks first look at the request's unlock latch
//!   (`redisson_unlock_latch:{name}:requestId`): if set, the unlock was
//!   already done and its reply is the latch's value. On a free name they
//!   publish the unlock message on `redisson_rwlock:{name}`, set the latch to
//!   1 and reply nil. A caller that is not an owner gets nil and changes
//!   nothing.
//! - Read unlock: count one hold off (drop the owner at 0) and delete that
//!   hold's timeout key. If other fields than `mode` remain, the hash lives
//!   on for the longest pttl among the remaining holds' timeout keys (reply
//!   0, latch 0); if none has time left but the mode is `write`, the writer
//!   still holds (reply 0, latch 0). Otherwise delete the hash, publish,
//!   latch 1, reply 1.
//! - Write unlock (mode `write` only, else nil): count one off; still held,
//!   renew the lease (reply 0, latch 0). At 0 drop the writer: if only
//!   `mode` remains, delete the hash and publish; else readers the writer
//!   took remain, and the mode becomes `read`. Latch 1, reply 1.
//!
//! The client then deletes the latch (`unlockInnerAsync`'s last step).

/// Redisson's default lease (the watchdog's `lockWatchdogTimeout`), ms.
pub const LEASE_MS: u64 = 30_000;
/// The unlock latch's timeout: (timeout 3000 ms + retry delay 1500 ms) x 3
/// retry attempts, Redisson's defaults in `unlockInnerAsync`.
pub const LATCH_MS: u64 = 13_500;

/// KEYS: hash, timeout-key prefix. ARGV: lease ms, reader name, writer name.
const READ_LOCK: &str = r#"
local hash, timeouts = KEYS[1], KEYS[2]
local lease, reader, writer = ARGV[1], ARGV[2], ARGV[3]
local mode = redis.call('hget', hash, 'mode')
if mode == false then
  -- Free: the first reader, its first hold's timeout key, both live the lease.
  redis.call('hset', hash, 'mode', 'read')
  redis.call('hset', hash, reader, 1)
  redis.call('set', timeouts .. ':1', 1)
  redis.call('pexpire', timeouts .. ':1', lease)
  redis.call('pexpire', hash, lease)
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', hash, writer) == 1) then
  -- Readers share; the writer may also read. One more hold, its own timeout
  -- key numbered by the new count.
  local n = redis.call('hincrby', hash, reader, 1)
  local timeout = timeouts .. ':' .. n
  redis.call('set', timeout, 1)
  redis.call('pexpire', timeout, lease)
  -- The hash lives as long as its longest hold.
  local left = redis.call('pttl', hash)
  redis.call('pexpire', hash, math.max(left, lease))
  return nil
end
-- Refused: how long the current holders keep it.
return redis.call('pttl', hash)
"#;

/// KEYS: hash, channel, timeout-key prefix, key prefix `{name}`, latch.
/// ARGV: unlock message, reader name, publish command, latch ms.
const READ_UNLOCK: &str = r#"
local hash, channel, timeouts, prefix, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local message, reader, publish, latch_ms = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
-- A retried request replies what the first one did.
local done = redis.call('get', latch)
if done ~= false then
  return tonumber(done)
end
local mode = redis.call('hget', hash, 'mode')
if mode == false then
  -- Nothing held: wake waiters anyway.
  redis.call(publish, channel, message)
  redis.call('set', latch, 1, 'px', latch_ms)
  return nil
end
if redis.call('hexists', hash, reader) == 0 then
  -- Not an owner: change nothing.
  return nil
end
-- One hold less; its timeout key goes with it.
local left = redis.call('hincrby', hash, reader, -1)
if left == 0 then
  redis.call('hdel', hash, reader)
end
redis.call('del', timeouts .. ':' .. (left + 1))
if redis.call('hlen', hash) > 1 then
  -- Other holds remain: the hash lives as long as the longest of their
  -- timeout keys (the 'mode' field is not a count and is skipped).
  local longest = -3
  for _, owner in ipairs(redis.call('hkeys', hash)) do
    local holds = tonumber(redis.call('hget', hash, owner))
    if type(holds) == 'number' then
      for i = holds, 1, -1 do
        local ttl = redis.call('pttl', prefix .. ':' .. owner .. ':rwlock_timeout:' .. i)
        longest = math.max(ttl, longest)
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', hash, longest)
    redis.call('set', latch, 0, 'px', latch_ms)
    return 0
  end
  -- No reader's time left, but a writer still holds.
  if mode == 'write' then
    redis.call('set', latch, 0, 'px', latch_ms)
    return 0
  end
end
-- The last hold: free the name and wake waiters.
redis.call('del', hash)
redis.call(publish, channel, message)
redis.call('set', latch, 1, 'px', latch_ms)
return 1
"#;

/// KEYS: hash. ARGV: lease ms, writer name.
const WRITE_LOCK: &str = r#"
local hash = KEYS[1]
local lease, writer = ARGV[1], ARGV[2]
local mode = redis.call('hget', hash, 'mode')
if mode == false then
  -- Free: this writer holds it once, for the lease.
  redis.call('hset', hash, 'mode', 'write')
  redis.call('hset', hash, writer, 1)
  redis.call('pexpire', hash, lease)
  return nil
end
if mode == 'write' and redis.call('hexists', hash, writer) == 1 then
  -- Reentry: one more hold, and one more lease on top of the time left.
  redis.call('hincrby', hash, writer, 1)
  local left = redis.call('pttl', hash)
  redis.call('pexpire', hash, left + lease)
  return nil
end
-- Refused (readers, or another writer): how long they keep it.
return redis.call('pttl', hash)
"#;

/// KEYS: hash, channel, latch. ARGV: unlock message, lease ms, writer name,
/// publish command, latch ms.
const WRITE_UNLOCK: &str = r#"
local hash, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local message, lease, writer, publish, latch_ms = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
-- A retried request replies what the first one did.
local done = redis.call('get', latch)
if done ~= false then
  return tonumber(done)
end
local mode = redis.call('hget', hash, 'mode')
if mode == false then
  -- Nothing held: wake waiters anyway.
  redis.call(publish, channel, message)
  redis.call('set', latch, 1, 'px', latch_ms)
  return nil
end
if mode ~= 'write' or redis.call('hexists', hash, writer) == 0 then
  -- Not the writer: change nothing.
  return nil
end
local left = redis.call('hincrby', hash, writer, -1)
if left > 0 then
  -- Still held (reentrant): renew the lease.
  redis.call('pexpire', hash, lease)
  redis.call('set', latch, 0, 'px', latch_ms)
  return 0
end
redis.call('hdel', hash, writer)
if redis.call('hlen', hash) == 1 then
  -- Only 'mode' is left: free the name and wake waiters.
  redis.call('del', hash)
  redis.call(publish, channel, message)
else
  -- The writer's own read holds remain.
  redis.call('hset', hash, 'mode', 'read')
end
redis.call('set', latch, 1, 'px', latch_ms)
return 1
"#;

pub struct Scripts {
    pub read_lock: redis::Script,
    pub read_unlock: redis::Script,
    pub write_lock: redis::Script,
    pub write_unlock: redis::Script,
}

impl Default for Scripts {
    fn default() -> Scripts {
        Scripts::new()
    }
}

impl Scripts {
    pub fn new() -> Scripts {
        Scripts {
            read_lock: redis::Script::new(READ_LOCK),
            read_unlock: redis::Script::new(READ_UNLOCK),
            write_lock: redis::Script::new(WRITE_LOCK),
            write_unlock: redis::Script::new(WRITE_UNLOCK),
        }
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

    /// The unlock script, then the latch's `DEL`, as `unlockInnerAsync` does;
    /// the script's reply (1 freed, 0 still held, nil not an owner).
    pub async fn unlock(
        &self,
        s: &Scripts,
        con: &mut redis::aio::MultiplexedConnection,
        write: bool,
        request: &str,
    ) -> Option<i64> {
        let latch = self.latch(request);
        let reply: Option<i64> = if write {
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
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis_lock_testkit::Server;

    async fn hash(con: &mut redis::aio::MultiplexedConnection) -> Vec<(String, String)> {
        let mut h: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg("rw")
            .query_async(con)
            .await
            .unwrap();
        h.sort();
        h
    }

    async fn exists(con: &mut redis::aio::MultiplexedConnection, key: &str) -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query_async(con)
            .await
            .unwrap()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut v: Vec<_> = p
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        v.sort();
        v
    }

    #[tokio::test]
    async fn the_scripts_keep_redissons_read_write_protocol() {
        let server = Server::start();
        let redis = redis::Client::open(server.url()).unwrap();
        let mut con = redis.get_multiplexed_async_connection().await.unwrap();
        let s = Scripts::new();
        let (a, b) = (Client::new("rw", "ida", 1), Client::new("rw", "idb", 7));
        let c = Client::new("rw", "idc", 3);

        // Two readers hold together, each with its hold's timeout key.
        assert!(a.try_lock(&s, &mut con, false).await);
        assert!(b.try_lock(&s, &mut con, false).await);
        assert_eq!(
            hash(&mut con).await,
            pairs(&[("mode", "read"), ("ida:1", "1"), ("idb:7", "1")])
        );
        assert!(exists(&mut con, "{rw}:ida:1:rwlock_timeout:1").await);
        assert!(exists(&mut con, "{rw}:idb:7:rwlock_timeout:1").await);

        // A reader holds: a writer is refused, and changes nothing.
        assert!(!c.try_lock(&s, &mut con, true).await);
        // A non-owner's unlocks change nothing and reply nil.
        assert_eq!(c.unlock(&s, &mut con, false, "r1").await, None);
        assert_eq!(c.unlock(&s, &mut con, true, "r2").await, None);
        assert_eq!(hash(&mut con).await.len(), 3);

        // Reentrant read: a second hold, a second timeout key; one unlock
        // takes back exactly that one.
        assert!(a.try_lock(&s, &mut con, false).await);
        assert_eq!(hash(&mut con).await[0], ("ida:1".into(), "2".into()));
        assert!(exists(&mut con, "{rw}:ida:1:rwlock_timeout:2").await);
        assert_eq!(a.unlock(&s, &mut con, false, "r3").await, Some(0));
        assert!(!exists(&mut con, "{rw}:ida:1:rwlock_timeout:2").await);
        assert_eq!(hash(&mut con).await[0], ("ida:1".into(), "1".into()));

        // The last reader out frees the name.
        assert_eq!(a.unlock(&s, &mut con, false, "r4").await, Some(0));
        assert_eq!(b.unlock(&s, &mut con, false, "r5").await, Some(1));
        assert!(!exists(&mut con, "rw").await);

        // A writer holds: readers and other writers are refused.
        assert!(c.try_lock(&s, &mut con, true).await);
        assert!(!a.try_lock(&s, &mut con, false).await);
        assert!(!b.try_lock(&s, &mut con, true).await);
        assert_eq!(a.unlock(&s, &mut con, true, "r6").await, None);
        assert_eq!(a.unlock(&s, &mut con, false, "r7").await, None);
        assert_eq!(
            hash(&mut con).await,
            pairs(&[("mode", "write"), ("idc:3:write", "1")])
        );

        // Reentrant write: counted, and released one hold at a time.
        assert!(c.try_lock(&s, &mut con, true).await);
        assert_eq!(hash(&mut con).await[0], ("idc:3:write".into(), "2".into()));
        assert_eq!(c.unlock(&s, &mut con, true, "r8").await, Some(0));
        assert!(!a.try_lock(&s, &mut con, false).await);

        // The writer may read too; its write unlock then leaves a read lock.
        assert!(c.try_lock(&s, &mut con, false).await);
        assert_eq!(c.unlock(&s, &mut con, true, "r9").await, Some(1));
        assert_eq!(
            hash(&mut con).await,
            pairs(&[("mode", "read"), ("idc:3", "1")])
        );
        assert!(a.try_lock(&s, &mut con, false).await);
        assert_eq!(c.unlock(&s, &mut con, false, "r10").await, Some(0));
        assert_eq!(a.unlock(&s, &mut con, false, "r11").await, Some(1));
        assert!(!exists(&mut con, "rw").await);
        // Every unlock's latch was deleted after it, as the client does.
        let left: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(left, Vec::<String>::new());
    }
}
