//! `redis-lock run --shared` and `run --limit N`, and `status` of a shared
//! key, against real servers.

use crate::common;
use common::*;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

fn cli(nodes: &[Server], args: &[&str]) -> Command {
    let mut c = Command::new(workspace_binary("redis-lock"));
    c.env("REDIS_LOCK_SERVERS", urls(nodes).join(","))
        .args(args);
    c
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "redis-lock-cli-shared-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The most intervals (start, end) that contain one instant.
fn most_at_once(intervals: &[(u128, u128)]) -> usize {
    intervals
        .iter()
        .map(|&(at, _)| {
            let inside = intervals.iter().filter(|&&(s, e)| s <= at && at < e);
            inside.count()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn the_most_at_once_counts_overlaps() {
    assert_eq!(most_at_once(&[(0, 10), (5, 15), (10, 20)]), 2);
    assert_eq!(most_at_once(&[(0, 10), (1, 9), (2, 8)]), 3);
    assert_eq!(most_at_once(&[(0, 1), (1, 2)]), 1);
}

/// Six contenders of `run --limit 2`, each recording its start and end
/// (the clock in ns, inside the lock) in a file of its own: never more than
/// two inside at once, every one served.
#[test]
fn run_limit_two_with_six_contenders_never_runs_more_than_two() {
    for n in [1, 3] {
        let nodes = Server::start_n(n);
        let dir = scratch(&format!("limit-{n}"));
        let contenders: Vec<Child> = (0..6)
            .map(|id| {
                let file = dir.join(format!("c{id}"));
                let script = format!(
                    "date +%s%N > {f}; sleep 0.3; date +%s%N >> {f}",
                    f = file.display()
                );
                cli(
                    &nodes,
                    &[
                        "run", "--limit", "2", "--wait", "60s", "slots", "--", "sh", "-c", &script,
                    ],
                )
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
            })
            .collect();
        for mut c in contenders {
            assert_eq!(c.wait().unwrap().code(), Some(0), "N={n}: served");
        }
        let intervals: Vec<(u128, u128)> = (0..6)
            .map(|id| {
                let text = std::fs::read_to_string(dir.join(format!("c{id}"))).unwrap();
                let t: Vec<u128> = text.lines().map(|l| l.parse().unwrap()).collect();
                assert_eq!(t.len(), 2, "N={n}: contender {id} ran to its end");
                (t[0], t[1])
            })
            .collect();
        let most = most_at_once(&intervals);
        assert!(most <= 2, "N={n}: {most} ran at once: {intervals:?}");
        for node in &nodes {
            assert_eq!(status(&mut node.conn(), "slots"), None, "N={n}: released");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Two `run --shared` hold the lock at once: each waits for the other's
/// mark, so both end only if they ran together. A run without --shared is
/// kept out meanwhile.
#[test]
fn run_shared_runs_together_and_keeps_an_exclusive_run_out() {
    let nodes = Server::start_n(3);
    let dir = scratch("shared");
    let waits_for = |me: &str, other: &str| {
        format!(
            "touch {d}/{me}; i=0; while [ ! -e {d}/{other} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; [ -e {d}/{other} ]",
            d = dir.display()
        )
    };
    let (a, b) = (waits_for("a", "b"), waits_for("b", "a"));
    let first = cli(&nodes, &["run", "--shared", "doc", "--", "sh", "-c", &a])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(std::time::Duration::from_secs(20), || dir
        .join("a")
        .exists()));
    let writer = cli(&nodes, &["run", "doc", "--", "true"]).output().unwrap();
    assert_eq!(writer.status.code(), Some(75), "kept out while read");
    let second = cli(
        &nodes,
        &["run", "-s", "--wait", "30s", "doc", "--", "sh", "-c", &b],
    )
    .output()
    .unwrap();
    assert_eq!(second.status.code(), Some(0), "the second reader ran");
    assert_eq!(first.wait_with_output().unwrap().status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn status_lists_a_shared_keys_holders() {
    let nodes = Server::start_n(3);
    for node in &nodes {
        for owner in ["r1", "r2"] {
            let line = format!("LOCK.ACQUIRE pool {owner} 30000 SHARED LIMIT 4");
            assert!(int(&mut node.conn(), &line) > 0);
        }
    }
    let out = cli(&nodes, &["status", "pool"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let shared = lines
        .iter()
        .filter(|l| l.contains("\tshared\tlimit=4\tholders=2"));
    assert_eq!(shared.count(), 3, "{text}");
    let holder = lines.iter().filter(|l| l.contains("\tholder\towner=r2\t"));
    assert_eq!(holder.count(), 3, "{text}");
    assert_eq!(
        lines.last().copied(),
        Some("quorum\tshared (limit 4) by r1 on 3 of 3, r2 on 3 of 3"),
        "{text}"
    );
    // A run under another limit is refused: bad settings, not contention.
    let other = cli(&nodes, &["run", "--limit", "5", "pool", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(78), "{other:?}");
    let bad = cli(&nodes, &["run", "--limit", "0", "pool", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(64));
}
