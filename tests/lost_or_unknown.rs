//! When `unlock` and `extend` say `Expired` (the lock is lost: CLI exit 76,
//! Python `LockLost`, an AutoLock's lost signal) and when `NoQuorum` (not
//! known): lost only once so many servers answered "not this owner's" that
//! no majority can hold it. An attack run (3f191a0) found both mistakes:
//! a lock taken by another client on a majority reported as unknown (its
//! watchdog kept a command running next to the new holder), and a lock
//! still held, or released by this very unlock, reported as lost.

mod common;
use common::*;
use redis_lock_client::{Builder, Error, LockOptions, Locker};
use std::time::Duration;

fn locker(urls: &[String], node_timeout_ms: u64) -> Locker {
    Builder::new(urls)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(node_timeout_ms))
        .build()
        .unwrap()
}

/// Someone else takes `name` on `s` (as after the lock expired there).
fn taken_over(s: &Server, name: &str) {
    let mut c = s.conn();
    q(&mut c, &format!("DEL {name}")).unwrap();
    assert!(int(&mut c, &format!("LOCK.ACQUIRE {name} bob 60000")) > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_extend_with_a_server_down_and_the_rest_taken_over_is_expired() {
    // Fail-fast ended the round at the down server's refusal (no majority
    // of yeses left) and called that NoQuorum; the others said "bob's".
    let mut s = Server::start_n(3);
    let l = locker(&urls(&s), 500);
    let mut locks = Vec::new();
    for i in 0..10 {
        locks.push(l.try_lock(&format!("k{i}")).await.unwrap());
    }
    s[0].kill();
    for (i, lock) in locks.iter_mut().enumerate() {
        let name = format!("k{i}");
        taken_over(&s[1], &name);
        taken_over(&s[2], &name);
        let extended = l.extend(lock).await;
        assert!(
            matches!(extended, Err(Error::Expired)),
            "{name}: {extended:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unlock_whose_release_ran_with_its_reply_lost_is_not_expired() {
    // The RELEASE ran, its reply was lost with the connection; sent again
    // it found the lock not held, which read as "lost" (CLI exit 76).
    let s = Server::start();
    let proxy = RespProxy::to(s.port);
    let l = locker(&[proxy.url()], 1000);
    let lock = l.try_lock("job").await.unwrap();
    proxy.lose_reply_of("LOCK.RELEASE");
    let unlocked = l.unlock(&lock).await;
    assert!(
        matches!(unlocked, Ok(()) | Err(Error::NoQuorum { .. })),
        "{unlocked:?}"
    );
    assert_eq!(status(&mut s.conn(), "job"), None, "released by the first");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_extend_through_a_server_listed_twice_sees_the_loss() {
    // The second URL's yes is no vote; it read as a failure, so a lock
    // taken over on the third server was never reported lost.
    let s = Server::start_n(2);
    let proxy = RespProxy::to(s[0].port);
    let via = [s[0].url(), proxy.url(), s[1].url()];
    let l = locker(&via, 500);
    let mut lock = l.try_lock("job").await.unwrap();
    taken_over(&s[1], "job");
    let extended = l.extend(&mut lock).await;
    assert!(matches!(extended, Err(Error::Expired)), "{extended:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reentrant_hold_that_lands_after_the_round_is_the_handles() {
    // Server 2 granted 0.9 s after a 300 ms round: that hold was neither
    // recorded nor released, so the unlock left it for a TTL and, with
    // server 1 lost meanwhile, said Expired though 0 and 2 held it.
    let s = Server::start_n(3);
    let (proxies, via) = in_front_of(&s);
    let l = locker(&via, 300);
    proxies[2].delay("LOCK.ACQUIRE", Duration::from_millis(900));
    let opts = LockOptions::new().reentrant(true);
    let lock = l.acquire("job", &opts).await.unwrap();
    let landed = eventually(Duration::from_secs(3), || {
        status(&mut s[2].conn(), "job").is_some()
    });
    assert!(landed, "the late grant never landed");
    std::thread::sleep(Duration::from_millis(100)); // its reply reaches the client
    q(&mut s[1].conn(), "DEL job").unwrap();
    let unlocked = l.unlock(&lock).await;
    assert!(matches!(unlocked, Ok(())), "{unlocked:?}");
    assert_eq!(status(&mut s[2].conn(), "job"), None, "late hold left");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_takeover_found_by_a_resent_release_is_expired() {
    // 4dd471c: the shared connection closed between renewals (a server
    // `timeout`, a reset); the RELEASE sent again found another owner's
    // lock, and that read as unknown: the CLI exited 0, not 76.
    let s = Server::start();
    let l = locker(&[s.url()], 1000);
    let lock = l.try_lock("job").await.unwrap();
    taken_over(&s, "job");
    q(&mut s.conn(), "CLIENT KILL TYPE normal SKIPME yes").unwrap();
    let unlocked = l.unlock(&lock).await;
    assert!(matches!(unlocked, Err(Error::Expired)), "{unlocked:?}");
}

/// Three servers, the third behind a proxy that holds back its clock
/// reading (`TIME`, 50 ms) and its ACQUIRE (300 ms, past the 100 ms node
/// timeout); the first two grant after 20 ms, so that a lock is won while
/// the third's new connection is open but still reading the clock. The
/// proxies, and the Locker, which has opened no connection yet.
fn racing_a_new_connection(s: &[Server]) -> (Vec<RespProxy>, Locker) {
    let proxies: Vec<RespProxy> = s.iter().map(|s| RespProxy::to(s.port)).collect();
    proxies[0].delay("LOCK.ACQUIRE", Duration::from_millis(20));
    proxies[1].delay("LOCK.ACQUIRE", Duration::from_millis(20));
    proxies[2].delay("TIME", Duration::from_millis(50));
    proxies[2].delay("LOCK.ACQUIRE", Duration::from_millis(300));
    let via: Vec<String> = proxies.iter().map(RespProxy::url).collect();
    let l = locker(&via, 100);
    (proxies, l)
}

/// `s` saw exactly one ACQUIRE, and holds nothing once it has run.
fn acquired_once_then_free(s: &Server) {
    let mut c = s.conn();
    let acquired = |c: &mut redis::Connection| command_calls(c, "lock.acquire") == 1;
    assert!(
        eventually(Duration::from_secs(2), || acquired(&mut c)),
        "the late ACQUIRE never reached the server"
    );
    assert!(
        eventually(Duration::from_secs(2), || status(&mut c, "job").is_none()),
        "the late grant was left held: {:?}",
        status(&mut c, "job")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grant_that_lands_after_the_round_and_the_unlock_is_given_back() {
    // CI on e6093a3: a connection still opening when try_lock won (its
    // clock reading held back) let the unlock's RELEASE overtake the
    // ACQUIRE, which was sent before the round's deadline and granted
    // after it; cut off at the deadline, that grant held the name on one
    // server for a TTL after the unlock.
    let s = Server::start_n(3);
    let (_proxies, l) = racing_a_new_connection(&s);
    let lock = l.try_lock("job").await.unwrap();
    l.unlock(&lock).await.unwrap();
    acquired_once_then_free(&s[2]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_callers_own_owner_unlock_goes_out_after_the_acquire_it_undoes() {
    // The same race with the caller's own owner, whose late grant is not
    // given back (it may be a newer call's): the first request on a new
    // connection is on it before anyone else's, so the unlock's RELEASE
    // runs after the ACQUIRE instead of overtaking it (CI on e6093a3).
    let s = Server::start_n(3);
    let (_proxies, l) = racing_a_new_connection(&s);
    let opts = LockOptions::new().owner("worker-1");
    let lock = l.acquire("job", &opts).await.unwrap();
    l.unlock(&lock).await.unwrap();
    acquired_once_then_free(&s[2]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unlock_leaves_no_clean_up_for_a_server_stopped_before_it_connected() {
    // Attack on 28688ae: a won lock's requests still connecting are kept a
    // TTL past the round's deadline for a generated owner too. With one
    // server of three stopped before the Locker first reached it (a host
    // whose TCP handshake completes but which never answers), the ACQUIRE
    // never leaves the connect, yet the unlocked lock's clean-up was
    // counted for the whole 10 s TTL: `background_done()` (the CLI's and
    // the bindings' exit, 2 s each) waited for a request that had nothing
    // on the wire to give back.
    let s = Server::start_n(3);
    s[2].signal("STOP");
    let l = locker(&urls(&s), 200);
    let lock = l.try_lock("job").await.unwrap();
    l.unlock(&lock).await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(3), l.background_done()).await;
    s[2].signal("CONT");
    assert!(
        done.is_ok(),
        "the clean-up of an unlocked lock waited for a server that never connected"
    );
    assert!(
        eventually(Duration::from_secs(2), || status(&mut s[2].conn(), "job")
            .is_none()),
        "held after the server resumed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unlock_goes_out_after_an_acquire_that_waited_for_the_connection_to_open() {
    // Attack on 7427d2a: only the request that opens a connection goes out
    // on it before anyone else's. One that came while it opened waits for
    // the opener's turn (the clock reading) and went out after requests
    // made later, which found the connection already shared: a caller's
    // own owner's unlock, sent meanwhile, overtook its ACQUIRE on the third
    // server, which then held the name there for the TTL.
    let s = Server::start_n(3);
    let proxy = RespProxy::to(s[2].port);
    // The third server's first connection identifies itself after 100 ms
    // and reads the clock 300 ms after that.
    proxy.delay("LOCK.SERVERID", Duration::from_millis(100));
    proxy.delay("TIME", Duration::from_millis(300));
    let l = locker(&[s[0].url(), s[1].url(), proxy.url()], 2000);
    let opener = tokio::spawn({
        let l = l.clone();
        async move {
            let lock = l.try_lock("other").await.unwrap();
            l.unlock(&lock).await.unwrap();
        }
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    // Granted by the first two; its ACQUIRE to the third waits for the
    // connection the opener is opening.
    let opts = LockOptions::new().owner("worker-1");
    let lock = l.acquire("job", &opts).await.unwrap();
    // Unlocked once that connection is shared, while it reads the clock.
    tokio::time::sleep(Duration::from_millis(150)).await;
    l.unlock(&lock).await.unwrap();
    opener.await.unwrap();
    let mut c = s[2].conn();
    assert!(
        eventually(Duration::from_secs(2), || status(&mut c, "job").is_none()),
        "the ACQUIRE landed after the unlock's RELEASE: {:?}",
        status(&mut c, "job")
    );
}
