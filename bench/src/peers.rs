//! Peer libraries in other languages, run as subprocesses that print JSON
//! (bench/peers/). Skipped, with a note, when their runtime is not installed.

use crate::contention::Row as ContentionRow;
use std::path::PathBuf;
use std::process::Command;

pub struct QuorumRow {
    pub client: String,
    pub p50_us: f64,
    pub p99_us: f64,
    pub tput: [f64; 3],
}

fn peers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers")
}

/// Each driver: `<driver> quorum|contention <urls,comma> <iterations> <secs>`,
/// one JSON object per line.
fn drivers() -> Vec<Vec<String>> {
    let dir = peers_dir();
    let mut out = Vec::new();
    let py = dir.join(".venv/bin/python");
    if py.exists() {
        out.push(vec![
            py.display().to_string(),
            dir.join("peers.py").display().to_string(),
        ]);
    }
    if dir.join("node_modules/redlock").exists() {
        out.push(vec![
            "node".into(),
            dir.join("peers.mjs").display().to_string(),
        ]);
    }
    out
}

fn run(args: &[String]) -> Vec<serde_json::Value> {
    let Ok(out) = Command::new(&args[0]).args(&args[1..]).output() else {
        return Vec::new();
    };
    if !out.status.success() {
        eprintln!(
            "peer driver {:?} failed: {}",
            args,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub fn quorum(urls: &[String], iterations: usize, secs: f64) -> Vec<QuorumRow> {
    let mut rows = Vec::new();
    for mut d in drivers() {
        d.extend([
            "quorum".into(),
            urls.join(","),
            iterations.to_string(),
            secs.to_string(),
        ]);
        for v in run(&d) {
            let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
            rows.push(QuorumRow {
                client: v["client"].as_str().unwrap_or("?").to_string(),
                p50_us: f("p50_us"),
                p99_us: f("p99_us"),
                tput: [f("tput1"), f("tput16"), f("tput64")],
            });
        }
    }
    rows
}

pub fn contention(url: &str, secs: f64) -> Vec<(String, ContentionRow)> {
    let mut rows = Vec::new();
    for mut d in drivers() {
        d.extend([
            "contention".into(),
            url.to_string(),
            "0".into(),
            secs.to_string(),
        ]);
        for v in run(&d) {
            let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
            rows.push((
                v["client"].as_str().unwrap_or("?").to_string(),
                ContentionRow {
                    sections_per_s: f("sections_per_s"),
                    handoff_p50_us: f("handoff_p50_us"),
                    handoff_p99_us: f("handoff_p99_us"),
                    max_wait_ms: f("max_wait_ms"),
                    wait_stddev_ms: f("wait_stddev_ms"),
                },
            ));
        }
    }
    rows
}
