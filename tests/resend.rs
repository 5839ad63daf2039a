//! A request whose reply was lost with its connection (the server ran it,
//! then the connection died) must not be sent again where a repeat changes
//! the outcome: an ACQUIRE (a second hold, or a grant landing after the
//! unlock's RELEASE), or the RELEASE of a caller's own REENTRANT lock (one
//! hold too many dropped: two holders). An attack run found each of these
//! when every broken request was resent (`Node::query_shared`). Replies are
//! lost by stopping the server with the request queued, then queueing a
//! `CLIENT KILL` behind it on another connection.

use crate::common;
use common::*;
use redis_lock_client::{Builder, LockOptions, Locker};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn servers(n: usize) -> Vec<Server> {
    Server::start_n(n)
}

fn locker(urls: &[String], timeout_ms: u64) -> Locker {
    Builder::new(urls)
        .ttl(Duration::from_secs(20))
        .node_timeout(Duration::from_millis(timeout_ms))
        .retry_delay(Duration::from_millis(5), Duration::from_millis(10))
        .build()
        .unwrap()
}

/// A raw connection, opened (and answered a PING) before the server stops.
fn raw(s: &Server) -> TcpStream {
    let mut t = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    t.write_all(b"PING\r\n").unwrap();
    let mut b = [0u8; 7];
    t.read_exact(&mut b).unwrap();
    t
}

/// Make the server process what it has queued and then drop the replies of
/// every other normal client: stopped, a CLIENT KILL is queued behind the
/// client's request (on a connection opened earlier), then CONT. Both are
/// read in one event-loop pass, the request first; the kill frees the
/// client before its reply is written. The request must have arrived
/// first: a kill ahead of it (a loaded machine sent it late) kills its
/// connection unread, and the client then sends it on a new one.
fn lose_replies(s: &Server, killer: &mut TcpStream) {
    s.await_unread_request();
    killer
        .write_all(b"CLIENT KILL TYPE normal SKIPME yes\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    s.signal("CONT");
    let mut b = [0u8; 64];
    let _ = killer.read(&mut b);
}

fn holder(s: &Server, key: &str) -> Option<(Vec<u8>, i64, i64, i64, i64)> {
    status(&mut s.conn(), key)
}

/// A REENTRANT ACQUIRE whose reply was lost on a killed connection was sent
/// once more: the server counted a second hold. It is not resent; and since
/// a REENTRANT handle releases only the holds it knows landed (elsewhere a
/// RELEASE would drop another handle's hold: tests/reentrant.rs), that one
/// server keeps the single unconfirmed hold until its TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_acquire_resent_leaves_a_hold_after_unlock() {
    let s = servers(3);
    let urls: Vec<String> = urls(&s);
    let l = locker(&urls, 2000);
    // Open every shared connection.
    let w = l.try_lock("warm").await.unwrap();
    l.unlock(&w).await.unwrap();
    let mut killer = raw(&s[2]);
    s[2].signal("STOP");
    let opts = LockOptions::new().owner("me").reentrant(true);
    let lock = l.acquire("job", &opts).await.unwrap(); // 0 and 1 grant; 2 straggles
    tokio::time::sleep(Duration::from_millis(50)).await;
    lose_replies(&s[2], &mut killer);
    tokio::time::sleep(Duration::from_millis(300)).await;
    l.unlock(&lock).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (i, n) in s[..2].iter().enumerate() {
        let st = holder(n, "job");
        assert!(st.is_none(), "node {i} still held after unlock: {st:?}");
    }
    let lost = holder(&s[2], "job").map(|h| h.3);
    assert!(lost <= Some(1), "node 2: {lost:?} holds (resent)");
}

/// The same with the lock acquired on all three, then re-entered, and the
/// second ACQUIRE's reply lost on two nodes: resent, it left two holds
/// there. Now one each at most after both unlocks (unconfirmed, they stay
/// until the TTL: the price of never dropping another handle's hold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_acquire_lost_on_a_majority_is_not_resent() {
    let s = servers(3);
    let urls: Vec<String> = urls(&s);
    let l = locker(&urls, 2000);
    let opts = LockOptions::new().owner("me").reentrant(true);
    let first = l.acquire("job", &opts).await.unwrap();
    let mut k1 = raw(&s[1]);
    let mut k2 = raw(&s[2]);
    s[1].signal("STOP");
    s[2].signal("STOP");
    let l2 = l.clone();
    let opts2 = opts.clone();
    let second = tokio::spawn(async move { l2.acquire("job", &opts2).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    lose_replies(&s[1], &mut k1);
    lose_replies(&s[2], &mut k2);
    // Its replies lost on a majority, the re-entry may fail (and give its
    // holds back); either way both handles are let go. (A server may send a
    // reply before it reads the kill: the re-entry then wins, and its
    // unlock's RELEASE on that killed connection fails: NoQuorum.)
    if let Ok(second) = second.await.unwrap() {
        let _ = l.unlock(&second).await;
    }
    l.unlock(&first).await.unwrap();
    for (i, n) in s.iter().enumerate() {
        let holds = holder(n, "job").map(|h| h.3);
        assert!(holds <= Some(1), "node {i}: {holds:?} holds (resent)");
    }
}

/// A won try_lock's straggler ACQUIRE (on an open connection, so driven but
/// not settled) and the unlock's RELEASE behind it on the same connection:
/// the connection dies with both unanswered, both are resent, and the
/// resent ACQUIRE may land after the resent RELEASE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn straggler_acquire_resent_after_the_unlocks_release() {
    let s = servers(3);
    let urls: Vec<String> = urls(&s);
    let mut bad = 0;
    let rounds = 10;
    for r in 0..rounds {
        let l = locker(&urls, 1500);
        let w = l.try_lock("warm").await.unwrap();
        l.unlock(&w).await.unwrap();
        let key = format!("job{r}");
        let mut killer = raw(&s[2]);
        s[2].signal("STOP");
        let lock = l.try_lock(&key).await.unwrap();
        let l2 = l.clone();
        let unlock = tokio::spawn(async move { l2.unlock(&lock).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        lose_replies(&s[2], &mut killer);
        let u = unlock.await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let st: Vec<_> = s.iter().map(|n| holder(n, &key)).collect();
        if st.iter().any(Option::is_some) {
            bad += 1;
            eprintln!("round {r}: unlock {u:?}, still held: {st:?}");
        }
    }
    assert_eq!(bad, 0, "{bad} of {rounds} unlocks left a node held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_release_resent_makes_two_holders() {
    let s = servers(3);
    let urls: Vec<String> = urls(&s);
    let l = locker(&urls, 2000);
    let opts = LockOptions::new().owner("svc").reentrant(true);
    let a = l.acquire("job", &opts).await.unwrap();
    let b = l.acquire("job", &opts).await.unwrap();
    let mut k1 = raw(&s[1]);
    let mut k2 = raw(&s[2]);
    s[1].signal("STOP");
    s[2].signal("STOP");
    let l2 = l.clone();
    let unlock_a = tokio::spawn(async move { l2.unlock(&a).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    lose_replies(&s[1], &mut k1);
    lose_replies(&s[2], &mut k2);
    let _ = unlock_a.await.unwrap();
    let other = locker(&urls, 300);
    let c = other.try_lock("job").await;
    assert!(
        c.is_err(),
        "another client locked while handle b (validity {:?}) still holds: servers {:?}",
        b.validity(),
        s.iter().map(|n| holder(n, "job")).collect::<Vec<_>>()
    );
}

/// A generated owner re-entered by a second handle (`owner(a.owner())`,
/// REENTRANT): the first handle's unlock RELEASE, its reply lost, was sent
/// again as a generated owner's may be, and dropped the second handle's
/// hold too: another client then took the lock from under it (b0d086f).
/// A REENTRANT lock's owner is shared, so its RELEASE is never resent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentered_generated_owner_is_not_released_twice() {
    let s = servers(3);
    let urls: Vec<String> = urls(&s);
    let l = locker(&urls, 2000);
    let first = l
        .acquire("job", &LockOptions::new().reentrant(true))
        .await
        .unwrap();
    assert!(!first.owner_is_private(), "REENTRANT: shared by design");
    let again = LockOptions::new().owner(first.owner()).reentrant(true);
    let second = l.acquire("job", &again).await.unwrap();
    let mut k1 = raw(&s[1]);
    let mut k2 = raw(&s[2]);
    s[1].signal("STOP");
    s[2].signal("STOP");
    let l2 = l.clone();
    let unlock = tokio::spawn(async move { l2.unlock(&first).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    lose_replies(&s[1], &mut k1);
    lose_replies(&s[2], &mut k2);
    let _ = unlock.await.unwrap(); // its replies are lost on two servers
    let other = locker(&urls, 300);
    assert!(
        other.try_lock("job").await.is_err(),
        "taken while the second handle holds it ({:?} valid)",
        second.validity()
    );
    // Resent, the RELEASE took the second handle's hold too: 0. Two where
    // the server read the kill before the RELEASE (it never ran).
    for (i, n) in s.iter().enumerate() {
        let holds = holder(n, "job").map(|h| h.3);
        assert!(
            matches!(holds, Some(1 | 2)),
            "node {i}: {holds:?} holds, the second handle's lost"
        );
    }
}
