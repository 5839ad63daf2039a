//! Section 3's verdicts: ratios of figures measured side by side, paired
//! round by round, as a grid of measures x N with the target and PASS/MISS
//! judged on the median. A ratio whose operand is missing (a peer runtime
//! not installed) says so instead of passing.

use crate::peers::Kind;
use crate::quorum::{Sample, TASKS};
use crate::quorum_rounds::{paired, Rounds, Row, NS};
use crate::stats::Spread;

#[derive(Clone, Copy)]
enum Target {
    AtLeast(f64),
    AtMost(f64),
}

impl Target {
    fn text(self) -> String {
        match self {
            Target::AtLeast(t) => format!(">= {t}x"),
            Target::AtMost(t) => format!("<= {t}x"),
        }
    }

    fn met(self, v: f64) -> bool {
        match self {
            Target::AtLeast(t) => v >= t,
            Target::AtMost(t) => v <= t,
        }
    }
}

/// One cell: the paired ratio, and what it was against when that varies.
struct Cell {
    ratio: Option<Spread>,
    against: Option<String>,
}

impl Cell {
    fn text(&self, target: Option<Target>) -> String {
        let Some(r) = self.ratio else {
            return "n/a (not measured)".into();
        };
        let vs = self
            .against
            .as_ref()
            .map_or(String::new(), |a| format!(" vs {a}"));
        let verdict = match target {
            Some(t) if t.met(r.median) => " PASS",
            Some(_) => " MISS",
            None => " (no target)",
        };
        format!("{}{vs}{verdict}", r.ratio())
    }
}

fn ratio(a: Option<&Row>, b: Option<&Row>, f: impl Fn(&Sample) -> f64) -> Cell {
    Cell {
        ratio: a.zip(b).map(|(a, b)| paired(a, b, f)),
        against: None,
    }
}

/// The peer (or Python peer) with the best median of `f`: highest when
/// `highest`, else lowest.
fn best(
    rounds: &Rounds,
    n: usize,
    pick: impl Fn(Kind) -> bool,
    f: impl Fn(&Sample) -> f64 + Copy,
    highest: bool,
) -> Option<&Row> {
    rounds.at(n).filter(|r| pick(r.kind)).max_by(|a, b| {
        let (a, b) = (a.spread(f).median, b.spread(f).median);
        let o = a.partial_cmp(&b).unwrap();
        if highest {
            o
        } else {
            o.reverse()
        }
    })
}

/// Grid rows as markdown table lines; each is also a summary line.
pub fn table(rounds: &Rounds) -> Vec<String> {
    type CellFn<'a> = Box<dyn Fn(&Rounds, usize) -> Cell + 'a>;
    type TargetFn = Box<dyn Fn(usize) -> Option<Target>>;
    let mut measures: Vec<(String, TargetFn, CellFn)> = Vec::new();
    for (t, tasks) in TASKS.iter().enumerate() {
        measures.push((
            format!("redis-lock / floor, ops/s x{tasks}"),
            Box::new(|_| Some(Target::AtLeast(0.9))),
            Box::new(move |r, n| {
                ratio(r.find(n, Kind::Ours), r.find(n, Kind::Floor), |s| s.tput[t])
            }),
        ));
    }
    // The floor's PINGs cost the servers less than LOCK.*; on a small box
    // the servers share the client's cores, so the commands alone already
    // sit below the floor. This is the client's own cost.
    for (t, tasks) in TASKS.iter().enumerate() {
        measures.push((
            format!("redis-lock / raw LOCK.* pair, ops/s x{tasks}"),
            Box::new(|_| None),
            Box::new(move |r, n| ratio(r.find(n, Kind::Ours), r.find(n, Kind::Raw), |s| s.tput[t])),
        ));
    }
    for (t, tasks) in TASKS.iter().enumerate() {
        measures.push((
            format!("raw LOCK.* pair / floor, ops/s x{tasks}"),
            Box::new(|_| None),
            Box::new(move |r, n| {
                ratio(r.find(n, Kind::Raw), r.find(n, Kind::Floor), |s| s.tput[t])
            }),
        ));
    }
    for (t, tasks) in TASKS.iter().enumerate() {
        measures.push((
            format!("redis-lock / fastest peer, ops/s x{tasks}"),
            Box::new(|_| Some(Target::AtLeast(1.2))),
            Box::new(move |r, n| {
                let peer = best(r, n, Kind::is_peer, move |s| s.tput[t], true);
                Cell {
                    against: peer.map(|p| p.client.clone()),
                    ..ratio(r.find(n, Kind::Ours), peer, |s| s.tput[t])
                }
            }),
        ));
    }
    measures.push((
        "redis-lock / floor, p50".into(),
        Box::new(|_| Some(Target::AtMost(1.1))),
        Box::new(|r, n| ratio(r.find(n, Kind::Ours), r.find(n, Kind::Floor), |s| s.p50_us)),
    ));
    // As for throughput: the commands alone against the floor, and the
    // client's own share of the latency.
    measures.push((
        "raw LOCK.* pair / floor, p50".into(),
        Box::new(|_| None),
        Box::new(|r, n| ratio(r.find(n, Kind::Raw), r.find(n, Kind::Floor), |s| s.p50_us)),
    ));
    measures.push((
        "redis-lock / raw LOCK.* pair, p50".into(),
        Box::new(|_| None),
        Box::new(|r, n| ratio(r.find(n, Kind::Ours), r.find(n, Kind::Raw), |s| s.p50_us)),
    ));
    measures.push((
        "redis-lock / floor, p99".into(),
        Box::new(|_| Some(Target::AtMost(1.5))),
        Box::new(|r, n| ratio(r.find(n, Kind::Ours), r.find(n, Kind::Floor), |s| s.p99_us)),
    ));
    measures.push((
        "fencing on / fencing off, p50".into(),
        Box::new(|_| Some(Target::AtMost(1.05))),
        Box::new(|r, n| {
            ratio(r.find(n, Kind::Ours), r.find(n, Kind::OursNoFencing), |s| {
                s.p50_us
            })
        }),
    ));
    measures.push((
        "Python package / Rust client, p50".into(),
        Box::new(|_| Some(Target::AtMost(1.2))),
        Box::new(|r, n| {
            ratio(r.find(n, Kind::OursPython), r.find(n, Kind::Ours), |s| {
                s.p50_us
            })
        }),
    ));
    measures.push((
        "fastest Python peer / Python package, p50".into(),
        // The bar is for quorums; at N = 1 redis-py's single-key Lock is
        // not a Redlock and is shown for information.
        Box::new(|n| (n >= 3).then_some(Target::AtLeast(3.0))),
        Box::new(|r, n| {
            let peer = best(r, n, |k| k == Kind::PythonPeer, |s| s.p50_us, false);
            Cell {
                against: peer.map(|p| p.client.clone()),
                ..ratio(peer, r.find(n, Kind::OursPython), |s| s.p50_us)
            }
        }),
    ));
    measures.push((
        "Node package / Rust client, p50".into(),
        Box::new(|_| Some(Target::AtMost(1.2))),
        Box::new(|r, n| {
            ratio(r.find(n, Kind::OursNode), r.find(n, Kind::Ours), |s| {
                s.p50_us
            })
        }),
    ));
    let x64 = TASKS.len() - 1;
    measures.push((
        format!("Node package / fastest Node peer, ops/s x{}", TASKS[x64]),
        Box::new(|_| Some(Target::AtLeast(1.5))),
        Box::new(move |r, n| {
            let peer = best(r, n, |k| k == Kind::NodePeer, move |s| s.tput[x64], true);
            Cell {
                against: peer.map(|p| p.client.clone()),
                ..ratio(r.find(n, Kind::OursNode), peer, |s| s.tput[x64])
            }
        }),
    ));
    measures
        .iter()
        .map(|(name, target, cell)| {
            let targets: Vec<String> = NS
                .iter()
                .map(|&n| target(n).map_or("–".into(), |t| t.text()))
                .collect();
            let mut targets_text = targets[0].clone();
            if targets.iter().any(|t| *t != targets[0]) {
                targets_text = format!("{} (N = 1) / {} (N >= 3)", targets[0], targets[1]);
            }
            let cells: Vec<String> = NS
                .iter()
                .map(|&n| cell(rounds, n).text(target(n)))
                .collect();
            format!("| {name} | {targets_text} | {} |", cells.join(" | "))
        })
        .collect()
}
