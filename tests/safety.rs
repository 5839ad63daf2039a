//! Restart/failover guard and clock-jump immunity on real servers.

use crate::common;
use common::*;
use std::time::Duration;

/// Persistence the guard trusts: an AOF fsync'd on every write.
const AOF: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];
/// The guard as long as the longest TTL allowed: 1 s.
const GUARD_1S: [&str; 4] = ["restart-delay-ms", "-1", "max-ttl-ms", "1000"];

#[test]
fn wall_clock_jump_frees_set_nx_px_but_not_a_lock() {
    let offset_file = std::env::temp_dir().join(format!("clockshim-{}", std::process::id()));
    std::fs::write(&offset_file, "0").unwrap();
    let shim = shim::clockshim();
    let s = Server::with_env(
        &[],
        &[],
        &[
            ("LD_PRELOAD", shim.to_str().unwrap()),
            ("CLOCKSHIM_FILE", offset_file.to_str().unwrap()),
        ],
    );
    let mut c = s.conn();
    q(&mut c, "SET plain token NX PX 30000").unwrap();
    let t = int(&mut c, "LOCK.ACQUIRE lock owner 30000");
    let before: i64 = redis::cmd("TIME").query::<Vec<i64>>(&mut c).unwrap()[0];
    std::fs::write(&offset_file, "40").unwrap(); // the server's wall clock jumps 40 s ahead
    std::thread::sleep(Duration::from_millis(300));
    let after: i64 = redis::cmd("TIME").query::<Vec<i64>>(&mut c).unwrap()[0];
    assert!(
        after - before >= 40,
        "the shim moved the server's clock: {before} -> {after}"
    );
    assert_eq!(
        q(&mut c, "GET plain").unwrap(),
        Value::Nil,
        "SET NX PX key freed by the jump"
    );
    assert_eq!(
        q(&mut c, "SET plain other NX PX 30000").unwrap(),
        Value::Okay,
        "and a second holder gets it"
    );
    let (owner, token, ttl, ..) = status(&mut c, "lock").expect("the lock survives the jump");
    assert_eq!((owner.as_slice(), token), (&b"owner"[..], t));
    assert!(ttl > 29_000, "and keeps its remaining TTL: {ttl}");
    assert_eq!(
        q(&mut c, "LOCK.ACQUIRE lock intruder 30000").unwrap(),
        Value::Nil
    );
    // A jump backwards neither extends the lock nor stalls its expiry.
    int(&mut c, "LOCK.ACQUIRE short owner 300");
    std::fs::write(&offset_file, "-3600").unwrap();
    assert!(
        eventually(Duration::from_secs(2), || int(&mut c, "EXISTS short") == 0),
        "expired on time"
    );
    let _ = std::fs::remove_file(offset_file);
}

#[test]
fn restart_guard_refuses_new_locks_but_not_holders() {
    let mut s = Server::with(&["--save", "3600 1"], &["restart-delay-ms", "1500"]);
    let mut c = s.conn();
    let e = err(&mut c, "LOCK.ACQUIRE fresh a 1000");
    assert!(e.contains("new locks refused for another"), "{e}");
    assert!(e.contains("TryAgain") || e.contains("TRYAGAIN"), "{e}");
    assert!(eventually(Duration::from_secs(3), || q(
        &mut c,
        "LOCK.ACQUIRE held a 30000"
    )
    .is_ok()));
    let t = status(&mut c, "held").unwrap().1;
    q(&mut c, "SAVE").unwrap();
    s.restart(); // the guard is up again after a restart without fsync'd AOF
    let mut c = s.conn();
    assert!(
        info_field(&mut c, "lock", "lock_restart_guard_ms_left")
            .parse::<u64>()
            .unwrap()
            > 1000
    );
    assert!(err(&mut c, "LOCK.ACQUIRE other b 1000").contains("refused"));
    assert_eq!(
        int(&mut c, "LOCK.ACQUIRE held a 30000"),
        t,
        "the holder renews"
    );
    assert_eq!(int(&mut c, "LOCK.EXTEND held a 30000"), 1, "and extends");
    assert_eq!(
        q(&mut c, "LOCK.ACQUIRE held b 30000").unwrap(),
        Value::Nil,
        "others still see it held"
    );
    assert_eq!(int(&mut c, "LOCK.RELEASE held a"), 1, "and releases");
    assert!(
        err(&mut c, "LOCK.ACQUIRE held b 30000").contains("refused"),
        "a freed lock is new again"
    );
}

#[test]
fn no_guard_with_an_always_fsynced_aof() {
    let mut s = Server::with(
        &["--appendonly", "yes", "--appendfsync", "always"],
        &["restart-delay-ms", "1000"],
    );
    // The first start loaded no AOF (a new disk looks like a wiped one).
    assert!(err(&mut s.conn(), "LOCK.ACQUIRE k a 1000").contains("TryAgain"));
    std::thread::sleep(Duration::from_millis(1100));
    s.restart();
    let mut c = s.conn();
    assert!(int(&mut c, "LOCK.ACQUIRE k a 1000") > 0);
}

/// The rest of a guard carried over a restart is timed on the boot clock:
/// the wall clock stepped an hour ahead while the server was down (NTP
/// after a stall, an operator) ended that guard at once, and a node
/// restarted twice in a row came back granting.
#[test]
fn a_clock_stepped_ahead_while_down_does_not_end_a_carried_guard() {
    let offset_file = std::env::temp_dir().join(format!("clockshim-g-{}", std::process::id()));
    std::fs::write(&offset_file, "0").unwrap();
    let shim = shim::clockshim();
    let env = [
        ("LD_PRELOAD", shim.to_str().unwrap()),
        ("CLOCKSHIM_FILE", offset_file.to_str().unwrap()),
    ];
    let aof = AOF;
    let mut s = Server::with_env(&aof, &["restart-delay-ms", "20000"], &env);
    // A new disk looks like a wiped one: the first start is guarded.
    assert!(err(&mut s.conn(), "LOCK.ACQUIRE k a 1000").contains("refused"));
    std::fs::write(&offset_file, "3600").unwrap();
    s.restart(); // a complete AOF, with 20 s of the earlier guard left
    let refused = err(&mut s.conn(), "LOCK.ACQUIRE k a 1000");
    let _ = std::fs::remove_file(&offset_file);
    assert!(refused.contains("refused"), "{refused}\n{}", s.log());
    assert!(
        s.log().contains("the rest of an earlier guard"),
        "{}",
        s.log()
    );
}

/// 67937c7: a replica restarted from its own AOF as a primary (its
/// config edited, no `REPLICAOF NO ONE`) trusted that AOF as holding every
/// grant and granted a lock its old primary had given to another owner
/// after the replica stopped. It gets the full guard, as a promotion does;
/// once that has passed, its own AOF is trusted again.
#[test]
fn a_replica_restarted_as_a_primary_from_its_aof_is_guarded() {
    let primary = Server::start();
    let aof = AOF;
    let module = ["restart-delay-ms", "-1", "max-ttl-ms", "1500"];
    let mut replica = Server::replica_with(&primary, &aof, &module);
    let mut p = primary.conn();
    replica.await_aof_rewrite();
    std::thread::sleep(Duration::from_millis(1600)); // past the start-up guards
    int(&mut p, "LOCK.ACQUIRE x alice 60000");
    q(&mut p, "WAIT 1 2000").unwrap();
    replica.kill();
    int(&mut p, "LOCK.ACQUIRE y carol 60000"); // the replica never sees it
    replica.restart_with(&aof, &module); // a primary now, from its own AOF
    let mut r = replica.conn();
    assert!(
        err(&mut r, "LOCK.ACQUIRE y dave 1000").contains("refused"),
        "granted y, which carol holds on the old primary:\n{}",
        replica.log()
    );
    assert_eq!(q(&mut r, "LOCK.ACQUIRE x bob 1000").unwrap(), Value::Nil);
    assert!(replica
        .log()
        .contains("may lack its primary's latest grants"));
    // The guard spends the flag: the next restart trusts the AOF again.
    std::thread::sleep(Duration::from_millis(1600));
    replica.restart();
    assert!(int(&mut replica.conn(), "LOCK.ACQUIRE z erin 1000") > 0);
}

/// 1605b38: after a full sync the AOF is rewritten; a promotion spent the
/// "written as a replica" flag, and when that rewrite outlasted the guard a
/// grant went only to the rewrite's temporary file, so a `kill -9` brought
/// back the pre-sync AOF, trusted. The first load after a promotion gets
/// the full guard (conservative: here the rewrite did finish).
#[test]
fn the_first_restart_after_a_promotion_is_guarded() {
    let primary = Server::start();
    let aof = AOF;
    let module = GUARD_1S;
    let mut replica = Server::replica_with(&primary, &aof, &module);
    replica.await_aof_rewrite();
    let mut r = replica.conn();
    q(&mut r, "REPLICAOF NO ONE").unwrap();
    // Granted once the promotion's guard (1 s) has passed.
    let granted = eventually(Duration::from_secs(10), || {
        q(&mut r, "LOCK.ACQUIRE l b 1000").is_ok_and(|v| v != Value::Nil)
    });
    assert!(granted, "{}", replica.log());
    replica.restart_with(&aof, &module); // kill -9, back as a primary
    let refused = err(&mut replica.conn(), "LOCK.ACQUIRE m c 1000");
    assert!(refused.contains("refused"), "{refused}\n{}", replica.log());
}

/// 62a27bb: a missing, empty or garbled `redis-lock.guard` read as "a
/// primary's complete AOF, no guard left", and a replica's AOF (or any
/// other) was trusted. Without a marker nothing is known: the full guard.
#[test]
fn a_lost_or_torn_guard_marker_means_the_full_guard() {
    let aof = AOF;
    let module = GUARD_1S;
    let mut s = Server::with(&aof, &module);
    let marker = s.dir.join("redis-lock.guard");
    std::thread::sleep(Duration::from_millis(1100)); // past the first start's guard
    s.restart();
    assert!(
        int(&mut s.conn(), "LOCK.ACQUIRE a x 1000") > 0,
        "a complete AOF with its marker: no guard"
    );
    for damage in ["missing", "empty", "garbled"] {
        match damage {
            "missing" => std::fs::remove_file(&marker).unwrap(),
            "empty" => std::fs::write(&marker, "").unwrap(),
            _ => std::fs::write(&marker, "not a marker").unwrap(),
        }
        s.restart();
        let refused = err(&mut s.conn(), "LOCK.ACQUIRE b y 1000");
        assert!(
            refused.contains("refused"),
            "{damage}: {refused}\n{}",
            s.log()
        );
        assert!(s.log().contains("missing or unreadable"), "{damage}");
        std::thread::sleep(Duration::from_millis(1100));
    }
}

/// 0daff04: a start that died after the module loaded, before its data
/// was (a `kill -9` in a slow AOF load, another module failing to load),
/// replaced a missing marker by a clean one; the next start, once that
/// start's guard had passed, trusted its AOF. The unknown history stays
/// until a load serves the full guard.
#[test]
fn a_start_that_dies_before_loading_keeps_the_marker_unknown() {
    let aof = AOF;
    let module = GUARD_1S;
    let mut s = Server::with(&aof, &module);
    let marker = s.dir.join("redis-lock.guard");
    std::thread::sleep(Duration::from_millis(1100));
    int(&mut s.conn(), "LOCK.ACQUIRE a x 1000"); // some data in the AOF
    s.kill();
    std::fs::remove_file(&marker).unwrap();
    let died = std::process::Command::new(server_binary())
        .args(["--port", &free_port().to_string(), "--bind", "127.0.0.1"])
        .arg("--dir")
        .arg(&s.dir)
        .args(aof)
        .arg("--loadmodule")
        .arg(module_path())
        .args(module)
        .args(["--loadmodule", "/nonexistent/other-module.so"])
        .output()
        .unwrap();
    assert!(!died.status.success(), "the second module failed to load");
    assert!(!marker.exists(), "an unknown history was written as clean");
    std::thread::sleep(Duration::from_millis(1100)); // past that start's guard
    s.restart();
    let refused = err(&mut s.conn(), "LOCK.ACQUIRE b y 1000");
    assert!(refused.contains("refused"), "{refused}\n{}", s.log());
    assert!(s.log().contains("missing or unreadable"));
}

/// 0daff04: the marker read at module load was kept for a load that
/// never came at start-up (no data files) and used by one much later
/// (`DEBUG LOADAOF`), blind to the taint written since: no guard.
#[test]
fn a_load_after_start_up_reads_the_marker_on_disk() {
    let aof = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--enable-debug-command",
        "yes",
    ];
    let module = GUARD_1S;
    let mut s = Server::with(&aof, &module);
    s.kill();
    // A clean marker and no data files: nothing loads at the next start.
    std::fs::remove_dir_all(s.dir.join("appendonlydir")).unwrap();
    std::fs::write(s.dir.join("redis-lock.guard"), "0 0 0\n").unwrap();
    s.restart();
    std::thread::sleep(Duration::from_millis(1100)); // the start's guard
    let mut c = s.conn();
    q(&mut c, "CONFIG SET appendonly no").unwrap(); // taints the AOF
    q(&mut c, "CONFIG SET appendonly yes").unwrap();
    s.await_aof_rewrite();
    q(&mut c, "DEBUG LOADAOF").unwrap();
    let refused = err(&mut c, "LOCK.ACQUIRE k a 1000");
    assert!(refused.contains("refused"), "{refused}\n{}", s.log());
}

/// Processes whose parent is `pid` (a server's fork children: an AOF
/// rewrite, a save), from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let parent_of = |stat: String| -> Option<u32> {
        // "pid (comm) S ppid ...": the fields after the last ')'.
        stat.rsplit(')')
            .next()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(parent_of)
                == Some(pid)
        })
        .collect()
}

/// kill -9 a server and its fork children (a rewrite child outlives its
/// parent until it is done otherwise).
fn kill_with_children(s: &mut Server) {
    let children = children_of(s.pid());
    s.kill();
    for child in children {
        let _ = std::process::Command::new("kill")
            .args(["-9", &child.to_string()])
            .status();
    }
}

/// 2026-11-28 (Redis 7.0 and Valkey 8.1): a `DEBUG LOADAOF` while the AOF
/// rewrite that `CONFIG SET appendonly yes` started was still running spent
/// the taint of `appendonly no`, though the stale AOF stays on disk until
/// that rewrite is done: a lock granted after the guard reached no file a
/// restart reads, and after a kill -9 the restart trusted the stale AOF
/// and granted it to a second owner. The taint stays while a rewrite runs.
#[test]
fn a_load_during_the_rewrite_that_appendonly_yes_started_keeps_the_taint() {
    let debug = ["--enable-debug-command", "yes"];
    let args: Vec<&str> = AOF.iter().chain(&debug).copied().collect();
    let module = GUARD_1S;
    let mut s = Server::with(&args, &module);
    std::thread::sleep(Duration::from_millis(1100)); // the start's guard
    let mut c = s.conn();
    q(&mut c, "DEBUG POPULATE 20000").unwrap(); // to rewrite slowly
    q(&mut c, "CONFIG SET appendonly no").unwrap(); // taints the AOF
    q(&mut c, "CONFIG SET rdb-key-save-delay 1000").unwrap(); // 1 ms a key
    q(&mut c, "CONFIG SET appendonly yes").unwrap(); // a rewrite of ~20 s
    let rewriting =
        |c: &mut redis::Connection| info_field(c, "persistence", "aof_rewrite_in_progress") == "1";
    assert!(rewriting(&mut c));
    q(&mut c, "DEBUG LOADAOF").unwrap();
    let granted = eventually(Duration::from_secs(10), || {
        q(&mut c, "LOCK.ACQUIRE k alice 1000").is_ok_and(|v| v != Value::Nil)
    });
    assert!(granted, "{}", s.log());
    assert!(
        rewriting(&mut c),
        "the rewrite ended before the test could use it"
    );
    kill_with_children(&mut s);
    s.restart(); // the stale AOF, which lacks alice's lock
    let refused = err(&mut s.conn(), "LOCK.ACQUIRE k bob 1000");
    assert!(refused.contains("refused"), "{refused}\n{}", s.log());
}

/// The same for the replica flag: a replica's full sync starts an AOF
/// rewrite too, and a promotion keeps the flag for the first load; a load
/// while that rewrite still ran (`DEBUG LOADAOF`) spent it, the grant made
/// after the guard reached no file, and the restart after a kill -9
/// trusted the AOF from before the sync.
#[test]
fn a_load_during_a_promoted_replicas_first_rewrite_keeps_the_replica_flag() {
    let primary = Server::with(&["--enable-debug-command", "yes"], &[]);
    q(&mut primary.conn(), "DEBUG POPULATE 20000").unwrap(); // to rewrite slowly
    let slow = [
        "--enable-debug-command",
        "yes",
        "--rdb-key-save-delay",
        "1000",
    ];
    let args: Vec<&str> = AOF.iter().chain(&slow).copied().collect();
    let module = GUARD_1S;
    let mut replica = Server::replica_with(&primary, &args, &module);
    let mut r = replica.conn();
    let rewriting =
        |c: &mut redis::Connection| info_field(c, "persistence", "aof_rewrite_in_progress") == "1";
    assert!(eventually(Duration::from_secs(5), || rewriting(&mut r)));
    q(&mut r, "REPLICAOF NO ONE").unwrap();
    q(&mut r, "DEBUG LOADAOF").unwrap();
    let granted = eventually(Duration::from_secs(10), || {
        q(&mut r, "LOCK.ACQUIRE k alice 1000").is_ok_and(|v| v != Value::Nil)
    });
    assert!(granted, "{}", replica.log());
    assert!(
        rewriting(&mut r),
        "the rewrite ended before the test could use it"
    );
    kill_with_children(&mut replica);
    replica.restart_with(&args, &module); // a primary, from the AOF before the sync
    let refused = err(&mut replica.conn(), "LOCK.ACQUIRE k bob 1000");
    assert!(refused.contains("refused"), "{refused}\n{}", replica.log());
}

/// 62a27bb: a run with `appendonly no` in its config file (not a CONFIG
/// SET) granted a lock; the next run, back on the production settings,
/// loaded the older AOF, which lacks it, with the guard off.
#[test]
fn an_aof_left_stale_by_a_run_without_it_is_not_trusted() {
    let aof = AOF;
    let module = GUARD_1S;
    let mut s = Server::with(&aof, &module);
    std::thread::sleep(Duration::from_millis(1100));
    int(&mut s.conn(), "LOCK.ACQUIRE x alice 1000");
    s.restart_with(&["--appendonly", "no"], &module);
    std::thread::sleep(Duration::from_millis(1100)); // its own guard
    int(&mut s.conn(), "LOCK.ACQUIRE y carol 1000"); // in no AOF
    s.restart_with(&aof, &module);
    let refused = err(&mut s.conn(), "LOCK.ACQUIRE y dave 1000");
    assert!(refused.contains("refused"), "{refused}\n{}", s.log());
}

#[test]
fn promoted_replica_refuses_new_locks_for_the_delay() {
    let primary = Server::start();
    let replica = Server::replica_of(&primary, &["restart-delay-ms", "800"]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    std::thread::sleep(Duration::from_millis(900)); // the start-up guard has passed
    int(&mut p, "LOCK.ACQUIRE held a 30000");
    q(&mut p, "WAIT 1 2000").unwrap();
    q(&mut r, "REPLICAOF NO ONE").unwrap();
    assert!(err(&mut r, "LOCK.ACQUIRE new b 1000").contains("refused"));
    assert_eq!(
        q(&mut r, "LOCK.ACQUIRE held b 1000").unwrap(),
        Value::Nil,
        "replicated lock still held"
    );
    assert_eq!(int(&mut r, "LOCK.EXTEND held a 30000"), 1);
    assert!(eventually(Duration::from_secs(3), || q(
        &mut r,
        "LOCK.ACQUIRE new b 1000"
    )
    .is_ok()));
}
