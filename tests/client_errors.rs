//! Issue #11, safety 1 and errors 6: a server listed twice is refused, and
//! a server's deterministic refusal is its own error, not retried, not an
//! outage — in the crate and in the CLI's exit codes. Real servers.

mod common;
use common::*;
use redis_lock_client::{Builder, Error, LockOptions, Locker};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn locker(urls: &[String]) -> Locker {
    Builder::new(urls)
        .node_timeout(Duration::from_millis(200))
        .retry_delay(Duration::from_millis(5), Duration::from_millis(10))
        .build()
        .unwrap()
}

/// `LOCK.ACQUIRE` calls this server has seen (INFO commandstats).
fn acquire_calls(s: &Server) -> u64 {
    command_calls(&mut s.conn(), "lock.acquire")
}

fn cli(servers: &str, args: &[&str]) -> std::process::Output {
    Command::new(workspace_binary("redis-lock"))
        .env("REDIS_LOCK_SERVERS", servers)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_same_server_twice_is_a_config_error_naming_both() {
    let live = Server::start();
    let down = free_port(); // nobody listens: a majority needs both live URLs
    let (a, b) = (
        format!("redis://127.0.0.1:{}/", live.port),
        format!("redis://localhost:{}/", live.port),
    );
    for twin in [a.clone(), b] {
        let urls = [
            a.clone(),
            twin.clone(),
            format!("redis://127.0.0.1:{down}/"),
        ];
        match Builder::new(&urls).build() {
            Err(Error::Config(why)) => {
                assert!(why.contains(&a) && why.contains(&twin), "{why}")
            }
            Err(other) => panic!("expected Config, got {other}"),
            Ok(_) => panic!("{urls:?} accepted: one server would vote twice"),
        }
        // The CLI refuses before running anything.
        let marker = std::env::temp_dir().join(format!("redis-lock-dup-{}", live.port));
        let _ = std::fs::remove_file(&marker);
        let out = cli(
            &urls.join(","),
            &["run", "job", "--", "touch", marker.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(78), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("same server"));
        assert!(!marker.exists(), "the command must not run");
    }
    assert!(status(&mut live.conn(), "job").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn ttl_above_the_servers_maximum_is_rejected_once_not_retried() {
    let nodes: Vec<Server> = Server::start_n(3);
    for n in &nodes {
        q(&mut n.conn(), "CONFIG SET lock.max-ttl-ms 1000").unwrap();
    }
    let urls: Vec<String> = urls(&nodes);
    let err = locker(&urls)
        .acquire(
            "big",
            &redis_lock_client::LockOptions::new()
                .ttl(Duration::from_secs(5))
                .wait(Duration::from_secs(3)),
        )
        .await
        .unwrap_err();
    match &err {
        Error::Rejected { message, .. } => assert!(message.contains("maximum"), "{err}"),
        other => panic!("expected Rejected, got {other}"),
    }
    // The slowest node's request may still be on its way when the error
    // returns (two refusals decide it); it arrives once, never again.
    for n in &nodes {
        assert!(eventually(Duration::from_secs(2), || acquire_calls(n) >= 1));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for n in &nodes {
        assert_eq!(acquire_calls(n), 1, "one round, no retries");
    }
    let out = cli(
        &urls.join(","),
        &["run", "--ttl", "5s", "big", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("maximum"));
}

#[tokio::test(flavor = "multi_thread")]
async fn wrongtype_noperm_and_bad_passwords_are_rejected() {
    let server = Server::start();
    let mut c = server.conn();
    q(&mut c, "SET plain-string x").unwrap();
    q(
        &mut c,
        "ACL SETUSER limited on >pw ~* +@all -lock.acquire -lock.release",
    )
    .unwrap();
    let port = server.port;
    let cases = [
        (server.url(), "plain-string", "WRONGTYPE"),
        (
            format!("redis://limited:pw@127.0.0.1:{port}/"),
            "job",
            "NOPERM",
        ),
        (
            format!("redis://limited:nope@127.0.0.1:{port}/"),
            "job",
            "auth",
        ),
    ];
    for (url, name, expect) in cases {
        let err = locker(std::slice::from_ref(&url))
            .lock(name, Duration::from_secs(2))
            .await
            .unwrap_err();
        match &err {
            Error::Rejected { message, .. } => assert!(
                message.to_lowercase().contains(&expect.to_lowercase()),
                "{url}: {err}"
            ),
            other => panic!("{url}: expected Rejected, got {other}"),
        }
        let out = cli(&url, &["run", "--wait", "2s", name, "--", "true"]);
        assert_eq!(out.status.code(), Some(78), "{url}: {out:?}");
    }
    // Only the WRONGTYPE requests ran (ACL and AUTH refuse before): one
    // round from the crate and one from the CLI, no retries.
    assert_eq!(acquire_calls(&server), 2);
}

/// A user allowed to acquire but not to fence (a hand-written ACL), and a
/// replica listed by mistake, are refusals too: reported at once as
/// `Rejected` (CLI 78), not retried for the whole wait as an outage.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_fence_permission_and_a_replica_are_rejected_at_once() {
    // Node 1's counter is raised ahead (as by a fence from a peer whose
    // clock is ahead), so the two grants in differ and the fencing round
    // runs (the third node is stopped; with all three in, the middle token
    // is already on a majority). Fresh nodes alone agree: every grant is
    // at least the clock + 60 s.
    let nodes: Vec<Server> = Server::start_n(3);
    nodes[1].raise_token_counter(redis_lock_client::quorum::unix_micros() + 80_000_000);
    for n in &nodes {
        q(
            &mut n.conn(),
            "ACL SETUSER nofence on >pw ~* -@all +ping +lock.acquire +lock.release +lock.extend +lock.status +lock.serverid",
        )
        .unwrap();
    }
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| format!("redis://nofence:pw@127.0.0.1:{}/", n.port))
        .collect();
    nodes[2].signal("STOP");
    let started = std::time::Instant::now();
    let err = locker(&urls)
        .lock("f", Duration::from_secs(3))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Rejected { message, .. } if message.contains("NOPERM")),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "not retried until the wait ran out"
    );
    let out = cli(&urls.join(","), &["run", "--wait", "3s", "f", "--", "true"]);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    nodes[2].signal("CONT");

    let replica = Server::replica_of(&nodes[0], &[]);
    let err = locker(&[replica.url()])
        .lock("r", Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::Rejected { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_absurd_ttl_is_refused_not_wrapped_around() {
    // u64::MAX ms + 1001 ms used to reach the servers as 1000 ms while the
    // client counted validity from the whole TTL.
    let servers: Vec<Server> = Server::start_n(3);
    let urls: Vec<String> = urls(&servers);
    let locker = locker(&urls);
    for ttl in [
        Duration::from_millis(u64::MAX) + Duration::from_millis(1001),
        Duration::MAX,
    ] {
        let opts = redis_lock_client::LockOptions::new().ttl(ttl);
        let got = locker.acquire("huge", &opts).await;
        assert!(
            matches!(&got, Err(Error::Rejected { message, .. }) if message.contains("ttl-ms")),
            "{ttl:?}: {got:?}"
        );
        for s in &servers {
            assert_eq!(status(&mut s.conn(), "huge"), None);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_under_a_millisecond_still_tries_once() {
    let servers: Vec<Server> = Server::start_n(3);
    let urls: Vec<String> = urls(&servers);
    let locker = locker(&urls);
    for wait in [Duration::from_nanos(1), Duration::from_micros(999)] {
        let lock = locker
            .lock("tiny", wait)
            .await
            .unwrap_or_else(|e| panic!("{wait:?}: {e}"));
        locker.unlock(&lock).await.unwrap();
    }
}

#[test]
fn a_wait_cut_off_by_its_runtime_shutting_down_is_an_outage_not_a_config_error() {
    let servers: Vec<Server> = Server::start_n(3);
    let urls: Vec<String> = urls(&servers);
    for s in &servers {
        assert!(int(&mut s.conn(), "LOCK.ACQUIRE job other 10000") > 0);
    }
    let locker = locker(&urls);
    let first = tokio::runtime::Runtime::new().unwrap();
    // The queued wait starts on the first runtime (its task lives there)...
    let mut wait = Box::pin(locker.lock("job", Duration::from_secs(5)));
    let started = first.block_on(async {
        tokio::time::timeout(Duration::from_millis(100), &mut wait)
            .await
            .is_err()
    });
    assert!(started, "the lock is held by another owner: the call waits");
    drop(first);
    // ...and is finished on another, after the first shut down.
    let second = tokio::runtime::Runtime::new().unwrap();
    match second.block_on(wait) {
        Err(Error::NoQuorum {
            granted, failures, ..
        }) => {
            assert_eq!(granted, 0);
            assert_eq!(failures.len(), 3);
            assert!(failures[0].cause.contains("runtime"), "{failures:?}");
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
}

#[test]
fn a_polling_wait_cut_off_by_its_runtime_shutting_down_is_an_outage_not_a_panic() {
    // 446f4f4: only the queued wait was guarded; a wait with retry_count
    // (polling rounds) panicked on the first runtime's timer.
    let servers: Vec<Server> = Server::start_n(3);
    for s in &servers {
        assert!(int(&mut s.conn(), "LOCK.ACQUIRE job other 10000") > 0);
    }
    let polling = Builder::new(&urls(&servers))
        .retry_count(1000)
        .build()
        .unwrap();
    let first = tokio::runtime::Runtime::new().unwrap();
    let mut wait = Box::pin(polling.lock("job", Duration::from_secs(5)));
    let started = first.block_on(async {
        tokio::time::timeout(Duration::from_millis(120), &mut wait)
            .await
            .is_err()
    });
    assert!(started);
    drop(first);
    let second = tokio::runtime::Runtime::new().unwrap();
    match second.block_on(wait) {
        Err(Error::NoQuorum { failures, .. }) => {
            assert!(failures[0].cause.contains("runtime"), "{failures:?}")
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
}

/// A queued wait holding the free third server, dropped where its clean-up
/// could not be spawned as it was: outside any runtime (its own still
/// running), and on another runtime after being moved there (its own still
/// running, its WAITs held back on their way). 446f4f4: the clean-up was
/// lost both ways, and the abandoned call held servers for a whole TTL.
#[test]
fn a_wait_dropped_off_its_runtime_is_still_cleaned_up_on_it() {
    let servers: Vec<Server> = Server::start_n(3);
    let (proxies, via) = in_front_of(&servers);
    let locker = Builder::new(&via)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let own = tokio::runtime::Runtime::new().unwrap();
    let other = tokio::runtime::Runtime::new().unwrap();
    own.block_on(async {
        let warm = locker.try_lock("warm").await.unwrap();
        locker.unlock(&warm).await.unwrap();
    });
    let held = |key: &str| -> Vec<bool> {
        servers
            .iter()
            .map(|s| status(&mut s.conn(), key).is_some_and(|(o, ..)| o != b"other"))
            .collect()
    };
    for (round, moved) in [(0, false), (1, false), (2, true), (3, true)] {
        let key = format!("k{round}");
        let busy = if moved { &servers[..] } else { &servers[..2] };
        for s in busy {
            assert!(int(&mut s.conn(), &format!("LOCK.ACQUIRE {key} other 60000")) > 0);
        }
        if moved {
            for p in &proxies {
                p.delay("WAIT", Duration::from_millis(800));
            }
        }
        let mut wait = Box::pin(locker.lock(&key, Duration::from_secs(10)));
        let cut = own.block_on(async {
            tokio::time::timeout(Duration::from_millis(40 + 20 * round), &mut wait)
                .await
                .is_err()
        });
        assert!(cut, "still waiting");
        if moved {
            let got = other.block_on(&mut wait);
            assert!(matches!(got, Err(Error::NoQuorum { .. })), "{got:?}");
            other.block_on(async { drop(wait) });
            for s in &servers {
                assert_eq!(int(&mut s.conn(), &format!("LOCK.RELEASE {key} other")), 1);
            }
            std::thread::sleep(Duration::from_millis(1200)); // the WAITs land
        } else {
            drop(wait); // outside any runtime
        }
        assert!(
            eventually(Duration::from_secs(3), || held(&key).iter().all(|h| !h)),
            "round {round}: the abandoned call holds {:?}",
            held(&key)
        );
        for p in &proxies {
            p.clear();
        }
    }
}

#[test]
fn a_locker_outliving_its_first_runtime_works_at_once_on_the_next() {
    let servers: Vec<Server> = Server::start_n(3);
    let urls: Vec<String> = urls(&servers);
    let locker = locker(&urls);
    // A Locker in a static, used by one #[tokio::test] runtime after another.
    for round in 0..3 {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            // Shared connections, and the dedicated ones of a wait.
            let lock = locker.try_lock("job").await.unwrap_or_else(|e| {
                panic!("runtime {round}: the first call failed: {e}");
            });
            locker.unlock(&lock).await.unwrap();
            let lock = locker.lock("job", Duration::from_secs(2)).await.unwrap();
            locker.unlock(&lock).await.unwrap();
        });
    }
}

#[test]
fn stragglers_of_a_runtime_that_shut_down_do_not_break_another_runtimes_driver() {
    // A won try_lock leaves the stopped node's request in flight, handed to
    // a straggler driver with its round's timer. Rounds of a short-lived
    // runtime used to go to the driver of the first runtime, which then
    // polled a timer of a runtime that was gone: tokio panics there.
    let shutdown_panics = Arc::new(AtomicUsize::new(0));
    let seen = shutdown_panics.clone();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.to_string().contains("being shutdown") {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        default_hook(info);
    }));
    let servers: Vec<Server> = Server::start_n(3);
    let urls: Vec<String> = urls(&servers);
    let locker = Builder::new(&urls)
        .node_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let main = tokio::runtime::Runtime::new().unwrap();
    main.block_on(async {
        let lock = locker.try_lock("warm").await.unwrap();
        locker.unlock(&lock).await.unwrap();
    });
    servers[2].signal("STOP");
    // The first stragglers: a driver on `main`.
    main.block_on(async { drop(locker.try_lock("a").await.unwrap()) });
    for (i, current_thread) in [true, false].into_iter().enumerate() {
        let short = if current_thread {
            tokio::runtime::Builder::new_current_thread()
        } else {
            tokio::runtime::Builder::new_multi_thread()
        }
        .enable_all()
        .build()
        .unwrap();
        short.block_on(async { drop(locker.try_lock(&format!("b{i}")).await.unwrap()) });
        drop(short);
        std::thread::sleep(Duration::from_millis(100));
    }
    let still_works = main.block_on(async { locker.try_lock("c").await.is_ok() });
    servers[2].signal("CONT");
    assert!(still_works);
    assert_eq!(
        shutdown_panics.load(Ordering::SeqCst),
        0,
        "a driver panicked"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unlock_reaches_a_server_restarted_since_the_lock() {
    // The cached connection to a restarted server is dead. Failing an
    // unlock's RELEASE there left that node held for a TTL: a RELEASE of a
    // generated owner is sent once more on a new connection. (An ACQUIRE
    // is not: see tests/resend.rs.)
    let holder = |s: &Server| status(&mut s.conn(), "job").map(|s| s.0);
    let mut servers: Vec<Server> = Server::start_n(3);
    let urls: Vec<String> = urls(&servers);
    let locker = locker(&urls);
    let lock = locker.try_lock("job").await.unwrap();
    let owner = Some(lock.owner().as_bytes().to_vec());
    assert!(eventually(Duration::from_secs(2), || {
        servers.iter().all(|s| holder(s) == owner)
    }));
    // Restarted again while held; its lock back as if from its AOF.
    servers[2].restart();
    let again = format!("LOCK.ACQUIRE job {} 10000", lock.owner());
    assert!(int(&mut servers[2].conn(), &again) > 0);
    locker.unlock(&lock).await.unwrap();
    for s in &servers {
        assert_eq!(holder(s), None, "the unlock left a server held");
    }
}

type Wait = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

thread_local! {
    static KEPT: std::cell::RefCell<Option<Wait>> = const { std::cell::RefCell::new(None) };
}

/// The child side of the test below: a wait on `urls` cut off, kept in a
/// thread-local, and dropped by its destructor when the thread exits.
fn drop_a_wait_in_a_thread_local_destructor(urls: Vec<String>) {
    let locker = locker(&urls);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let handle = rt.handle().clone();
    std::thread::spawn(move || {
        // Touched first: its destructor runs after tokio's context is gone.
        KEPT.with(|k| k.borrow_mut().take());
        let mut wait: Wait = Box::pin(async move {
            let _ = locker.lock("tls", Duration::from_secs(10)).await;
        });
        let cut = handle.block_on(async {
            tokio::time::timeout(Duration::from_millis(150), &mut wait)
                .await
                .is_err()
        });
        assert!(cut, "still waiting");
        KEPT.with(|k| *k.borrow_mut() = Some(wait));
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(800)); // the clean-up runs on rt
}

/// f9619de: entering the call's runtime from a thread-local destructor
/// panicked there, which aborted the process, and the free server stayed
/// held for the TTL. Run in a child process (an abort would be its own).
#[test]
fn a_wait_dropped_by_a_thread_local_destructor_is_cleaned_up() {
    if let Ok(urls) = std::env::var("REDIS_LOCK_TEST_CHILD_URLS") {
        drop_a_wait_in_a_thread_local_destructor(urls.split(',').map(String::from).collect());
        return;
    }
    let servers: Vec<Server> = Server::start_n(3);
    for s in &servers[..2] {
        assert!(int(&mut s.conn(), "LOCK.ACQUIRE tls other 60000") > 0);
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "a_wait_dropped_by_a_thread_local_destructor_is_cleaned_up",
            "--exact",
        ])
        .env("REDIS_LOCK_TEST_CHILD_URLS", urls(&servers).join(","))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{err}", out.status);
    assert_eq!(status(&mut servers[2].conn(), "tls"), None, "{err}");
}

/// `min-replicas-to-write` (docs/production.md, Sentinel): a primary
/// without a good replica answers `-NOREPLICAS`, an outage that passes,
/// not a refusal: a short wait says NoQuorum naming it, and a wait that
/// outlasts it takes the lock once a replica is back.
#[tokio::test(flavor = "multi_thread")]
async fn noreplicas_is_waited_out_not_a_refusal() {
    let primary = Server::with(
        &[
            "--min-replicas-to-write",
            "1",
            "--min-replicas-max-lag",
            "10",
        ],
        &[],
    );
    let l = locker(&[primary.url()]);
    match l.lock("job", Duration::from_millis(300)).await {
        Err(Error::NoQuorum { failures, .. }) => {
            let why = format!("{failures:?}");
            assert!(why.contains("NOREPLICAS"), "{why}");
        }
        other => panic!("expected NoQuorum naming NOREPLICAS, got {other:?}"),
    }
    assert_eq!(status(&mut primary.conn(), "job"), None);
    let waiting = {
        let l = l.clone();
        tokio::spawn(async move { l.lock("job", Duration::from_secs(20)).await })
    };
    let _replica = Server::replica_of(&primary, &[]);
    let lock = waiting
        .await
        .unwrap()
        .expect("granted once the replica is back");
    let (owner, ..) = status(&mut primary.conn(), "job").expect("held on the primary");
    assert_eq!(owner, lock.owner().as_bytes());
}

/// A server without the module quotes the arguments of the command it does
/// not know, the owner among them, and the owner is what lets anyone
/// release the lock: it must not reach the error (and so the logs), while
/// the error still says what is wrong (2026-11-29).
#[tokio::test(flavor = "multi_thread")]
async fn a_server_without_the_module_is_named_without_the_owner() {
    let plain = Server::configured(&[]);
    let opts = LockOptions::new().owner("secret-owner-0b5e");
    let err = locker(&[plain.url()])
        .acquire("job", &opts)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Rejected { .. }), "{text}");
    assert!(!text.contains("secret-owner"), "{text}");
    assert!(text.contains("module"), "{text}");
}
