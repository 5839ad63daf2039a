//! Peer libraries in other languages, and this repository's Python and
//! Node packages, run as subprocesses that print JSON (bench/peers/). A driver whose
//! runtime is not installed is skipped with a note on stderr.

use crate::contention::Row as ContentionRow;
use crate::quorum::Sample;
use std::path::PathBuf;
use std::process::Command;

/// Who wrote a row: the ratio tables pick their operands by this.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// The round-trip floor the ratios divide by.
    Floor,
    /// A reference row shown but used in no ratio.
    Reference,
    /// The commands alone, joined like the floor (what the client costs).
    Raw,
    /// redis-lock's Rust client, fencing on (the default).
    Ours,
    /// redis-lock's Rust client, fencing off.
    OursNoFencing,
    /// redis-lock's Python package (the Rust client behind PyO3).
    OursPython,
    /// redis-lock's Node package (the Rust client behind napi-rs).
    OursNode,
    /// Another library in Rust.
    Peer,
    /// Another library in Node: the bar for the Node package.
    NodePeer,
    /// Another library in Python: the bar for the Python package.
    PythonPeer,
}

impl Kind {
    fn of(v: &serde_json::Value) -> Kind {
        match (v["role"].as_str(), v["lang"].as_str()) {
            (Some("ours"), Some("node")) => Kind::OursNode,
            (Some("ours"), _) => Kind::OursPython,
            (_, Some("python")) => Kind::PythonPeer,
            (_, Some("node")) => Kind::NodePeer,
            _ => Kind::Peer,
        }
    }

    pub fn is_peer(self) -> bool {
        matches!(self, Kind::Peer | Kind::NodePeer | Kind::PythonPeer)
    }
}

fn peers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers")
}

/// The venv `make python` builds the package into (setup.sh adds redis-py
/// and pottery to it), so `import redis_lock_client` works in peers.py.
/// BENCH_PYTHON overrides it.
fn python() -> PathBuf {
    std::env::var_os("BENCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/python-venv/bin/python")
        })
}

/// Each driver: `<driver> quorum <urls,comma> <iterations> <secs>` or
/// `<driver> contention <urls,comma> <clients> <secs>`, one JSON object per
/// line and client.
fn drivers() -> Vec<Vec<String>> {
    let dir = peers_dir();
    let mut out = Vec::new();
    let py = python();
    if py.exists() {
        out.push(vec![
            py.display().to_string(),
            dir.join("peers.py").display().to_string(),
        ]);
    } else {
        eprintln!(
            "{} missing (make python, bench/peers/setup.sh): Python rows skipped",
            py.display()
        );
    }
    if dir.join("node_modules/redlock").exists() {
        out.push(vec![
            "node".into(),
            dir.join("peers.mjs").display().to_string(),
        ]);
    } else {
        eprintln!("bench/peers/node_modules missing (bench/peers/setup.sh): Node rows skipped");
    }
    out
}

fn run(args: &[String]) -> Vec<serde_json::Value> {
    let Ok(out) = Command::new(&args[0]).args(&args[1..]).output() else {
        eprintln!("peer driver {args:?} did not start");
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

fn each(mode: &str, urls: &[String], arg: usize, secs: f64) -> Vec<serde_json::Value> {
    let mut rows = Vec::new();
    for mut d in drivers() {
        d.extend([
            mode.into(),
            urls.join(","),
            arg.to_string(),
            secs.to_string(),
        ]);
        rows.extend(run(&d));
    }
    rows
}

fn name(v: &serde_json::Value) -> String {
    v["client"].as_str().unwrap_or("?").to_string()
}

/// One round of every peer's sequential latency and throughput.
pub fn quorum(urls: &[String], iterations: usize, secs: f64) -> Vec<(String, Kind, Sample)> {
    each("quorum", urls, iterations, secs)
        .into_iter()
        .map(|v| {
            let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
            let sample = Sample {
                p50_us: f("p50_us"),
                p99_us: f("p99_us"),
                tput: [f("tput1"), f("tput16"), f("tput64")],
            };
            (name(&v), Kind::of(&v), sample)
        })
        .collect()
}

/// Every peer's hot key: `clients` looping on one key across `urls`.
pub fn contention(
    urls: &[String],
    clients: usize,
    secs: f64,
) -> Vec<(String, Kind, ContentionRow)> {
    each("contention", urls, clients, secs)
        .into_iter()
        .map(|v| {
            let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
            let row = ContentionRow {
                sections_per_s: f("sections_per_s"),
                handoff_p50_us: f("handoff_p50_us"),
                handoff_p99_us: f("handoff_p99_us"),
                max_wait_ms: f("max_wait_ms"),
                wait_stddev_ms: f("wait_stddev_ms"),
                min_sections: v["min_sections"].as_u64().unwrap_or(0) as usize,
            };
            (name(&v), Kind::of(&v), row)
        })
        .collect()
}
