//! Section 4b: the hot key on a quorum. 16 clients on one key on N = 3 and
//! N = 5 servers, each looping lock(wait) -> empty section -> unlock: the
//! redis-lock clients through their public waiting API, the others polling
//! as their libraries do. Starvation shows as a client with 0 sections.

use crate::contention::{self, Row};
use crate::peers::{self, Kind};

pub const CLIENTS: usize = 16;
pub const NS: [usize; 2] = [3, 5];

/// Targets for the redis-lock rows (Rust, Python and Node).
pub const MAX_HANDOFF_P99_US: f64 = 2000.0;
pub const MAX_WAIT_MS: f64 = 100.0;

pub struct Measured {
    pub n: usize,
    pub client: String,
    pub kind: Kind,
    pub row: Row,
}

pub async fn run(urls: &[String], secs: f64) -> Vec<Measured> {
    let mut out = Vec::new();
    for n in NS {
        let urls = &urls[..n];
        let key = format!("qhot:{n}");
        out.push(Measured {
            n,
            client: "redis-lock lock(name, 30 s)".into(),
            kind: Kind::Ours,
            row: contention::native(urls, &key, CLIENTS, secs).await,
        });
        out.push(Measured {
            n,
            client: "rslock 0.10.0 (polling, 0-200 ms)".into(),
            kind: Kind::Peer,
            row: contention::rslock_polling(urls, &format!("{key}:rslock"), CLIENTS, secs).await,
        });
        for (client, kind, row) in peers::contention(urls, CLIENTS, secs) {
            out.push(Measured {
                n,
                client,
                kind,
                row,
            });
        }
    }
    out
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

/// Markdown lines of the targets table for the redis-lock rows; each is
/// also a summary line.
pub fn targets(rows: &[Measured]) -> Vec<String> {
    rows.iter()
        .filter(|m| matches!(m.kind, Kind::Ours | Kind::OursPython | Kind::OursNode))
        .map(|m| {
            let r = &m.row;
            format!(
                "| hot key N={} {} | hand-off p99 {:.0} us {} | longest wait {:.0} ms {} | fewest sections {} {} |",
                m.n,
                m.client,
                r.handoff_p99_us,
                verdict(r.handoff_p99_us <= MAX_HANDOFF_P99_US),
                r.max_wait_ms,
                verdict(r.max_wait_ms <= MAX_WAIT_MS),
                r.min_sections,
                verdict(r.min_sections > 0),
            )
        })
        .collect()
}
