//! Two URLs that reach one server the builder cannot see through (a unix
//! socket next to the TCP port, a proxy in front): `LOCK.SERVERID` on each
//! new connection keeps the second from voting.

use crate::common;
use common::*;
use redis_lock_client::{Builder, Error, LockOptions, Locker};
use redis_lock_testkit::proxy::DelayProxy;
use std::time::{Duration, Instant};

fn locker(urls: &[String]) -> Locker {
    Builder::new(urls)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(300))
        .build()
        .expect("the builder cannot tell these URLs apart")
}

/// `server` by TCP and again by `alias`, then `other`. With `other` down,
/// the server alone must not make a majority of 2 of 3.
async fn alias_gets_no_vote(server: &Server, alias: String, mut other: Server) {
    let urls = vec![server.url(), alias, other.url()];
    let l = locker(&urls);
    // All up: the lock is held by the server and `other` (2 of 3).
    let lock = l.try_lock("job").await.unwrap();
    l.unlock(&lock).await.unwrap();
    other.kill();
    // A late ACQUIRE of the first try through the second URL can hold the
    // server for a moment after the unlock (README): wait until it is free.
    assert!(eventually(Duration::from_secs(5), || status(
        &mut server.conn(),
        "job"
    )
    .is_none()));
    match l.try_lock("job").await {
        Err(e @ (Error::Rejected { .. } | Error::NoQuorum { .. })) => {
            assert!(e.to_string().contains("same server"), "{e}")
        }
        other => panic!("one server voted twice: {other:?}"),
    }
    // Waiting (LOCK.ACQUIRE ... WAIT on dedicated connections) too.
    let waited = l.lock("job2", Duration::from_millis(300)).await;
    assert!(waited.is_err(), "one server voted twice: {waited:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_unix_socket_of_a_listed_server_gets_no_vote() {
    let dir = std::env::temp_dir().join(format!("redis-lock-alias-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("redis.sock").display().to_string();
    let s = Server::with(&["--unixsocket", &socket, "--unixsocketperm", "700"], &[]);
    let other = Server::start();
    alias_gets_no_vote(&s, format!("redis+unix://{socket}"), other).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_in_front_of_a_listed_server_gets_no_vote() {
    let s = Server::start();
    let proxy = DelayProxy::to(s.port);
    let other = Server::start();
    alias_gets_no_vote(&s, proxy.url(), other).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_dbs_of_one_server_still_vote_apart() {
    // Allowed (README): one process, but two lock spaces.
    let s = Server::start();
    let other = Server::start();
    let urls = vec![s.url(), format!("{}1", s.url()), other.url()];
    let l = locker(&urls);
    let lock = l.try_lock("job").await.unwrap();
    let mut c = s.conn();
    q(&mut c, "SELECT 1").unwrap();
    assert!(status(&mut c, "job").is_some(), "db 1 voted");
    l.unlock(&lock).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_not_allowed_lock_serverid_is_refused_not_counted_apart() {
    // 269c0e3: a URL whose ACL user lacks LOCK.SERVERID was counted as a
    // server of its own, so next to a URL of the same server that can say,
    // that server voted twice: [A as that user, A, B] with B down got a lock.
    let a = Server::start();
    let mut b = Server::start();
    let acl = "ACL SETUSER locker on >pw resetkeys ~* -@all +ping +lock.acquire +lock.release +lock.extend +lock.status +lock.fence";
    q(&mut a.conn(), acl).unwrap();
    let proxy = DelayProxy::to(a.port);
    let urls = vec![
        proxy.url().replace("redis://", "redis://locker:pw@"),
        a.url(),
        b.url(),
    ];
    b.kill();
    let l = locker(&urls);
    let refused = |got: Result<_, Error>| match got {
        Err(e @ (Error::Rejected { .. } | Error::NoQuorum { .. })) => {
            assert!(e.to_string().contains("+lock.serverid"), "{e}")
        }
        other => panic!("one server voted twice: {other:?}"),
    };
    refused(l.try_lock("job").await);
    refused(l.lock("job", Duration::from_millis(300)).await);
    assert!(
        eventually(Duration::from_secs(2), || status(&mut a.conn(), "job")
            .is_none()),
        "left held"
    );
}

#[test]
fn serverid_is_the_run_id_and_differs_between_servers() {
    let [a, b] = [Server::start(), Server::start()];
    let id = |s: &Server| match q(&mut s.conn(), "LOCK.SERVERID").unwrap() {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    let run_id = info_field(&mut a.conn(), "server", "run_id");
    assert_eq!(id(&a), run_id);
    assert_eq!(id(&a), id(&a), "stable");
    assert_ne!(id(&a), id(&b));
    assert!(err(&mut a.conn(), "LOCK.SERVERID x").contains("wrong number of arguments"));
}

// the attacks fixed in 82fe3cf on the first version, which refused an alias node at
// connect time and kept a claim per node: each of these broke it.

#[tokio::test(flavor = "multi_thread")]
async fn after_the_server_restarts_a_waiting_acquire_still_counts_it_once() {
    // The claim of the node that kept the vote went stale with the restart,
    // the alias claimed the new run_id, and WAIT requests (dedicated
    // connections, never identified) went out through both.
    let mut s = Server::start();
    let proxy = DelayProxy::to(s.port);
    let mut other = Server::start();
    let l = locker(&[s.url(), proxy.url(), other.url()]);
    let lock = l.try_lock("warm").await.unwrap();
    l.unlock(&lock).await.unwrap();
    s.restart();
    other.kill();
    let opts = LockOptions::new().owner("me").wait(Duration::from_secs(1));
    let got = l.acquire("job", &opts).await;
    assert!(got.is_err(), "one server voted twice: {got:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_busy_while_connecting_is_still_counted_once() {
    // LOCK.SERVERID answered BUSY (a script running): the check was skipped
    // for the life of that connection.
    let s = Server::with(&["--lua-time-limit", "100"], &[]);
    let proxy = DelayProxy::to(s.port);
    let mut other = Server::start();
    let l = locker(&[s.url(), proxy.url(), other.url()]);
    let port = s.port;
    let script = std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let _: redis::RedisResult<redis::Value> = redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query(&mut c);
    });
    std::thread::sleep(Duration::from_millis(400));
    let _ = l.try_lock("during-busy").await;
    let _ = q(&mut s.conn(), "SCRIPT KILL");
    script.join().unwrap();
    other.kill();
    let got = l.try_lock("job").await;
    assert!(got.is_err(), "one server voted twice: {got:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_still_votes_once_after_its_first_path_went_away() {
    // The node that reached it first kept a claim after its proxy was gone,
    // and the live path was refused for good: 2 of 3 servers up, no lock.
    let s = Server::start();
    let p0 = DelayProxy::to(s.port);
    let p1 = DelayProxy::to(s.port);
    p1.delay("LOCK.SERVERID", Duration::from_millis(150)); // p0 connects first
    let other = Server::start();
    let l = locker(&[p0.url(), p1.url(), other.url()]);
    let lock = l.try_lock("warm").await.unwrap();
    l.unlock(&lock).await.unwrap();
    p1.clear();
    drop(p0);
    let lock = l
        .try_lock("job")
        .await
        .expect("the server through p1, and other");
    l.unlock(&lock).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_alias_keeps_its_connection() {
    // A refused alias used to open (and identify) a new connection for
    // every request.
    let s = Server::start();
    let proxy = DelayProxy::to(s.port);
    let other = Server::start();
    let l = locker(&[s.url(), proxy.url(), other.url()]);
    let connections = || {
        let n = info_field(&mut s.conn(), "stats", "total_connections_received");
        n.parse::<i64>().unwrap()
    };
    let before = connections();
    for _ in 0..50 {
        // The alias's own ACQUIRE goes through the delaying proxy and can
        // land after the unlock; that stray grant is given back in the
        // background, so "job" may be busy for a moment (failed once in a
        // fresh-clone make test of bc013c6).
        let started = Instant::now();
        let lock = loop {
            match l.try_lock("job").await {
                Ok(lock) => break lock,
                Err(Error::Taken) if started.elapsed() < Duration::from_secs(5) => {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
                Err(e) => panic!("{e}"),
            }
        };
        l.unlock(&lock).await.unwrap();
    }
    let opened = connections() - before - 1; // minus the one asking
    assert!(opened <= 4, "{opened} connections for 50 cycles");
}

/// A wait through the servers' queues with one server listed twice ends
/// with a `Config` error naming both URLs (it cannot order requests that
/// travel to one server on two connections: attack runs found two holders
/// three ways), and leaves nothing held.
async fn a_wait_through_two_urls_is_refused(reentrant: bool) {
    let a = Server::start();
    let b = Server::start();
    let p = DelayProxy::to(a.port);
    assert!(int(&mut b.conn(), "LOCK.ACQUIRE job y 60000") > 0);
    // The path through the proxy is slow: a WAIT sent through it before
    // the refusal would arrive after the clean-up's RELEASE and, with the
    // caller's own owner (not withdrawn later), hold A for its TTL
    // (269c0e3).
    p.delay("LOCK.ACQUIRE", Duration::from_millis(400));
    let l = locker(&[a.url(), p.url(), b.url()]);
    let opts = LockOptions::new()
        .owner("me")
        .reentrant(reentrant)
        .wait(Duration::from_secs(3));
    // First contact: every node is met before the first WAIT.
    match l.acquire("job", &opts).await {
        Err(Error::Config(msg)) => assert!(msg.contains("same server"), "{msg}"),
        other => panic!("a wait through two URLs of one server: {other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(status(&mut a.conn(), "job"), None, "left held");
    assert_eq!(
        command_calls(&mut a.conn(), "lock.acquire"),
        0,
        "a WAIT was sent"
    );
    // Known since: refused at once.
    let took = Instant::now();
    assert!(matches!(
        l.acquire("job", &opts).await,
        Err(Error::Config(_))
    ));
    assert!(took.elapsed() < Duration::from_millis(500));
    // Polling still works: B is held, so a try is refused, not an error.
    assert!(matches!(l.try_lock("job").await, Err(Error::Taken)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_through_two_urls_of_one_server_is_refused() {
    a_wait_through_two_urls_is_refused(false).await;
    a_wait_through_two_urls_is_refused(true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_see_each_server_once() {
    // 2f4670f: status said "held on 2 of 3" for a lock held on one server
    // listed twice, and release counted its two answers as a majority.
    let s = Server::start();
    let proxy = DelayProxy::to(s.port);
    let mut other = Server::start();
    let l = locker(&[s.url(), proxy.url(), other.url()]);
    assert!(int(&mut s.conn(), "LOCK.ACQUIRE job x 60000") > 0);
    let reports = l.status("job").await;
    let alias = reports[1]
        .1
        .as_ref()
        .expect_err("the alias reports no answer of its own");
    assert!(alias.contains("same server"), "{alias}");
    let state = redis_lock_client::quorum_state(&reports);
    assert!(
        !matches!(state, redis_lock_client::QuorumState::Held { .. }),
        "held on one server only: {state:?}"
    );
    other.kill();
    let released = l.force_release("job", "x").await;
    assert!(matches!(released[0].1, Ok(1)), "{released:?}");
    let alias = format!("{:?}", released[1].1);
    assert!(alias.contains("same server"), "{alias}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_release_that_came_through_the_alias_shows_at_the_first_url() {
    // The stop-23 flake, made certain: the server's first URL is a proxy
    // whose RELEASE is held back, so the second URL's (direct) releases
    // and the first's finds nothing. The report hid the 1 behind the
    // alias label: "not held" on every URL for a lock it had released.
    let s = Server::start();
    let proxy = DelayProxy::to(s.port);
    let other = Server::start();
    let l = locker(&[proxy.url(), s.url(), other.url()]);
    let _ = l.status("job").await; // both paths know the server now
    assert!(int(&mut s.conn(), "LOCK.ACQUIRE job x 60000") > 0);
    proxy.delay("LOCK.RELEASE", Duration::from_millis(100));
    let released = l.force_release("job", "x").await;
    assert!(matches!(released[0].1, Ok(1)), "{released:?}");
    let alias = format!("{:?}", released[1].1);
    assert!(alias.contains("same server as server 1 "), "{alias}");
    assert!(matches!(released[2].1, Ok(-1)), "{released:?}");
    assert_eq!(status(&mut s.conn(), "job"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_restarted_with_its_locks_mid_wait_is_still_counted_once() {
    // 2f4670f: its run_id changed while its locks survived (AOF), and a
    // waiting acquire counted its yes once under each run_id.
    let dir = std::env::temp_dir().join(format!("redis-lock-alias-aof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("redis.sock").display().to_string();
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--unixsocket",
        &socket,
        "--unixsocketperm",
        "700",
    ];
    let mut a = Server::with(&args, &[]);
    let b = Server::start();
    assert!(int(&mut b.conn(), "LOCK.ACQUIRE job y 60000") > 0); // B never free
    assert!(int(&mut a.conn(), "LOCK.ACQUIRE job x 60000") > 0);
    let l = locker(&[a.url(), format!("redis+unix://{socket}"), b.url()]);
    let w = {
        let l = l.clone();
        tokio::spawn(async move {
            let opts = LockOptions::new().owner("me").wait(Duration::from_secs(6));
            l.acquire("job", &opts).await
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(int(&mut a.conn(), "LOCK.RELEASE job x"), 1); // A hands off to W
    tokio::time::sleep(Duration::from_millis(20)).await;
    a.restart(); // the grant survives in the AOF
    let got = w.await.unwrap();
    assert!(
        got.is_err(),
        "one server voted twice across its restart: {got:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// One round of the race fixed in 890e3bc: client 1 waits on [A, A', B, B', C]
/// (two servers listed twice; C held by H), and its give-backs through A'
/// and B' are held 150 ms in the proxies. Client 2 on [A, B, C] locks in
/// that moment; then H lets C go. Both holding = two holders.
async fn shadow_give_back_race(fencing: bool) -> bool {
    let ab = Server::start_n(2);
    let (a, b) = (&ab[0], &ab[1]);
    let c = Server::start();
    let (pa, pb) = (DelayProxy::to(a.port), DelayProxy::to(b.port));
    for p in [&pa, &pb] {
        p.delay("LOCK.RELEASE", Duration::from_millis(150));
    }
    let mut h = c.conn();
    assert!(int(&mut h, "LOCK.ACQUIRE job H 30000") > 0);
    let build = |urls: Vec<String>| {
        Builder::new(&urls)
            .ttl(Duration::from_secs(10))
            .fencing(fencing)
            .build()
            .unwrap()
    };
    let c1 = build(vec![a.url(), pa.url(), b.url(), pb.url(), c.url()]);
    let c2 = build(vec![a.url(), b.url(), c.url()]);
    let t1 = tokio::spawn(async move {
        c1.acquire("job", &LockOptions::new().wait(Duration::from_secs(8)))
            .await
    });
    tokio::time::sleep(Duration::from_millis(1500)).await; // long hold-outs by now
    let began = Instant::now();
    while !(pa.holding() && pb.holding()) {
        if began.elapsed() > Duration::from_secs(5) {
            return false; // no give-back through both aliases at once
        }
        tokio::time::sleep(Duration::from_micros(300)).await;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    let Ok(l2) = c2.lock("job", Duration::from_millis(1000)).await else {
        return false;
    };
    int(&mut h, "LOCK.RELEASE job H");
    match t1.await.unwrap() {
        Ok(l1) => l1.validity() > Duration::ZERO && l2.validity() > Duration::ZERO,
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_give_back_through_a_slow_alias_cannot_free_a_grant_counted_again() {
    // 890e3bc: the counted URL's give-back was confirmed first and queued
    // again at once; the alias's RELEASE, still on its way, then freed that
    // new grant, and the server handed the lock to client 2: two holders
    // (3 of 3 runs without fencing; with it, the fencing round happened to
    // catch the stale grants).
    // Since then a wait refuses two URLs of one server (Config) as soon as
    // it sees them; this keeps the race itself under test.
    assert!(
        !shadow_give_back_race(false).await,
        "two holders without fencing"
    );
}

/// bb86c59: [S through a proxy, S's unix socket, T]. S starts without
/// the socket, so that URL first meets S after S restarted (new run_id Y,
/// now with the socket) while the proxy URL knew it as X. T goes down.
/// Then the proxy URL reconnects slowly (its LOCK.SERVERID held `slow`)
/// and links X to Y in the middle of the next call, after the socket URL's
/// yes was counted under Y. S must not make 2 of 3 alone.
async fn a_restart_link_made_mid_call(slow: Duration, opts: LockOptions) {
    let id = format!("{}-{}", std::process::id(), slow.as_millis());
    let dir = std::env::temp_dir().join(format!("redis-lock-link-{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("redis.sock").display().to_string();
    let mut s = Server::start();
    let pa = DelayProxy::to(s.port);
    let mut t = Server::start();
    let l = locker(&[pa.url(), format!("redis+unix://{socket}"), t.url()]);
    let lock = l.try_lock("warm").await.expect("S via the proxy, and T");
    l.unlock(&lock).await.unwrap();
    s.restart_with(&["--unixsocket", &socket, "--unixsocketperm", "700"], &[]);
    t.kill();
    // The proxy URL's dead connection is dropped; the socket URL meets Y.
    let _ = l.status("x").await;
    pa.delay("LOCK.SERVERID", slow);
    let got = l.acquire("job", &opts).await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(got.is_err(), "S alone made 2 of 3: {got:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_link_made_mid_round_still_counts_the_server_once() {
    a_restart_link_made_mid_call(Duration::from_millis(150), LockOptions::new()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_link_made_mid_wait_still_counts_the_server_once() {
    // Slower than the node timeout: the wait does not meet the proxy URL
    // before its first WAIT, and its reply must still be refused.
    let opts = LockOptions::new().owner("me").wait(Duration::from_secs(2));
    a_restart_link_made_mid_call(Duration::from_millis(400), opts).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_through_a_second_url_met_late_is_never_sent() {
    // d992c16: the second URL's path was slow to say who it reached (400
    // ms, not met before the first WAIT) and slow to carry ACQUIRE (800 ms).
    // Its WAIT went out right after its connection identified the server,
    // the wait ended with Config, and that WAIT then landed and held S for
    // its TTL under the caller's owner. Now it is refused before sending.
    let s = Server::start();
    let t = Server::start();
    assert!(int(&mut t.conn(), "LOCK.ACQUIRE job y 60000") > 0);
    let slow_acquire = DelayProxy::to(s.port);
    slow_acquire.delay("LOCK.ACQUIRE", Duration::from_millis(800));
    let slow_id = DelayProxy::to(slow_acquire.port);
    slow_id.delay("LOCK.SERVERID", Duration::from_millis(400));
    let l = locker(&[s.url(), slow_id.url(), t.url()]);
    let opts = LockOptions::new().owner("me").wait(Duration::from_secs(5));
    match l.acquire("job", &opts).await {
        Err(Error::Config(msg)) => assert!(msg.contains("same server"), "{msg}"),
        other => panic!("a wait through two URLs of one server: {other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(status(&mut s.conn(), "job"), None, "S left held");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_through_two_urls_of_one_server_and_no_other_names_the_list() {
    // Every server up, one listed twice: a731eb1 counts each answer to a
    // wait's reachability probe as a yes, once per server, so the two URLs
    // gave one yes of the two needed and the wait said NoQuorum, an
    // outage, instead of naming the list as a queued wait does.
    let a = Server::start();
    let p = DelayProxy::to(a.port);
    let l = locker(&[a.url(), p.url()]);
    match l.lock("job", Duration::from_secs(1)).await {
        Err(Error::Config(msg)) => assert!(msg.contains("same server"), "{msg}"),
        other => panic!("a wait through two URLs of one server: {other:?}"),
    }
    assert_eq!(status(&mut a.conn(), "job"), None, "left held");
}
