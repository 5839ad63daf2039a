//! A Sentinel node (`redis+sentinel://`) against sentinels and servers that
//! misbehave: a sentinel that names a hung server, a stopped sentinel,
//! Lockers made and dropped (2026-11-28).

use crate::common;
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
    // The first lookup learns the other sentinels (41efe16).
    let lock = locker.try_lock("warm").await.unwrap();
    locker.unlock(&lock).await.unwrap();
    hung.signal("STOP");
    every_lookup_finds_the_primary(&locker, &group, hung.port).await;
}

/// The group's first sentinel made to name the server at `stale` as the
/// primary; then each of nine calls, its connection closed so that it looks
/// the primary up again, still takes and releases its lock.
async fn every_lookup_finds_the_primary(locker: &Locker, group: &SentinelGroup, stale: u16) {
    let mut first = group.sentinels[0].conn();
    q(&mut first, &format!("SENTINEL REMOVE {SERVICE}")).unwrap();
    q(
        &mut first,
        &format!("SENTINEL MONITOR {SERVICE} 127.0.0.1 {stale} 2"),
    )
    .unwrap();
    let mut failed = Vec::new();
    for i in 0..9 {
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

/// This process's TCP connections to 127.0.0.1:`port` (its socket fds
/// matched against /proc/net/tcp).
fn connections_to(port: u16) -> usize {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let remote = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .filter(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // rem_address, state 01 (ESTABLISHED), inode.
            f.len() > 9 && f[2] == remote && f[3] == "01" && inodes.contains(f[9])
        })
        .count()
}

/// Lockers made, used and dropped: none leaves a connection to a
/// sentinel behind (the `+switch-master` watcher, the discovery of the
/// other sentinels).
#[tokio::test]
async fn dropped_lockers_leave_no_connection_to_the_sentinels() {
    let group = SentinelGroup::start(&[]);
    for i in 0..10 {
        let locker = locker(&[group.url(0)]);
        let lock = locker.try_lock("job").await.unwrap();
        locker.unlock(&lock).await.unwrap();
        // The watcher and the discovery run meanwhile.
        tokio::time::sleep(Duration::from_millis(100)).await;
        if i == 0 {
            // The count sees them: the watcher follows the first sentinel.
            assert!(connections_to(group.sentinels[0].port) > 0);
        }
    }
    let ports: Vec<u16> = group.sentinels.iter().map(|s| s.port).collect();
    let mut left = Vec::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = ports.iter().map(|&p| connections_to(p)).collect();
        if left.iter().all(|&n| n == 0) {
            break;
        }
    }
    assert!(left.iter().all(|&n| n == 0), "connections left: {left:?}");
}

/// The only sentinel a node knows is stopped: a `lock` with a wait ends
/// NoQuorum, within its wait and a node timeout (give or take the load),
/// never hangs.
#[tokio::test]
async fn a_stopped_sentinel_fails_the_call_without_a_hang() {
    let group = SentinelGroup::start(&[]);
    group.sentinels[0].signal("STOP");
    let locker = locker(&[group.url(0)]);
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        locker.lock("job", Duration::from_secs(1)),
    )
    .await;
    group.sentinels[0].signal("CONT");
    match outcome {
        Ok(Err(redis_lock_client::Error::NoQuorum { .. })) => {}
        other => panic!(
            "expected NoQuorum, got {other:?} after {:?}",
            started.elapsed()
        ),
    }
}

/// One group listed twice, as its sentinel's URL and as its primary's
/// plain URL, beside a server that is down: the primary's yes counts once,
/// so no majority of three.
#[tokio::test]
async fn a_group_and_its_primarys_own_url_vote_once() {
    let group = SentinelGroup::start(&[]);
    let mut down = Server::start();
    let urls = vec![group.url(0), group.data[0].url(), down.url()];
    down.kill();
    let locker = locker(&urls);
    match locker.try_lock("job").await {
        Err(redis_lock_client::Error::NoQuorum { failures, .. }) => {
            let why = format!("{failures:?}");
            assert!(why.contains("reaches the same server"), "{why}");
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
}

/// The CLI looking the primary up through a stopped sentinel gets SIGTERM:
/// it exits at once (not at the end of its wait), without the lock.
#[test]
fn the_cli_ends_on_sigterm_during_the_primary_lookup() {
    let group = SentinelGroup::start(&[]);
    group.sentinels[0].signal("STOP");
    let mut child = std::process::Command::new(workspace_binary("redis-lock"))
        .env("REDIS_LOCK_SERVERS", group.url(0))
        .args(["run", "job", "--wait", "60s", "--", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let ended = eventually(Duration::from_secs(10), || {
        child.try_wait().ok().flatten().is_some()
    });
    group.sentinels[0].signal("CONT");
    if !ended {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(ended, "still running 10 s after SIGTERM: {stderr}");
    assert_ne!(status.code(), Some(0), "{stderr}");
    eprintln!("exit {status:?}: {stderr}");
    assert_eq!(status_of(&group, "job"), None);
}

fn status_of(group: &SentinelGroup, name: &str) -> Option<Vec<u8>> {
    status(&mut group.data[0].conn(), name).map(|s| s.0)
}

/// A service name written percent-encoded (`lo%63ks` for `locks`) names
/// the same service, as in any URL: read as written, a name with `#`, `?`
/// or `%` in it could not be given at all.
#[tokio::test]
async fn a_percent_encoded_service_name_is_decoded() {
    let group = SentinelGroup::start(&[]);
    let url = format!(
        "redis+sentinel://127.0.0.1:{}/lo%63ks",
        group.sentinels[0].port
    );
    let locker = locker(&[url]);
    let lock = locker.try_lock("job").await.unwrap();
    assert!(status_of(&group, "job").is_some());
    locker.unlock(&lock).await.unwrap();
}

/// A `lock` queued on the primary (LOCK.ACQUIRE ... WAIT) when the primary
/// is demoted (REPLICAOF, which unblocks its blocked clients) and the
/// sentinels name the new one: the waiter follows to the new primary and
/// gets the lock once the holder lets it go, within its wait; one holder
/// at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_waiter_follows_a_demotion_to_the_new_primary() {
    let group = SentinelGroup::start(&[]);
    let holder_side = locker(&[group.url(0)]);
    let waiter_side = locker(&[group.url(1)]);
    let held = holder_side.try_lock("job").await.unwrap();
    await_held_on(&group.data[1], "job");
    let waiter = tokio::spawn(async move {
        let outcome = waiter_side.lock("job", Duration::from_secs(20)).await;
        (outcome, waiter_side)
    });
    let (old, new) = (&group.data[0], &group.data[1]);
    let mut c = old.conn();
    let queued = eventually(Duration::from_secs(10), || {
        info_field(&mut c, "clients", "blocked_clients") != "0"
    });
    assert!(queued, "the waiter never queued on the primary");

    group.promote_by_hand(1);
    holder_side.unlock(&held).await.unwrap();
    assert_eq!(status(&mut new.conn(), "job").map(|s| s.0), None);
    let (outcome, waiter_side) = waiter.await.unwrap();
    let lock = outcome.expect("the waiter gets the lock on the new primary");
    let (owner, ..) = status(&mut new.conn(), "job").expect("held on the new primary");
    assert_eq!(owner, lock.owner().as_bytes());
    waiter_side.unlock(&lock).await.unwrap();
}

fn await_held_on(server: &Server, name: &str) {
    let mut c = server.conn();
    let held = eventually(Duration::from_secs(10), || status(&mut c, name).is_some());
    assert!(held, "{name} never reached 127.0.0.1:{}", server.port);
}

/// One sentinel still names a server that refuses the URL's credentials
/// (an old primary, decommissioned, without this user); the two others
/// name the live primary, which takes them. That refusal ended the lookup
/// whenever it came first: a lock refused as a configuration error
/// (Rejected, CLI exit 78) with the primary up.
#[tokio::test]
async fn a_stale_sentinel_naming_a_server_that_refuses_the_user_is_outvoted() {
    let group = SentinelGroup::start(&[]);
    let acl = "ACL SETUSER locker on >s3cret ~* +@all";
    for s in &group.data {
        q(&mut s.conn(), acl).unwrap();
    }
    let elsewhere = Server::start();
    let port = group.sentinels[0].port;
    let url = format!("redis+sentinel://locker:s3cret@127.0.0.1:{port}/{SERVICE}");
    let locker = locker(&[url]);
    let lock = locker.try_lock("warm").await.unwrap();
    locker.unlock(&lock).await.unwrap();
    every_lookup_finds_the_primary(&locker, &group, elsewhere.port).await;
}

/// A sentinel lists among the group's sentinels one whose announced
/// address is no URL host (an IPv6 address with a zone, `::1%lo`: taken by
/// Sentinel with `resolve-hostnames` and reported as announced with
/// `announce-hostnames`). The node learns the group's sentinels from that
/// reply (`SENTINEL SENTINELS`, in the primary lookup's round trip since
/// 41efe16); each learned address was made into a sentinel URL with
/// `expect("checked when parsed")`, and the next lookup panicked in the
/// caller's task.
#[tokio::test]
async fn a_sentinel_address_that_is_no_url_host_does_not_panic_a_lookup() {
    let group = SentinelGroup::start(&[]);
    let mut s0 = group.sentinels[0].conn();
    q(&mut s0, "SENTINEL CONFIG SET resolve-hostnames yes").unwrap();
    q(&mut s0, "SENTINEL CONFIG SET announce-hostnames yes").unwrap();
    let primary = &group.data[group.primary()];
    let hello = format!(
        "::1%lo,26999,{},0,{SERVICE},127.0.0.1,{},0",
        "f".repeat(40),
        primary.port
    );
    let lists_it = || {
        let _ = redis::cmd("PUBLISH")
            .arg("__sentinel__:hello")
            .arg(&hello)
            .query::<i64>(&mut primary.conn());
        let listed: redis::Value = redis::cmd("SENTINEL")
            .arg("SENTINELS")
            .arg(SERVICE)
            .query(&mut group.sentinels[0].conn())
            .unwrap();
        format!("{listed:?}").contains("::1%lo")
    };
    assert!(
        eventually(Duration::from_secs(5), lists_it),
        "the sentinel does not list the announced address"
    );
    let locker = locker(&[group.url(0)]);
    let lock = locker.try_lock("first").await.unwrap();
    locker.unlock(&lock).await.unwrap();
    // The node's connection closed: its next call looks the primary up,
    // asking every sentinel it knows.
    q(&mut primary.conn(), "CLIENT KILL TYPE normal SKIPME yes").unwrap();
    let next = tokio::spawn(async move {
        let lock = locker.try_lock("next").await?;
        locker.unlock(&lock).await
    });
    let ended = next.await;
    assert!(
        ended.as_ref().is_ok_and(|r| r.is_ok()),
        "the lookup after learning the address: {ended:?}"
    );
}
