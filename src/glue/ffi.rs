//! The thin unsafe layer between Redis and the lock logic: argv access,
//! replies, key handles and replication. Nothing here decides anything.

use crate::rules::lock::Lock;
use crate::rules::shared::Shared;
use crate::rules::value::Value;
use redis_module::raw;
use std::ffi::{c_char, c_int, c_longlong, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// "0" and "1" as module strings, for replicated commands.
static ZERO: once_cell::sync::OnceCell<usize> = once_cell::sync::OnceCell::new();
static ONE: once_cell::sync::OnceCell<usize> = once_cell::sync::OnceCell::new();

/// A constant module string, made on first use (on the main thread, as
/// every command runs).
fn constant(cell: &once_cell::sync::OnceCell<usize>, text: &CStr) -> RawString {
    // SAFETY: a NULL-ctx string is unowned: created once, never freed.
    *cell.get_or_init(|| unsafe {
        api!(RedisModule_CreateString)(std::ptr::null_mut(), text.as_ptr(), text.to_bytes().len())
    } as usize) as RawString
}

pub type RawCtx = *mut raw::RedisModuleCtx;
pub type RawString = *mut raw::RedisModuleString;

/// Calls a Redis API function pointer. Every one of them is filled in by
/// `RedisModule_Init` before any of our code runs, so the unwrap cannot fail.
macro_rules! api {
    ($name:ident) => {
        raw::$name.unwrap()
    };
}
pub(crate) use api;

/// Why a cluster node may not write a key now (`Ctx::may_write_key`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterRefusal {
    /// The key's slot is served by another node (or being migrated away).
    Elsewhere,
    /// The cluster is down, or takes only reads.
    Down,
}

impl ClusterRefusal {
    /// What a waiter is told.
    pub fn message(self) -> &'static str {
        match self {
            ClusterRefusal::Elsewhere => {
                "TRYAGAIN the lock's key is served by another cluster node now (slot migrated); retry"
            }
            ClusterRefusal::Down => "CLUSTERDOWN the cluster is down: no lock is handed on; retry",
        }
    }
}

/// The module's data type, as Redis created it (set once at load, by lib.rs,
/// so this bottom layer never reaches up into `datatype.rs`).
static LOCK_TYPE: std::sync::atomic::AtomicPtr<raw::RedisModuleType> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

pub fn set_lock_type(lock_type: *mut raw::RedisModuleType) {
    LOCK_TYPE.store(lock_type, std::sync::atomic::Ordering::Relaxed);
}

fn lock_type() -> *mut raw::RedisModuleType {
    LOCK_TYPE.load(std::sync::atomic::Ordering::Relaxed)
}

/// The bytes of a Redis string, borrowed for as long as the string lives.
pub fn bytes<'a>(s: *const raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: Redis hands us valid strings (argv, key names) that outlive the call.
    unsafe {
        let ptr = api!(RedisModule_StringPtrLen)(s, &mut len);
        std::slice::from_raw_parts(ptr.cast::<u8>(), len)
    }
}

/// Whether writes are paused (`CLIENT PAUSE ... WRITE|ALL`, `FAILOVER`,
/// a cluster manual failover). While they are, nothing may be written or
/// propagated from timers and events: Redis asserts on it.
pub fn writes_paused() -> bool {
    // SAFETY: no arguments; on 7.0 it reports (and times out) client pauses.
    unsafe { api!(RedisModule_AvoidReplicaTraffic)() != 0 }
}

/// The server's wall clock in µs since the epoch: `RedisModule_Microseconds`
/// where it exists (7.2+, Valkey), else `RedisModule_Milliseconds` × 1000.
/// Wall-clock µs as the server reads its clock: one clock for the server
/// and its module, even where the module's own libc calls are bound apart
/// from the server's (Valkey loads modules with RTLD_DEEPBIND, so a clock
/// shim preloaded into the server would not reach them).
pub fn wall_micros() -> u64 {
    server_unix_micros().unwrap_or_else(crate::rules::clock::unix_micros)
}

fn server_unix_micros() -> Option<u64> {
    // SAFETY: the API table is written once by RedisModule_Init and only read
    // afterwards; both functions take no arguments.
    unsafe {
        if let Some(micros) = raw::RedisModule_Microseconds {
            return u64::try_from(micros()).ok();
        }
        let millis = raw::RedisModule_Milliseconds?;
        u64::try_from(millis()).ok().map(|ms| ms * 1000)
    }
}

/// Run a command body without ever letting a panic unwind into Redis.
pub fn guard(ctx: RawCtx, body: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        Ctx(ctx).error("ERR internal error in the lock module (see server log)");
        raw::REDISMODULE_OK as c_int
    })
}

/// A command or callback context.
#[derive(Clone, Copy)]
pub struct Ctx(pub RawCtx);

impl Ctx {
    pub fn reply_int(self, v: i64) {
        // SAFETY: valid ctx for the duration of the command.
        unsafe { api!(RedisModule_ReplyWithLongLong)(self.0, v as c_longlong) };
    }
    pub fn reply_null(self) {
        // SAFETY: as above.
        unsafe { api!(RedisModule_ReplyWithNull)(self.0) };
    }
    pub fn reply_bytes(self, b: &[u8]) {
        // SAFETY: Redis copies the buffer before returning.
        unsafe { api!(RedisModule_ReplyWithStringBuffer)(self.0, b.as_ptr().cast(), b.len()) };
    }
    pub fn reply_map(self, pairs: usize) {
        // SAFETY: as above; RESP2 clients get a flat array of 2*pairs.
        unsafe { api!(RedisModule_ReplyWithMap)(self.0, pairs as _) };
    }
    pub fn reply_array(self, len: usize) {
        // SAFETY: as above.
        unsafe { api!(RedisModule_ReplyWithArray)(self.0, len as _) };
    }
    pub fn reply_simple(self, s: &CStr) {
        // SAFETY: s is NUL-terminated.
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.0, s.as_ptr()) };
    }
    /// `msg` must start with an error code such as `ERR ` and hold no CR/LF.
    pub fn error(self, msg: &str) {
        let mut buf = msg.replace(['\r', '\n', '\0'], " ").into_bytes();
        buf.push(0);
        // SAFETY: buf is NUL-terminated; Redis copies it.
        unsafe { api!(RedisModule_ReplyWithError)(self.0, buf.as_ptr().cast::<c_char>()) };
    }

    pub fn flags(self) -> u32 {
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_GetContextFlags)(self.0) as u32 }
    }
    /// Whether this node may write the key `name` now (create a lock in
    /// it). Outside cluster mode always. In a cluster, the server's own
    /// redirection rules decide, reached through `RedisModule_Call` of a
    /// write command (which refuses a key the node would redirect a client
    /// for: another node's slot, a key missing from a slot being migrated
    /// away, a cluster that is down or takes only reads). A hand-off must
    /// not create a lock the slot's new owner, or the promoted replica of a
    /// partitioned primary, may grant too (attack runs, 6cfbd0b and 55a45f8:
    /// two holders across a MIGRATE, and across a partition on Valkey with
    /// `cluster-allow-reads-when-down yes`).
    pub fn may_write_key(self, name: RawString) -> Result<(), ClusterRefusal> {
        if !self.in_cluster() {
            return Ok(());
        }
        // LOCK.APPLY: a write command of ours (config cannot rename it, as
        // it can EXISTS or UNLINK) that refuses every caller but a primary
        // or the AOF, so it changes nothing: only whether the call got past
        // the cluster check matters.
        // SAFETY: valid ctx; "scccc" matches one RedisModuleString and four
        // NUL-terminated strings; a non-null reply is freed once.
        let refused = unsafe {
            let reply = api!(RedisModule_Call)(
                self.0,
                c"lock.apply".as_ptr(),
                c"scccc".as_ptr(),
                name,
                c"".as_ptr(),
                c"0".as_ptr(),
                c"0".as_ptr(),
                c"0".as_ptr(),
            );
            if reply.is_null() {
                Some(std::io::Error::last_os_error().raw_os_error())
            } else {
                api!(RedisModule_FreeCallReply)(reply);
                None
            }
        };
        match refused {
            None => Ok(()),
            Some(Some(libc::EROFS | libc::ENETDOWN)) => Err(ClusterRefusal::Down),
            Some(_) => Err(ClusterRefusal::Elsewhere),
        }
    }
    /// The id of the client calling the command (0 without one).
    pub fn client_id(self) -> u64 {
        // SAFETY: valid ctx; returns 0 when there is no client.
        unsafe { api!(RedisModule_GetClientId)(self.0) }
    }

    /// Whether the ACL user of client `client_id` may run `argv` (a command
    /// name and its arguments) now, as the server would check it: command,
    /// key and selector rules. A client that is gone or has no ACL user (the
    /// server's own), a server without the ACL API, or a command the server
    /// does not know: true, nothing to go by. A user deleted meanwhile: false.
    pub fn client_may_run(self, client_id: u64, argv: &[&[u8]]) -> bool {
        // SAFETY (the reads): the API table is written once at load.
        let api = unsafe {
            (
                raw::RedisModule_GetClientUserNameById,
                raw::RedisModule_GetModuleUserFromUserName,
                raw::RedisModule_ACLCheckCommandPermissions,
                raw::RedisModule_FreeModuleUser,
            )
        };
        let (Some(user_name), Some(user_of), Some(check), Some(free_user)) = api else {
            return true;
        };
        // SAFETY: valid ctx; a non-null name is ours to free, once.
        let name = unsafe { user_name(self.0, client_id) };
        if name.is_null() {
            return true;
        }
        // SAFETY: name is a live string; the user (if any) is freed below.
        let user = unsafe { user_of(name) };
        // SAFETY: created for us above, freed once.
        unsafe { api!(RedisModule_FreeString)(self.0, name) };
        if user.is_null() {
            return false;
        }
        let strings: Vec<OwnedString> = argv.iter().map(|a| self.create_string(a)).collect();
        let mut raw_argv: Vec<RawString> = strings.iter().map(|s| s.1).collect();
        let argc = c_int::try_from(raw_argv.len()).unwrap_or(c_int::MAX);
        // SAFETY: user is live until freed here; argv holds argc live strings.
        let (rc, errno) = unsafe {
            let rc = check(user, raw_argv.as_mut_ptr(), argc);
            let errno = std::io::Error::last_os_error().raw_os_error();
            free_user(user);
            (rc, errno)
        };
        rc == raw::REDISMODULE_OK as c_int || errno != Some(libc::EACCES)
    }
    pub fn in_cluster(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_CLUSTER != 0
    }
    pub fn is_replica(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_SLAVE != 0
    }
    pub fn is_loading(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_LOADING != 0
    }
    /// The command arrived over the replication link or from the AOF.
    pub fn is_replicated_or_aof(self) -> bool {
        self.flags() & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING)
            != 0
    }
    /// (`is_replicated_or_aof`, `is_replica`) in one look at the flags:
    /// every command's entry point asks both.
    pub fn replayed_and_replica(self) -> (bool, bool) {
        let flags = self.flags();
        let replayed = raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING;
        (
            flags & replayed != 0,
            flags & raw::REDISMODULE_CTX_FLAGS_SLAVE != 0,
        )
    }
    /// Blocking is not allowed inside MULTI, Lua, or for replicated/AOF commands.
    pub fn can_block(self) -> bool {
        self.flags()
            & (raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING
                | raw::REDISMODULE_CTX_FLAGS_REPLICATED
                | raw::REDISMODULE_CTX_FLAGS_LOADING)
            == 0
    }
    pub fn selected_db(self) -> i32 {
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_GetSelectedDb)(self.0) }
    }
    pub fn select_db(self, db: i32) -> bool {
        // SAFETY: valid ctx; fails harmlessly for an out-of-range db.
        unsafe { api!(RedisModule_SelectDb)(self.0, db) == raw::REDISMODULE_OK as c_int }
    }

    /// Propagate the absolute state of a lock (`LOCK.APPLY`) to replicas
    /// and the AOF: the effect, not the command, so tokens and deadlines match.
    pub fn replicate_apply(self, key: RawString, lock: &Lock, remaining: u64) {
        // SAFETY: "sblll" matches the five arguments that follow.
        unsafe {
            api!(RedisModule_Replicate)(
                self.0,
                c"LOCK.APPLY".as_ptr(),
                c"sblll".as_ptr(),
                key,
                lock.owner.as_ptr().cast::<c_char>(),
                lock.owner.len(),
                lock.token as c_longlong,
                remaining as c_longlong,
                c_longlong::from(lock.holds),
            )
        };
    }

    /// Propagate one shared holder's state absolutely
    /// (`LOCK.APPLYSHARED key limit owner token ttl-ms holds`, limit 0 for
    /// none): a grant, renewal, extension, fence or downgrade of that hold.
    pub fn replicate_shared_hold(
        self,
        key: RawString,
        limit: Option<u32>,
        hold: &Lock,
        remaining: u64,
    ) {
        self.replicate_shared(key, limit, &hold.owner, hold.token, remaining, hold.holds);
    }

    /// Propagate that `owner`'s shared hold is gone (released, expired,
    /// taken back): `LOCK.APPLYSHARED key limit owner 0 0 0`.
    pub fn replicate_shared_drop(self, key: RawString, limit: Option<u32>, owner: &[u8]) {
        self.replicate_shared(key, limit, owner, 0, 0, 0);
    }

    fn replicate_shared(
        self,
        key: RawString,
        limit: Option<u32>,
        owner: &[u8],
        token: u64,
        ttl: u64,
        holds: u32,
    ) {
        // The "slblll" form built nine objects per call (two per number),
        // which made a shared acquire + release cost 1.6x an exclusive pair
        // beside 100 holders, all of it here (2026-11-28). Numbers that are
        // nearly always 0 or 1 (limit, holds, a drop's token and ttl) are
        // shared constants; only the owner and other numbers are new.
        let mut made: [RawString; 5] = [std::ptr::null_mut(); 5];
        let mut n = 0;
        let mut number = |v: u64| -> RawString {
            match v {
                0 => constant(&ZERO, c"0"),
                1 => constant(&ONE, c"1"),
                _ => {
                    // SAFETY: valid ctx; freed below.
                    let s = unsafe {
                        api!(RedisModule_CreateStringFromLongLong)(self.0, v as c_longlong)
                    };
                    made[n] = s;
                    n += 1;
                    s
                }
            }
        };
        let limit = number(u64::from(limit.unwrap_or(0)));
        let token = number(token);
        let ttl = number(ttl);
        let holds = number(u64::from(holds));
        // SAFETY: valid ctx; Redis copies the buffer; freed below.
        let owner = unsafe {
            api!(RedisModule_CreateString)(self.0, owner.as_ptr().cast::<c_char>(), owner.len())
        };
        made[n] = owner;
        n += 1;
        // SAFETY: valid ctx; "v" takes an array of strings and a count, and
        // Redis takes its own references to them.
        unsafe {
            let mut args = [key, limit, owner, token, ttl, holds];
            api!(RedisModule_Replicate)(
                self.0,
                c"LOCK.APPLYSHARED".as_ptr(),
                c"v".as_ptr(),
                args.as_mut_ptr(),
                args.len(),
            );
            for s in &made[..n] {
                api!(RedisModule_FreeString)(self.0, *s);
            }
        }
    }

    /// Propagate a fresh grant made by `LOCK.ACQUIRE key owner ttl-ms ...`
    /// as `LOCK.APPLY key owner token ttl-ms 1`, reusing the command's own
    /// argument objects: only the token string is new (the hot path).
    pub fn replicate_grant(self, argv: &[RawString], token: u64) {
        let one = constant(&ONE, c"1");
        // SAFETY: valid ctx; "v" takes an array of strings and a count,
        // and Redis takes its own references to them.
        unsafe {
            let token = api!(RedisModule_CreateStringFromLongLong)(self.0, token as c_longlong);
            let mut args = [argv[1], argv[2], token, argv[3], one];
            api!(RedisModule_Replicate)(
                self.0,
                c"LOCK.APPLY".as_ptr(),
                c"v".as_ptr(),
                args.as_mut_ptr(),
                args.len(),
            );
            api!(RedisModule_FreeString)(self.0, token);
        }
    }

    /// Propagate the command as it was sent (no new objects).
    pub fn replicate_verbatim(self) {
        // SAFETY: valid command ctx.
        unsafe { api!(RedisModule_ReplicateVerbatim)(self.0) };
    }

    pub fn replicate_del(self, key: RawString) {
        // SAFETY: "s" matches the one RedisModuleString argument.
        unsafe { api!(RedisModule_Replicate)(self.0, c"DEL".as_ptr(), c"s".as_ptr(), key) };
    }

    /// A keyspace event of class `m` (module), e.g. `lock.acquire`.
    pub fn notify(self, event: &CStr, key: RawString) {
        // SAFETY: event is NUL-terminated; key is a live string.
        unsafe {
            api!(RedisModule_NotifyKeyspaceEvent)(
                self.0,
                raw::NotifyEvent::MODULE.bits(),
                event.as_ptr(),
                key,
            )
        };
    }

    pub fn create_string(self, b: &[u8]) -> OwnedString {
        // SAFETY: Redis copies the buffer.
        OwnedString(self, unsafe {
            api!(RedisModule_CreateString)(self.0, b.as_ptr().cast(), b.len())
        })
    }
}

/// A Redis string we created and must free.
pub struct OwnedString(Ctx, pub RawString);

impl Drop for OwnedString {
    fn drop(&mut self) {
        // SAFETY: created by RedisModule_CreateString on this ctx, freed once.
        unsafe { api!(RedisModule_FreeString)(self.0 .0, self.1) };
    }
}

/// What a key holds, as far as the lock commands care.
pub enum Slot<'a> {
    Empty,
    /// An exclusive lock (the hot path, as before shared holds existed).
    Lock(&'a mut Lock),
    Shared(&'a mut Shared),
    WrongType,
}

/// An open key, closed on drop.
pub struct Key {
    ptr: *mut raw::RedisModuleKey,
    lock_type: *mut raw::RedisModuleType,
}

impl Key {
    pub fn open(ctx: Ctx, name: RawString, write: bool) -> Key {
        let mode = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        // SAFETY: valid ctx and key name; the handle is closed in Drop.
        let ptr = unsafe { api!(RedisModule_OpenKey)(ctx.0, name, mode as c_int) };
        Key {
            ptr,
            lock_type: lock_type(),
        }
    }

    pub fn slot(&mut self) -> Slot<'_> {
        if self.ptr.is_null() {
            return Slot::Empty; // read-only open of a missing key
        }
        // SAFETY: open handle; the value pointer is ours (checked by type) and
        // lives until the key is modified, which needs `&mut self` again.
        unsafe {
            match api!(RedisModule_KeyType)(self.ptr) as isize {
                raw::REDISMODULE_KEYTYPE_EMPTY => Slot::Empty,
                raw::REDISMODULE_KEYTYPE_MODULE
                    if api!(RedisModule_ModuleTypeGetType)(self.ptr) == self.lock_type =>
                {
                    match &mut *api!(RedisModule_ModuleTypeGetValue)(self.ptr).cast::<Value>() {
                        Value::Exclusive(lock) => Slot::Lock(lock),
                        Value::Shared(shared) => Slot::Shared(shared),
                    }
                }
                _ => Slot::WrongType,
            }
        }
    }

    /// The lock behind a key handle Redis opened for us (SCAN callback).
    pub fn peek<'a>(key: *mut raw::RedisModuleKey) -> Option<&'a Value> {
        // SAFETY: a live key handle; the value is ours when the type matches.
        unsafe {
            (!key.is_null() && api!(RedisModule_ModuleTypeGetType)(key) == lock_type())
                .then(|| &*api!(RedisModule_ModuleTypeGetValue)(key).cast::<Value>())
        }
    }

    /// Store a lock (replacing whatever was there) and return it in place.
    pub fn set(&mut self, lock: Lock) -> &mut Lock {
        match self.set_value(Value::Exclusive(lock)) {
            Value::Exclusive(lock) => lock,
            Value::Shared(_) => unreachable!("just stored an exclusive lock"),
        }
    }

    /// Store shared holds (replacing whatever was there), in place.
    pub fn set_shared(&mut self, shared: Shared) -> &mut Shared {
        match self.set_value(Value::Shared(Box::new(shared))) {
            Value::Shared(shared) => shared,
            Value::Exclusive(_) => unreachable!("just stored shared holds"),
        }
    }

    fn set_value(&mut self, value: Value) -> &mut Value {
        let value = Box::into_raw(Box::new(value));
        crate::rules::stats::lock_created();
        // SAFETY: key opened for write; Redis owns the box from here and
        // gives it back to `datatype::free`.
        unsafe {
            api!(RedisModule_ModuleTypeSetValue)(self.ptr, self.lock_type, value.cast::<c_void>());
            &mut *value
        }
    }

    pub fn delete(&mut self) {
        // SAFETY: key opened for write; frees the value via `datatype::free`.
        unsafe { api!(RedisModule_DeleteKey)(self.ptr) };
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: opened by RedisModule_OpenKey, closed exactly once.
            unsafe { api!(RedisModule_CloseKey)(self.ptr) };
        }
    }
}

/// Attach arity, a one-line summary and a key spec (the key at argv[1],
/// with `key_flags`; none when 0) to a created command, for COMMAND
/// INFO/DOCS and ACLs.
pub fn describe_command(
    ctx: RawCtx,
    name: &CStr,
    arity: c_int,
    key_flags: u32,
    summary: &'static CStr,
) -> bool {
    use raw::{
        RedisModuleCommandArg as Arg, RedisModuleCommandHistoryEntry as History,
        RedisModuleCommandKeySpec as Spec,
    };
    let version = Box::leak(Box::new(raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<History>(),
        sizeof_keyspec: std::mem::size_of::<Spec>(),
        sizeof_arg: std::mem::size_of::<Arg>(),
    }));
    // SAFETY: all-zero is the documented terminator / "unset" for these C structs.
    let mut specs: [Spec; 2] = unsafe { std::mem::zeroed() };
    specs[0].flags = u64::from(key_flags);
    specs[0].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    specs[0].bs.index.pos = 1;
    specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    specs[0].fk.range = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
        lastkey: 0,
        keystep: 1,
        limit: 0,
    };
    // SAFETY: as above; Redis copies what it needs from the info struct.
    let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
    info.version = version;
    info.summary = summary.as_ptr();
    info.since = c"0.1.0".as_ptr();
    info.arity = arity;
    if key_flags != 0 {
        info.key_specs = specs.as_mut_ptr();
    }
    // SAFETY: valid ctx during OnLoad; the command was just created.
    unsafe {
        let command = api!(RedisModule_GetCommand)(ctx, name.as_ptr());
        !command.is_null()
            && api!(RedisModule_SetCommandInfo)(command, &info) == raw::REDISMODULE_OK as c_int
    }
}
