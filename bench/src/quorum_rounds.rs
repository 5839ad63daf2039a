//! Section 3's runs: every client at N = 1, 3, 5, in interleaved rounds
//! (round r runs every client once before round r + 1 starts), so a slow
//! spell of the machine lands in one round of every client instead of in
//! every round of one client. The figures are medians over rounds with
//! their min–max; ratios pair the two clients' figures round by round.

use crate::peers::{self, Kind};
use crate::quorum::{self, Client, Sample};
use crate::stats::Spread;
use std::sync::Arc;

pub const NS: [usize; 3] = [1, 3, 5];

/// One client at one N: its sample of each round it ran in.
pub struct Row {
    pub client: String,
    pub kind: Kind,
    pub n: usize,
    samples: Vec<(usize, Sample)>,
}

impl Row {
    pub fn spread(&self, f: impl Fn(&Sample) -> f64) -> Spread {
        Spread::of(&self.samples.iter().map(|(_, s)| f(s)).collect::<Vec<_>>())
    }
}

/// a's figure over b's, per round both ran in (a peer driver may have
/// failed in one).
pub fn paired(a: &Row, b: &Row, f: impl Fn(&Sample) -> f64) -> Spread {
    let ratios: Vec<f64> = a
        .samples
        .iter()
        .filter_map(|(r, sa)| {
            let (_, sb) = b.samples.iter().find(|(rb, _)| rb == r)?;
            Some(f(sa) / f(sb).max(1e-9))
        })
        .collect();
    Spread::of(&ratios)
}

#[derive(Default)]
pub struct Rounds {
    pub rows: Vec<Row>,
}

impl Rounds {
    fn add(&mut self, round: usize, n: usize, client: &str, kind: Kind, sample: Sample) {
        match self
            .rows
            .iter_mut()
            .find(|r| r.n == n && r.client == client)
        {
            Some(row) => row.samples.push((round, sample)),
            None => self.rows.push(Row {
                client: client.to_string(),
                kind,
                n,
                samples: vec![(round, sample)],
            }),
        }
    }

    pub fn at(&self, n: usize) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(move |r| r.n == n)
    }

    pub fn find(&self, n: usize, kind: Kind) -> Option<&Row> {
        self.at(n).find(|r| r.kind == kind)
    }
}

/// What runs in a round: one Rust client, or every peer driver (one
/// subprocess per driver).
enum Entry {
    Rust(&'static str, Kind, Arc<Client>),
    Peers,
}

async fn entries(urls: &[String]) -> Vec<Entry> {
    vec![
        Entry::Rust(
            "floor: 2x N PINGs joined on one task",
            Kind::Floor,
            Arc::new(Client::floor(urls).await),
        ),
        Entry::Rust(
            "floor, a task spawned per node (reference)",
            Kind::Reference,
            Arc::new(Client::floor_spawned(urls).await),
        ),
        Entry::Rust(
            "raw LOCK.* pair joined (no client logic)",
            Kind::Raw,
            Arc::new(Client::raw(urls).await),
        ),
        Entry::Rust(
            "redis-lock (fencing on)",
            Kind::Ours,
            Arc::new(Client::ours(urls, true)),
        ),
        Entry::Rust(
            "redis-lock (fencing off)",
            Kind::OursNoFencing,
            Arc::new(Client::ours(urls, false)),
        ),
        Entry::Rust("rslock 0.10.0", Kind::Peer, Arc::new(Client::rslock(urls))),
        Entry::Peers,
    ]
}

/// `rounds` interleaved rounds over the first 1, 3 and 5 of `urls`. Each
/// round also rotates the order of the clients, so none always runs first
/// (right after a Python process exits, say).
pub async fn run(urls: &[String], rounds: usize, iterations: usize, secs: f64) -> Rounds {
    let mut per_n = Vec::new();
    for n in NS {
        per_n.push((n, entries(&urls[..n]).await));
    }
    let mut out = Rounds::default();
    for round in 0..rounds {
        eprintln!("  round {}/{rounds}", round + 1);
        for (n, entries) in &per_n {
            let urls = &urls[..*n];
            for i in 0..entries.len() {
                match &entries[(i + round) % entries.len()] {
                    Entry::Rust(name, kind, client) => {
                        let s = quorum::measure(client.clone(), iterations, secs).await;
                        out.add(round, *n, name, *kind, s);
                    }
                    Entry::Peers => {
                        for (name, kind, s) in peers::quorum(urls, iterations, secs) {
                            out.add(round, *n, &name, kind, s);
                        }
                    }
                }
            }
        }
    }
    // Table order: the order of the first round's entries, not its rotation.
    out.rows.sort_by_key(|r| (r.n, rank(r.kind)));
    out
}

fn rank(kind: Kind) -> usize {
    match kind {
        Kind::Floor => 0,
        Kind::Reference => 1,
        Kind::Raw => 2,
        Kind::Ours => 3,
        Kind::OursNoFencing => 4,
        Kind::OursPython => 5,
        Kind::OursNode => 6,
        Kind::Peer => 7,
        Kind::NodePeer => 8,
        Kind::PythonPeer => 9,
    }
}
