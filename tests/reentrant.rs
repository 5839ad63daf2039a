//! REENTRANT locks re-entered by a second handle (`owner(held.owner())`):
//! every RELEASE must take back a hold of its own handle, never another's.
//! Server-side holds are counted per owner, so a RELEASE sent where this
//! handle's ACQUIRE never landed drops the other handle's hold (attack run
//! 1033558: two holders both ways below, 5/5 and 6/6).

use crate::common;
use common::*;
use redis_lock_client::{Builder, Lock, LockOptions, Locker};
use std::time::Duration;

fn locker(urls: &[String]) -> Locker {
    Builder::new(urls)
        .ttl(Duration::from_secs(20))
        .node_timeout(Duration::from_millis(300))
        .retry_delay(Duration::from_millis(5), Duration::from_millis(10))
        .build()
        .unwrap()
}

/// The client's shared connection to `s` dies: the next request on it
/// fails before it is sent (and an ACQUIRE is never sent again).
fn kill_clients(s: &Server) {
    q(&mut s.conn(), "CLIENT KILL TYPE normal SKIPME yes").unwrap();
}

fn holds(servers: &[Server]) -> Vec<Option<i64>> {
    servers
        .iter()
        .map(|n| status(&mut n.conn(), "k").map(|h| h.3))
        .collect()
}

/// `first` still holds: nobody else can take the lock.
async fn still_exclusive(urls: &[String], first: &Lock) {
    let other = locker(urls).try_lock("k").await;
    assert!(
        other.is_err(),
        "taken by another client while the first handle holds it ({:?} valid)",
        first.validity()
    );
}

/// Three servers, a Locker over them, and "k" held REENTRANT (one hold on
/// each server).
async fn held_reentrant() -> (Vec<Server>, Vec<String>, Locker, Lock) {
    let s = Server::start_n(3);
    let urls = urls(&s);
    let l = locker(&urls);
    let first = l
        .acquire("k", &LockOptions::new().reentrant(true))
        .await
        .unwrap();
    // It returned at a majority: the third grant can still be on its way,
    // and a test that then kills a server's clients cut it (holds [2, None,
    // 2] once under load, 2026-11-28). Every test here starts from a hold
    // on all three, its reply in.
    let everywhere = eventually(Duration::from_secs(5), || holds(&s) == [Some(1); 3]);
    assert!(everywhere, "the first hold landed on every server");
    tokio::time::sleep(Duration::from_millis(100)).await;
    (s, urls, l, first)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_re_entry_gives_back_only_its_own_holds() {
    // The re-entry's ACQUIREs to servers 1 and 2 fail unsent: it fails, and
    // its clean-up RELEASEd everywhere, freeing the first handle there.
    let (s, urls, l, first) = held_reentrant().await;
    for n in &s[1..] {
        kill_clients(n);
    }
    let again = LockOptions::new().reentrant(true).owner(first.owner());
    assert!(
        l.acquire("k", &again).await.is_err(),
        "a minority re-entered"
    );
    assert_eq!(
        holds(&s),
        [Some(1), Some(1), Some(1)],
        "the first handle's holds"
    );
    still_exclusive(&urls, &first).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_re_entry_unlocks_only_where_it_landed() {
    // Each re-entry wins without one server (its connection dead), then its
    // unlock RELEASEd there too: after two, the first handle held one server.
    let (s, urls, l, first) = held_reentrant().await;
    let again = LockOptions::new().reentrant(true).owner(first.owner());
    for victim in [2, 1] {
        kill_clients(&s[victim]);
        let second = l.acquire("k", &again).await.unwrap();
        l.unlock(&second).await.unwrap();
        assert_eq!(
            holds(&s),
            [Some(1), Some(1), Some(1)],
            "after the re-entry missed {victim}"
        );
    }
    still_exclusive(&urls, &first).await;
    l.unlock(&first).await.unwrap();
    assert_eq!(holds(&s), [None, None, None]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_re_entrys_late_hold_is_given_back_by_its_unlock() {
    // Server 2 answers the re-entry late (after the majority): its hold
    // there is recorded when it lands and released by the unlock, once.
    let s = Server::start_n(3);
    let (proxies, via) = in_front_of(&s);
    let l = locker(&via);
    let first = l
        .acquire("k", &LockOptions::new().reentrant(true))
        .await
        .unwrap();
    proxies[2].delay("LOCK.ACQUIRE", Duration::from_millis(150));
    let again = LockOptions::new().reentrant(true).owner(first.owner());
    let second = l.acquire("k", &again).await.unwrap();
    assert!(eventually(Duration::from_secs(3), || holds(&s)
        == [Some(2), Some(2), Some(2)]));
    l.unlock(&second).await.unwrap();
    assert_eq!(holds(&s), [Some(1), Some(1), Some(1)]);
    l.unlock(&first).await.unwrap();
    assert_eq!(holds(&s), [None, None, None]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_renewed_reentrant_auto_lock_is_released_by_its_unlock() {
    // e95e3a9: renewed by its watchdog past its TTL, a REENTRANT AutoLock's
    // unlock judged it by the acquisition's validity, gave nothing back and
    // said Expired: held for another TTL.
    let s = Server::start_n(3);
    let urls = urls(&s);
    let l = Builder::new(&urls)
        .ttl(Duration::from_millis(1500))
        .node_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let guard = l
        .acquire_auto("k", &LockOptions::new().reentrant(true))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
    assert_eq!(holds(&s), [None, None, None]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shorter_re_entry_does_not_cut_the_first_handle_short() {
    // bcb62a7: a re-entry with a 500 ms TTL set every server's deadline
    // to 500 ms; unlocked, the lock then expired under the first handle
    // (20 s): another client took it (5/5).
    let (s, urls, l, first) = held_reentrant().await;
    let brief = LockOptions::new()
        .reentrant(true)
        .owner(first.owner())
        .ttl(Duration::from_millis(500));
    let second = l.acquire("k", &brief).await.unwrap();
    l.unlock(&second).await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(holds(&s), [Some(1), Some(1), Some(1)]);
    still_exclusive(&urls, &first).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unlock_that_could_not_reach_a_hold_is_no_quorum_not_expired() {
    // The CI failure fixed in 99ca348: a re-entry held two servers of three; its unlock's
    // RELEASE reached one, the other's connection had died (a REENTRANT
    // RELEASE is never resent). One yes and one failure: the lock was
    // still held there, yet the unlock said Expired (the CLI's "lost").
    let (s, _urls, l, first) = held_reentrant().await;
    let again = LockOptions::new().reentrant(true).owner(first.owner());
    kill_clients(&s[1]);
    let second = l.acquire("k", &again).await.unwrap(); // holds on 0 and 2
    assert_eq!(holds(&s), [Some(2), Some(1), Some(2)]);
    kill_clients(&s[2]);
    match l.unlock(&second).await {
        Err(redis_lock_client::Error::NoQuorum { granted, .. }) => assert_eq!(granted, 1),
        other => panic!("one release and one failure said {other:?}"),
    }
    assert_eq!(holds(&s), [Some(1), Some(1), Some(2)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hold_granted_after_the_rounds_deadline_is_given_back_by_the_unlock() {
    // 4dd471c: the round's deadline dropped server 2's request still on
    // its way (a round that waits for every reply, or a fencing wait that
    // runs past it); its grant landed later, unrecorded, and stayed a TTL
    // after an unlock that said Ok.
    let s = Server::start_n(3);
    let (proxies, via) = in_front_of(&s);
    let l = Builder::new(&via)
        .ttl(Duration::from_secs(20))
        .node_timeout(Duration::from_millis(300))
        .fail_fast(false)
        .build()
        .unwrap();
    let w = l.try_lock("warm").await.unwrap(); // connections open
    l.unlock(&w).await.unwrap();
    proxies[2].delay("LOCK.ACQUIRE", Duration::from_millis(900));
    let lock = l
        .acquire("k", &LockOptions::new().reentrant(true))
        .await
        .unwrap();
    assert!(eventually(Duration::from_secs(3), || holds(&s)[2] == Some(1)));
    std::thread::sleep(Duration::from_millis(100)); // its reply reaches the client
    l.unlock(&lock).await.unwrap();
    assert_eq!(holds(&s), [None, None, None]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reentrant_wait_ends_by_its_deadline_plus_one_node_timeout() {
    // 2026-11-28: a REENTRANT call first connects to every node (to refuse
    // two URLs of one server), and its deadline was counted from after
    // that: with a majority of the servers stopped (SIGSTOP: connections
    // are accepted, nothing is answered), a new Locker's wait of 300 ms
    // with a 1 s node timeout spent the node timeout meeting the nodes,
    // then its wait and one node timeout more.
    let wait = Duration::from_millis(300);
    let node_timeout = Duration::from_secs(1);
    let nodes = Server::start_n(3);
    let locker = Builder::new(&urls(&nodes))
        .ttl(Duration::from_secs(10))
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    nodes[1].signal("STOP");
    nodes[2].signal("STOP");
    let opts = LockOptions::new().owner("me").reentrant(true).wait(wait);
    let started = std::time::Instant::now();
    let got = locker.acquire("stopped", &opts).await;
    let took = started.elapsed();
    nodes[1].signal("CONT");
    nodes[2].signal("CONT");
    println!("{:?} after {took:?}", got.as_ref().map(|l| l.token()));
    assert!(got.is_err(), "a majority is stopped");
    // Slack for a loaded machine.
    assert!(
        took < wait + node_timeout + Duration::from_millis(500),
        "returned {:?} past the deadline",
        took.saturating_sub(wait)
    );
}
