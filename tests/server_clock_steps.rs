//! Fencing tokens go up for every later holder of a name while the
//! servers' wall clocks are stepped (minutes ahead and back) under
//! connected clients: a lock request's token floor (`MINTOKEN`) comes from
//! the servers' clocks as read when each connection opened (2026-11-28),
//! so a long-lived client keeps readings from before a step while a new
//! one reads the stepped clocks.

use crate::common;
use common::*;
use redis_lock_client::{Builder, LockOptions, Locker};
use shim::ClockOffset;
use std::time::Duration;

fn locker(urls: &[String]) -> Locker {
    Builder::new(urls)
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_rise_across_holders_while_server_clocks_are_stepped() {
    let dir = tempfile_dir();
    let offsets: Vec<ClockOffset> = (0..3)
        .map(|i| {
            let d = dir.join(format!("n{i}"));
            std::fs::create_dir_all(&d).unwrap();
            ClockOffset::new(&d)
        })
        .collect();
    let nodes: Vec<Server> = offsets
        .iter()
        .map(|o| {
            let env = o.env();
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            Server::with_env(&[], &[], &env)
        })
        .collect();
    let urls = urls(&nodes);
    let old = locker(&urls);
    // Clocks (s) per server at each step: ahead, behind, a majority moved.
    // Clocks (s) per server at each step, within 60 s of each other.
    let steps: [[i64; 3]; 8] = [
        [0, 0, 0],
        [25, 0, 0],
        [25, -25, 0],
        [0, -25, -25],
        [-25, -25, -25],
        [30, 30, 30],
        [0, -29, 29],
        [0, 0, 0],
    ];
    let mut last = 0u64;
    let mut seen = Vec::new();
    for (k, step) in steps.iter().enumerate() {
        for (o, s) in offsets.iter().zip(step) {
            o.set(*s);
        }
        std::thread::sleep(Duration::from_millis(250));
        let fresh = locker(&urls);
        for (who, l) in [("old", &old), ("new", &fresh)] {
            for (how, wait) in [("try", Duration::ZERO), ("queued", Duration::from_secs(2))] {
                for owner in [None, Some("me")] {
                    let mut opts = LockOptions::new().wait(wait);
                    if let Some(o) = owner {
                        opts = opts.owner(o);
                    }
                    let lock = l.acquire("stepped", &opts).await;
                    let lock = match lock {
                        Ok(lock) => lock,
                        Err(e) => {
                            println!("step {k} {who} {how} {owner:?}: {e:?}");
                            continue;
                        }
                    };
                    let t = lock.token();
                    seen.push((k, who, how, t));
                    assert!(
                        t > last,
                        "step {k} ({step:?}) {who} {how} {owner:?}: token {t} after {last}: {seen:?}"
                    );
                    last = t;
                    l.unlock(&lock).await.unwrap();
                }
            }
        }
    }
    println!("{} holders, tokens rose: {seen:?}", seen.len());
    // Every one succeeds on a quiet machine; under CPU load a 2 s wait can
    // run out. The claim is the tokens' order, checked above for each.
    assert!(
        seen.len() >= 48,
        "most acquisitions succeed: {}",
        seen.len()
    );
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("clock-steps-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Fails on 2162e88 (a reproduction, ignored until fixed): a client keeps
/// its readings of the servers' clocks for 10 min unless its own wall
/// clock moves, so after every server's clock is stepped 120 s ahead (an
/// NTP correction) the clients connected before take tickets 120 s in the
/// servers' past and go first in every queue: 733 and 731 sections to 13
/// and 12 for two clients connected after, in 5 s on one hot name.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "fails: server clock readings are taken again only after 10 min"]
async fn tickets_stay_fair_after_every_servers_clock_steps_ahead() {
    let dir = tempfile_dir().join("fair");
    let offsets: Vec<ClockOffset> = (0..3)
        .map(|i| {
            let d = dir.join(format!("n{i}"));
            std::fs::create_dir_all(&d).unwrap();
            ClockOffset::new(&d)
        })
        .collect();
    let nodes: Vec<Server> = offsets
        .iter()
        .map(|o| {
            let env = o.env();
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            Server::with_env(&[], &[], &env)
        })
        .collect();
    let urls = urls(&nodes);
    let old: Vec<Locker> = (0..2).map(|_| locker(&urls)).collect();
    for l in &old {
        let lock = l.try_lock("warm").await.unwrap();
        l.unlock(&lock).await.unwrap();
    }
    for o in &offsets {
        o.set(120);
    }
    std::thread::sleep(Duration::from_millis(300));
    let new: Vec<Locker> = (0..2).map(|_| locker(&urls)).collect();
    let stop = std::time::Instant::now() + Duration::from_secs(5);
    let mut tasks = Vec::new();
    for (who, l) in old
        .into_iter()
        .map(|l| ("old", l))
        .chain(new.into_iter().map(|l| ("new", l)))
    {
        tasks.push(tokio::spawn(async move {
            let mut n = 0u32;
            while std::time::Instant::now() < stop {
                if let Ok(lock) = l.lock("fair", Duration::from_secs(3)).await {
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let _ = l.unlock(&lock).await;
                }
            }
            (who, n)
        }));
    }
    let (mut old_sections, mut new_sections) = (0, 0);
    for t in tasks {
        let (who, n) = t.await.unwrap();
        println!("{who}: {n}");
        match who {
            "old" => old_sections += n,
            _ => new_sections += n,
        }
    }
    assert!(
        new_sections * 4 >= old_sections,
        "clients connected after the step starved: {new_sections} sections to {old_sections}"
    );
}
