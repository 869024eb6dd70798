//! The checker of the consume-transform-produce workload (`ctp_workload.rs`): pure code over
//! the history's `CtpInput`, `CtpTxn`, `CtpRead`, `CtpFinalRead`, `CtpFinalReadDone` and
//! `CtpCommittedSeen` events. An output value is `<input value>@<input offset>@<transaction>`,
//! so every output names the input it was made from and the transaction that wrote it.
//!
//! Safety (any of these fails the run), i.e. exactly-once:
//! * **lost**: an acknowledged input with no output in the final read_committed read of the
//!   output topic, or an output of a committed transaction missing from it;
//! * **duplicated**: an input with more than one output in that read (processed twice, e.g.
//!   by two processes across a restart or a fencing);
//! * **aborted reads**: an output of an aborted transaction (commit never requested) read by a
//!   read_committed reader, during the run or in the final read;
//! * **torn**: a transaction of unknown outcome that the final read shows in part;
//! * **divergent**: two different values at one offset among the read_committed reads;
//! * **regressions**: the group's committed offset of an input partition fetched lower than a
//!   fetch that had completed before it saw (the processor's group only moves forward).
//!
//! Lost and torn need a complete final read taken after the processor consumed every input
//! (`caught_up`); without one the run is inconclusive.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::history::{Event, Outcome};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CtpReport {
    pub inputs_acked: u64,
    pub outputs: u64,
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    /// Processor processes killed -9, and paused while a new one took over (zombies).
    pub kills: u64,
    pub zombies: u64,
    pub final_read_complete: bool,
    pub lost: Vec<(i32, String)>,
    pub duplicated: Vec<(i32, String)>,
    pub aborted_reads: Vec<(i32, String)>,
    pub torn: Vec<String>,
    pub divergent: Vec<(i32, i64, Vec<String>)>,
    pub regressions: Vec<(i32, i64, i64)>,
}

impl CtpReport {
    pub fn safety_violations(&self) -> usize {
        self.lost.len()
            + self.duplicated.len()
            + self.aborted_reads.len()
            + self.torn.len()
            + self.divergent.len()
            + self.regressions.len()
    }

    pub fn summary_line(&self) -> String {
        format!(
            "ctp inputs {} outputs {} committed {} aborted {} unknown {} kills {} zombies {} lost {} duplicated {} aborted_reads {} torn {} divergent {} regressions {}",
            self.inputs_acked,
            self.outputs,
            self.committed,
            self.aborted,
            self.unknown,
            self.kills,
            self.zombies,
            self.lost.len(),
            self.duplicated.len(),
            self.aborted_reads.len(),
            self.torn.len(),
            self.divergent.len(),
            self.regressions.len()
        )
    }
}

/// `<input>@<input offset>@<transaction>` -> (input, input offset, transaction).
fn split_output(value: &str) -> Option<(&str, &str, &str)> {
    let (rest, txn) = value.rsplit_once('@')?;
    let (input, offset) = rest.rsplit_once('@')?;
    Some((input, offset, txn))
}

/// A transaction's outcome and the input records (partition, offset, value) it consumed.
type TxnInputs<'a> = (&'a str, &'a [(i32, i64, String)]);

/// What the history says, indexed for the rules.
#[derive(Default)]
struct Seen<'a> {
    any: bool,
    acked: BTreeSet<(i32, &'a str)>,
    /// Transaction -> (outcome, its inputs).
    txns: BTreeMap<&'a str, TxnInputs<'a>>,
    /// Output values read during the run and in the final read.
    read_during: BTreeSet<(i32, &'a str)>,
    finally: Vec<(i32, &'a str)>,
    seen_at: BTreeMap<(i32, i64), BTreeSet<&'a str>>,
    floors: Vec<(u64, i32, i64)>,
    fetches: Vec<(u64, i32, i64)>,
}

fn index<'a>(events: &'a [Event], report: &mut CtpReport) -> Seen<'a> {
    let mut s = Seen::default();
    for e in events {
        match e {
            Event::CtpInput {
                partition,
                value,
                outcome,
                ..
            } => {
                s.any = true;
                if matches!(outcome, Outcome::Ok { .. }) {
                    report.inputs_acked += 1;
                    s.acked.insert((*partition, value.as_str()));
                }
            }
            Event::CtpTxn {
                txn,
                inputs,
                outcome,
                ..
            } => {
                s.any = true;
                match outcome.as_str() {
                    "committed" => report.committed += 1,
                    "aborted" => report.aborted += 1,
                    _ => report.unknown += 1,
                }
                s.txns
                    .insert(txn.as_str(), (outcome.as_str(), inputs.as_slice()));
            }
            Event::CtpRead {
                partition,
                offset,
                value,
                ..
            } => {
                s.any = true;
                s.read_during.insert((*partition, value.as_str()));
                let at = s.seen_at.entry((*partition, *offset)).or_default();
                at.insert(value.as_str());
            }
            Event::CtpFinalRead {
                partition,
                offset,
                value,
            } => {
                s.any = true;
                s.finally.push((*partition, value.as_str()));
                let at = s.seen_at.entry((*partition, *offset)).or_default();
                at.insert(value.as_str());
            }
            Event::CtpFinalReadDone {
                complete,
                caught_up,
                ..
            } => {
                s.any = true;
                report.final_read_complete |= *complete && *caught_up;
            }
            Event::CtpCommittedSeen {
                t,
                latency,
                partition,
                offset,
            } => {
                s.floors.push((t + latency, *partition, *offset));
                s.fetches.push((*t, *partition, *offset));
            }
            Event::CtpProcess { action, .. } => match action.as_str() {
                "kill -9" => report.kills += 1,
                "pause" => report.zombies += 1,
                _ => {}
            },
            _ => {}
        }
    }
    s
}

/// `None` when the history has no consume-transform-produce workload.
pub fn check(events: &[Event]) -> Option<CtpReport> {
    let mut report = CtpReport::default();
    let s = index(events, &mut report);
    if !s.any {
        return None;
    }
    report.outputs = s.finally.len() as u64;
    // Input -> the transactions (and the input offsets they read it at) whose outputs of it
    // the final read holds. Two input offsets: the input itself was written twice.
    let mut made_by: BTreeMap<(i32, &str), Vec<(&str, &str)>> = BTreeMap::new();
    for (p, v) in &s.finally {
        if let Some((input, offset, txn)) = split_output(v) {
            made_by.entry((*p, input)).or_default().push((txn, offset));
        }
    }
    let outcome_of = |txn: &str| s.txns.get(txn).map(|(o, _)| *o);
    let mut aborted_reads = BTreeSet::new();
    for (p, v) in s.read_during.iter().chain(s.finally.iter()) {
        let txn = split_output(v).map(|(_, _, t)| t);
        if txn.and_then(outcome_of) == Some("aborted") {
            aborted_reads.insert((*p, v.to_string()));
        }
    }
    report.aborted_reads = aborted_reads.into_iter().collect();
    report.duplicated = made_by
        .iter()
        .filter(|(_, by)| by.len() > 1)
        .map(|((p, input), by)| {
            let by: Vec<String> = by
                .iter()
                .map(|(txn, offset)| format!("{txn} (input offset {offset})"))
                .collect();
            (*p, format!("{input} by {}", by.join(", ")))
        })
        .collect();
    if report.final_read_complete {
        judge_complete(&s, &made_by, &mut report);
    }
    report.divergent = s
        .seen_at
        .iter()
        .filter(|(_, values)| values.len() > 1)
        .map(|((p, o), values)| (*p, *o, values.iter().map(|v| v.to_string()).collect()))
        .collect();
    report.regressions = crate::checker::offset_regressions(s.floors, s.fetches);
    Some(report)
}

/// Lost and torn: only with a complete final read after the processor caught up.
fn judge_complete(
    s: &Seen<'_>,
    made_by: &BTreeMap<(i32, &str), Vec<(&str, &str)>>,
    r: &mut CtpReport,
) {
    for (p, input) in &s.acked {
        if !made_by.contains_key(&(*p, *input)) {
            r.lost.push((*p, input.to_string()));
        }
    }
    // (partition, input) -> the transactions whose output of it is visible.
    let visible: HashMap<(i32, &str), Vec<&str>> = made_by
        .iter()
        .map(|(k, by)| (*k, by.iter().map(|(txn, _)| *txn).collect()))
        .collect();
    for (txn, (outcome, inputs)) in &s.txns {
        let present = inputs
            .iter()
            .filter(|(p, _, v)| {
                visible
                    .get(&(*p, v.as_str()))
                    .is_some_and(|by| by.contains(txn))
            })
            .count();
        match *outcome {
            "committed" if present < inputs.len() => {
                for (p, _, v) in inputs.iter() {
                    let by = visible.get(&(*p, v.as_str()));
                    if !by.is_some_and(|by| by.contains(txn)) {
                        r.lost.push((*p, format!("{v} of {txn}")));
                    }
                }
            }
            "unknown" if present > 0 && present < inputs.len() => r.torn.push(txn.to_string()),
            _ => {}
        }
    }
    r.lost.sort();
    r.lost.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(p: i32, v: &str) -> Event {
        Event::CtpInput {
            t: 0,
            latency: 1,
            producer: "i0.0".into(),
            partition: p,
            value: v.into(),
            outcome: Outcome::Ok { offset: 0 },
        }
    }

    fn txn(name: &str, outcome: &str, inputs: &[(i32, i64, &str)]) -> Event {
        Event::CtpTxn {
            t: 0,
            latency: 1,
            txn: name.into(),
            inputs: inputs
                .iter()
                .map(|(p, o, v)| (*p, *o, v.to_string()))
                .collect(),
            offsets: Vec::new(),
            outcome: outcome.into(),
            error: None,
        }
    }

    fn out(p: i32, offset: i64, v: &str) -> Event {
        Event::CtpFinalRead {
            partition: p,
            offset,
            value: v.into(),
        }
    }

    fn done() -> Event {
        Event::CtpFinalReadDone {
            complete: true,
            caught_up: true,
            detail: String::new(),
        }
    }

    #[test]
    fn no_workload_no_report() {
        assert_eq!(check(&[]), None);
    }

    #[test]
    fn every_input_once_across_an_aborted_attempt_passes() {
        let r = check(&[
            input(0, "a"),
            input(1, "b"),
            txn("x0.0.0-0", "aborted", &[(0, 0, "a")]),
            txn("x0.1.0-0", "committed", &[(0, 0, "a"), (1, 0, "b")]),
            out(0, 0, "a@0@x0.1.0-0"),
            out(1, 0, "b@0@x0.1.0-0"),
            done(),
        ])
        .unwrap();
        assert_eq!(r.safety_violations(), 0, "{r:?}");
        assert_eq!(
            (r.committed, r.aborted, r.inputs_acked, r.outputs),
            (1, 1, 2, 2)
        );
    }

    #[test]
    fn an_input_processed_by_two_committed_transactions_is_duplicated() {
        let r = check(&[
            input(0, "a"),
            txn("x0.0.0-0", "committed", &[(0, 0, "a")]),
            txn("x0.1.0-0", "committed", &[(0, 0, "a")]),
            out(0, 0, "a@0@x0.0.0-0"),
            out(0, 1, "a@0@x0.1.0-0"),
            done(),
        ])
        .unwrap();
        assert_eq!(
            r.duplicated,
            vec![(
                0,
                "a by x0.0.0-0 (input offset 0), x0.1.0-0 (input offset 0)".to_string()
            )]
        );
    }

    #[test]
    fn an_unprocessed_input_and_a_missing_committed_output_are_lost() {
        let events = [
            input(0, "a"),
            input(0, "b"),
            txn("x0.0.0-0", "committed", &[(0, 0, "a")]),
            done(),
        ];
        let r = check(&events).unwrap();
        assert_eq!(
            r.lost,
            vec![
                (0, "a".to_string()),
                (0, "a of x0.0.0-0".to_string()),
                (0, "b".to_string())
            ]
        );
        // Not caught up: inconclusive, nothing called lost.
        let mut partial = events.to_vec();
        partial[3] = Event::CtpFinalReadDone {
            complete: true,
            caught_up: false,
            detail: String::new(),
        };
        let r = check(&partial).unwrap();
        assert!(r.lost.is_empty() && !r.final_read_complete);
    }

    #[test]
    fn an_aborted_output_read_committed_is_an_aborted_read() {
        let r = check(&[
            txn("x0.0.0-0", "aborted", &[(0, 0, "a")]),
            Event::CtpRead {
                t: 3,
                partition: 0,
                offset: 0,
                value: "a@0@x0.0.0-0".into(),
            },
            done(),
        ])
        .unwrap();
        assert_eq!(r.aborted_reads, vec![(0, "a@0@x0.0.0-0".to_string())]);
    }

    #[test]
    fn an_unknown_transaction_seen_in_part_is_torn() {
        let r = check(&[
            txn("x0.0.0-0", "unknown", &[(0, 0, "a"), (1, 0, "b")]),
            out(0, 0, "a@0@x0.0.0-0"),
            done(),
        ])
        .unwrap();
        assert_eq!(r.torn, vec!["x0.0.0-0".to_string()]);
    }

    #[test]
    fn a_committed_offset_fetched_lower_than_an_earlier_fetch_is_a_regression() {
        let seen = |t, offset| Event::CtpCommittedSeen {
            t,
            latency: 2,
            partition: 1,
            offset,
        };
        let r = check(&[seen(10, 5), seen(11, 4), seen(20, 3), done()]).unwrap();
        // The fetch at 11 was concurrent with the one at 10; the one at 20 came after both.
        assert_eq!(r.regressions, vec![(1, 5, 3)]);
    }

    #[test]
    fn two_outputs_at_one_offset_diverge() {
        let r = check(&[
            Event::CtpRead {
                t: 1,
                partition: 0,
                offset: 4,
                value: "a@0@x".into(),
            },
            out(0, 4, "b@1@y"),
            done(),
        ])
        .unwrap();
        assert_eq!(r.divergent.len(), 1);
    }
}
