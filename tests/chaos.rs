//! The chaos checker: a short safe run is clean, and the deliberately
//! unsafe configurations are caught (a checker that never fails proves
//! nothing). `make chaos` runs the long version.

use crate::common;
use common::*;
use std::process::Command;

fn chaos(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(workspace_binary("redis-lock-chaos"))
        .args(args)
        .output()
        .expect("redis-lock-chaos");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    println!("{text}");
    (out.status.code(), text)
}

fn metric(report: &str, name: &str) -> u64 {
    let line = report
        .lines()
        .find(|l| l.contains(name))
        .unwrap_or_else(|| panic!("no {name} in\n{report}"));
    line.trim_end_matches('|')
        .rsplit('|')
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Writers, readers of the same name and semaphore workers under LIMIT 2,
/// side by side: neither invariant broken, fencing holding.
#[test]
fn safe_run_under_all_nemeses_has_no_violation() {
    let (code, report) = chaos(&[
        "--seconds",
        "40",
        "--workers",
        "4",
        "--readers",
        "2",
        "--limited",
        "3",
        "--limit",
        "2",
    ]);
    assert_eq!(code, Some(0), "{report}");
    assert!(metric(&report, "acquisitions") >= 50, "{report}");
    assert!(metric(&report, "exclusive (writers)") > 0, "{report}");
    assert!(metric(&report, "shared (readers") > 0, "{report}");
    assert!(metric(&report, "limited (semaphore") > 0, "{report}");
    assert_eq!(metric(&report, "VIOLATIONS"), 0);
    assert!(
        report.contains("CrashRestart") && report.contains("ClockJump"),
        "{report}"
    );
}

#[test]
fn majority_restart_without_the_guard_is_caught() {
    let (code, report) = chaos(&[
        "--seconds",
        "15",
        "--workers",
        "6",
        "--ttl",
        "3000",
        "--unsafe",
        "no-guard",
    ]);
    assert_eq!(code, Some(1), "{report}");
    assert!(metric(&report, "strict violations") > 0, "{report}");
}

#[test]
fn set_nx_px_under_a_clock_jump_is_caught() {
    let (code, report) = chaos(&[
        "--seconds",
        "8",
        "--workers",
        "4",
        "--unsafe",
        "setnx-clock",
    ]);
    assert_eq!(code, Some(1), "{report}");
    assert!(metric(&report, "strict violations") > 0, "{report}");
}
