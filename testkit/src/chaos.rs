//! The chaos checker's analysis. Pure: worker log lines in, a report out.
//!
//! Each successful acquisition is logged by its worker as one line:
//! `ACQ owner token requested_ns acquired_ns valid_until_ns released_ns first_write last_write`
//! where a write is `at_ns:accepted|rejected|skipped`, times on the
//! machine-wide monotonic clock. Failed attempts are `ERR kind`.

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
    pub writes: [Write; 2],
}

impl Record {
    /// The holder's window: from the grant to the end of validity or the
    /// release, whichever is first.
    pub fn end(&self) -> u64 {
        self.valid_until.min(self.released)
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
            "ACQ {} {} {} {} {} {} {} {}",
            self.owner,
            self.token,
            self.requested,
            self.acquired,
            self.valid_until,
            self.released,
            w(&self.writes[0]),
            w(&self.writes[1])
        )
    }

    pub fn parse(line: &str) -> Option<Record> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [tag, owner, token, requested, acquired, valid_until, released, w1, w2] = f.as_slice()
        else {
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
        })
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub acquisitions: usize,
    /// Two holders whose windows overlap (mutual exclusion broken).
    pub overlaps: usize,
    /// A later holder got a token not above an earlier holder's.
    pub token_regressions: usize,
    /// Writes after the writer's window that fencing turned away.
    pub stale_rejected: usize,
    /// Writes after a newer holder was granted that the resource accepted.
    pub stale_accepted: usize,
    pub no_quorum: usize,
    pub taken: usize,
    pub other_errors: usize,
}

impl Report {
    pub fn violations(&self) -> usize {
        self.overlaps + self.token_regressions + self.stale_accepted
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = [
            ("acquisitions", self.acquisitions),
            ("strict violations (overlapping holders)", self.overlaps),
            ("fencing-token regressions", self.token_regressions),
            (
                "stale writes accepted by the fenced resource",
                self.stale_accepted,
            ),
            ("stale writes rejected by fencing", self.stale_rejected),
            ("no-quorum errors", self.no_quorum),
            ("lock taken (contention)", self.taken),
            ("other errors", self.other_errors),
        ];
        for (name, n) in rows {
            writeln!(f, "| {name:<46} | {n:>8} |")?;
        }
        write!(f, "| {:<46} | {:>8} |", "VIOLATIONS", self.violations())
    }
}

/// Analyse every worker's log lines together.
pub fn analyse<'a>(lines: impl IntoIterator<Item = &'a str>) -> Report {
    let mut report = Report::default();
    let mut records = Vec::new();
    for line in lines {
        if let Some(r) = Record::parse(line) {
            records.push(r);
        } else if let Some(kind) = line.strip_prefix("ERR ") {
            match kind.split_whitespace().next() {
                Some("no-quorum") => report.no_quorum += 1,
                Some("taken") => report.taken += 1,
                _ => report.other_errors += 1,
            }
        }
    }
    records.sort_by_key(|r| r.acquired);
    report.acquisitions = records.len();

    // Overlaps: sweep by grant time, remembering the latest window end seen.
    let mut latest: Option<&Record> = None;
    for r in &records {
        if let Some(prev) = latest {
            if r.acquired < prev.end() && r.owner != prev.owner {
                report.overlaps += 1;
            }
        }
        if latest.is_none_or(|p| r.end() > p.end()) {
            latest = Some(r);
        }
    }

    // Token order: a holder's token must exceed every token of a holder
    // whose window ended before this one's began. Only holders that had a
    // window take part: one whose worker saw its lock with no validity left
    // (paused after the grant, or its wait used the validity up) never held
    // it, and its grants may predate a holder that came and went meanwhile
    // (a 300 s run counted one such lock as a regression).
    // For two real windows the order is certain: the later holder's grant
    // on a node both majorities share came after the earlier one's.
    let held: Vec<&Record> = records.iter().filter(|r| r.end() > r.acquired).collect();
    let mut by_end = held.clone();
    by_end.sort_by_key(|r| r.end());
    let (mut next_end, mut max_ended) = (0, 0);
    for r in held {
        while next_end < by_end.len() && by_end[next_end].end() <= r.acquired {
            max_ended = max_ended.max(by_end[next_end].token);
            next_end += 1;
        }
        if r.token <= max_ended {
            report.token_regressions += 1;
        }
    }

    // Late writes: after the writer's window, while a newer holder exists.
    for r in &records {
        for w in &r.writes {
            if w.result == WriteResult::Skipped || w.at <= r.end() {
                continue;
            }
            let newer_granted = records
                .iter()
                .any(|o| o.token > r.token && o.acquired < w.at);
            match (w.result, newer_granted) {
                (WriteResult::Rejected, _) => report.stale_rejected += 1,
                (WriteResult::Accepted, true) => report.stale_accepted += 1,
                _ => {}
            }
        }
    }
    report
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
        }
    }

    fn lines(rs: &[Record]) -> Vec<String> {
        rs.iter().map(Record::to_line).collect()
    }

    #[test]
    fn lines_round_trip() {
        let r = rec("a", 5, 10, 20, 15);
        assert_eq!(Record::parse(&r.to_line()), Some(r));
        assert_eq!(Record::parse("ERR taken"), None);
    }

    #[test]
    fn back_to_back_holders_are_fine() {
        let l = lines(&[
            rec("a", 1, 0, 100, 50),
            rec("b", 2, 50, 150, 120),
            rec("c", 3, 130, 300, 200),
        ]);
        let report = analyse(l.iter().map(String::as_str));
        assert_eq!(report.acquisitions, 3);
        assert_eq!(report.violations(), 0, "{report}");
    }

    #[test]
    fn overlapping_windows_are_violations() {
        let l = lines(&[rec("a", 1, 0, 100, 90), rec("b", 2, 50, 150, 120)]);
        let report = analyse(l.iter().map(String::as_str));
        assert_eq!(report.overlaps, 1);
        assert!(report.violations() > 0);
    }

    #[test]
    fn a_window_ends_at_validity_even_if_released_later() {
        // a was paused past its validity (100) and released at 500.
        let l = lines(&[rec("a", 1, 0, 100, 500), rec("b", 2, 200, 300, 250)]);
        assert_eq!(analyse(l.iter().map(String::as_str)).overlaps, 0);
    }

    #[test]
    fn token_regressions_are_violations() {
        let l = lines(&[rec("a", 9, 0, 100, 50), rec("b", 3, 60, 150, 120)]);
        assert_eq!(analyse(l.iter().map(String::as_str)).token_regressions, 1);
    }

    #[test]
    fn a_holder_that_saw_its_lock_with_no_validity_left_is_not_judged() {
        // b's worker was paused between b's grant (token 3, before a's) and
        // its log line at 200: no validity was left, so b never held.
        let l = lines(&[rec("a", 9, 60, 150, 120), rec("b", 3, 200, 200, 200)]);
        assert_eq!(analyse(l.iter().map(String::as_str)).token_regressions, 0);
        // With validity left at 200, a lower token than a's is a regression.
        let l = lines(&[rec("a", 9, 60, 150, 120), rec("b", 3, 200, 300, 250)]);
        assert_eq!(analyse(l.iter().map(String::as_str)).token_regressions, 1);
    }

    #[test]
    fn late_writes_are_split_by_the_fence() {
        let mut a = rec("a", 1, 0, 100, 400);
        a.writes[1] = Write {
            at: 350,
            result: WriteResult::Rejected,
        };
        let b = rec("b", 2, 200, 300, 250);
        let l = lines(&[a, b]);
        let report = analyse(l.iter().map(String::as_str));
        assert_eq!((report.stale_rejected, report.stale_accepted), (1, 0));
        let mut a = rec("a", 1, 0, 100, 400);
        a.writes[1] = Write {
            at: 350,
            result: WriteResult::Accepted,
        };
        let l = lines(&[a, rec("b", 2, 200, 300, 250)]);
        assert_eq!(analyse(l.iter().map(String::as_str)).stale_accepted, 1);
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
