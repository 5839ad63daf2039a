#!/usr/bin/env python3
"""Where one command's server time goes, from `perf script` of a
--call-graph dwarf recording (bench/server-profile.sh): the samples under
`call()` grouped by the innermost frame that says what they were doing.
usage: perf script -i X.perf.data | server_profile_shares.py"""
import sys, re, collections
CATS = [
  ("reply / write to socket", r"writeToClient|_writeToClient|addReply|RM_ReplyWith|_addReply|reply_int|reply_null|prepareClientToWrite|setDeferred|__GI___libc_write|tcp_"),
  ("key lookup (dict, key compare)", r"dictFind|lookupKey|dictSdsKeyCompare|dictSdsHash|siphash$|getExpire|keyIsExpired|expireIfNeeded|lookupKeyWrite|RM_OpenKey|dictAddRaw|dictAdd|_dictKeyIndex|dbAdd|setKey|dictExpand|_dictExpand|dictRehash|rehash"),
  ("lock value read (robj -> moduleValue -> lock)", r"drop_expired_holders|ModuleTypeGetType|ModuleTypeGetValue|RM_KeyType|Key::slot|rules::lock::|rules::owner"),
  ("allocation / free", r"malloc|free|zfree|zmalloc|jemalloc|je_|decrRefCount|createObject|createStringObject|createEmbeddedStringObject|sdsnewlen|_sdsnewlen|dictFreeUnlinkedEntry|moduleFreeValue|datatype::free|drop_in_place|RedisAlloc|CloseKey|dbGenericDelete|dictGenericDelete|dictUnlink|dbSyncDelete|dbDelete|RM_DeleteKey|unlink2|moduleNotifyKeyUnlink|ModuleTypeSetValue|moduleTypeCreate|createModuleObject"),
  ("propagation / replication", r"alsoPropagate|propagate|RM_Replicate|replicate_|moduleCreateArgvFromUserFormat|rewriteClientCommand|CreateStringFromLongLong|RM_CreateString|RM_FreeString|replicationFeed"),
  ("keyspace notification / signal", r"notifyKeyspaceEvent|RM_NotifyKeyspaceEvent|signalModifiedKey|touchWatchedKey|trackingInvalidateKey|notify"),
  ("token counter / clocks", r"fencing|TOKENS|wall_micros|clock_gettime|gettimeofday|Instant|Timespec|now_ms|RM_Microseconds|RM_Milliseconds|ustime|mstime|monotonic"),
  ("module dispatch (context, flags, waiter checks, stats)", r"RedisModuleCommandDispatcher|moduleCreateContext|moduleFreeContext|RM_GetContextFlags|glue::ffi::guard|_command$|blocking::|stats::|config::|GetSelectedDb|Mutex|pthread|futex|catch_unwind|commands::release$|commands::acquire$|commands::extend$|commands::rest|rules::args"),
  ("command logic (built-in)", r"setGenericCommand|setCommand|delGenericCommand|delCommand|expireGenericCommand|pexpireCommand|getLongLongFromObject|string2ll|checkStringLength|parseExtendedStringArgumentsOrReply|strcasecmp|getLongLongFromObjectOrReply"),
]
def classify(stack):
    # stack: leaf first. Walk from the leaf up: first frame that matches a category.
    for f in stack:
        for name, pat in CATS:
            if re.search(pat, f):
                return name
    return "other"
counts = collections.Counter(); total_all = 0; in_cmd = 0
stack = []
def flush():
    global total_all, in_cmd
    if not stack: return
    total_all += 1
    # only the command's own time: frames under call()'s c->cmd->proc
    names = stack
    roots = [i for i, f in enumerate(names) if re.search(r"^(call)$", f)]
    if roots:
        sub = names[:roots[0]]
        if any(re.search(r"RedisModuleCommandDispatcher|setCommand|delCommand|pexpireCommand|expireGenericCommand|delGenericCommand|setGenericCommand", f) for f in sub):
            in_cmd += 1
            counts[classify(sub)] += 1
for line in sys.stdin:
    if line.strip() == "":
        flush(); stack = []; continue
    if not line.startswith("\t") and not line.startswith(" "):
        continue
    parts = line.split()
    if len(parts) >= 2:
        sym = re.sub(r"\+0x[0-9a-f]+$", "", parts[1])
        stack.append(sym)
flush()
print(f"samples {total_all}, in the command's proc {in_cmd} ({100*in_cmd/max(total_all,1):.0f}%)")
for name, n in counts.most_common():
    print(f"  {100*n/max(in_cmd,1):5.1f}%  {name}")
