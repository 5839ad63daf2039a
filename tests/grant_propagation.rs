//! A grant's `LOCK.APPLY` effect is built only where it can reach someone
//! (src/glue/propagation.rs): these check that every grant a replica, a
//! partial resync or the AOF needs still gets there, and that a server
//! with nobody to reach still counts its grants for the `save` points.

use crate::common;
use common::*;
use std::time::Duration;

fn effects(c: &mut redis::Connection) -> String {
    info_field(c, "lock", "lock_grant_effects")
}

fn acquire_all(c: &mut redis::Connection, prefix: &str, n: usize) -> Vec<i64> {
    (0..n)
        .map(|i| int(c, &format!("LOCK.ACQUIRE {prefix}:{i} owner-{i} 60000")))
        .collect()
}

/// Every lock `prefix:0..` is on the replica with its owner and token.
fn assert_replicated(r: &mut redis::Connection, prefix: &str, tokens: &[i64]) {
    for (i, &t) in tokens.iter().enumerate() {
        let (owner, token, ..) = status(r, &format!("{prefix}:{i}"))
            .unwrap_or_else(|| panic!("{prefix}:{i} missing on the replica"));
        assert_eq!(
            (owner, token),
            (format!("owner-{i}").into_bytes(), t),
            "{prefix}:{i}"
        );
    }
}

#[test]
fn grants_made_before_a_replica_reach_it_and_those_after_go_as_effects() {
    let primary = Server::start();
    let mut p = primary.conn();
    assert_eq!(effects(&mut p), "0", "no replica, backlog or AOF yet");
    let dirty = |p: &mut redis::Connection| -> u64 {
        info_field(p, "persistence", "rdb_changes_since_last_save")
            .parse()
            .unwrap()
    };
    let before = dirty(&mut p);
    let early = acquire_all(&mut p, "early", 200);
    assert_eq!(
        dirty(&mut p) - before,
        200,
        "each grant still counts for the save points"
    );

    // The full sync's snapshot carries them; its fork turns effects on.
    let replica = Server::replica_of(&primary, &[]);
    let mut r = replica.conn();
    assert_eq!(effects(&mut p), "1");
    assert_replicated(&mut r, "early", &early);

    let late = acquire_all(&mut p, "late", 200);
    q(&mut p, "WAIT 1 5000").unwrap();
    assert_replicated(&mut r, "late", &late);
    assert_eq!(
        command_calls(&mut r, "lock.apply"),
        200,
        "each grant as its effect"
    );
    assert_eq!(command_calls(&mut r, "lock.acquire"), 0);

    // A dropped link resyncs partially from the backlog: what was granted
    // while it was down reaches the replica from there.
    let partial = |p: &mut redis::Connection| -> u64 {
        info_field(p, "stats", "sync_partial_ok").parse().unwrap()
    };
    let resyncs = partial(&mut p);
    q(&mut p, "CLIENT KILL TYPE replica").unwrap();
    let gap = acquire_all(&mut p, "gap", 50);
    assert!(eventually(Duration::from_secs(20), || {
        info_field(&mut r, "replication", "master_link_status") == "up" && partial(&mut p) > resyncs
    }));
    q(&mut p, "WAIT 1 5000").unwrap();
    assert_replicated(&mut r, "gap", &gap);
}

#[test]
fn a_server_that_starts_with_the_aof_on_replays_each_grant_with_its_token() {
    // No fork, no load (a fresh directory): only the AOF says the effect
    // is needed. A grant replayed as its command would draw a new token.
    let mut s = Server::with(&["--appendonly", "yes", "--appendfsync", "always"], &[]);
    let mut c = s.conn();
    let tokens = acquire_all(&mut c, "aof", 50);
    s.kill(); // only the AOF survives
    s.restart();
    let mut c = s.conn();
    for (i, &t) in tokens.iter().enumerate() {
        assert_eq!(status(&mut c, &format!("aof:{i}")).map(|s| s.1), Some(t));
    }
}

#[test]
fn a_module_loaded_into_a_running_primary_with_a_replica_sends_effects_at_once() {
    let module = module_path().display().to_string();
    let load = |c: &mut redis::Connection| {
        q(c, &format!("MODULE LOAD {module} restart-delay-ms 0")).unwrap();
    };
    let primary = Server::configured(&["--enable-module-command", "yes"]);
    let port = primary.port.to_string();
    let replica = Server::configured(&[
        "--enable-module-command",
        "yes",
        "--replicaof",
        "127.0.0.1",
        &port,
    ]);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    assert!(eventually(Duration::from_secs(20), || info_field(
        &mut r,
        "replication",
        "master_link_status"
    ) == "up"));
    load(&mut r);
    load(&mut p);
    assert_eq!(effects(&mut p), "1", "a replica is already attached");
    let tokens = acquire_all(&mut p, "runtime", 20);
    q(&mut p, "WAIT 1 5000").unwrap();
    assert_replicated(&mut r, "runtime", &tokens);
}

#[test]
fn a_load_or_a_role_change_turns_effects_on() {
    // A loaded replication ID lets a replica of the server's earlier life
    // resync partially, from a backlog the module cannot see.
    let mut s = Server::with(&["--save", "3600 1"], &[]);
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE saved o 60000");
    q(&mut c, "SAVE").unwrap(); // in the foreground: no fork
    assert_eq!(effects(&mut c), "0");
    s.restart();
    let mut c = s.conn();
    assert_eq!(effects(&mut c), "1", "after loading the RDB");

    // A replica keeps its backlog when promoted.
    let other = Server::start();
    let mut o = other.conn();
    assert_eq!(effects(&mut o), "0");
    q(&mut o, &format!("REPLICAOF 127.0.0.1 {}", s.port)).unwrap();
    assert_eq!(effects(&mut o), "1", "after becoming a replica");
}

/// The server makes its backlog when a replica sends `PSYNC`, before any
/// fork, and keeps it when the sync is abandoned. A replica seeded with an
/// RDB from `SAVE` (replication ID and offset, no fork) then resyncs
/// partially from that backlog: every grant in it must be an effect, or
/// the replica mints its own tokens (an attack run on fe1f63f).
#[test]
fn grants_after_an_abandoned_sync_reach_a_replica_that_resyncs_partially() {
    use std::io::{Read, Write};
    let primary = Server::with(
        &[
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "5",
        ],
        &[],
    );
    let mut p = primary.conn();
    let mut sync = std::net::TcpStream::connect(("127.0.0.1", primary.port)).unwrap();
    // As a replica asks, so that the primary waits out the diskless delay
    // (a bare SYNC gets an RDB on disk at once, through a fork); PSYNC is
    // refused while REPLCONF's reply is unread.
    sync.write_all(b"REPLCONF capa eof capa psync2\r\n")
        .unwrap();
    let mut ok = [0u8; 5];
    sync.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    sync.write_all(b"PSYNC ? -1\r\n").unwrap();
    assert!(eventually(Duration::from_secs(5), || {
        info_field(&mut p, "replication", "repl_backlog_active") == "1"
    }));
    drop(sync); // abandoned inside the diskless delay: no fork ever
    assert!(eventually(Duration::from_secs(5), || {
        info_field(&mut p, "replication", "connected_slaves") == "0"
    }));
    q(&mut p, "SAVE").unwrap();
    let tokens = acquire_all(&mut p, "after-sync", 20);

    let mut replica = Server::start();
    replica.kill();
    std::fs::copy(primary.dir.join("dump.rdb"), replica.dir.join("dump.rdb")).unwrap();
    let port = primary.port.to_string();
    replica.restart_with(&["--replicaof", "127.0.0.1", &port], &[]);
    let mut r = replica.conn();
    assert!(eventually(Duration::from_secs(20), || {
        info_field(&mut r, "replication", "master_link_status") == "up"
    }));
    assert_eq!(
        info_field(&mut p, "stats", "sync_partial_ok"),
        "1",
        "the seeded replica resynced partially"
    );
    q(&mut p, "WAIT 1 5000").unwrap();
    assert_replicated(&mut r, "after-sync", &tokens);
    assert_eq!(command_calls(&mut r, "lock.acquire"), 0);
}
