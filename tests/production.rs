//! The README's production section, run: the shipped config include and
//! systemd drop-ins, the ACL user for lock clients, and scraping INFO lock.

use crate::common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// deploy/redis-lock.conf with its loadmodule line pointed at the built
/// module (the shipped file names the installed path).
fn include_file(dir: &Path) -> PathBuf {
    let shipped = std::fs::read_to_string(repo("deploy/redis-lock.conf")).unwrap();
    let lines: Vec<String> = shipped
        .lines()
        .map(|l| match l.strip_prefix("loadmodule ") {
            Some(path) => {
                assert!(
                    path.starts_with('/'),
                    "production path must be absolute: {path}"
                );
                format!("loadmodule {}", module_path().display())
            }
            None => l.to_string(),
        })
        .collect();
    let out = dir.join("redis-lock.conf");
    std::fs::write(&out, lines.join("\n")).unwrap();
    out
}

#[test]
fn the_shipped_include_restarts_without_a_guard() {
    let dir = std::env::temp_dir().join(format!("redis-lock-prod-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let include = include_file(&dir);
    // The shipped lines, with a short max TTL so the first guard passes soon.
    let include = include.to_str().unwrap();
    let mut s = Server::configured(&["--include", include, "--lock.max-ttl-ms", "1500"]);
    let mut c = s.conn();
    // A first start cannot tell a new disk from a wiped one: guarded.
    assert!(err(&mut c, "LOCK.ACQUIRE lock:job alice 1000").contains("TryAgain"));
    std::thread::sleep(std::time::Duration::from_millis(1600));
    s.restart(); // kill -9: the always-fsync'd AOF is loaded, no guard
    let mut c = s.conn();
    assert!(
        int(&mut c, "LOCK.ACQUIRE lock:job alice 1000") > 0,
        "no guard after an AOF load"
    );
    let config: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query(&mut c)
        .unwrap();
    assert_eq!(config[1], "always");
    let ttl: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("lock.max-ttl-ms")
        .query(&mut c)
        .unwrap();
    assert_eq!(ttl[1], "1500");
    let shipped = std::fs::read_to_string(repo("deploy/redis-lock.conf")).unwrap();
    assert!(shipped.contains("lock.max-ttl-ms 600000"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_systemd_drop_ins_keep_the_packaged_command_and_include_the_file() {
    for (unit, binary, conf) in [
        (
            "redis-server",
            "/usr/bin/redis-server",
            "/etc/redis/redis.conf",
        ),
        (
            "valkey-server",
            "/usr/bin/valkey-server",
            "/etc/valkey/valkey.conf",
        ),
    ] {
        let text = std::fs::read_to_string(repo(&format!(
            "deploy/systemd/{unit}.service.d/redis-lock.conf"
        )))
        .unwrap();
        let exec: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("ExecStart="))
            .collect();
        assert_eq!(
            exec[0], "ExecStart=",
            "{unit}: the packaged ExecStart must be reset first"
        );
        let words: Vec<&str> = exec[1]["ExecStart=".len()..].split_whitespace().collect();
        assert_eq!(&words[..2], &[binary, conf], "{unit}");
        let include = words
            .iter()
            .position(|w| *w == "--include")
            .expect("--include");
        assert!(words[include + 1].ends_with("/redis-lock.conf"));
        assert!(text.contains("--supervised systemd --daemonize no"));
    }
    // Where the packaged unit is installed, the drop-in repeats its command.
    if let Ok(packaged) = std::fs::read_to_string("/lib/systemd/system/redis-server.service") {
        let original = packaged
            .lines()
            .find(|l| l.starts_with("ExecStart="))
            .unwrap();
        let ours = std::fs::read_to_string(repo(
            "deploy/systemd/redis-server.service.d/redis-lock.conf",
        ))
        .unwrap();
        assert!(
            ours.contains(&format!("{original} --include")),
            "{original}"
        );
    }
}

/// The ACL user of the README: lock commands on `lock:*` keys, nothing else.
#[test]
fn the_lock_client_acl_user_can_lock_and_nothing_more() {
    let s = Server::start();
    let mut admin = s.conn();
    q(
        &mut admin,
        "ACL SETUSER locker on >s3cret resetkeys ~lock:* resetchannels -@all +ping +lock.acquire +lock.release +lock.extend +lock.status +lock.fence +lock.serverid",
    )
    .unwrap();
    let mut c = s.conn();
    q(&mut c, "AUTH locker s3cret").unwrap();
    assert!(int(&mut c, "LOCK.ACQUIRE lock:job w1 5000") > 0);
    assert_eq!(int(&mut c, "LOCK.EXTEND lock:job w1 6000"), 1);
    assert!(status(&mut c, "lock:job").is_some());
    assert_eq!(int(&mut c, "LOCK.RELEASE lock:job w1"), 1);
    let run_id = info_field(&mut admin, "server", "run_id");
    assert_eq!(
        q(&mut c, "LOCK.SERVERID").unwrap(),
        Value::BulkString(run_id.into_bytes()),
        "the quorum client's same-server check"
    );
    for denied in [
        "LOCK.ACQUIRE other w1 5000",
        "SET lock:job x",
        "DEL lock:job",
        "FLUSHALL",
        "RESTORE lock:x 0 x",
        "LOCK.APPLY lock:job w1 1 1000 1",
    ] {
        let e = err(&mut c, denied);
        assert!(
            e.contains("NOPERM") || e.contains("NoPerm") || e.contains("permission"),
            "{denied}: {e}"
        );
    }
}

/// The monitoring example of the README: a shell scrape of INFO lock.
#[test]
fn the_info_scrape_example_reports_the_alert_fields() {
    let s = Server::start();
    let mut c = s.conn();
    int(&mut c, "LOCK.ACQUIRE k holder 5000");
    assert_eq!(
        q(&mut c, "LOCK.ACQUIRE k waiter 1000 WAIT 20").unwrap(),
        Value::Nil
    );
    let script = format!(
        "redis-cli -p {} INFO lock | tr -d '\\r' | grep -E '^lock_(held|wait_timeouts|waiters|restart_guard_ms_left):'",
        s.port
    );
    let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "lock_held:1",
        "lock_wait_timeouts:1",
        "lock_waiters:0",
        "lock_restart_guard_ms_left:0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing from:\n{text}"
        );
    }
}

/// ed160dd: nothing said that `allkeys-*` eviction can drop a held lock
/// (a second holder's grant). Warned at load and when a policy is set.
#[test]
fn a_policy_that_can_evict_locks_is_warned_about() {
    let warning = "can evict lock keys";
    let s = Server::with(&["--maxmemory-policy", "allkeys-lru"], &[]);
    assert!(s.log().contains(warning), "{}", s.log());
    let s = Server::start();
    assert!(!s.log().contains(warning), "{}", s.log());
    q(&mut s.conn(), "CONFIG SET maxmemory-policy volatile-lru").unwrap();
    q(&mut s.conn(), "CONFIG SET maxmemory-policy allkeys-lfu").unwrap();
    q(&mut s.conn(), "CONFIG SET maxmemory-policy allkeys-random").unwrap();
    q(&mut s.conn(), "CONFIG SET lock.max-ttl-ms 5000").unwrap(); // unrelated: no line
    let warned = |n| s.log().matches(warning).count() == n;
    assert!(
        eventually(std::time::Duration::from_secs(2), || warned(2)),
        "{}",
        s.log()
    );
}
