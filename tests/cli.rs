//! The `redis-lock` CLI against real servers.

use crate::common;
use common::*;
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn cli_path() -> PathBuf {
    workspace_binary("redis-lock")
}

fn servers_arg(nodes: &[Server]) -> String {
    urls(nodes).join(",")
}

fn cli(nodes: &[Server], args: &[&str]) -> Command {
    cli_at(&servers_arg(nodes), args)
}

/// The CLI with `servers` (comma-separated URLs) as its server list.
fn cli_at(servers: &str, args: &[&str]) -> Command {
    let mut c = Command::new(cli_path());
    c.env("REDIS_LOCK_SERVERS", servers).args(args);
    c
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redis-lock-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[test]
fn run_passes_the_lock_to_the_command_and_its_exit_code_back() {
    let nodes: Vec<Server> = Server::start_n(3);
    let out = cli(
        &nodes,
        &[
            "run",
            "job",
            "--",
            "sh",
            "-c",
            "echo $REDIS_LOCK_NAME $REDIS_LOCK_TOKEN $REDIS_LOCK_OWNER; exit 7",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(7));
    let line = String::from_utf8(out.stdout).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[0], "job");
    assert!(words[1].parse::<u64>().unwrap() > 0);
    assert_eq!(words[2].len(), 32);
    assert!(
        nodes.iter().all(|n| status(&mut n.conn(), "job").is_none()),
        "released after exit"
    );
}

#[test]
fn busy_lock_gives_the_not_acquired_exit_code() {
    let nodes: Vec<Server> = Server::start_n(3);
    for n in &nodes {
        int(&mut n.conn(), "LOCK.ACQUIRE job someone-else 30000");
    }
    let started = Instant::now();
    let out = cli(&nodes, &["run", "--wait", "300ms", "job", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(75));
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not acquired"));
}

#[test]
fn eight_concurrent_clis_count_exactly() {
    let nodes: Vec<Server> = Server::start_n(5);
    let dir = scratch("counter");
    let file = dir.join("count");
    std::fs::write(&file, "0").unwrap();
    let body = format!(
        "n=$(cat {f}); sleep 0.01; echo $((n+1)) > {f}",
        f = file.display()
    );
    let rounds = 5;
    let procs: Vec<_> = (0..8)
        .map(|_| {
            let script = format!(
                "for i in $(seq {rounds}); do {cli} run --wait 60s --ttl 5s counter -- sh -c '{body}' || exit 1; done",
                cli = cli_path().display()
            );
            Command::new("sh")
                .arg("-c")
                .arg(script)
                .env("REDIS_LOCK_SERVERS", servers_arg(&nodes))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut p in procs {
        assert!(p.wait().unwrap().success());
    }
    let count: u32 = std::fs::read_to_string(&file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        count,
        8 * rounds,
        "no lost update: every increment ran under the lock"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn losing_the_lock_stops_the_command_with_its_own_exit_code() {
    let mut nodes: Vec<Server> = Server::start_n(5);
    let dir = scratch("lost");
    let pidfile = dir.join("pid");
    let mut run = cli(
        &nodes,
        &[
            "run",
            "--ttl",
            "500ms",
            // The node timeout is 25 ms: a loaded machine can miss one round.
            "--wait",
            "5s",
            "--grace",
            "500ms",
            "doomed",
            "--",
            "sh",
            "-c",
            &format!("echo $$ > {}; exec sleep 30", pidfile.display()),
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    assert!(eventually(Duration::from_secs(5), || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| !s.trim().is_empty())
    }));
    let child: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for n in &mut nodes[..3] {
        n.kill();
    }
    let killed = Instant::now();
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(76));
    assert!(
        killed.elapsed() < Duration::from_secs(3),
        "{:?}",
        killed.elapsed()
    );
    assert!(!alive(child), "the command was stopped");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("lost"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// 22529f6: the lock was taken over between two renewals and the command
/// ended before the next one: the release found it gone, and the CLI exited
/// 0 with nothing said.
#[test]
fn a_lock_found_lost_at_the_release_exits_76() {
    let nodes: Vec<Server> = Server::start_n(3);
    let dir = scratch("lost-at-release");
    let started = dir.join("started");
    let mut run = cli(
        &nodes,
        &[
            "run",
            "--ttl",
            "30s",
            "taken",
            "--",
            "sh",
            "-c",
            &format!("touch {}; sleep 1", started.display()),
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    assert!(eventually(Duration::from_secs(5), || started.exists()));
    for n in &nodes {
        q(&mut n.conn(), "FLUSHALL").unwrap();
        assert!(int(&mut n.conn(), "LOCK.ACQUIRE taken other 60000") > 0);
    }
    let status = run.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(76), "{err}");
    assert!(err.contains("was lost while the command ran"), "{err}");
    for n in &nodes {
        let (owner, ..) = redis_lock_testkit::status(&mut n.conn(), "taken").unwrap();
        assert_eq!(owner, b"other", "the other holder's lock stays");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// After exit 76 the CLI releases what is left on the nodes still up (their
/// copies were refreshed by the failed renewals), instead of leaving them
/// held until their TTL.
#[test]
fn a_lost_lock_is_released_where_it_is_left() {
    let mut nodes: Vec<Server> = Server::start_n(5);
    let dir = scratch("left");
    let started = dir.join("started");
    // Wait for the command, not for a node's grant: node 4 may hold the lock
    // while the CLI's acquisition still waits on the others' replies, and
    // killing those then fails the acquisition (69), not the held lock (76).
    let script = format!("touch {}; exec sleep 30", started.display());
    let mut run = cli(
        &nodes,
        &[
            "run", "--ttl", "3s", "--grace", "0s", "left", "--", "sh", "-c", &script,
        ],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    assert!(eventually(Duration::from_secs(10), || started.exists()));
    for n in &mut nodes[..3] {
        n.kill();
    }
    assert_eq!(run.wait().unwrap().code(), Some(76));
    for n in &nodes[3..] {
        assert!(
            redis_lock_testkit::status(&mut n.conn(), "left").is_none(),
            "left held after exit 76"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sigterm_is_forwarded_and_the_lock_released() {
    let nodes: Vec<Server> = Server::start_n(3);
    let dir = scratch("term");
    let ready = dir.join("ready");
    let script = format!(
        "trap 'exit 9' TERM; touch {}; while true; do sleep 0.05; done",
        ready.display()
    );
    let mut run = cli(&nodes, &["run", "job", "--", "sh", "-c", &script])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || ready.exists()));
    assert!(nodes.iter().all(|n| status(&mut n.conn(), "job").is_some()));
    // SAFETY: kill(2) on the CLI process this test started.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    assert_eq!(
        run.wait().unwrap().code(),
        Some(9),
        "the command's own exit code"
    );
    assert!(
        nodes.iter().all(|n| status(&mut n.conn(), "job").is_none()),
        "released"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn status_and_release_for_operators() {
    let nodes: Vec<Server> = Server::start_n(3);
    for n in &nodes[..2] {
        int(&mut n.conn(), "LOCK.ACQUIRE job stuck-owner 30000");
    }
    let out = cli(&nodes, &["status", "job"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("owner=stuck-owner").count(), 2, "{text}");
    assert_eq!(text.matches("free").count(), 1, "{text}");
    let out = cli(&nodes, &["release", "job", "--owner", "stuck-owner"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout)
            .unwrap()
            .matches("released")
            .count(),
        2
    );
    assert!(nodes.iter().all(|n| status(&mut n.conn(), "job").is_none()));
    let help = cli(&nodes, &["--help"]).output().unwrap();
    assert!(String::from_utf8(help.stdout)
        .unwrap()
        .contains("Exit codes"));
    let bad = cli(&nodes, &["run", "--ttl", "soon", "job", "--", "true"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid duration"));
}

#[test]
fn bad_command_lines_are_usage_errors_with_a_hint() {
    let nodes = [Server::start()];
    let out = cli(&nodes, &["run", "--ttl", "soon", "job", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid duration"));
    let out = cli(&nodes, &["run", "job", "echo", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you forget -- before the command?"));
    assert!(
        status(&mut nodes[0].conn(), "job").is_none(),
        "nothing acquired"
    );
}

#[test]
fn a_command_that_is_not_executable_exits_126_and_a_missing_one_127() {
    let nodes = [Server::start()];
    let dir = scratch("noexec");
    let file = dir.join("script.sh");
    std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap(); // mode 0644
    let out = cli(&nodes, &["run", "job", "--", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{out:?}");
    let out = cli(&nodes, &["run", "job", "--", "/nonexistent/command"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    assert!(status(&mut nodes[0].conn(), "job").is_none(), "released");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn status_prints_the_quorum_verdict_and_fails_without_a_majority() {
    let mut nodes: Vec<Server> = Server::start_n(3);
    for n in &nodes[..2] {
        int(&mut n.conn(), "LOCK.ACQUIRE job holder-a 30000");
    }
    let out = cli(&nodes, &["status", "job"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("quorum\theld by holder-a on 2 of 3"));
    let out = cli(&nodes, &["status", "free-one"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("quorum\tfree on 3 of 3"));
    nodes[0].kill();
    nodes[1].kill();
    let out = cli(&nodes, &["status", "job"]).output().unwrap();
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("only 1 of 3 servers answered"));
}

#[test]
fn conflict_exit_code_owner_and_help() {
    let nodes: Vec<Server> = Server::start_n(3);
    for n in &nodes {
        int(&mut n.conn(), "LOCK.ACQUIRE busy someone-else 30000");
    }
    let out = cli(
        &nodes,
        &["run", "--conflict-exit-code", "3", "busy", "--", "true"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(3), "like flock -E");
    // A chosen owner, shown without -v, can be released by hand.
    let out = cli(
        &nodes,
        &[
            "run",
            "--owner",
            "op-42",
            "free",
            "--",
            "sh",
            "-c",
            "echo $REDIS_LOCK_OWNER",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "op-42");
    assert!(String::from_utf8_lossy(&out.stderr).contains("owner op-42"));
    let help = cli(&nodes, &["run", "--help"]).output().unwrap();
    let text = String::from_utf8(help.stdout).unwrap();
    for needle in [
        "Exit codes",
        "75",
        "76",
        "69",
        "78",
        "126",
        "127",
        "--conflict-exit-code",
        "--owner",
    ] {
        assert!(text.contains(needle), "run --help lacks {needle}:\n{text}");
    }
}

/// A TTL the client cannot use is a bad argument like any other (64), not
/// bad settings (78), and the message says what is wrong with it.
#[test]
fn a_ttl_below_the_minimum_is_a_usage_error() {
    let nodes = [Server::start()];
    let out = cli(&nodes, &["run", "--ttl", "0s", "job", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--ttl") && err.contains("at least 10ms"),
        "{err}"
    );
    assert!(
        status(&mut nodes[0].conn(), "job").is_none(),
        "nothing acquired"
    );
}

/// A host name the resolver says does not exist is a typo in the settings
/// (78, naming the host), for every subcommand and even when a majority of
/// the other servers is fine; a server that is down is unavailable (69).
#[test]
fn an_unknown_host_is_bad_settings_and_a_down_server_unavailable() {
    let unknown = "redis://no-such-host.invalid:7000/";
    for args in [
        &["run", "job", "--", "true"][..],
        &["status", "job"],
        &["release", "job", "--owner", "x"],
    ] {
        let out = cli_at(unknown, args).output().unwrap();
        assert_eq!(out.status.code(), Some(78), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no-such-host.invalid"), "{args:?}: {err}");
    }
    let mut nodes: Vec<Server> = Server::start_n(2);
    let mixed = format!("{},{unknown}", servers_arg(&nodes));
    let out = cli_at(&mixed, &["run", "job", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    assert!(nodes.iter().all(|n| status(&mut n.conn(), "job").is_none()));
    let down = nodes[0].url();
    nodes[0].kill();
    let out = cli_at(&down, &["run", "job", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69), "{out:?}");
}

/// `release` tells "not held" (1) from "no majority answered" (69) and
/// from a refusal by the servers (78).
#[test]
fn release_tells_not_held_from_unreachable_and_refused() {
    let mut nodes: Vec<Server> = Server::start_n(3);
    let release = ["release", "job", "--owner", "nobody"];
    let out = cli(&nodes, &release).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .matches("not held")
            .count(),
        3
    );
    // One server still answers "not held": that is no majority.
    nodes[0].kill();
    nodes[1].kill();
    let out = cli(&nodes, &release).output().unwrap();
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    let mut c = nodes[2].conn();
    q(&mut c, "ACL SETUSER limited on >pw ~* +@all -lock.release").unwrap();
    let port = nodes[2].port;
    for url in [
        format!("redis://limited:pw@127.0.0.1:{port}/"),
        format!("redis://limited:wrong@127.0.0.1:{port}/"),
    ] {
        let out = cli_at(&url, &release).output().unwrap();
        assert_eq!(out.status.code(), Some(78), "{url}: {out:?}");
    }
    let help = cli(&nodes, &["release", "--help"]).output().unwrap();
    let text = String::from_utf8(help.stdout).unwrap();
    for needle in ["Exit codes", "\n  1 ", "\n  69 ", "\n  78 "] {
        assert!(
            text.contains(needle),
            "release --help lacks {needle:?}:\n{text}"
        );
    }
}

/// Owners are binary-safe: `status` prints them escaped, so a tab, newline
/// or terminal escape sequence in one cannot break the tab-separated lines
/// or reach the terminal.
#[test]
fn status_prints_owners_escaped() {
    let nodes: Vec<Server> = Server::start_n(3);
    let owner: &[u8] = b"a\tb\nc\x1b[31m\\d\xff\"q";
    for n in &nodes[..2] {
        run(&mut n.conn(), &[b"LOCK.ACQUIRE", b"job", owner, b"30000"]).unwrap();
    }
    let out = cli(&nodes, &["status", "job"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("escaped output is UTF-8");
    let shown = r#"a\tb\nc\u{1b}[31m\\d\xff"q"#;
    assert_eq!(text.lines().count(), 4, "{text}");
    assert_eq!(
        text.matches(&format!("\towner={shown}\ttoken=")).count(),
        2,
        "{text}"
    );
    assert!(
        text.contains(&format!("quorum\theld by {shown} on 2 of 3")),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "{text}");
}

/// Stderr a pipe nobody reads any more (`2>&1 | head -1` after head
/// exited, a supervisor whose log reader died).
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) into a local array; we close the read end at once and
    // hand the write end to Stdio, which owns it from then on.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        libc::close(fds[0]);
        Stdio::from(std::os::fd::OwnedFd::from_raw_fd(fds[1]))
    }
}

#[test]
fn a_closed_stderr_does_not_crash_the_cli() {
    // eprintln! panicked on EPIPE: exit 101, the command never ran and the
    // lock stayed held for its TTL.
    let nodes: Vec<Server> = Server::start_n(3);
    let dir = scratch("epipe");
    let ran = dir.join("ran");
    let code = cli(
        &nodes,
        &[
            "run",
            "job",
            "--",
            "sh",
            "-c",
            &format!("echo yes > {}", ran.display()),
        ],
    )
    .stderr(closed_pipe())
    .status()
    .unwrap()
    .code();
    assert_eq!(code, Some(0));
    assert!(ran.exists(), "the command ran");
    assert!(
        nodes.iter().all(|n| status(&mut n.conn(), "job").is_none()),
        "released"
    );
    for n in &nodes {
        int(&mut n.conn(), "LOCK.ACQUIRE job someone-else 30000");
    }
    let busy = cli(&nodes, &["run", "job", "--", "true"])
        .stderr(closed_pipe())
        .status()
        .unwrap();
    assert_eq!(busy.code(), Some(75), "held by another owner");
    let _ = std::fs::remove_dir_all(dir);
}

/// 22529f6: one server listed twice (here by a proxy in front of it)
/// leaves no majority of distinct servers: bad settings (78), as a wait
/// already said, not "servers down" (69) for `run`, `status` and `release`.
#[test]
fn a_server_listed_twice_is_bad_settings_everywhere() {
    let s = Server::start();
    let alias = DelayProxy::to(s.port);
    let servers = format!("{},{}", s.url(), alias.url());
    let code = |args: &[&str]| {
        let out = cli_at(&servers, args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.code(), err)
    };
    for args in [
        &["run", "job", "--", "true"][..],
        &["run", "--wait", "1s", "job", "--", "true"],
        &["status", "job"],
        &["release", "job", "--owner", "nobody"],
    ] {
        let (code, err) = code(args);
        assert_eq!(code, Some(78), "{args:?}: {err}");
        assert!(err.contains("reach the same server"), "{args:?}: {err}");
    }
    assert_eq!(redis_lock_testkit::status(&mut s.conn(), "job"), None);
}
