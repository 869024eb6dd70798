//! The checker of the transactional workload: pure code over the history's `Txn`, `TxnRead`,
//! `TxnFinalRead` and `TxnFinalReadDone` events.
//!
//! Safety (any of these fails the run):
//! * **aborted reads**: a value of an aborted transaction (commit never requested) read by a
//!   read_committed consumer, during the run or in the final read;
//! * **lost**: a value of a committed transaction absent from the final read_committed read;
//! * **duplicated**: one value at two offsets of the final read;
//! * **torn**: a transaction of unknown outcome that the final read shows in part (some of
//!   its values, not all): a transaction is all or nothing;
//! * **divergent**: two different values seen at one offset by read_committed readers.
//!
//! Lost and torn need a complete final read (one that reached every partition's high
//! watermark); without one the run is inconclusive, as for the queue workload.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::history::Event;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TxnReport {
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub final_read_complete: bool,
    pub aborted_reads: Vec<(i32, String)>,
    pub lost: Vec<(i32, String)>,
    pub duplicated: Vec<(i32, String)>,
    pub torn: Vec<String>,
    pub divergent: Vec<(i32, i64, Vec<String>)>,
}

impl TxnReport {
    pub fn safety_violations(&self) -> usize {
        self.aborted_reads.len()
            + self.lost.len()
            + self.duplicated.len()
            + self.torn.len()
            + self.divergent.len()
    }

    pub fn summary_line(&self) -> String {
        format!(
            "txn committed {} aborted {} unknown {} aborted_reads {} lost {} duplicated {} torn {} divergent {}",
            self.committed,
            self.aborted,
            self.unknown,
            self.aborted_reads.len(),
            self.lost.len(),
            self.duplicated.len(),
            self.torn.len(),
            self.divergent.len()
        )
    }
}

/// A value written to a partition.
type PartitionValue = (i32, String);

/// `None` when the history has no transactional workload.
pub fn check(events: &[Event]) -> Option<TxnReport> {
    let mut report = TxnReport::default();
    let mut any = false;
    // value -> (transaction, outcome); transactions -> their values.
    let mut owner: HashMap<(i32, &str), (&str, &str)> = HashMap::new();
    let mut txns: BTreeMap<&str, (&str, &[PartitionValue])> = BTreeMap::new();
    let mut seen_at: BTreeMap<(i32, i64), BTreeSet<&str>> = BTreeMap::new();
    let mut read_during: BTreeSet<(i32, &str)> = BTreeSet::new();
    let mut finally: HashMap<(i32, &str), usize> = HashMap::new();
    for e in events {
        match e {
            Event::Txn {
                txn,
                values,
                outcome,
                ..
            } => {
                any = true;
                match outcome.as_str() {
                    "committed" => report.committed += 1,
                    "aborted" => report.aborted += 1,
                    _ => report.unknown += 1,
                }
                for (p, v) in values {
                    owner.insert((*p, v.as_str()), (txn.as_str(), outcome.as_str()));
                }
                txns.insert(txn.as_str(), (outcome.as_str(), values.as_slice()));
            }
            Event::TxnRead {
                partition,
                offset,
                value,
                ..
            } => {
                any = true;
                read_during.insert((*partition, value.as_str()));
                seen_at
                    .entry((*partition, *offset))
                    .or_default()
                    .insert(value.as_str());
            }
            Event::TxnFinalRead {
                partition,
                offset,
                value,
            } => {
                any = true;
                *finally.entry((*partition, value.as_str())).or_default() += 1;
                seen_at
                    .entry((*partition, *offset))
                    .or_default()
                    .insert(value.as_str());
            }
            Event::TxnFinalReadDone { complete, .. } => {
                any = true;
                report.final_read_complete |= *complete;
            }
            _ => {}
        }
    }
    if !any {
        return None;
    }
    let mut aborted_reads: BTreeSet<(i32, String)> = BTreeSet::new();
    for (p, v) in read_during.iter().copied().chain(finally.keys().copied()) {
        if owner.get(&(p, v)).is_some_and(|(_, o)| *o == "aborted") {
            aborted_reads.insert((p, v.to_string()));
        }
    }
    report.aborted_reads = aborted_reads.into_iter().collect();
    let mut dups: Vec<(i32, String)> = finally
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((p, v), _)| (*p, v.to_string()))
        .collect();
    dups.sort();
    report.duplicated = dups;
    if report.final_read_complete {
        for (name, (outcome, values)) in &txns {
            let present = values
                .iter()
                .filter(|(p, v)| finally.contains_key(&(*p, v.as_str())))
                .count();
            match *outcome {
                "committed" => report.lost.extend(
                    values
                        .iter()
                        .filter(|(p, v)| !finally.contains_key(&(*p, v.as_str())))
                        .cloned(),
                ),
                "unknown" if present > 0 && present < values.len() => {
                    report.torn.push(name.to_string())
                }
                _ => {}
            }
        }
    }
    report.divergent = seen_at
        .into_iter()
        .filter(|(_, values)| values.len() > 1)
        .map(|((p, o), values)| (p, o, values.into_iter().map(str::to_string).collect()))
        .collect();
    Some(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(name: &str, outcome: &str, values: &[(i32, &str)]) -> Event {
        Event::Txn {
            t: 0,
            latency: 1,
            txn: name.into(),
            values: values.iter().map(|(p, v)| (*p, v.to_string())).collect(),
            outcome: outcome.into(),
            error: None,
        }
    }

    fn fin(partition: i32, offset: i64, value: &str) -> Event {
        Event::TxnFinalRead {
            partition,
            offset,
            value: value.into(),
        }
    }

    fn done() -> Event {
        Event::TxnFinalReadDone {
            complete: true,
            detail: String::new(),
        }
    }

    #[test]
    fn no_transactional_workload_no_report() {
        assert_eq!(check(&[]), None);
    }

    #[test]
    fn a_clean_history_passes() {
        let r = check(&[
            txn("a", "committed", &[(0, "a.0"), (1, "a.1")]),
            txn("b", "aborted", &[(0, "b.0")]),
            txn("c", "unknown", &[(1, "c.0")]),
            fin(0, 0, "a.0"),
            fin(1, 0, "a.1"),
            done(),
        ])
        .unwrap();
        assert_eq!(r.safety_violations(), 0, "{r:?}");
        assert_eq!((r.committed, r.aborted, r.unknown), (1, 1, 1));
    }

    #[test]
    fn an_aborted_value_read_committed_is_an_aborted_read() {
        let r = check(&[
            txn("b", "aborted", &[(0, "b.0")]),
            Event::TxnRead {
                t: 5,
                partition: 0,
                offset: 3,
                value: "b.0".into(),
            },
            done(),
        ])
        .unwrap();
        assert_eq!(r.aborted_reads, vec![(0, "b.0".to_string())]);
        let r = check(&[txn("b", "aborted", &[(0, "b.0")]), fin(0, 0, "b.0"), done()]).unwrap();
        assert_eq!(r.aborted_reads.len(), 1);
    }

    #[test]
    fn a_committed_value_missing_is_lost_and_twice_is_duplicated() {
        let events = [
            txn("a", "committed", &[(0, "a.0"), (0, "a.1")]),
            fin(0, 0, "a.0"),
            fin(0, 1, "a.0"),
            done(),
        ];
        let r = check(&events).unwrap();
        assert_eq!(r.lost, vec![(0, "a.1".to_string())]);
        assert_eq!(r.duplicated, vec![(0, "a.0".to_string())]);
        // Without a complete final read nothing is called lost (inconclusive instead).
        let r = check(&events[..3]).unwrap();
        assert!(r.lost.is_empty() && !r.final_read_complete);
    }

    #[test]
    fn an_unknown_transaction_seen_in_part_is_torn() {
        let r = check(&[
            txn("c", "unknown", &[(0, "c.0"), (1, "c.1")]),
            fin(0, 0, "c.0"),
            done(),
        ])
        .unwrap();
        assert_eq!(r.torn, vec!["c".to_string()]);
    }

    #[test]
    fn two_values_at_one_offset_diverge() {
        let r = check(&[
            Event::TxnRead {
                t: 1,
                partition: 0,
                offset: 7,
                value: "x".into(),
            },
            fin(0, 7, "y"),
            done(),
        ])
        .unwrap();
        assert_eq!(r.divergent.len(), 1);
    }
}
