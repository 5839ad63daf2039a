//! The chaos checker's analysis. Pure: worker log lines in, a report out.
//!
//! Each successful acquisition is logged by its worker as one line:
//! `ACQ owner token requested_ns acquired_ns valid_until_ns released_ns first_op last_op hold name`
//! where an op on the fenced resource is `at_ns:accepted|rejected|skipped`
//! (a write for an exclusive holder, a read for a shared one, none for a
//! limited one), `hold` is `x` (exclusive), `s` (shared) or `l<n>` (shared
//! under `LIMIT n`), times on the machine-wide monotonic clock. Failed
//! attempts are `ERR kind`. A line without `hold name` (the format before
//! shared holds) is an exclusive hold of `chaos`.
//!
//! Invariants, per lock name, over the windows of holders that held:
//! never an exclusive holder beside any other holder; never more than `n`
//! holders of a name taken under `LIMIT n`; tokens increasing; and no stale
//! write (or read) accepted by the fenced resource once a newer conflicting
//! holder was granted, whether the writer's window had ended (a paused
//! holder) or not (two holders at once: a replica promoted without the
//! grants its primary made, an old primary still granting).
//!
//! Each violation is kept with its time, so that a run can say which fault
//! (nemesis) it followed: `by_nemesis`.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteResult {
    Accepted,
    Rejected,
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub at: u64,
    pub result: WriteResult,
}

/// The kind of hold a worker took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    Exclusive,
    /// Shared without a limit: a reader of a read-write lock.
    Shared,
    /// Shared under `LIMIT n`: a semaphore's permit.
    Limited(u32),
}

impl Hold {
    /// The hold's word in a log line (and the worker's `--hold`).
    pub fn word(self) -> String {
        match self {
            Hold::Exclusive => "x".into(),
            Hold::Shared => "s".into(),
            Hold::Limited(n) => format!("l{n}"),
        }
    }

    /// The hold a log word names.
    pub fn parse(word: &str) -> Option<Hold> {
        match word {
            "x" => Some(Hold::Exclusive),
            "s" => Some(Hold::Shared),
            _ => word.strip_prefix('l')?.parse().ok().map(Hold::Limited),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub owner: String,
    pub token: u64,
    /// When the worker asked for the lock: the grant came after this.
    pub requested: u64,
    /// When the worker saw the lock (a worker paused in between sees it
    /// late, maybe with no validity left).
    pub acquired: u64,
    pub valid_until: u64,
    pub released: u64,
    /// The two operations on the fenced resource: writes of an exclusive
    /// holder, reads of a shared one, skipped for a limited one.
    pub writes: [Write; 2],
    pub hold: Hold,
    pub name: String,
}

impl Record {
    /// The holder's window: from the grant to the end of validity or the
    /// release, whichever is first.
    pub fn end(&self) -> u64 {
        self.valid_until.min(self.released)
    }

    /// A worker that saw its lock with no validity left never held it.
    fn held(&self) -> bool {
        self.end() > self.acquired
    }

    pub fn to_line(&self) -> String {
        let w = |w: &Write| {
            format!(
                "{}:{}",
                w.at,
                match w.result {
                    WriteResult::Accepted => "accepted",
                    WriteResult::Rejected => "rejected",
                    WriteResult::Skipped => "skipped",
                }
            )
        };
        format!(
            "ACQ {} {} {} {} {} {} {} {} {} {}",
            self.owner,
            self.token,
            self.requested,
            self.acquired,
            self.valid_until,
            self.released,
            w(&self.writes[0]),
            w(&self.writes[1]),
            self.hold.word(),
            self.name
        )
    }

    pub fn parse(line: &str) -> Option<Record> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (fields, hold, name) = match f.as_slice() {
            [fields @ .., hold, name] if fields.len() == 9 => (fields, Hold::parse(hold)?, *name),
            fields if fields.len() == 9 => (fields, Hold::Exclusive, "chaos"),
            _ => return None,
        };
        let [tag, owner, token, requested, acquired, valid_until, released, w1, w2] = fields else {
            return None;
        };
        if *tag != "ACQ" {
            return None;
        }
        let write = |s: &str| -> Option<Write> {
            let (at, res) = s.split_once(':')?;
            let result = match res {
                "accepted" => WriteResult::Accepted,
                "rejected" => WriteResult::Rejected,
                "skipped" => WriteResult::Skipped,
                _ => return None,
            };
            Some(Write {
                at: at.parse().ok()?,
                result,
            })
        };
        Some(Record {
            owner: owner.to_string(),
            token: token.parse().ok()?,
            requested: requested.parse().ok()?,
            acquired: acquired.parse().ok()?,
            valid_until: valid_until.parse().ok()?,
            released: released.parse().ok()?,
            writes: [write(w1)?, write(w2)?],
            hold,
            name: name.to_string(),
        })
    }
}

/// One violation, when it happened (the machine's monotonic clock, ns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub at: u64,
    pub what: &'static str,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub acquisitions: usize,
    pub exclusive: usize,
    pub shared: usize,
    pub limited: usize,
    /// An exclusive holder's window overlapping another holder's (mutual
    /// exclusion broken), counted once per holder that began inside one.
    pub overlaps: usize,
    /// A limited name held by more than its limit at once, counted once
    /// per holder that began as one too many.
    pub over_limit: usize,
    /// Most holders of a limited name seen at once (at most its limit).
    pub most_limited: usize,
    /// Most shared holders of a read-write name seen at once.
    pub most_shared: usize,
    /// A later holder got a token not above an earlier holder's.
    pub token_regressions: usize,
    /// Writes after the writer's window that fencing turned away.
    pub stale_rejected: usize,
    /// Writes after a newer holder was granted that the resource accepted.
    pub stale_accepted: usize,
    /// Reads after the reader's window that fencing turned away.
    pub stale_reads_rejected: usize,
    /// Reads after a newer writer was granted that the resource accepted.
    pub stale_reads_accepted: usize,
    /// Writes or reads inside the holder's own window that the resource
    /// accepted although a newer conflicting holder had been granted by
    /// then: a stale operation fencing could not catch (the newer holder
    /// had not written yet), which only two holders at once allow.
    pub superseded_accepted: usize,
    /// Writes or reads inside the holder's own window that fencing turned
    /// away: the resource had seen a newer conflicting holder's token
    /// while this one still believed it held (two holders at once, caught).
    pub superseded_rejected: usize,
    /// A hold taken again by its own owner with the same token: a renewal
    /// of a grant whose release was lost, judged at its first window.
    pub renewed: usize,
    pub no_quorum: usize,
    pub taken: usize,
    pub other_errors: usize,
    /// Every violation counted above, with its time.
    pub events: Vec<Event>,
}

impl Report {
    pub fn violations(&self) -> usize {
        self.overlaps
            + self.over_limit
            + self.token_regressions
            + self.stale_accepted
            + self.stale_reads_accepted
            + self.superseded_accepted
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = [
            ("acquisitions", self.acquisitions),
            ("  exclusive (writers)", self.exclusive),
            ("  shared (readers, same name)", self.shared),
            ("  limited (semaphore permits)", self.limited),
            (
                "strict violations (exclusive beside another)",
                self.overlaps,
            ),
            (
                "limit violations (more holders than the limit)",
                self.over_limit,
            ),
            (
                "most permits of the limited name held at once",
                self.most_limited,
            ),
            ("most readers holding at once", self.most_shared),
            ("fencing-token regressions", self.token_regressions),
            (
                "stale writes accepted by the fenced resource",
                self.stale_accepted,
            ),
            ("stale writes rejected by fencing", self.stale_rejected),
            (
                "stale reads accepted by the fenced resource",
                self.stale_reads_accepted,
            ),
            ("stale reads rejected by fencing", self.stale_reads_rejected),
            (
                "in-window ops accepted after a newer grant",
                self.superseded_accepted,
            ),
            (
                "in-window ops rejected by fencing",
                self.superseded_rejected,
            ),
            (
                "holds renewed by their owner (a lost release)",
                self.renewed,
            ),
            ("no-quorum errors", self.no_quorum),
            ("lock taken (contention)", self.taken),
            ("other errors", self.other_errors),
        ];
        for (name, n) in rows {
            writeln!(f, "| {name:<48} | {n:>8} |")?;
        }
        write!(f, "| {:<48} | {:>8} |", "VIOLATIONS", self.violations())
    }
}

/// Analyse every worker's log lines together.
pub fn analyse<'a>(lines: impl IntoIterator<Item = &'a str>) -> Report {
    let mut report = Report::default();
    let mut by_name: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    for line in lines {
        if let Some(r) = Record::parse(line) {
            by_name.entry(r.name.clone()).or_default().push(r);
        } else if let Some(kind) = line.strip_prefix("ERR ") {
            match kind.split_whitespace().next() {
                Some("no-quorum") => report.no_quorum += 1,
                Some("taken") => report.taken += 1,
                _ => report.other_errors += 1,
            }
        }
    }
    for records in by_name.values_mut() {
        records.sort_by_key(|r| r.acquired);
        report.acquisitions += records.len();
        for r in records.iter() {
            match r.hold {
                Hold::Exclusive => report.exclusive += 1,
                Hold::Shared => report.shared += 1,
                Hold::Limited(_) => report.limited += 1,
            }
        }
        holders(records, &mut report);
        tokens(records, &mut report);
        stale(records, &mut report);
    }
    report
}

/// Who held at once: a sweep by grant time over the windows still open.
/// Only holders that had a window take part (see `tokens`).
fn holders(records: &[Record], report: &mut Report) {
    let mut open: Vec<&Record> = Vec::new();
    for r in records.iter().filter(|r| r.held()) {
        open.retain(|o| o.end() > r.acquired);
        let exclusive = |o: &Record| o.hold == Hold::Exclusive;
        if open
            .iter()
            .any(|o| o.owner != r.owner && (exclusive(o) || exclusive(r)))
        {
            report.overlaps += 1;
            report.events.push(Event {
                at: r.acquired,
                what: "overlap",
            });
        }
        open.push(r);
        let count = |same: fn(Hold) -> bool| open.iter().filter(|o| same(o.hold)).count();
        match r.hold {
            Hold::Limited(n) => {
                let permits = count(|h| matches!(h, Hold::Limited(_)));
                report.most_limited = report.most_limited.max(permits);
                if permits > n as usize {
                    report.over_limit += 1;
                    report.events.push(Event {
                        at: r.acquired,
                        what: "over-limit",
                    });
                }
            }
            Hold::Shared => {
                let readers = count(|h| h == Hold::Shared);
                report.most_shared = report.most_shared.max(readers);
            }
            Hold::Exclusive => {}
        }
    }
}

/// Token order: a holder's token must exceed every token of a holder
/// whose window ended before this one's began. Only holders that had a
/// window take part: one whose worker saw its lock with no validity left
/// (paused after the grant, or its wait used the validity up) never held
/// it, and its grants may predate a holder that came and went meanwhile
/// (a 300 s run counted one such lock as a regression).
/// For two real windows of which one is exclusive the order is certain:
/// the later holder's grant on a node both quorums share came after the
/// earlier one's (they cannot have held together), and a node's counter
/// only grows. Two shared holders may hold together, so the later one's
/// grant is only known to follow the earlier one's end when it was
/// *requested* after that end: a permit granted first but seen late by
/// its worker (715 ms into its round) logged a window beginning after a
/// later-granted permit's end, which a 120 s run (2026-11-28) counted as
/// a regression.
fn tokens(records: &[Record], report: &mut Report) {
    let held: Vec<&Record> = records.iter().filter(|r| r.held()).collect();
    // (end, highest token of the windows ended by then), by end: of the
    // exclusive windows and of the shared ones.
    let ends = |exclusive: bool| {
        let mut v: Vec<(u64, u64)> = held
            .iter()
            .filter(|r| (r.hold == Hold::Exclusive) == exclusive)
            .map(|r| (r.end(), r.token))
            .collect();
        v.sort();
        let mut top = 0;
        for e in &mut v {
            top = top.max(e.1);
            e.1 = top;
        }
        v
    };
    let (exclusive, shared) = (ends(true), ends(false));
    let top_ended_by = |v: &[(u64, u64)], t: u64| match v.partition_point(|e| e.0 <= t) {
        0 => 0,
        n => v[n - 1].1,
    };
    // The first window of each grant (owner, token): a later window with
    // both the same is that grant again, not a later holder's.
    let mut first: std::collections::HashMap<(&str, u64), u64> = Default::default();
    for r in &held {
        first
            .entry((r.owner.as_str(), r.token))
            .or_insert(r.acquired);
    }
    for &r in &held {
        // Its release was lost (sent to a primary a failover had just
        // replaced, or one killed with it unreplicated) and the owner,
        // reusing its owner string, renewed the hold the server still had,
        // with its token (docs/safety.md, Known limits). The grant was
        // judged at its first window; a holder granted meanwhile elsewhere
        // (the old primary) is judged by the windows and the fence.
        if first[&(r.owner.as_str(), r.token)] < r.acquired {
            report.renewed += 1;
            continue;
        }
        let shared_since = if r.hold == Hold::Exclusive {
            r.acquired
        } else {
            r.requested
        };
        let top = top_ended_by(&exclusive, r.acquired).max(top_ended_by(&shared, shared_since));
        if r.token <= top {
            report.token_regressions += 1;
            report.events.push(Event {
                at: r.acquired,
                what: "token-regression",
            });
        }
    }
}

/// Stale operations: after the holder's window (a paused holder), or
/// inside it (two holders at once), while a newer conflicting holder had
/// been granted (any newer holder for a writer, a newer writer for a
/// reader: readers do not conflict with each other).
fn stale(records: &[Record], report: &mut Report) {
    for r in records {
        for w in &r.writes {
            if w.result == WriteResult::Skipped {
                continue;
            }
            let newer_granted = records.iter().any(|o| {
                o.token > r.token
                    && o.acquired < w.at
                    && (r.hold == Hold::Exclusive || o.hold == Hold::Exclusive)
            });
            let exclusive = r.hold == Hold::Exclusive;
            let late = w.at > r.end();
            let what = match (late, exclusive, w.result, newer_granted) {
                (false, _, WriteResult::Rejected, _) => {
                    report.superseded_rejected += 1;
                    continue;
                }
                (false, _, WriteResult::Accepted, true) => {
                    report.superseded_accepted += 1;
                    "superseded-op-accepted"
                }
                (true, true, WriteResult::Rejected, _) => {
                    report.stale_rejected += 1;
                    continue;
                }
                (true, true, WriteResult::Accepted, true) => {
                    report.stale_accepted += 1;
                    "stale-write-accepted"
                }
                (true, false, WriteResult::Rejected, _) => {
                    report.stale_reads_rejected += 1;
                    continue;
                }
                (true, false, WriteResult::Accepted, true) => {
                    report.stale_reads_accepted += 1;
                    "stale-read-accepted"
                }
                _ => continue,
            };
            report.events.push(Event { at: w.at, what });
        }
    }
}

/// One fault the run injected: its kind, when it began and ended (the
/// machine's monotonic clock, ns), and whether it failed to complete (a
/// failover that did not happen, a slot move refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strike {
    pub kind: String,
    pub start: u64,
    pub end: u64,
    pub failed: bool,
}

/// What followed one kind of fault: grants and violations from each
/// strike's start to the next strike's (whatever its kind), so a
/// violation is charged to the fault it came after.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct NemesisRow {
    pub kind: String,
    pub strikes: usize,
    pub failed: usize,
    /// Time spent inside the strikes themselves (s).
    pub seconds: f64,
    pub grants: usize,
    pub violations: usize,
}

/// The rows of `by_nemesis`'s table, one per kind in order of first
/// strike, after a row for the time before the first strike (`none`).
pub fn by_nemesis<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    report: &Report,
    strikes: &[Strike],
) -> Vec<NemesisRow> {
    let mut strikes: Vec<&Strike> = strikes.iter().collect();
    strikes.sort_by_key(|s| s.start);
    let mut rows: Vec<NemesisRow> = vec![NemesisRow {
        kind: "none (before the first)".into(),
        ..NemesisRow::default()
    }];
    let mut row_of_strike = Vec::with_capacity(strikes.len());
    for s in &strikes {
        let i = match rows.iter().position(|r| r.kind == s.kind) {
            Some(i) => i,
            None => {
                rows.push(NemesisRow {
                    kind: s.kind.clone(),
                    ..NemesisRow::default()
                });
                rows.len() - 1
            }
        };
        rows[i].strikes += 1;
        rows[i].failed += usize::from(s.failed);
        rows[i].seconds += s.end.saturating_sub(s.start) as f64 / 1e9;
        row_of_strike.push(i);
    }
    let row_at = |t: u64| match strikes.partition_point(|s| s.start <= t) {
        0 => 0,
        n => row_of_strike[n - 1],
    };
    for r in lines.into_iter().filter_map(Record::parse) {
        rows[row_at(r.acquired)].grants += 1;
    }
    for e in &report.events {
        rows[row_at(e.at)].violations += 1;
    }
    rows
}

/// `by_nemesis`'s rows as a Markdown table: grants and violations are
/// counted from each strike's start to the next strike's.
pub fn nemesis_table(rows: &[NemesisRow]) -> String {
    let mut out = format!(
        "| {:<28} | {:>6} | {:>6} | {:>8} | {:>12} | {:>10} |\n|{}|{}|{}|{}|{}|{}|",
        "nemesis",
        "struck",
        "failed",
        "seconds",
        "grants after",
        "violations",
        "-".repeat(30),
        "-".repeat(8),
        "-".repeat(8),
        "-".repeat(10),
        "-".repeat(14),
        "-".repeat(12),
    );
    for r in rows {
        out.push_str(&format!(
            "\n| {:<28} | {:>6} | {:>6} | {:>8.1} | {:>12} | {:>10} |",
            r.kind, r.strikes, r.failed, r.seconds, r.grants, r.violations
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(owner: &str, token: u64, acquired: u64, valid_until: u64, released: u64) -> Record {
        let w = Write {
            at: acquired + 1,
            result: WriteResult::Accepted,
        };
        Record {
            owner: owner.into(),
            token,
            requested: acquired.saturating_sub(1),
            acquired,
            valid_until,
            released,
            writes: [w.clone(), w],
            hold: Hold::Exclusive,
            name: "chaos".into(),
        }
    }

    fn with(hold: Hold, mut r: Record) -> Record {
        r.hold = hold;
        if let Hold::Limited(_) = hold {
            r.name = "pool".into();
            for w in &mut r.writes {
                w.result = WriteResult::Skipped;
            }
        }
        r
    }

    fn lines(rs: &[Record]) -> Vec<String> {
        rs.iter().map(Record::to_line).collect()
    }

    fn report(rs: &[Record]) -> Report {
        let l = lines(rs);
        analyse(l.iter().map(String::as_str))
    }

    #[test]
    fn lines_round_trip() {
        let r = rec("a", 5, 10, 20, 15);
        assert_eq!(Record::parse(&r.to_line()), Some(r.clone()));
        for hold in [Hold::Shared, Hold::Limited(3)] {
            let r = with(hold, r.clone());
            assert_eq!(Record::parse(&r.to_line()), Some(r));
        }
        assert_eq!(Record::parse("ERR taken"), None);
        // A line of the format before shared holds: exclusive, on `chaos`.
        let old = "ACQ a 5 9 10 20 15 11:accepted 11:accepted";
        assert_eq!(Record::parse(old), Some(r));
    }

    #[test]
    fn back_to_back_holders_are_fine() {
        let report = report(&[
            rec("a", 1, 0, 100, 50),
            rec("b", 2, 50, 150, 120),
            rec("c", 3, 130, 300, 200),
        ]);
        assert_eq!(report.acquisitions, 3);
        assert_eq!(report.violations(), 0, "{report}");
    }

    #[test]
    fn overlapping_windows_are_violations() {
        let report = report(&[rec("a", 1, 0, 100, 90), rec("b", 2, 50, 150, 120)]);
        assert_eq!(report.overlaps, 1);
        assert!(report.violations() > 0);
    }

    #[test]
    fn a_window_ends_at_validity_even_if_released_later() {
        // a was paused past its validity (100) and released at 500.
        let report = report(&[rec("a", 1, 0, 100, 500), rec("b", 2, 200, 300, 250)]);
        assert_eq!(report.overlaps, 0);
    }

    #[test]
    fn readers_together_are_fine_and_a_writer_beside_a_reader_is_not() {
        let r = |o, t, a, v, rel| with(Hold::Shared, rec(o, t, a, v, rel));
        let readers = report(&[
            r("a", 1, 0, 100, 90),
            r("b", 2, 10, 150, 120),
            r("c", 3, 20, 150, 130),
        ]);
        assert_eq!(readers.violations(), 0, "{readers}");
        assert_eq!(readers.most_shared, 3);
        // A writer granted while a reader holds, and a reader while a writer does.
        let writer_in = report(&[r("a", 1, 0, 100, 90), rec("w", 2, 50, 150, 120)]);
        assert_eq!(writer_in.overlaps, 1, "{writer_in}");
        let reader_in = report(&[rec("w", 1, 0, 100, 90), r("a", 2, 50, 150, 120)]);
        assert_eq!(reader_in.overlaps, 1, "{reader_in}");
        // The same windows on two names do not meet.
        let mut other = r("a", 2, 50, 150, 120);
        other.name = "elsewhere".into();
        assert_eq!(report(&[rec("w", 1, 0, 100, 90), other]).violations(), 0);
    }

    #[test]
    fn more_holders_than_the_limit_is_a_violation() {
        let l = |o, t, a, v, rel| with(Hold::Limited(2), rec(o, t, a, v, rel));
        // Two at once, then a third after the first left: within the limit.
        let fine = report(&[
            l("a", 1, 0, 100, 90),
            l("b", 2, 10, 150, 140),
            l("c", 3, 95, 200, 190),
        ]);
        assert_eq!(fine.violations(), 0, "{fine}");
        assert_eq!(fine.most_limited, 2);
        // A third while both hold.
        let over = report(&[
            l("a", 1, 0, 100, 90),
            l("b", 2, 10, 150, 140),
            l("c", 3, 50, 200, 190),
        ]);
        assert_eq!((over.over_limit, over.most_limited), (1, 3), "{over}");
        assert!(over.violations() > 0);
        // A permit whose worker saw it with no validity left never held.
        let late = report(&[
            l("a", 1, 0, 100, 90),
            l("b", 2, 10, 150, 140),
            l("c", 3, 50, 50, 60),
        ]);
        assert_eq!(late.violations(), 0, "{late}");
    }

    #[test]
    fn token_regressions_are_violations() {
        let report = report(&[rec("a", 9, 0, 100, 50), rec("b", 3, 60, 150, 120)]);
        assert_eq!(report.token_regressions, 1);
        let r = |o, t, a, v, rel| with(Hold::Shared, rec(o, t, a, v, rel));
        let readers = super::analyse(
            lines(&[r("a", 9, 0, 100, 50), r("b", 3, 60, 150, 120)])
                .iter()
                .map(String::as_str),
        );
        assert_eq!(readers.token_regressions, 1);
    }

    #[test]
    fn two_shared_holders_are_ordered_from_the_later_ones_request() {
        let l = |o, t, req, a, v, rel| {
            let mut r = with(Hold::Limited(2), rec(o, t, a, v, rel));
            r.requested = req;
            r
        };
        // b was granted first (token 130) and held beside a (token 132),
        // but its worker saw the grant only at 300, after a had left.
        let seen_late = report(&[
            l("a", 132, 100, 150, 250, 200),
            l("b", 130, 50, 300, 1000, 900),
        ]);
        assert_eq!(seen_late.violations(), 0, "{seen_late}");
        // Asked for after a had left, b's token must be above a's.
        let asked_after = report(&[
            l("a", 132, 100, 150, 250, 200),
            l("b", 130, 210, 300, 1000, 900),
        ]);
        assert_eq!(asked_after.token_regressions, 1, "{asked_after}");
        // Against an exclusive holder the window's start is enough.
        let mut writer = rec("w", 132, 150, 250, 200);
        writer.requested = 100;
        let mut reader = with(Hold::Shared, rec("r", 130, 300, 1000, 900));
        reader.requested = 50;
        assert_eq!(report(&[writer, reader]).token_regressions, 1);
    }

    #[test]
    fn the_same_grant_renewed_by_its_owner_is_not_a_regression() {
        // a's release was lost; a asked again with its own owner string and
        // renewed the hold the server still had: the same token.
        let l = report(&[rec("a", 9, 0, 100, 50), rec("a", 9, 60, 150, 120)]);
        assert_eq!((l.violations(), l.renewed), (0, 1), "{l}");
        // The same token for another owner is two grants.
        let l = report(&[rec("a", 9, 0, 100, 50), rec("b", 9, 60, 150, 120)]);
        assert_eq!((l.token_regressions, l.renewed), (1, 0), "{l}");
        // A holder granted in between elsewhere (b, on an old primary, with
        // a higher token): the renewal is judged by its first window, and
        // b's write comes first, so the fence turns a's renewed one away.
        let mut renewed = rec("a", 9, 60, 150, 120);
        for w in &mut renewed.writes {
            w.result = WriteResult::Rejected;
        }
        let l = report(&[rec("a", 9, 0, 100, 50), rec("b", 10, 52, 150, 58), renewed]);
        assert_eq!((l.token_regressions, l.renewed), (0, 1), "{l}");
        assert_eq!((l.superseded_rejected, l.violations()), (2, 0), "{l}");
        // Had the resource taken it, that write would be stale.
        let l = report(&[
            rec("a", 9, 0, 100, 50),
            rec("b", 10, 52, 150, 58),
            rec("a", 9, 60, 150, 120),
        ]);
        assert_eq!(l.superseded_accepted, 2, "{l}");
    }

    #[test]
    fn a_holder_that_saw_its_lock_with_no_validity_left_is_not_judged() {
        // b's worker was paused between b's grant (token 3, before a's) and
        // its log line at 200: no validity was left, so b never held.
        let l = report(&[rec("a", 9, 60, 150, 120), rec("b", 3, 200, 200, 200)]);
        assert_eq!(l.token_regressions, 0);
        // With validity left at 200, a lower token than a's is a regression.
        let l = report(&[rec("a", 9, 60, 150, 120), rec("b", 3, 200, 300, 250)]);
        assert_eq!(l.token_regressions, 1);
    }

    #[test]
    fn late_writes_are_split_by_the_fence() {
        let late = |result| {
            let mut a = rec("a", 1, 0, 100, 400);
            a.writes[1] = Write { at: 350, result };
            a
        };
        let b = rec("b", 2, 200, 300, 250);
        let r = report(&[late(WriteResult::Rejected), b.clone()]);
        assert_eq!((r.stale_rejected, r.stale_accepted), (1, 0));
        assert_eq!(
            report(&[late(WriteResult::Accepted), b.clone()]).stale_accepted,
            1
        );
        // A newer reader conflicts with a late writer too.
        let reader = with(Hold::Shared, b);
        assert_eq!(
            report(&[late(WriteResult::Accepted), reader]).stale_accepted,
            1
        );
    }

    #[test]
    fn late_reads_conflict_with_newer_writers_only() {
        let late = |result| {
            let mut a = with(Hold::Shared, rec("a", 1, 0, 100, 400));
            a.writes[1] = Write { at: 350, result };
            a
        };
        let writer = rec("w", 2, 200, 300, 250);
        let r = report(&[late(WriteResult::Accepted), writer.clone()]);
        assert_eq!(r.stale_reads_accepted, 1, "{r}");
        assert!(r.violations() > 0);
        let r = report(&[late(WriteResult::Rejected), writer]);
        assert_eq!((r.stale_reads_rejected, r.violations()), (1, 0), "{r}");
        // A newer reader does not make a late read stale.
        let reader = with(Hold::Shared, rec("b", 2, 200, 300, 250));
        assert_eq!(
            report(&[late(WriteResult::Accepted), reader]).violations(),
            0
        );
    }

    #[test]
    fn an_accepted_write_inside_the_window_after_a_newer_grant_is_a_violation() {
        // b was granted at 50 while a still held (two holders at once): a's
        // second write at 60 reached the resource before b's first.
        let mut a = rec("a", 1, 0, 100, 90);
        a.writes[1] = Write {
            at: 60,
            result: WriteResult::Accepted,
        };
        let b = rec("b", 2, 50, 150, 120);
        let r = report(&[a.clone(), b.clone()]);
        assert_eq!((r.superseded_accepted, r.overlaps), (1, 1), "{r}");
        // Fencing caught it: b had written first.
        a.writes[1].result = WriteResult::Rejected;
        let r = report(&[a, b]);
        assert_eq!((r.superseded_accepted, r.superseded_rejected), (0, 1));
    }

    #[test]
    fn violations_are_charged_to_the_fault_they_followed() {
        let strike = |kind: &str, start, end| Strike {
            kind: kind.into(),
            start,
            end,
            failed: false,
        };
        let strikes = [
            strike("KillPrimary", 1_000, 2_000),
            strike("SlotMigration", 3_000, 3_500),
            strike("KillPrimary", 5_000, 6_000),
        ];
        let records = [
            rec("a", 1, 500, 900, 800),
            rec("b", 2, 1_500, 1_900, 1_800),
            rec("c", 3, 3_100, 3_900, 3_800),
            rec("d", 4, 3_200, 3_900, 3_800), // beside c: an overlap
            rec("e", 5, 7_000, 7_900, 7_800),
        ];
        let l = lines(&records);
        let report = analyse(l.iter().map(String::as_str));
        assert_eq!(report.overlaps, 1);
        let rows = by_nemesis(l.iter().map(String::as_str), &report, &strikes);
        let row = |kind: &str| rows.iter().find(|r| r.kind == kind).unwrap().clone();
        assert_eq!(rows[0].grants, 1);
        let kill = row("KillPrimary");
        assert_eq!((kill.strikes, kill.grants, kill.violations), (2, 2, 0));
        assert!((kill.seconds - 2e-6).abs() < 1e-9);
        let moved = row("SlotMigration");
        assert_eq!((moved.strikes, moved.grants, moved.violations), (1, 2, 1));
        assert!(nemesis_table(&rows).contains("| SlotMigration"));
    }

    #[test]
    fn errors_are_counted_by_kind() {
        let report = analyse(["ERR no-quorum x", "ERR taken", "ERR expired"]);
        assert_eq!(
            (report.no_quorum, report.taken, report.other_errors),
            (1, 1, 1)
        );
    }
}
