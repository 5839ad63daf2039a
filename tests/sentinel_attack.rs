//! A Sentinel node (`redis+sentinel://`) against sentinels and servers that
//! misbehave: a sentinel that names a hung server, a stopped sentinel,
//! Lockers made and dropped (2026-11-28).

mod common;
use common::*;
use redis_lock_client::{Builder, Locker};
use redis_lock_testkit::sentinel_group::{SentinelGroup, SERVICE};
use std::time::Duration;

fn locker(urls: &[String]) -> Locker {
    Builder::new(urls)
        .ttl(Duration::from_secs(30))
        .node_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// One sentinel missed a failover and still names the old primary, which
/// hangs (SIGSTOP: it accepts connections and answers nothing); the two
/// others name the live one. A lookup that waited on the hung server's
/// ROLE before reading the other sentinels' answers failed whenever the
/// stale sentinel answered first: a call with the primary up and two
/// sentinels of three naming it ended without its vote.
#[tokio::test]
async fn a_sentinel_naming_a_hung_server_does_not_hide_the_primary() {
    let group = SentinelGroup::start(&[]);
    let hung = Server::start();
    let locker = locker(&[group.url(0)]);
    let lock = locker.try_lock("warm").await.unwrap();
    locker.unlock(&lock).await.unwrap();
    // The node learns the other sentinels in a task of its own.
    tokio::time::sleep(Duration::from_millis(500)).await;

    hung.signal("STOP");
    let mut stale = group.sentinels[0].conn();
    q(&mut stale, &format!("SENTINEL REMOVE {SERVICE}")).unwrap();
    q(
        &mut stale,
        &format!("SENTINEL MONITOR {SERVICE} 127.0.0.1 {} 2", hung.port),
    )
    .unwrap();

    let mut failed = Vec::new();
    for i in 0..9 {
        // The node's connection closed: its next call looks the primary up.
        q(
            &mut group.data[0].conn(),
            "CLIENT KILL TYPE normal SKIPME yes",
        )
        .unwrap();
        let name = format!("job{i}");
        match locker.try_lock(&name).await {
            Ok(lock) => locker.unlock(&lock).await.unwrap(),
            Err(e) => failed.push(format!("{name}: {e:?}")),
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
