//! The history checker: pure code over a recorded [`Event`] list.
//!
//! Safety (any of these fails the run): lost (acknowledged, absent from the final read),
//! duplicated (one value at two offsets of the final read), reordered (a producer's values out
//! of its send order within a partition), divergent (two different values seen at one offset,
//! by any reader or by an acknowledgment), vanished (read by a consumer during the run, absent
//! from the final read) and committed-offset regressions (a committed offset fetched after a
//! commit or a fetch of a higher one completed). Unavailability (not a safety violation): time
//! in gaps of at least [`GAP_MS`] between acknowledgments while a majority was connected.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::history::{Event, Outcome};

/// A gap between acknowledgments shorter than this is normal latency, not unavailability.
pub const GAP_MS: u64 = 1000;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub acked: u64,
    pub failed: u64,
    pub lost: Vec<(i32, String)>,
    pub duplicated: Vec<(i32, String)>,
    pub reordered: Vec<(i32, String)>,
    pub divergent: Vec<(i32, i64, Vec<String>)>,
    pub vanished: Vec<(i32, String)>,
    pub regressions: Vec<(i32, i64, i64)>,
    pub unavailable_ms: u64,
    pub longest_unavailable_ms: u64,
    pub final_read_complete: bool,
    /// The transactional workload's verdict (`txn_checker`), when it ran.
    pub txn: Option<crate::txn_checker::TxnReport>,
    /// The consume-transform-produce workload's verdict (`ctp_checker`), when it ran.
    pub ctp: Option<crate::ctp_checker::CtpReport>,
}

impl Report {
    pub fn safety_violations(&self) -> usize {
        self.lost.len()
            + self.duplicated.len()
            + self.reordered.len()
            + self.divergent.len()
            + self.vanished.len()
            + self.regressions.len()
            + self
                .txn
                .as_ref()
                .map_or(0, crate::txn_checker::TxnReport::safety_violations)
            + self
                .ctp
                .as_ref()
                .map_or(0, crate::ctp_checker::CtpReport::safety_violations)
    }

    /// Whether every final read (the queue's, and the transactional ones' if they ran)
    /// reached the end of every partition.
    pub fn complete(&self) -> bool {
        self.final_read_complete
            && self.txn.as_ref().is_none_or(|t| t.final_read_complete)
            && self.ctp.as_ref().is_none_or(|c| c.final_read_complete)
    }

    /// The one summary line every run ends with.
    pub fn summary_line(&self) -> String {
        format!(
            "acked {} lost {} duplicated {} reordered {} divergent {} regressions {} unavailable_ms {}",
            self.acked,
            self.lost.len(),
            self.duplicated.len(),
            self.reordered.len(),
            self.divergent.len(),
            self.regressions.len(),
            self.unavailable_ms
        )
    }
}

/// `p<producer>-<seq>` -> (producer, seq): the order a producer sent its values in.
fn producer_seq(value: &str) -> Option<(&str, u64)> {
    let (producer, seq) = value.rsplit_once('-')?;
    Some((producer, seq.parse().ok()?))
}

pub fn check(events: &[Event]) -> Report {
    let mut report = Report {
        final_read_complete: events
            .iter()
            .any(|e| matches!(e, Event::FinalReadDone { complete: true, .. })),
        ..Report::default()
    };
    let mut acked: BTreeMap<(i32, String), i64> = BTreeMap::new();
    let mut seen_at: BTreeMap<(i32, i64), BTreeSet<String>> = BTreeMap::new();
    let mut final_read: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    let mut read_during: BTreeSet<(i32, String)> = BTreeSet::new();
    for e in events {
        match e {
            Event::Produce {
                partition,
                value,
                outcome,
                ..
            } => match outcome {
                Outcome::Ok { offset } => {
                    report.acked += 1;
                    acked.insert((*partition, value.clone()), *offset);
                    if *offset >= 0 {
                        seen_at
                            .entry((*partition, *offset))
                            .or_default()
                            .insert(value.clone());
                    }
                }
                Outcome::Fail { .. } => report.failed += 1,
            },
            Event::Read {
                partition,
                offset,
                value,
                ..
            } => {
                read_during.insert((*partition, value.clone()));
                seen_at
                    .entry((*partition, *offset))
                    .or_default()
                    .insert(value.clone());
            }
            Event::FinalRead {
                partition,
                offset,
                value,
            } => {
                final_read
                    .entry(*partition)
                    .or_default()
                    .push((*offset, value.clone()));
                seen_at
                    .entry((*partition, *offset))
                    .or_default()
                    .insert(value.clone());
            }
            _ => {}
        }
    }
    let mut finally: HashMap<(i32, &str), usize> = HashMap::new();
    for (p, records) in &final_read {
        for (_, v) in records {
            *finally.entry((*p, v.as_str())).or_default() += 1;
        }
    }
    if report.final_read_complete {
        for (p, v) in acked.keys() {
            if !finally.contains_key(&(*p, v.as_str())) {
                report.lost.push((*p, v.clone()));
            }
        }
        for (p, v) in &read_during {
            if !finally.contains_key(&(*p, v.as_str())) && !acked.contains_key(&(*p, v.clone())) {
                report.vanished.push((*p, v.clone()));
            }
        }
    }
    let mut dups: Vec<(i32, String)> = finally
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((p, v), _)| (*p, v.to_string()))
        .collect();
    dups.sort();
    report.duplicated = dups;
    report.reordered = reordered(&final_read);
    report.divergent = seen_at
        .into_iter()
        .filter(|(_, values)| values.len() > 1)
        .map(|((p, o), values)| (p, o, values.into_iter().collect()))
        .collect();
    report.regressions = regressions(events);
    let (total, longest) = unavailability(events);
    report.unavailable_ms = total;
    report.longest_unavailable_ms = longest;
    report.txn = crate::txn_checker::check(events);
    report.ctp = crate::ctp_checker::check(events);
    report
}

/// Values of one producer within a partition must appear in the order it sent them.
fn reordered(final_read: &BTreeMap<i32, Vec<(i64, String)>>) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for (p, records) in final_read {
        let mut last: HashMap<&str, u64> = HashMap::new();
        let mut sorted: Vec<&(i64, String)> = records.iter().collect();
        sorted.sort_by_key(|(o, _)| *o);
        for (_, v) in sorted {
            let Some((producer, seq)) = producer_seq(v) else {
                continue;
            };
            match last.get(producer) {
                Some(prev) if *prev >= seq => out.push((*p, v.clone())),
                _ => {
                    last.insert(producer, seq);
                }
            }
        }
    }
    out
}

/// A committed offset fetched (invoked) after a commit of, or a fetch that saw, a higher offset
/// completed. The group only moves forward, so any such fetch is a regression.
fn regressions(events: &[Event]) -> Vec<(i32, i64, i64)> {
    // (completion time, partition, offset) of every commit and fetch that set a floor, and
    // (invocation time, partition, offset) of every fetch; swept together in time order.
    let mut floors = Vec::new();
    let mut fetches = Vec::new();
    for e in events {
        match e {
            Event::Commit {
                t,
                latency,
                partition,
                offset,
                ..
            } => floors.push((t + latency, *partition, *offset)),
            Event::CommittedSeen {
                t,
                latency,
                partition,
                offset,
            } => {
                floors.push((t + latency, *partition, *offset));
                fetches.push((*t, *partition, *offset));
            }
            _ => {}
        }
    }
    offset_regressions(floors, fetches)
}

/// The regression rule over `floors` ((completion time, partition, offset) of every commit or
/// fetch that proved an offset committed) and `fetches` ((invocation time, partition, offset)):
/// a fetch below a floor set before it was invoked. Out: (partition, floor, seen) once each.
pub(crate) fn offset_regressions(
    mut floors: Vec<(u64, i32, i64)>,
    mut fetches: Vec<(u64, i32, i64)>,
) -> Vec<(i32, i64, i64)> {
    floors.sort_unstable();
    fetches.sort_unstable();
    let mut floor: HashMap<i32, i64> = HashMap::new();
    let mut next = 0;
    let mut out = Vec::new();
    for (invoked, p, seen) in fetches {
        while next < floors.len() && floors[next].0 < invoked {
            let (_, fp, o) = floors[next];
            let f = floor.entry(fp).or_insert(o);
            *f = (*f).max(o);
            next += 1;
        }
        if let Some(f) = floor.get(&p) {
            if seen < *f && !out.contains(&(p, *f, seen)) {
                out.push((p, *f, seen));
            }
        }
    }
    out
}

/// Intervals [from, to) during which no majority was connected.
fn minority_intervals(events: &[Event]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut since: Option<u64> = None;
    for e in events {
        if let Event::Topology {
            t,
            majority_connected,
        } = e
        {
            match (since, majority_connected) {
                (None, false) => since = Some(*t),
                (Some(from), true) => {
                    out.push((from, *t));
                    since = None;
                }
                _ => {}
            }
        }
    }
    if let Some(from) = since {
        out.push((from, u64::MAX));
    }
    out
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> u64 {
    a.1.min(b.1).saturating_sub(a.0.max(b.0))
}

/// When each acknowledged write completed (ms since the run's start), in order.
pub(crate) fn ack_times(events: &[Event]) -> Vec<u64> {
    let mut acks: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Produce {
                t,
                latency,
                outcome: Outcome::Ok { .. },
                ..
            } => Some(t + latency),
            _ => None,
        })
        .collect();
    acks.sort_unstable();
    acks
}

/// (total, longest) ms in gaps >= [`GAP_MS`] between acknowledgments (completion times) from
/// the first acknowledgment to the last, minus the time no majority was connected.
fn unavailability(events: &[Event]) -> (u64, u64) {
    let acks = ack_times(events);
    let excluded = minority_intervals(events);
    let (mut total, mut longest) = (0, 0);
    for pair in acks.windows(2) {
        let gap = (pair[0], pair[1]);
        if gap.1 - gap.0 < GAP_MS {
            continue;
        }
        let blind: u64 = excluded.iter().map(|x| overlap(gap, *x)).sum();
        let counted = (gap.1 - gap.0).saturating_sub(blind);
        total += counted;
        longest = longest.max(counted);
    }
    (total, longest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(t: u64, p: i32, v: &str, offset: i64) -> Event {
        Event::Produce {
            t,
            latency: 1,
            producer: "p0".into(),
            partition: p,
            value: v.into(),
            outcome: Outcome::Ok { offset },
        }
    }
    fn fin(p: i32, offset: i64, v: &str) -> Event {
        Event::FinalRead {
            partition: p,
            offset,
            value: v.into(),
        }
    }
    fn done() -> Event {
        Event::FinalReadDone {
            complete: true,
            detail: String::new(),
        }
    }

    #[test]
    fn a_clean_history_has_no_violation() {
        let h = vec![
            ack(0, 0, "p0-0", 0),
            ack(5, 0, "p0-1", 1),
            fin(0, 0, "p0-0"),
            fin(0, 1, "p0-1"),
            done(),
        ];
        let r = check(&h);
        assert_eq!(r.safety_violations(), 0, "{r:?}");
        assert_eq!(
            r.summary_line(),
            "acked 2 lost 0 duplicated 0 reordered 0 divergent 0 regressions 0 unavailable_ms 0"
        );
    }

    #[test]
    fn an_acknowledged_value_missing_from_the_final_read_is_lost() {
        let h = vec![
            ack(0, 0, "p0-0", 0),
            ack(1, 0, "p0-1", 1),
            fin(0, 0, "p0-0"),
            done(),
        ];
        let r = check(&h);
        assert_eq!(r.lost, vec![(0, "p0-1".to_string())]);
    }

    #[test]
    fn without_a_complete_final_read_nothing_is_called_lost() {
        let h = vec![ack(0, 0, "p0-0", 0)];
        let r = check(&h);
        assert!(r.lost.is_empty() && !r.final_read_complete);
    }

    #[test]
    fn a_value_at_two_offsets_is_duplicated() {
        let h = vec![
            ack(0, 0, "p0-0", 0),
            fin(0, 0, "p0-0"),
            fin(0, 1, "p0-0"),
            done(),
        ];
        assert_eq!(check(&h).duplicated, vec![(0, "p0-0".to_string())]);
    }

    #[test]
    fn a_producer_value_behind_an_earlier_one_is_reordered() {
        let h = vec![
            fin(0, 0, "p0-2"),
            fin(0, 1, "p0-1"),
            fin(0, 2, "p1-0"),
            done(),
        ];
        assert_eq!(check(&h).reordered, vec![(0, "p0-1".to_string())]);
    }

    #[test]
    fn an_ack_and_a_read_disagreeing_on_an_offset_diverge() {
        let h = vec![ack(0, 0, "p0-0", 0), fin(0, 0, "p1-0"), done()];
        let r = check(&h);
        assert_eq!(r.divergent.len(), 1);
        assert_eq!(r.lost.len(), 1);
    }

    #[test]
    fn a_read_value_absent_from_the_final_read_vanished() {
        let h = vec![
            Event::Read {
                t: 0,
                reader: "c0".into(),
                partition: 0,
                offset: 0,
                value: "p0-7".into(),
            },
            done(),
        ];
        assert_eq!(check(&h).vanished, vec![(0, "p0-7".to_string())]);
    }

    #[test]
    fn a_committed_offset_below_a_completed_commit_is_a_regression() {
        let commit = |t, offset| Event::Commit {
            t,
            latency: 2,
            member: "c0".into(),
            partition: 0,
            offset,
        };
        let seen = |t, offset| Event::CommittedSeen {
            t,
            latency: 2,
            partition: 0,
            offset,
        };
        // A fetch concurrent with the commit may see the old value; one invoked after may not.
        let h = vec![commit(10, 50), seen(11, 40), seen(20, 50), seen(30, 45)];
        assert_eq!(check(&h).regressions, vec![(0, 50, 45)]);
    }

    #[test]
    fn gaps_count_as_unavailable_except_while_no_majority_was_connected() {
        let topo = |t, m| Event::Topology {
            t,
            majority_connected: m,
        };
        let h = vec![
            ack(0, 0, "p0-0", 0),
            ack(3000, 0, "p0-1", 1), // 2999 ms gap ... (completion times 1 and 3001)
            topo(4000, false),
            topo(6000, true),
            ack(7000, 0, "p0-2", 2), // 4000 ms gap, 2000 of it without a majority
            ack(7500, 0, "p0-3", 3), // short gap: latency, not unavailability
        ];
        let r = check(&h);
        assert_eq!(r.unavailable_ms, 3000 + 2000);
        assert_eq!(r.longest_unavailable_ms, 3000);
    }
}
