//! `lock()` with a wait on several servers queues in their WAIT queues
//! (client/src/waiting.rs). Behaviour, not timing: one holder at a time,
//! tokens rise across holders, every waiter is served, a minority of grants
//! is given back, and the wait still ends with the right error.

mod common;
use common::*;
use redis_lock_client::{Builder, Error, LockOptions, Locker};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn locker(nodes: &[Server]) -> Locker {
    locker_on(&urls(nodes))
}

/// TTL 10 s, node timeout 200 ms, over any URLs (proxies included).
fn locker_on(urls: &[String]) -> Locker {
    Builder::new(urls)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(200))
        .build()
        .unwrap()
}

/// `clients` tasks, each with its own Locker (own connections, so their
/// requests race to the servers), loop lock -> check -> unlock on one key.
async fn hot_key(nodes: &[Server], clients: usize, run_for: Duration) -> Vec<u64> {
    let inside = Arc::new(AtomicBool::new(false));
    let last_token = Arc::new(AtomicU64::new(0));
    let sections = Arc::new(Mutex::new(vec![0u64; clients]));
    let stop = Instant::now() + run_for;
    let mut tasks = Vec::new();
    for id in 0..clients {
        let locker = locker(nodes);
        let (inside, last_token, sections) = (inside.clone(), last_token.clone(), sections.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < stop {
                let lock = locker
                    .lock("hot", Duration::from_secs(20))
                    .await
                    .unwrap_or_else(|e| panic!("client {id}: {e}"));
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                let previous = last_token.swap(lock.token(), Ordering::SeqCst);
                assert!(
                    lock.token() > previous,
                    "token {} after {previous}",
                    lock.token()
                );
                tokio::task::yield_now().await;
                inside.store(false, Ordering::SeqCst);
                sections.lock().unwrap()[id] += 1;
                locker.unlock(&lock).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let counts = sections.lock().unwrap().clone();
    counts
}

#[tokio::test(flavor = "multi_thread")]
async fn every_waiter_is_served_on_three_and_five_servers() {
    for n in [3, 5] {
        let nodes = Server::start_n(n);
        let counts = hot_key(&nodes, 12, Duration::from_secs(2)).await;
        println!("N={n}: sections per client {counts:?}");
        assert!(
            counts.iter().all(|&c| c >= 1),
            "N={n}: a client starved: {counts:?}"
        );
        // Nothing is left behind: no lock, no queued waiter.
        for node in &nodes {
            assert_eq!(status(&mut node.conn(), "hot"), None);
            assert_eq!(
                info_field(&mut node.conn(), "lock", "lock_waiters"),
                "0",
                "{}",
                node.url()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hot_keys_hand_off_costs_each_server_one_acquire_and_one_release() {
    // Waiters on a name a try just found held queue at once (no plain try
    // that would be busy again), and the WAITs a won lock did not need,
    // granted right after it, are taken back by its unlock's RELEASE (no
    // second one). Before: 1.94 ACQUIREs and 1.18 RELEASEs per server and
    // section with these 4 clients (2 and 1.4 with 16).
    let nodes = Server::start_n(5);
    let counts = hot_key(&nodes, 4, Duration::from_millis(1500)).await;
    let sections: u64 = counts.iter().sum();
    let per_section = |cmd| {
        let calls: u64 = nodes
            .iter()
            .map(|s| command_calls(&mut s.conn(), cmd))
            .sum();
        calls as f64 / (sections as f64 * nodes.len() as f64)
    };
    let (acquires, releases) = (per_section("lock.acquire"), per_section("lock.release"));
    println!("{sections} sections: per server and section {acquires:.2} ACQUIREs, {releases:.2} RELEASEs");
    assert!(sections >= 100, "{counts:?}");
    // Slack for the tries a client still makes (one per 200 ms at most)
    // and for grants that split and are given back.
    assert!(
        acquires < 1.25,
        "{acquires:.2} ACQUIREs per server and section"
    );
    assert!(
        releases < 1.1,
        "{releases:.2} RELEASEs per server and section"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_minority_of_grants_is_given_back() {
    let nodes = Server::start_n(3);
    // Someone else holds two of the three servers.
    for node in &nodes[..2] {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE k other 30000") > 0);
    }
    let waiter = locker(&nodes);
    let waiting = tokio::spawn(async move {
        let opts = LockOptions::new()
            .wait(Duration::from_secs(10))
            .owner("waiter");
        waiter.acquire("k", &opts).await.map(|l| (waiter, l))
    });
    // The waiter is granted the free server at once: a minority.
    assert!(eventually(Duration::from_secs(2), || {
        status(&mut nodes[2].conn(), "k").is_some_and(|s| s.0 == b"waiter")
    }));
    // A third party queues on that server, behind the waiter's grant.
    let url = nodes[2].url();
    let third = tokio::task::spawn_blocking(move || {
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        q(&mut con, "LOCK.ACQUIRE k third 30000 WAIT 5000")
    });
    // The waiter gives its grant back while it waits for the majority...
    let got = third.await.unwrap().unwrap();
    assert!(
        matches!(got, redis::Value::Int(t) if t > 0),
        "the given-back grant went to the next in line: {got:?}"
    );
    assert!(!waiting.is_finished(), "no majority yet");
    // ...and gets the majority once the other holder releases.
    for node in &nodes[..2] {
        assert_eq!(int(&mut node.conn(), "LOCK.RELEASE k other"), 1);
    }
    let (waiter, lock) = waiting.await.unwrap().unwrap();
    assert_eq!(lock.owner(), "waiter");
    for node in &nodes[..2] {
        assert_eq!(status(&mut node.conn(), "k").unwrap().0, b"waiter");
    }
    waiter.unlock(&lock).await.unwrap();
    // Its request still queued behind "third" was withdrawn by the release.
    assert!(eventually(Duration::from_secs(2), || {
        info_field(&mut nodes[2].conn(), "lock", "lock_waiters") == "0"
    }));
    assert_eq!(status(&mut nodes[2].conn(), "k").unwrap().0, b"third");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_wait_ends_taken_and_leaves_nothing_queued() {
    let nodes = Server::start_n(3);
    for node in &nodes {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE k other 30000") > 0);
    }
    let started = Instant::now();
    let got = locker(&nodes).lock("k", Duration::from_millis(300)).await;
    assert!(matches!(got, Err(Error::Taken)), "{got:?}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    for node in &nodes {
        assert_eq!(status(&mut node.conn(), "k").unwrap().0, b"other");
        assert!(eventually(Duration::from_secs(2), || {
            info_field(&mut node.conn(), "lock", "lock_waiters") == "0"
        }));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_minority_does_not_stop_the_queue() {
    let nodes = Server::start_n(3);
    let locker = locker(&nodes);
    let first = locker.try_lock("k").await.unwrap();
    nodes[2].signal("STOP");
    let waiter = locker.clone();
    let waiting = tokio::spawn(async move { waiter.lock("k", Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    locker.unlock(&first).await.ok();
    let second = waiting.await.unwrap().unwrap();
    assert!(second.token() > first.token());
    nodes[2].signal("CONT");
    locker.unlock(&second).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn too_many_servers_down_is_no_quorum_at_the_deadline() {
    let mut nodes = Server::start_n(3);
    nodes[0].kill();
    nodes[1].kill();
    let got = locker(&nodes).lock("k", Duration::from_millis(400)).await;
    assert!(matches!(got, Err(Error::NoQuorum { .. })), "{got:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn waiters_are_served_in_the_order_they_came() {
    for n in [3, 5] {
        let nodes = Server::start_n(n);
        for node in &nodes {
            assert!(int(&mut node.conn(), "LOCK.ACQUIRE k other 30000") > 0);
        }
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for id in 0..4 {
            let (locker, order) = (locker(&nodes), order.clone());
            waiters.push(tokio::spawn(async move {
                let lock = locker.lock("k", Duration::from_secs(10)).await.unwrap();
                order.lock().unwrap().push(id);
                locker.unlock(&lock).await.unwrap();
            }));
            // Each waiter queued on every server before the next one starts.
            assert!(eventually(Duration::from_secs(2), || {
                nodes.iter().all(|node| {
                    info_field(&mut node.conn(), "lock", "lock_waiters") == (id + 1).to_string()
                })
            }));
        }
        for node in &nodes {
            assert_eq!(int(&mut node.conn(), "LOCK.RELEASE k other"), 1);
        }
        for w in waiters {
            w.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3], "N={n}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn waiters_reconnect_to_restarted_servers() {
    // Without the restart guard (`restart-delay-ms 0`) a restarted server
    // has no locks: a waiter gets it there once it reconnects.
    let mut nodes = Server::start_n(3);
    for node in &nodes {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE k other 30000") > 0);
    }
    let waiter = locker(&nodes);
    let waiting = tokio::spawn(async move { waiter.lock("k", Duration::from_secs(10)).await });
    assert!(eventually(Duration::from_secs(2), || {
        info_field(&mut nodes[0].conn(), "lock", "lock_waiters") == "1"
    }));
    nodes[0].restart();
    nodes[1].restart();
    let lock = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiter got the restarted majority")
        .unwrap()
        .unwrap();
    assert_eq!(lock.owner().len(), 32);
}

/// Owners of `key` on each node.
fn holders(nodes: &[&Server], key: &str) -> Vec<Option<Vec<u8>>> {
    nodes
        .iter()
        .map(|n| status(&mut n.conn(), key).map(|s| s.0))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_give_back_that_times_out_is_never_counted_again() {
    // The waiter's give-back RELEASE to one server is held up in the network
    // past the node timeout. Counting that server's grant again (it still
    // says "granted": the RELEASE has not arrived) would make a lock that
    // the late RELEASE then takes away: a majority on paper, a minority on
    // the servers, and a second holder possible.
    let nodes = Server::start_n(3);
    let proxy = DelayProxy::to(nodes[2].port);
    let urls = vec![nodes[0].url(), nodes[1].url(), proxy.url()];
    let waiter = locker_on(&urls);
    let all = [&nodes[0], &nodes[1], &nodes[2]];
    for release_a_after in [250u64, 320, 400, 550] {
        for node in &nodes[..2] {
            assert!(int(&mut node.conn(), "LOCK.ACQUIRE k other 30000") > 0);
        }
        proxy.delay("LOCK.RELEASE", Duration::from_millis(900));
        let w = waiter.clone();
        let waiting = tokio::spawn(async move {
            let opts = LockOptions::new().wait(Duration::from_secs(10)).owner("w1");
            w.acquire("k", &opts).await
        });
        // Granted the free server: a minority, so it gives it back (delayed).
        assert!(eventually(Duration::from_secs(2), || {
            holders(&all, "k")[2].as_deref() == Some(b"w1".as_slice())
        }));
        tokio::time::sleep(Duration::from_millis(release_a_after)).await;
        assert_eq!(int(&mut nodes[0].conn(), "LOCK.RELEASE k other"), 1);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        if !waiting.is_finished() {
            assert_eq!(int(&mut nodes[1].conn(), "LOCK.RELEASE k other"), 1);
        }
        let lock = waiting.await.unwrap().expect("the waiter gets the lock");
        // Every delayed RELEASE has landed by now.
        proxy.clear();
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let owned = holders(&all, "k")
            .iter()
            .filter(|o| o.as_deref() == Some(b"w1".as_slice()))
            .count();
        assert!(lock.validity() > Duration::ZERO);
        assert!(
            owned >= 2,
            "A released after {release_a_after} ms: the lock is valid for {:?} but held on {owned} of 3 servers: {:?}",
            lock.validity(),
            holders(&all, "k")
        );
        waiter.unlock(&lock).await.unwrap();
        for node in &nodes {
            let _ = q(&mut node.conn(), "LOCK.RELEASE k other");
            assert_eq!(status(&mut node.conn(), "k"), None);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_waiters_with_split_grants_do_not_swap_them_forever() {
    // C is held by someone else, so each waiter needs both A and B. Each
    // waiter's path to one of them is slow (its requests there arrive 30 ms
    // late), so w1 is granted A and w2 B, each queued behind the other:
    // both hold a minority and give it back on the same schedule, each
    // handing its grant to the other. Without something to break the tie
    // they swap A and B until their waits run out.
    let nodes = Server::start_n(3);
    assert!(int(&mut nodes[2].conn(), "LOCK.ACQUIRE k other 60000") > 0);
    let slow_b = DelayProxy::to(nodes[1].port);
    let slow_a = DelayProxy::to(nodes[0].port);
    slow_b.delay("LOCK.ACQUIRE", Duration::from_millis(30));
    slow_a.delay("LOCK.ACQUIRE", Duration::from_millis(30));
    let c = nodes[2].url();
    let lockers: Vec<Locker> = [
        [nodes[0].url(), slow_b.url(), c.clone()],
        [slow_a.url(), nodes[1].url(), c],
    ]
    .iter()
    .map(|urls| {
        Builder::new(urls)
            .ttl(Duration::from_secs(10))
            .node_timeout(Duration::from_millis(200))
            .build()
            .unwrap()
    })
    .collect();
    // The tie is broken at random: try it several times.
    for round in 0..6 {
        let mut tasks = Vec::new();
        for (id, locker) in lockers.iter().cloned().enumerate() {
            tasks.push(tokio::spawn(async move {
                let started = Instant::now();
                let got = locker.lock("k", Duration::from_secs(2)).await;
                let lock =
                    got.map_err(|e| format!("w{}: {e} after {:?}", id + 1, started.elapsed()))?;
                // Hold it long enough for the other to be queued behind it.
                tokio::time::sleep(Duration::from_millis(50)).await;
                locker.unlock(&lock).await.unwrap();
                Ok::<_, String>(started.elapsed())
            }));
        }
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(t.await.unwrap());
        }
        println!("round {round}: {outcomes:?}");
        assert!(
            outcomes.iter().all(Result::is_ok),
            "round {round}: {outcomes:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn waiters_split_across_two_free_servers_do_not_livelock() {
    // One of three servers is held by someone else for the whole test, so
    // every waiter needs both of the other two. Grants split between two
    // waiters there; the two give back and must not keep swapping them in
    // lockstep while everyone else starves.
    let nodes = Server::start_n(3);
    assert!(int(&mut nodes[2].conn(), "LOCK.ACQUIRE k other 60000") > 0);
    let inside = Arc::new(AtomicBool::new(false));
    let stop = Instant::now() + Duration::from_secs(2);
    let mut tasks = Vec::new();
    for id in 0..12 {
        let locker = locker(&nodes);
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            let mut sections = 0u32;
            while Instant::now() < stop {
                let lock = match locker.lock("k", Duration::from_secs(3)).await {
                    Ok(lock) => lock,
                    Err(e) => return Err(format!("client {id} after {sections} sections: {e}")),
                };
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                tokio::time::sleep(Duration::from_millis(1)).await;
                inside.store(false, Ordering::SeqCst);
                sections += 1;
                locker.unlock(&lock).await.unwrap();
            }
            Ok(sections)
        }));
    }
    let mut counts = Vec::new();
    for t in tasks {
        counts.push(t.await.unwrap());
    }
    println!("sections per client: {counts:?}");
    assert!(
        counts.iter().all(|c| matches!(c, Ok(n) if *n >= 1)),
        "a waiter starved: {counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn waits_longer_than_a_server_takes_still_wait() {
    // 2^31 - 1 ms (~24.8 days) is the longest WAIT a server accepts; a longer
    // wait, up to Duration::MAX ("forever"), must neither be refused nor panic.
    for n in [1, 3] {
        let nodes = Server::start_n(n);
        for wait in [Duration::from_secs(30 * 24 * 3600), Duration::MAX] {
            for node in &nodes {
                assert!(int(&mut node.conn(), "LOCK.ACQUIRE k other 30000") > 0);
            }
            let waiter = locker(&nodes);
            let waiting = tokio::spawn(async move {
                let lock = waiter.lock("k", wait).await?;
                waiter.unlock(&lock).await.map(|_| lock.token())
            });
            assert!(eventually(Duration::from_secs(2), || {
                nodes
                    .iter()
                    .all(|node| info_field(&mut node.conn(), "lock", "lock_waiters") == "1")
            }));
            assert!(!waiting.is_finished(), "N={n} {wait:?}: still waiting");
            for node in &nodes {
                assert_eq!(int(&mut node.conn(), "LOCK.RELEASE k other"), 1);
            }
            let got = tokio::time::timeout(Duration::from_secs(5), waiting)
                .await
                .expect("handed over")
                .unwrap();
            assert!(got.is_ok(), "N={n} {wait:?}: {got:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_at_any_moment_leaves_nothing_behind() {
    // Cancel at moments that fall in every phase: connecting, queued,
    // granted a minority (the free server), giving it back, queuing again.
    let nodes = Server::start_n(3);
    for node in &nodes[..2] {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE k other 60000") > 0);
    }
    let waiter = locker(&nodes);
    for after_us in [
        0u64, 200, 500, 1000, 2000, 3000, 5000, 8000, 20_000, 60_000, 150_000,
    ] {
        let cancelled = tokio::time::timeout(
            Duration::from_micros(after_us),
            waiter.lock("k", Duration::from_secs(10)),
        )
        .await;
        assert!(cancelled.is_err(), "still waiting when cancelled");
        assert!(
            eventually(Duration::from_secs(3), || {
                status(&mut nodes[2].conn(), "k").is_none()
                    && nodes
                        .iter()
                        .all(|node| info_field(&mut node.conn(), "lock", "lock_waiters") == "0")
            }),
            "cancelled after {after_us} µs: {:?} holds the free server",
            status(&mut nodes[2].conn(), "k")
        );
    }
    assert!(
        waiter.try_lock("free").await.is_ok(),
        "the Locker still works"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_release_that_timed_out_is_never_overtaken_later_in_the_same_wait() {
    // B and C sit behind paths that hold RELEASEs back 1.5 s. The waiter
    // gets B, gives it back (timed out), then C, the same; with only A left
    // in play that pass of the wait fails, and the next pass must not count
    // B or C again: its WAITs travel on other connections and overtake the
    // RELEASEs, which would then free what it counted.
    let nodes = Server::start_n(3);
    let slow_b = DelayProxy::to(nodes[1].port);
    let slow_c = DelayProxy::to(nodes[2].port);
    let all = [&nodes[0], &nodes[1], &nodes[2]];
    let waiter = Builder::new(&[nodes[0].url(), slow_b.url(), slow_c.url()])
        .ttl(Duration::from_secs(4))
        .node_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    for trial in 0..4 {
        let key = format!("k{trial}");
        for node in [&nodes[0], &nodes[2]] {
            assert!(int(&mut node.conn(), &format!("LOCK.ACQUIRE {key} other 60000")) > 0);
        }
        slow_b.delay("LOCK.RELEASE", Duration::from_millis(1500));
        slow_c.delay("LOCK.RELEASE", Duration::from_millis(1500));
        let (w, k) = (waiter.clone(), key.clone());
        let waiting = tokio::spawn(async move { w.lock(&k, Duration::from_secs(10)).await });
        assert!(eventually(Duration::from_secs(2), || {
            matches!(holders(&all, &key)[1].as_deref(), Some(o) if o != b"other")
        }));
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            int(&mut nodes[2].conn(), &format!("LOCK.RELEASE {key} other")),
            1
        );
        // Whatever it returns, a lock it reports valid must be held on a
        // majority all along, also once the held-back RELEASEs land.
        let got = tokio::time::timeout(Duration::from_secs(3), waiting).await;
        println!("trial {trial}: {got:?}");
        if let Ok(Ok(Ok(lock))) = &got {
            let stop = Instant::now() + Duration::from_secs(2);
            while Instant::now() < stop && !lock.validity().is_zero() {
                let owned = holders(&all, &key)
                    .iter()
                    .filter(|o| o.as_deref() == Some(lock.owner().as_bytes()))
                    .count();
                assert!(
                    lock.validity().is_zero() || owned >= 2,
                    "trial {trial}: valid for {:?} more but held on {owned} of 3: {:?}",
                    lock.validity(),
                    holders(&all, &key)
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        slow_b.clear();
        slow_c.clear();
        // Let the held-back RELEASEs land, and the waiter end, before the
        // next trial (which then starts with connections already open).
        tokio::time::sleep(Duration::from_millis(1600)).await;
        if let Ok(Ok(Ok(lock))) = &got {
            let _ = waiter.unlock(lock).await;
        }
        for node in &nodes {
            let _ = q(&mut node.conn(), &format!("DEL {key}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bursts_of_cancelled_waits_leave_no_grant() {
    // Hundreds of queued lock() calls cut off together: a WAIT still on its
    // way when the caller gave up must not be granted later and kept.
    let nodes = Server::start_n(3);
    for node in &nodes[..2] {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE m other 600000") > 0);
    }
    let locker = locker(&nodes);
    for burst in 0..8 {
        let mut tasks = Vec::new();
        for _ in 0..300 {
            let l = locker.clone();
            tasks.push(tokio::spawn(async move {
                let wait = l.lock("m", Duration::from_secs(30));
                tokio::time::timeout(Duration::from_millis(30), wait)
                    .await
                    .is_err()
            }));
        }
        for t in tasks {
            assert!(t.await.unwrap(), "still waiting when cancelled");
        }
        assert!(eventually(Duration::from_secs(5), || {
            nodes
                .iter()
                .all(|n| info_field(&mut n.conn(), "lock", "lock_waiters") == "0")
        }));
        // Let late WAITs land, then give their give-backs time (a kept
        // grant stays for the TTL, far longer).
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            eventually(Duration::from_secs(3), || status(&mut nodes[2].conn(), "m")
                .is_none()),
            "burst {burst}: a cancelled waiter holds the free server"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_lock_does_not_take_a_server_later() {
    // Won on A and B while still queued on C; the Lock is then dropped (not
    // unlocked). When C comes free its queued WAIT is granted: that grant
    // must be given back at once, not held for a fresh TTL long after the
    // lock was dropped.
    let nodes = Server::start_n(3);
    let all = [&nodes[0], &nodes[1], &nodes[2]];
    let locker = Builder::new(&urls(&nodes))
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    // Held everywhere, so that the call queues (a free majority would be
    // taken by its first, plain round); then A and B come free.
    for node in &nodes {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE d other 60000") > 0);
    }
    let waiting = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.lock("d", Duration::from_secs(60)).await })
    };
    assert!(eventually(Duration::from_secs(2), || {
        all.iter()
            .all(|n| info_field(&mut n.conn(), "lock", "lock_waiters") == "1")
    }));
    for node in &nodes[..2] {
        assert_eq!(int(&mut node.conn(), "LOCK.RELEASE d other"), 1);
    }
    let lock = waiting.await.unwrap().unwrap();
    let me = lock.owner().as_bytes().to_vec();
    assert_eq!(
        info_field(&mut nodes[2].conn(), "lock", "lock_waiters"),
        "1",
        "still queued on C"
    );
    drop(lock);
    assert_eq!(int(&mut nodes[2].conn(), "LOCK.RELEASE d other"), 1);
    // Given back at once; kept, it would stay for the 10 s TTL.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        eventually(Duration::from_secs(3), || holders(&all, "d")[2].as_deref()
            != Some(me.as_slice())),
        "the dropped lock took C after it was dropped"
    );
}

/// Call 1 with the caller's own owner "me" ends (its wait runs out, or its
/// caller cancels it) while its WAITs to two servers are still held back
/// on the way; then call 2 of the same owner wins. Nothing call 1 left
/// running may release call 2's grants.
async fn an_ended_call_leaves_a_later_call_of_its_owner_alone(cancel: bool) {
    let nodes = Server::start_n(3);
    let (proxies, via_proxies) = in_front_of(&nodes);
    let all = [&nodes[0], &nodes[1], &nodes[2]];
    let me = locker_on(&via_proxies);
    let other = locker(&nodes);
    let warm = me.try_lock("warm").await.unwrap();
    me.unlock(&warm).await.unwrap();
    let held = other.try_lock("k").await.unwrap();
    for p in &proxies[..2] {
        p.delay("LOCK.ACQUIRE", Duration::from_millis(1000));
    }
    let opts = |wait| LockOptions::new().owner("me").wait(wait);
    if cancel {
        let first = tokio::time::timeout(
            Duration::from_millis(50),
            me.acquire("k", &opts(Duration::from_secs(5))),
        )
        .await;
        assert!(first.is_err(), "cancelled while waiting");
    } else {
        let first = me.acquire("k", &opts(Duration::from_millis(100))).await;
        assert!(first.is_err(), "{first:?}");
    }
    for p in &proxies {
        p.clear();
    }
    other.unlock(&held).await.unwrap();
    let lock = me
        .acquire("k", &opts(Duration::from_secs(5)))
        .await
        .unwrap();
    // Past the held-back WAITs and anything sent after them.
    let stop = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < stop {
        let mine = holders(&all, "k")
            .iter()
            .filter(|o| o.as_deref() == Some(b"me".as_slice()))
            .count();
        assert!(
            mine >= 2 || lock.validity().is_zero(),
            "call 2 valid for {:?} but held on {mine} of 3",
            lock.validity()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(matches!(other.try_lock("k").await, Err(Error::Taken)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_that_ran_out_leaves_a_later_call_of_its_owner_alone() {
    an_ended_call_leaves_a_later_call_of_its_owner_alone(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_wait_leaves_a_later_call_of_its_owner_alone() {
    an_ended_call_leaves_a_later_call_of_its_owner_alone(true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_that_can_no_longer_reach_a_majority_ends_at_once() {
    // Two give-backs are held back past the node timeout: both servers are
    // left out of this call, so no majority is possible any more. The call
    // says so at once instead of retrying until its 15 s deadline.
    let nodes = Server::start_n(3);
    let (proxies, via_proxies) = in_front_of(&nodes);
    let waiter = Builder::new(&via_proxies)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    for node in &nodes {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE k other 60000") > 0);
    }
    let started = Instant::now();
    let waiting = tokio::spawn(async move { waiter.lock("k", Duration::from_secs(15)).await });
    assert!(eventually(Duration::from_secs(2), || {
        info_field(&mut nodes[0].conn(), "lock", "lock_waiters") == "1"
    }));
    for p in &proxies[..2] {
        p.delay("LOCK.RELEASE", Duration::from_millis(300));
    }
    // Each hand-off is a minority the waiter gives back, held back.
    for node in &nodes[..2] {
        assert_eq!(int(&mut node.conn(), "LOCK.RELEASE k other"), 1);
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let got = waiting.await.unwrap();
    assert!(matches!(got, Err(Error::NoQuorum { .. })), "{got:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "ended after {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_late_grant_of_one_pass_cannot_release_the_next_pass() {
    // One lock() call, two passes: the first wins A and B but fails its
    // fence (the extend it needs times out), while its WAIT to C is still
    // held back; the second wins B and C. When the first pass's WAIT lands
    // on C it is granted there, and that grant, being the first pass's, is
    // released: with one owner for both passes, that RELEASE freed the
    // second pass's grant (an attack run: two holders). Each pass of a
    // generated owner now has an owner of its own.
    let nodes = Server::start_n(3);
    let (px, via) = in_front_of(&nodes);
    let mk = || {
        Builder::new(&via)
            .ttl(Duration::from_millis(2000))
            .node_timeout(Duration::from_millis(200))
            .retry_delay(Duration::from_millis(300), Duration::from_millis(300))
            .build()
            .unwrap()
    };
    let (h, w, y) = (mk(), mk(), mk());
    for l in [&h, &w, &y] {
        let warm = l.try_lock("warm").await.unwrap();
        l.unlock(&warm).await.unwrap();
    }
    let all = [&nodes[0], &nodes[1], &nodes[2]];
    let held = h.try_lock("k").await.unwrap();
    let started = Instant::now();
    px[2].delay("TICKET", Duration::from_millis(2500));
    let waiting = tokio::spawn(async move { w.lock("k", Duration::from_secs(20)).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    px[2].clear();
    px[0].delay("LOCK.EXTEND", Duration::from_millis(260));
    px[1].delay("LOCK.EXTEND", Duration::from_millis(260));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    h.unlock(&held).await.unwrap();
    tokio::time::sleep(Duration::from_millis(40)).await;
    px[0].delay("TICKET", Duration::from_secs(5));
    let lock = waiting.await.unwrap().expect("the waiter's lock");
    while started.elapsed() < Duration::from_millis(2700) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mine = holders(&all, "k")
        .iter()
        .filter(|o| o.as_deref() == Some(lock.owner().as_bytes()))
        .count();
    px[0].clear();
    let intruder = y.try_lock("k").await;
    assert!(
        lock.validity().is_zero() || (mine >= 2 && intruder.is_err()),
        "valid for {:?}, held on {mine} of 3, another client: {:?}",
        lock.validity(),
        intruder.map(|l| l.token())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_won_waits_request_queued_elsewhere_is_withdrawn_after_unlock() {
    // The winner's WAIT to C is held back past its win and its unlock; it
    // then queues on C behind the next holder. It must be withdrawn, not
    // left queued for the rest of its 60 s wait.
    let nodes = Server::start_n(3);
    let proxy = DelayProxy::to(nodes[2].port);
    let via = vec![nodes[0].url(), nodes[1].url(), proxy.url()];
    let (a, b, c) = (locker_on(&via), locker_on(&via), locker_on(&via));
    let held = a.try_lock("w").await.unwrap();
    proxy.delay("TICKET", Duration::from_millis(800));
    let winner = tokio::spawn(async move {
        let lock = b.lock("w", Duration::from_secs(60)).await.unwrap();
        b.unlock(&lock).await.unwrap();
        b
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    a.unlock(&held).await.unwrap();
    let _b = winner.await.unwrap();
    let next = c.try_lock("w").await.unwrap();
    proxy.clear();
    // The held-back WAIT has landed (and was queued) by now.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        eventually(Duration::from_secs(3), || {
            info_field(&mut nodes[2].conn(), "lock", "lock_waiters") == "0"
        }),
        "the unlocked winner's WAIT is still queued on C"
    );
    c.unlock(&next).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn one_server_a_wait_that_lands_after_it_ended_is_withdrawn() {
    // N = 1: the WAIT is held back on the way; the call is cancelled (or
    // its wait runs out) before it lands, the holder then releases, and the
    // late WAIT must not take the lock for a TTL with nobody behind it.
    for cancel in [true, false] {
        let node = Server::start();
        let proxy = DelayProxy::to(node.port);
        let locker = Builder::new(&[proxy.url()])
            .ttl(Duration::from_secs(30))
            .node_timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        let warm = locker.try_lock("warm").await.unwrap();
        locker.unlock(&warm).await.unwrap();
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE s other 60000") > 0);
        proxy.delay("WAIT", Duration::from_millis(400));
        if cancel {
            let wait = locker.lock("s", Duration::from_secs(5));
            let cancelled = tokio::time::timeout(Duration::from_millis(50), wait).await;
            assert!(cancelled.is_err());
        } else {
            let got = locker.lock("s", Duration::from_millis(100)).await;
            assert!(got.is_err(), "{got:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(int(&mut node.conn(), "LOCK.RELEASE s other"), 1);
        proxy.clear();
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            eventually(Duration::from_secs(3), || status(&mut node.conn(), "s")
                .is_none()),
            "cancel={cancel}: the ended wait holds the lock: {:?}",
            status(&mut node.conn(), "s")
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_server_does_not_hold_up_a_new_lockers_wait() {
    // A queued wait first connects to every node (to refuse two URLs of one
    // server before sending a WAIT). A server that accepts connections but
    // does not answer (stopped) must not hold every wait of a new Locker
    // (each CLI run is one) for the node timeout.
    let nodes = Server::start_n(3);
    nodes[2].signal("STOP");
    let fresh = Builder::new(&urls(&nodes))
        .node_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let started = Instant::now();
    // A caller's own owner queues at once (no polling round first).
    let opts = LockOptions::new().owner("me").wait(Duration::from_secs(10));
    let lock = fresh.acquire("job", &opts).await.unwrap();
    let took = started.elapsed();
    nodes[2].signal("CONT");
    fresh.unlock(&lock).await.unwrap();
    assert!(
        took < Duration::from_secs(1),
        "the wait began {took:?} late"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_that_runs_out_ends_at_its_deadline_with_a_server_stopped() {
    // 5171401: held on servers 0 and 1, server 2 stopped. The wait ran out
    // at 300 ms, then gave back in the foreground, waiting the node timeout
    // for the stopped server's RELEASE (`--wait 300ms` took 800 ms).
    let nodes = Server::start_n(3);
    let timeout = Duration::from_secs(1);
    let locker = connected_locker(&nodes, timeout).await;
    for node in &nodes[..2] {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE job other 60000") > 0);
    }
    nodes[2].signal("STOP");
    let wait = Duration::from_millis(300);
    let started = Instant::now();
    let err = locker.lock("job", wait).await.unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, Error::Taken), "{err}");
    assert!(took < wait + timeout / 2, "took {took:?}");
    nodes[2].signal("CONT");
    tokio::time::timeout(Duration::from_secs(5), locker.background_done())
        .await
        .expect("the clean-up ends");
    let all = [&nodes[0], &nodes[1], &nodes[2]];
    let other = Some(b"other".to_vec());
    assert_eq!(holders(&all, "job"), [other.clone(), other, None]);
    for node in &nodes {
        let mut c = node.conn();
        assert_eq!(info_field(&mut c, "lock", "lock_waiters"), "0");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_release_left_travelling_by_an_earlier_call_cannot_free_a_later_calls_grant() {
    // b0d086f: call 1 with the caller's own owner fails; its RELEASE to C
    // times out but is still on its way (held back 1.5 s on the path).
    // Call 2, same owner, queues: its WAITs travel on connections of their
    // own, overtook that RELEASE, counted C (still "me" from call 1), and
    // the RELEASE then freed C under it: another client took B and C while
    // call 2 still held the lock.
    let nodes = Server::start_n(3);
    let (proxies, via) = in_front_of(&nodes);
    let locker = Builder::new(&via)
        .ttl(Duration::from_secs(20))
        .node_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    for node in &nodes[..2] {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE k Z 20000") > 0);
    }
    proxies[2].delay("LOCK.RELEASE", Duration::from_millis(1500));
    let me = LockOptions::new().owner("me");
    assert!(matches!(locker.acquire("k", &me).await, Err(Error::Taken)));
    for node in &nodes[..2] {
        assert_eq!(int(&mut node.conn(), "LOCK.RELEASE k Z"), 1);
    }
    assert!(int(&mut nodes[1].conn(), "LOCK.ACQUIRE k W 1000") > 0);
    let waited = me.clone().wait(Duration::from_millis(300));
    let second = locker.acquire("k", &waited).await;
    tokio::time::sleep(Duration::from_millis(2000)).await; // the RELEASE lands, W expires
    let other = Builder::new(&urls(&nodes)).build().unwrap();
    let taken = other.try_lock("k").await;
    if let (Ok(second), Ok(taken)) = (&second, &taken) {
        panic!(
            "two holders: call 2 ({:?} valid) and another client ({:?})",
            second.validity(),
            taken.validity()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_held_locks_wait_still_queued_elsewhere_is_not_clean_up() {
    // b0d086f: won on A and B, still queued on C (held by Q). What drives
    // that WAIT is part of the lock while it is held: background_done()
    // waited for it until C answered (7.7 s there), and so did every
    // Python exit (2 s). It counts from the let-go on.
    let nodes = Server::start_n(3);
    let all = [&nodes[0], &nodes[1], &nodes[2]];
    for node in &nodes {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE h Q 60000") > 0);
    }
    let locker = locker(&nodes);
    let waiting = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.lock("h", Duration::from_secs(30)).await })
    };
    assert!(eventually(Duration::from_secs(2), || {
        all.iter()
            .all(|n| info_field(&mut n.conn(), "lock", "lock_waiters") == "1")
    }));
    for node in &nodes[..2] {
        assert_eq!(int(&mut node.conn(), "LOCK.RELEASE h Q"), 1);
    }
    let lock = waiting.await.unwrap().unwrap();
    let done = tokio::time::timeout(Duration::from_millis(500), locker.background_done());
    assert!(done.await.is_ok(), "waited for a held lock's queued WAIT");
    locker.unlock(&lock).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), locker.background_done())
        .await
        .expect("the let-go's clean-up ends");
    assert_eq!(
        info_field(&mut nodes[2].conn(), "lock", "lock_waiters"),
        "0",
        "its WAIT on C was withdrawn"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_polling_wait_of_an_own_owner_does_not_overtake_its_last_release() {
    // 1033558: one server, retry_count set (polling). The unlock's
    // RELEASE is held back past the node timeout; the next call of the
    // same owner sent its WAIT on a connection of its own, was granted
    // (same owner), and the RELEASE then freed it: two holders, 6/6. Its
    // polls now go on the shared connection, behind that RELEASE.
    let server = Server::start();
    let proxy = DelayProxy::to(server.port);
    let locker = Builder::new(&[proxy.url()])
        .ttl(Duration::from_secs(20))
        .node_timeout(Duration::from_millis(200))
        .retry_count(3)
        .retry_delay(Duration::from_millis(5), Duration::from_millis(10))
        .build()
        .unwrap();
    let me = LockOptions::new().owner("me");
    let first = locker.acquire("k", &me).await.unwrap();
    proxy.delay("LOCK.RELEASE", Duration::from_millis(1500));
    let _ = locker.unlock(&first).await; // times out; still on its way
    let second = locker.acquire("k", &me.wait(Duration::from_secs(5))).await;
    tokio::time::sleep(Duration::from_millis(1800)).await; // the RELEASE lands
    let other = Builder::new(&[server.url()]).build().unwrap();
    let taken = other.try_lock("k").await;
    if let (Ok(second), Ok(_)) = (&second, &taken) {
        panic!(
            "two holders: the second call ({:?} valid) and another client",
            second.validity()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_own_owners_late_wait_is_not_waited_for_as_clean_up() {
    // 1033558: a caller's own owner's WAIT still travelling after its lock
    // was won and unlocked is only driven, never given back: counting it as
    // clean-up kept background_done() pending while it stayed queued (8 s+).
    let nodes = Server::start_n(3);
    let (proxies, via) = in_front_of(&nodes);
    let locker = locker_on(&via);
    let warm = locker.try_lock("warm").await.unwrap();
    locker.unlock(&warm).await.unwrap();
    proxies[2].delay("TICKET", Duration::from_millis(800));
    let me = LockOptions::new().owner("me").wait(Duration::from_secs(60));
    let lock = locker.acquire("k", &me).await.unwrap();
    locker.unlock(&lock).await.unwrap();
    assert!(int(&mut nodes[2].conn(), "LOCK.ACQUIRE k h 20000") > 0);
    let done = tokio::time::timeout(Duration::from_secs(3), locker.background_done());
    assert!(done.await.is_ok(), "waited for a WAIT nobody gives back");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_module_from_before_ticket_is_polled_and_the_grant_kept() {
    // A rolling upgrade: servers whose module refuses TICKET. lock() with a
    // wait falls back to polling. On a name a try found held a moment ago
    // it skips the try; the refused queued pass then releases its owner in
    // the background (here slowed: RELEASEs take 300 ms through the
    // proxies). 82b79fb: the polling round reused that owner, and the
    // late RELEASE freed its grant while lock() had returned Ok: two
    // holders (N = 1 5/5; N = 3 a race).
    for n in [1, 3] {
        let nodes = Server::start_n(n);
        let proxies: Vec<RespProxy> = nodes.iter().map(|s| RespProxy::to(s.port)).collect();
        for p in &proxies {
            p.refuse("TICKET", "ERR unknown option 'TICKET'");
        }
        let via: Vec<String> = proxies.iter().map(RespProxy::url).collect();
        let (a, other) = (locker_on(&via), locker(&nodes));
        let warm = a.try_lock("warm").await.unwrap();
        a.unlock(&warm).await.unwrap();
        let held = other.try_lock("k").await.unwrap();
        let busy = a.lock("k", Duration::from_millis(1)).await;
        assert!(matches!(busy, Err(Error::Taken)), "N={n}: {busy:?}");
        other.unlock(&held).await.unwrap();
        for p in &proxies {
            p.delay("LOCK.RELEASE", Duration::from_millis(300));
        }
        let mine = a.lock("k", Duration::from_secs(5)).await.unwrap();
        // Every RELEASE of the call has landed by now.
        tokio::time::sleep(Duration::from_millis(900)).await;
        let all: Vec<&Server> = nodes.iter().collect();
        let mine_owner = Some(mine.owner().as_bytes().to_vec());
        let holding = holders(&all, "k")
            .into_iter()
            .filter(|h| *h == mine_owner)
            .count();
        assert_eq!(holding, n, "N={n}: held on {holding} of {n} after lock()");
        let second = other.try_lock("k").await;
        assert!(second.is_err(), "N={n}: two holders: {second:?}");
        for p in &proxies {
            p.delay("LOCK.RELEASE", Duration::ZERO);
        }
        a.unlock(&mine).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_wait_on_a_name_busy_a_moment_ago_sees_it_free() {
    // The try is skipped on a name a try found held within 200 ms; the
    // queued pass then starts on a busy runtime after a 1 ms wait is over.
    // b10a186: it sent nothing and said `Taken` on a free name (8–18 of
    // 30 here). Every server still gets one (1 ms) WAIT.
    let spin = Arc::new(AtomicBool::new(true));
    for _ in 0..2 {
        let spin = spin.clone();
        tokio::spawn(async move {
            while spin.load(Ordering::Relaxed) {
                let busy = Instant::now();
                while busy.elapsed() < Duration::from_millis(4) {}
                tokio::task::yield_now().await;
            }
        });
    }
    for n in [1, 3] {
        let nodes = Server::start_n(n);
        let (me, other) = (locker(&nodes), locker(&nodes));
        let warm = me.try_lock("warm").await.unwrap();
        me.unlock(&warm).await.unwrap();
        for round in 0..20 {
            let held = other.try_lock("t").await.unwrap();
            let busy = me.lock("t", Duration::from_millis(2)).await;
            assert!(matches!(busy, Err(Error::Taken)), "{busy:?}");
            other.unlock(&held).await.unwrap();
            match me.lock("t", Duration::from_millis(1)).await {
                Ok(lock) => me.unlock(&lock).await.unwrap(),
                Err(e) => panic!("N={n}, round {round}: a free name: {e}"),
            }
        }
    }
    spin.store(false, Ordering::Relaxed);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_cancelled_while_its_won_lock_is_fenced_leaves_nothing_held() {
    // Three servers whose token counters differ: a lock won through two
    // of their queues gets two tokens and needs a fencing round. The
    // caller gives up in the middle of it: the lock it was about to get is
    // let go at once, not held for its TTL, and its place in the third
    // server's queue is given up too. (Freed on all three at once, the
    // three grants could all be in before the round was decided: the
    // middle token is then held by two of them and no fence is needed.
    // That, or counters too close together (below), failed the CI run of
    // 0b2f3ec on 2026-11-28 with "no fencing round".)
    let nodes = Server::start_n(3);
    let (proxies, via_proxies) = in_front_of(&nodes);
    let all = [&nodes[0], &nodes[1], &nodes[2]];
    let waiter = locker_on(&via_proxies);
    let last = |n: &Server| -> u64 {
        info_field(&mut n.conn(), "lock", "lock_last_token")
            .parse()
            .unwrap()
    };
    // Each node's owner and token of `key`, for the failure messages.
    let tokens = |key: &str| -> Vec<Option<(String, i64)>> {
        all.iter()
            .map(|n| status(&mut n.conn(), key))
            .map(|s| s.map(|(owner, token, ..)| (String::from_utf8_lossy(&owner).into(), token)))
            .collect()
    };
    for round in 0..3 {
        let key = format!("f{round}");
        // The last round's fence aligned them: set them apart again, by
        // seconds: a grant is at least the server's clock + 60 s and the
        // request's floor (the client's clock + 61.1 s), so counters only
        // a millisecond apart were both overtaken by the time the name was
        // freed, and the two grants came with one token.
        let top = all.iter().map(|n| last(n)).max().unwrap();
        nodes[1].raise_token_counter(top + 5_000_000);
        nodes[2].raise_token_counter(top + 10_000_000);
        for node in &nodes {
            assert!(int(&mut node.conn(), &format!("LOCK.ACQUIRE {key} other 60000")) > 0);
        }
        let waiting = {
            let (waiter, key) = (waiter.clone(), key.clone());
            tokio::spawn(async move { waiter.lock(&key, Duration::from_secs(30)).await })
        };
        assert!(eventually(Duration::from_secs(2), || {
            all.iter()
                .all(|n| info_field(&mut n.conn(), "lock", "lock_waiters") == "1")
        }));
        for p in &proxies {
            p.delay("LOCK.FENCE", Duration::from_millis(400));
        }
        for node in &nodes[..2] {
            assert_eq!(
                int(&mut node.conn(), &format!("LOCK.RELEASE {key} other")),
                1
            );
        }
        assert!(
            eventually(Duration::from_secs(2), || proxies
                .iter()
                .any(|p| p.holding())),
            "round {round}: no fencing round: {:?}",
            tokens(&key)
        );
        waiting.abort();
        assert!(waiting.await.unwrap_err().is_cancelled());
        for p in &proxies {
            p.clear();
        }
        assert_eq!(
            int(&mut nodes[2].conn(), &format!("LOCK.RELEASE {key} other")),
            1
        );
        // Let go in the background: gone well before the 10 s TTL.
        assert!(
            eventually(Duration::from_secs(3), || holders(&all, &key)
                .iter()
                .all(Option::is_none)),
            "round {round}: the abandoned lock is still held: {:?}",
            holders(&all, &key)
        );
    }
}

/// 22529f6: a WAIT held back on its way (1.5 s) past the end of a
/// 300 ms `lock()` reaches its server after the call gave up and after the
/// holder let go: granted at once, it held that server (on two of three,
/// the lock) for a whole TTL. The call's clean-up must still take it back.
async fn a_wait_that_lands_after_the_call_gave_up_is_taken_back(
    nodes: usize,
    slow: usize,
    retry_count: Option<u32>,
) {
    let servers = Server::start_n(nodes);
    let proxies: Vec<DelayProxy> = servers[..slow]
        .iter()
        .map(|s| DelayProxy::to(s.port))
        .collect();
    let mut urls: Vec<String> = proxies.iter().map(DelayProxy::url).collect();
    urls.extend(servers[slow..].iter().map(Server::url));
    let mut builder = Builder::new(&urls)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(200));
    if let Some(n) = retry_count {
        builder = builder.retry_count(n); // polling rounds instead of queueing
    }
    let waiter = builder.build().unwrap();
    let warm = waiter.try_lock("warm").await.unwrap();
    waiter.unlock(&warm).await.unwrap();
    for s in &servers {
        assert!(int(&mut s.conn(), "LOCK.ACQUIRE k x 60000") > 0);
    }
    for p in &proxies {
        p.delay("WAIT", Duration::from_millis(1500));
    }
    let began = Instant::now();
    let got = waiter.lock("k", Duration::from_millis(300)).await;
    assert!(got.is_err(), "N={nodes}: {got:?}");
    for s in &servers {
        assert_eq!(int(&mut s.conn(), "LOCK.RELEASE k x"), 1);
    }
    // Past the held-back WAITs' arrival, and a withdrawal after it.
    let landed = Duration::from_millis(1500 + 1200).saturating_sub(began.elapsed());
    tokio::time::sleep(landed).await;
    let all: Vec<&Server> = servers.iter().collect();
    let held = holders(&all, "k");
    assert!(
        held.iter().all(Option::is_none),
        "N={nodes}, {slow} slow: a late WAIT holds {held:?}"
    );
    for p in &proxies {
        p.clear();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_that_lands_after_the_call_gave_up_is_taken_back_on_three_servers() {
    a_wait_that_lands_after_the_call_gave_up_is_taken_back(3, 1, None).await;
    a_wait_that_lands_after_the_call_gave_up_is_taken_back(3, 2, None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_that_lands_after_the_call_gave_up_is_taken_back_on_one_server() {
    a_wait_that_lands_after_the_call_gave_up_is_taken_back(1, 1, None).await;
    // 446f4f4: with polling rounds the round's deadline had dropped the
    // WAIT, and nothing was left to withdraw it.
    a_wait_that_lands_after_the_call_gave_up_is_taken_back(1, 1, Some(3)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_polling_wait_on_one_server_does_not_take_it_later() {
    // One server, polling rounds (retry_count): each round's WAIT goes on
    // a connection of its own. Cancelled while that WAIT is held back on
    // its way, the call released the name once; the WAIT landed after that
    // and, the holder gone, took the server for a whole TTL.
    let server = Server::start();
    let proxy = DelayProxy::to(server.port);
    let waiter = Builder::new(&[proxy.url()])
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(200))
        .retry_count(3)
        .build()
        .unwrap();
    let warm = waiter.try_lock("warm").await.unwrap();
    waiter.unlock(&warm).await.unwrap();
    for round in 0..2 {
        let key = format!("c{round}");
        assert!(int(&mut server.conn(), &format!("LOCK.ACQUIRE {key} x 60000")) > 0);
        proxy.delay("WAIT", Duration::from_millis(1000));
        let wait = waiter.lock(&key, Duration::from_secs(5));
        let cut = tokio::time::timeout(Duration::from_millis(100), wait).await;
        assert!(cut.is_err(), "still waiting when cancelled");
        assert_eq!(int(&mut server.conn(), &format!("LOCK.RELEASE {key} x")), 1);
        tokio::time::sleep(Duration::from_millis(1100)).await; // it lands
        assert!(
            eventually(Duration::from_secs(2), || status(&mut server.conn(), &key)
                .is_none()),
            "round {round}: the cancelled call holds {:?}",
            status(&mut server.conn(), &key)
        );
        proxy.clear();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_down_does_not_hold_up_a_waits_clean_up() {
    // f9619de: a WAIT refused by a server that is down was counted as one
    // that may still land, and its server was "withdrawn" for 30 s after
    // every such wait: background_done() (and a CLI's exit) waited for it.
    // A refused connection delivers nothing later.
    let mut nodes = Server::start_n(3);
    nodes[2].kill();
    let waiter = locker(&nodes[..]);
    for node in &nodes[..2] {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE d other 60000") > 0);
    }
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.lock("d", Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    for node in &nodes[..2] {
        assert_eq!(int(&mut node.conn(), "LOCK.RELEASE d other"), 1);
    }
    let lock = waiting.await.unwrap().expect("won on the two that are up");
    waiter.unlock(&lock).await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(5), waiter.background_done()).await;
    assert!(done.is_ok(), "clean-up still running 5 s after the unlock");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_held_lock_with_a_server_down_is_taken_not_no_quorum() {
    // fc4d3a1: one server of three down, the lock held on the other two
    // all along: the wait ended as soon as the first said "busy", with the
    // second's WAIT still queued, counted as no reply: `NoQuorum` (the
    // CLI's "servers down", 69) instead of `Taken` (75).
    let mut nodes = Server::start_n(3);
    nodes[2].kill();
    for node in &nodes[..2] {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE h other 60000") > 0);
    }
    let waiter = locker(&nodes[..]);
    for wait_ms in [100, 300, 600] {
        let got = waiter.lock("h", Duration::from_millis(wait_ms)).await;
        assert!(matches!(got, Err(Error::Taken)), "{wait_ms} ms: {got:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_own_owners_short_wait_after_a_stalled_unlock_is_not_eaten_by_the_drain() {
    // 2026-11-28: three servers, C stopped; lock and unlock under
    // owner("me"): the RELEASE to C times out, so C is in doubt. The next
    // wait of "me" drained C (up to the node timeout) before its first
    // WAIT, and a 150 ms wait on a free name said `NoQuorum` after 1 s; on
    // a name held elsewhere a 1 ms wait said `NoQuorum`, not `Taken`. Now
    // A and B are asked while C drains.
    let nodes = Server::start_n(3);
    let locker = Builder::new(&urls(&nodes))
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let me = LockOptions::new().owner("me");
    // Every node connected before C stops.
    let lock = locker.acquire("warm", &me).await.unwrap();
    locker.unlock(&lock).await.unwrap();
    nodes[2].signal("STOP");
    let lock = locker.acquire("x", &me).await.unwrap();
    locker.unlock(&lock).await.unwrap(); // C's RELEASE timed out: in doubt
    let free = locker
        .acquire("free", &me.clone().wait(Duration::from_millis(150)))
        .await;
    let free = free.expect("a free name, with A and B up");
    locker.unlock(&free).await.unwrap();
    for node in &nodes[..2] {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE busy other 30000") > 0);
    }
    let busy = locker
        .acquire("busy", &me.clone().wait(Duration::from_millis(1)))
        .await;
    nodes[2].signal("CONT");
    assert!(
        matches!(busy, Err(Error::Taken)),
        "held by another owner on a majority: {busy:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_ends_by_its_deadline_plus_one_node_timeout() {
    // 2026-11-28: a hand-off late in a wait longer than TTL/2 needs an
    // extend round (the grants' validity counts from the first WAIT), and
    // if that fails a release: each took up to a node timeout, so lock()
    // returned ~2 node timeouts past its deadline (here 6.6 s for a 3 s
    // wait with a 2 s node timeout). Now every round after the deadline
    // ends by the deadline plus one node timeout. EXTENDs (and what
    // follows them on the connection) are held back 5 s on every path.
    let wait = Duration::from_secs(3);
    let node_timeout = Duration::from_secs(2);
    let nodes = Server::start_n(3);
    for (key, owner) in [("own", Some("me")), ("generated", None)] {
        let (proxies, via) = in_front_of(&nodes);
        let locker = Builder::new(&via)
            .ttl(Duration::from_secs(4))
            .node_timeout(node_timeout)
            .build()
            .unwrap();
        for node in &nodes {
            let cmd = format!("LOCK.ACQUIRE {key} other 30000");
            assert!(int(&mut node.conn(), &cmd) > 0);
        }
        for p in &proxies {
            p.delay("LOCK.EXTEND", Duration::from_secs(5));
        }
        let mut opts = LockOptions::new().ttl(Duration::from_secs(4)).wait(wait);
        if let Some(owner) = owner {
            opts = opts.owner(owner);
        }
        let started = Instant::now();
        let waiting = {
            let locker = locker.clone();
            tokio::spawn(async move { locker.acquire(key, &opts).await })
        };
        // Handed over at 2.6 s: the grants' validity (from the first WAIT,
        // at 0 s) is under TTL/2, so an extend round must confirm it.
        tokio::time::sleep_until((started + Duration::from_millis(2600)).into()).await;
        for node in &nodes {
            assert_eq!(
                int(&mut node.conn(), &format!("LOCK.RELEASE {key} other")),
                1
            );
        }
        let got = waiting.await.unwrap();
        let took = started.elapsed();
        println!(
            "{key}: {:?} after {took:?}",
            got.as_ref().map(|l| l.token())
        );
        // Slack for a loaded machine; before, 6.6 s.
        assert!(
            took < wait + node_timeout + Duration::from_millis(600),
            "{key}: returned {:?} past the deadline: {got:?}",
            took - wait
        );
        assert!(got.is_err(), "{key}: no extend round could confirm it");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn polling_rounds_end_by_the_deadline_plus_one_node_timeout() {
    // The same bound for polling rounds (`retry_count` set; also REENTRANT
    // and a module from before TICKET): a round begun just before the
    // deadline that no server answers took its node timeout, then its
    // release as long again (the RELEASE follows the unanswered ACQUIRE on
    // the connection): 6.6 s for a 3 s wait with a 2 s node timeout.
    let wait = Duration::from_secs(3);
    let node_timeout = Duration::from_secs(2);
    let nodes = Server::start_n(3);
    let (proxies, via) = in_front_of(&nodes);
    let locker = Builder::new(&via)
        .node_timeout(node_timeout)
        .retry_count(10_000)
        .retry_delay(Duration::from_millis(20), Duration::from_millis(40))
        .build()
        .unwrap();
    for node in &nodes {
        assert!(int(&mut node.conn(), "LOCK.ACQUIRE p other 30000") > 0);
    }
    let opts = LockOptions::new().owner("me").wait(wait);
    let started = Instant::now();
    let waiting = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.acquire("p", &opts).await })
    };
    // Rounds say "taken" at once until then; from then on none is answered.
    tokio::time::sleep_until((started + Duration::from_millis(2600)).into()).await;
    for p in &proxies {
        p.delay("LOCK.ACQUIRE", Duration::from_secs(5));
    }
    let got = waiting.await.unwrap();
    let took = started.elapsed();
    println!("{got:?} after {took:?}");
    assert!(
        took < wait + node_timeout + Duration::from_millis(600),
        "returned {:?} past the deadline: {got:?}",
        took - wait
    );
    assert!(got.is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_whose_time_reply_came_late_is_kept() {
    // 2026-11-28: a new connection reads its server's TIME (tickets and
    // token floors) before it is kept, inside the first request's node
    // timeout. A TIME reply later than that (a slow link or a server
    // briefly busy as the client connects) had the timeout drop the
    // connection unkept, and the next request opened another, with the
    // same end: the servers answered everything, and no lock was ever
    // granted. Here every server's TIME reply (and what follows it on its
    // connection) comes 700 ms late, with a 500 ms node timeout: the first
    // try fails, a later one must find the connections open.
    let nodes = Server::start_n(3);
    let proxies: Vec<RespProxy> = nodes.iter().map(|s| RespProxy::to(s.port)).collect();
    for p in &proxies {
        p.delay("TIME", Duration::from_millis(700));
    }
    let urls: Vec<String> = proxies.iter().map(RespProxy::url).collect();
    let locker = Builder::new(&urls)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let mut got = None;
    for attempt in 0..6 {
        let tried = locker.try_lock("late-time").await;
        println!("try {attempt}: {:?}", tried.as_ref().map(|l| l.token()));
        if let Ok(lock) = tried {
            got = Some(lock);
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let lock = got.expect("servers that answer every request must grant a free key");
    locker.unlock(&lock).await.unwrap();
}
