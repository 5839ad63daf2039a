//! Two URLs that reach one server the builder cannot see through (a unix
//! socket next to the TCP port, a proxy in front): `LOCK.SERVERID` on each
//! new connection keeps the second from voting.

mod common;
use common::*;
use redis_lock_client::{Builder, Error, Locker};
use redis_lock_testkit::proxy::DelayProxy;
use std::time::Duration;

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
async fn a_server_that_cannot_say_who_it_is_still_votes() {
    // An ACL without LOCK.SERVERID (the one documented before it existed):
    // the client cannot check, and works as before.
    let nodes = Server::start_n(3);
    let acl = "ACL SETUSER locker on >pw resetkeys ~* -@all +ping +lock.acquire +lock.release +lock.extend +lock.status +lock.fence";
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| {
            q(&mut n.conn(), acl).unwrap();
            format!("redis://locker:pw@127.0.0.1:{}/", n.port)
        })
        .collect();
    let l = locker(&urls);
    let lock = l.try_lock("job").await.unwrap();
    l.unlock(&lock).await.unwrap();
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
