//! A Sentinel group as one node (`redis+sentinel://host:port/service`),
//! against real servers: a primary and a replica with the module, and
//! three sentinels (`testkit/src/sentinel_group.rs`).

use crate::common;
use common::*;
use redis_lock_client::{Builder, Error, Locker};
use redis_lock_testkit::sentinel_group::{SentinelGroup, SERVICE};
use std::time::Duration;

fn locker(urls: &[String]) -> Locker {
    Builder::new(urls)
        .ttl(Duration::from_secs(30))
        .node_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// Until `server` holds `name` (a lock replicated to a replica).
fn await_held(server: &Server, name: &str) {
    let mut c = server.conn();
    let held = eventually(Duration::from_secs(10), || status(&mut c, name).is_some());
    assert!(held, "{name} never reached 127.0.0.1:{}", server.port);
}

#[tokio::test]
async fn a_lock_through_a_sentinel_lands_on_the_groups_primary() {
    let group = SentinelGroup::start(&[]);
    let locker = locker(&[group.url(1)]);
    assert_eq!(
        locker.node_names(),
        [format!("127.0.0.1:{}/{}", group.sentinels[1].port, SERVICE)]
    );
    let lock = locker.try_lock("job").await.unwrap();
    let (owner, token, ..) = status(&mut group.data[0].conn(), "job").expect("held on the primary");
    assert_eq!(owner, lock.owner().as_bytes());
    assert_eq!(token as u64, lock.token());
    locker.unlock(&lock).await.unwrap();
    assert_eq!(status(&mut group.data[0].conn(), "job"), None);
}

/// SENTINEL FAILOVER while a lock is held: the holder extends and releases
/// it on the new primary (the lock was replicated, token and all); a new
/// lock waits out the new primary's promotion guard when its wait covers
/// it, and fails with NoQuorum naming the guard when it does not.
///
/// On two worker threads: the client learns of the switch from the
/// sentinel's `+switch-master` event, which its watcher task reads while
/// this thread blocks on the harness (the old primary stays writable until
/// the sentinels demote it, seconds later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_the_holder_renews_on_the_new_primary_and_new_locks_wait_out_the_guard() {
    let group = SentinelGroup::start(&["restart-delay-ms", "6000"]);
    let locker = locker(&[group.url(0)]);
    // The start-up guard of the primary (6 s) is waited out.
    let mut held = locker.lock("held", Duration::from_secs(15)).await.unwrap();
    await_held(&group.data[1], "held");

    let new = group.failover();
    assert_eq!(new, 1);
    // The holder's renewal reaches the new primary: its TTL there is
    // renewed (the old one no longer replicates to it).
    held.set_ttl(Duration::from_secs(120));
    locker.extend(&mut held).await.unwrap();
    let (owner, token, ttl, ..) = status(&mut group.data[1].conn(), "held").unwrap();
    assert_eq!(
        (owner.as_slice(), token as u64),
        (held.owner().as_bytes(), held.token())
    );
    assert!(ttl > 60_000, "extended on the new primary: ttl {ttl}");

    // The new primary's guard (6 s from its promotion) is still on.
    match locker.lock("new", Duration::from_millis(200)).await {
        Err(Error::NoQuorum { failures, .. }) => {
            let why = format!("{failures:?}");
            assert!(why.contains("restart-delay-ms"), "{why}");
        }
        other => panic!("expected NoQuorum naming the guard, got {other:?}"),
    }
    let new_lock = locker.lock("new", Duration::from_secs(15)).await.unwrap();
    let (owner, ..) = status(&mut group.data[1].conn(), "new").expect("granted by the new primary");
    assert_eq!(owner, new_lock.owner().as_bytes());
    locker.unlock(&new_lock).await.unwrap();
    locker.unlock(&held).await.unwrap();
    assert_eq!(status(&mut group.data[1].conn(), "held"), None);
}

/// The primary demoted by hand (REPLICAOF, which closes no client) and the
/// sentinels pointed at the new one: the client's open connection reaches a
/// replica, which answers READONLY; the client asks the sentinels again
/// and the holder's renewal lands on the new primary, in the same call.
#[tokio::test]
async fn a_demoted_primarys_readonly_sends_the_client_to_the_new_one() {
    let group = SentinelGroup::start(&[]);
    let locker = locker(&[group.url(2)]);
    let mut held = locker.try_lock("held").await.unwrap();
    await_held(&group.data[1], "held");

    let (old, new) = (&group.data[0], &group.data[1]);
    group.promote_by_hand(1);
    // The old primary answers READONLY on the client's connection.
    let readonly = err(&mut old.conn(), "LOCK.EXTEND held x 1000");
    assert!(readonly.to_uppercase().contains("READONLY"), "{readonly}");

    held.set_ttl(Duration::from_secs(120));
    locker.extend(&mut held).await.unwrap();
    let (_, token, ttl, ..) = status(&mut new.conn(), "held").unwrap();
    assert_eq!(token as u64, held.token());
    assert!(ttl > 60_000, "extended on the new primary: ttl {ttl}");
    locker.unlock(&held).await.unwrap();
    assert_eq!(status(&mut new.conn(), "held"), None);
}

/// N = 3: one Sentinel group and two single servers, one vote each.
#[tokio::test]
async fn a_sentinel_group_votes_beside_single_servers() {
    let group = SentinelGroup::start(&[]);
    let mut singles = Server::start_n(2);
    let mut all = vec![group.url(0)];
    all.extend(urls(&singles));
    let locker = locker(&all);
    let lock = locker.try_lock("job").await.unwrap();
    locker.unlock(&lock).await.unwrap();
    // The grant that was not needed for the majority (the group's, while
    // its first connection looks up the primary) can land after the
    // unlock's reply and is given back then: wait for it (a try_lock
    // found it still held in a fresh-clone make test of 4512de8).
    let free = |c: &mut redis::Connection| status(c, "job").is_none();
    assert!(eventually(Duration::from_secs(5), || {
        free(&mut group.data[0].conn()) && singles.iter().all(|s| free(&mut s.conn()))
    }));
    // One single down: the majority needs the group's vote.
    singles[1].kill();
    let lock = locker.try_lock("job").await.unwrap();
    let (owner, ..) = status(&mut group.data[0].conn(), "job").expect("the group granted");
    assert_eq!(owner, lock.owner().as_bytes());
    locker.unlock(&lock).await.unwrap();
    // Both singles down: the group alone is one vote of three.
    singles[0].kill();
    match locker.try_lock("job").await {
        Err(Error::NoQuorum { granted, .. }) => assert!(granted <= 1),
        other => panic!("expected NoQuorum, got {other:?}"),
    }
}

/// The same group through two of its sentinels: the builder cannot tell
/// (two groups may share a name), the primary can: its yes counts once.
#[tokio::test]
async fn one_group_through_two_sentinels_votes_once() {
    let group = SentinelGroup::start(&[]);
    let locker = locker(&[group.url(0), group.url(1)]);
    match locker.try_lock("job").await {
        Err(Error::NoQuorum { failures, .. }) => {
            let why = format!("{failures:?}");
            assert!(why.contains("reaches the same server"), "{why}");
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    assert!(matches!(locker.listed_twice(), Some(Error::Config(_))));
}

/// Configuration errors, never a wait: no service name, a db, one group
/// twice through one sentinel (build time); a service the sentinels do not
/// monitor (at once, as a refusal).
#[tokio::test]
async fn bad_sentinel_urls_are_configuration_errors() {
    for urls in [
        vec!["redis+sentinel://127.0.0.1:26379".to_string()],
        vec!["redis+sentinel://127.0.0.1:26379/locks/1".to_string()],
        vec![
            "redis+sentinel://127.0.0.1:26379/locks".to_string(),
            "redis+sentinel://localhost:26379/locks".to_string(),
        ],
    ] {
        assert!(
            matches!(Builder::new(&urls).config(), Err(Error::Config(_))),
            "{urls:?}"
        );
    }
    let group = SentinelGroup::start(&[]);
    let unknown = format!(
        "redis+sentinel://127.0.0.1:{}/nosuch",
        group.sentinels[0].port
    );
    let locker = locker(&[unknown]);
    match locker.lock("job", Duration::from_secs(30)).await {
        Err(Error::Rejected { message, .. }) => {
            assert!(message.contains("no service named \"nosuch\""), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The CLI takes the same URLs: `run` takes the lock on the group's
/// primary, `status` shows a lock held there; a URL without a service name exits
/// 78 (bad settings), a service the sentinels do not know too.
#[test]
fn the_cli_takes_sentinel_urls() {
    let group = SentinelGroup::start(&[]);
    let cli = |servers: &str, args: &[&str]| {
        std::process::Command::new(workspace_binary("redis-lock"))
            .env("REDIS_LOCK_SERVERS", servers)
            .args(args)
            .output()
            .unwrap()
    };
    let granted = || command_calls(&mut group.data[0].conn(), "lock.acquire");
    let before = granted();
    let out = cli(&group.url(0), &["run", "job", "--", "sh", "-c", "exit 7"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(granted() > before, "the primary granted it");

    int(&mut group.data[0].conn(), "LOCK.ACQUIRE held stuck 30000");
    let out = cli(&group.url(1), &["status", "held"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("owner=stuck"),
        "{text}"
    );

    let no_service = format!("redis+sentinel://127.0.0.1:{}", group.sentinels[0].port);
    let out = cli(&no_service, &["run", "job", "--", "true"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("no service name"), "{stderr}");

    let unknown = format!("{no_service}/nosuch");
    let out = cli(&unknown, &["run", "job", "--wait", "30s", "--", "true"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("nosuch"), "{stderr}");
}

/// `user:pass` authenticate the data servers; the sentinels (no
/// `requirepass` here) are asked without them. A user whose ACL lacks
/// `ROLE` is told so at once.
#[tokio::test]
async fn credentials_go_to_the_data_servers_and_role_is_needed() {
    let group = SentinelGroup::start(&[]);
    let acl = "ACL SETUSER locker on >s3cret resetkeys ~* -@all +ping +lock.acquire \
               +lock.release +lock.extend +lock.status +lock.fence +lock.serverid +time";
    for s in &group.data {
        q(&mut s.conn(), acl).unwrap();
    }
    let port = group.sentinels[0].port;
    let url = format!("redis+sentinel://locker:s3cret@127.0.0.1:{port}/{SERVICE}");
    match locker(std::slice::from_ref(&url))
        .lock("job", Duration::from_secs(30))
        .await
    {
        Err(Error::Rejected { message, .. }) => assert!(message.contains("+role"), "{message}"),
        other => panic!("expected a refusal naming +role, got {other:?}"),
    }
    for s in &group.data {
        q(&mut s.conn(), "ACL SETUSER locker +role").unwrap();
    }
    let locker = locker(&[url]);
    let lock = locker.try_lock("job").await.unwrap();
    let (owner, ..) = status(&mut group.data[0].conn(), "job").unwrap();
    assert_eq!(owner, lock.owner().as_bytes());
    locker.unlock(&lock).await.unwrap();
    let wrong = format!("redis+sentinel://locker:nope@127.0.0.1:{port}/{SERVICE}");
    assert!(matches!(
        self::locker(&[wrong])
            .lock("job", Duration::from_secs(30))
            .await,
        Err(Error::Rejected { .. })
    ));
}

/// The URL names one sentinel; the node learns the others
/// (`SENTINEL SENTINELS`) with its first lookup and finds the primary
/// through them once that one is gone, at once after the first lock: learned
/// in a task of its own, they were not yet known then (Valkey, a
/// fresh-clone make test of 28688ae).
#[tokio::test]
async fn the_other_sentinels_are_found_and_asked_when_the_first_is_gone() {
    let mut group = SentinelGroup::start(&[]);
    let locker = locker(&[group.url(0)]);
    let lock = locker.try_lock("job").await.unwrap();
    locker.unlock(&lock).await.unwrap();
    drop(group.sentinels.remove(0));
    // The client's connection closed: its next lock looks the primary up.
    q(
        &mut group.data[0].conn(),
        "CLIENT KILL TYPE normal SKIPME yes",
    )
    .unwrap();
    let lock = locker.lock("job", Duration::from_secs(10)).await.unwrap();
    assert!(status(&mut group.data[0].conn(), "job").is_some());
    locker.unlock(&lock).await.unwrap();
}
