//! Issue #11, waiting 3–5 and options 9: the wait is a deadline, a
//! hand-off longer than the TTL is a valid lock, a busy single server is
//! busy (not down), blocking calls reuse connections, per-lock options.
//! Real servers; the CLI ones drive the real binary.

use crate::common;
use common::*;
use redis_lock_client::{Builder, Error, LockOptions, Locker};
use std::process::Command;
use std::time::{Duration, Instant};

fn cli(nodes: &[Server], args: &[&str]) -> std::process::Output {
    Command::new(workspace_binary("redis-lock"))
        .env("REDIS_LOCK_SERVERS", urls(nodes).join(","))
        .args(args)
        .output()
        .unwrap()
}

/// Hold `name` on every node as another owner for `ms`.
fn hold_everywhere(nodes: &[Server], name: &str, ms: u64) {
    for n in nodes {
        int(
            &mut n.conn(),
            &format!("LOCK.ACQUIRE {name} someone-else {ms}"),
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn lock_keeps_trying_until_the_wait_is_over_not_a_round_count() {
    let nodes: Vec<Server> = Server::start_n(3);
    // Short pauses: 32 rounds (the old cap) are over long before the holder's 2 s.
    let locker = Builder::new(&urls(&nodes))
        .node_timeout(Duration::from_millis(100))
        .retry_delay(Duration::from_millis(5), Duration::from_millis(10))
        .build()
        .unwrap();
    hold_everywhere(&nodes, "w", 2000);
    let lock = locker
        .lock("w", Duration::from_secs(20))
        .await
        .expect("acquired once the holder's TTL ran out, within the wait");
    assert!(status(&mut nodes[0].conn(), "w").is_some_and(|s| s.0 == lock.owner().as_bytes()));
    locker.unlock(&lock).await.unwrap();
    // An explicit cap still applies.
    let capped = Builder::new(&urls(&nodes)).retry_count(2).build().unwrap();
    hold_everywhere(&nodes, "w", 30_000);
    assert!(matches!(
        capped.lock("w", Duration::from_secs(20)).await,
        Err(Error::Taken)
    ));
}

#[test]
fn cli_wait_outlasts_a_holder_and_reports_the_time_waited() {
    let nodes: Vec<Server> = Server::start_n(3);
    // 7 s outlasts the old 32 rounds of 50–250 ms (about 4.8 s).
    hold_everywhere(&nodes, "long", 7000);
    let out = cli(&nodes, &["run", "--wait", "30s", "long", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    hold_everywhere(&nodes, "busy", 60_000);
    let out = cli(&nodes, &["run", "--wait", "1s", "busy", "--", "true"]);
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("after waiting 1."), "{err}");
}

#[test]
fn single_server_hand_off_after_more_than_a_ttl_is_a_valid_lock() {
    let nodes = [Server::start()];
    // The holder's 2.5 s outlast the waiter's 1 s TTL: validity counted from
    // the request would read the handed-off lock as already expired.
    hold_everywhere(&nodes, "handoff", 2500);
    let out = cli(
        &nodes,
        &[
            "run", "--ttl", "1s", "--wait", "10s", "handoff", "--", "sh", "-c", "exit 3",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        status(&mut nodes[0].conn(), "handoff").is_none(),
        "released"
    );
    let mut c = nodes[0].conn();
    assert_eq!(
        info_field(&mut c, "lock", "lock_handoffs"),
        "1",
        "waited in the server"
    );
}

#[test]
fn a_busy_single_server_is_busy_not_an_outage() {
    let nodes = [Server::start()];
    hold_everywhere(&nodes, "held", 60_000);
    for wait in ["0s", "300ms"] {
        let out = cli(&nodes, &["run", "--wait", wait, "held", "--", "true"]);
        assert_eq!(out.status.code(), Some(75), "--wait {wait}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("no quorum"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_calls_reuse_pooled_connections() {
    let server = Server::start();
    let mut c = server.conn();
    let locker = Builder::new(&[server.url()]).build().unwrap();
    let connections = |c: &mut redis::Connection| -> u64 {
        info_field(c, "stats", "total_connections_received")
            .parse()
            .unwrap()
    };
    let before = connections(&mut c);
    for i in 0..200 {
        // A wait makes every lock() a blocking LOCK.ACQUIRE ... WAIT.
        let lock = locker
            .lock(&format!("cycle:{}", i % 3), Duration::from_secs(1))
            .await
            .unwrap();
        locker.unlock(&lock).await.unwrap();
    }
    let opened = connections(&mut c) - before;
    eprintln!("200 lock+unlock cycles opened {opened} connection(s)");
    assert!(
        opened <= 3,
        "200 lock+unlock cycles opened {opened} connections"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn per_lock_ttl_owner_and_reentrancy() {
    let nodes: Vec<Server> = Server::start_n(3);
    let locker: Locker = Builder::new(&urls(&nodes))
        .ttl(Duration::from_secs(60))
        .build()
        .unwrap();
    let opts = LockOptions::new()
        .ttl(Duration::from_secs(2))
        .owner("operator-known")
        .reentrant(true);
    let first = locker.acquire("opt", &opts).await.unwrap();
    assert_eq!(first.owner(), "operator-known");
    assert_eq!(first.ttl(), Duration::from_secs(2));
    let second = locker.acquire("opt", &opts).await.unwrap();
    // Re-entered: the nodes keep their tokens (a straggler node that granted
    // after the first round's verdict may add a larger one to the maximum).
    assert!(second.token() >= first.token());
    let on = |n: &Server| status(&mut n.conn(), "opt");
    assert!(eventually(Duration::from_secs(1), || nodes.iter().all(
        |n| on(n).is_some_and(|s| s.0 == b"operator-known" && s.2 <= 2000 && s.3 == 2)
    )));
    locker.unlock(&second).await.unwrap();
    assert!(
        nodes.iter().all(|n| on(n).is_some_and(|s| s.3 == 1)),
        "one hold left"
    );
    locker.unlock(&first).await.unwrap();
    assert!(nodes.iter().all(|n| on(n).is_none()));
    // Without REENTRANT another owner is still refused.
    let held = locker.acquire("opt", &opts).await.unwrap();
    let started = Instant::now();
    let other = locker
        .acquire("opt", &LockOptions::new().wait(Duration::from_millis(300)))
        .await;
    assert!(matches!(other, Err(Error::Taken)));
    assert!(started.elapsed() >= Duration::from_millis(300));
    locker.unlock(&held).await.unwrap();
}
