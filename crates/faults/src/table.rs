//! `--table DIR...`: the campaign's per-nemesis table over recorded runs. Each fault owns the
//! window from its start to the next fault's start (its healing and recovery included):
//! acknowledgments completed in it and the longest gap between acknowledgments that began in
//! it are attributed to the fault's kind. Safety counts come from the whole run's checker.

use std::collections::BTreeMap;

use crate::checker;
use crate::history::Event;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Row {
    pub faults: u64,
    pub window_ms: u64,
    pub acked: u64,
    pub longest_gap_ms: u64,
}

/// "partition minority [2]" -> "partition minority"; "kill -9 node 3" -> "kill -9".
pub fn kind(fault: &str) -> String {
    let words: Vec<&str> = fault.split_whitespace().collect();
    let take = match words.first().copied() {
        Some("partition") | Some("kill") | Some("disk") | Some("SIGTERM") => 2,
        _ => 1,
    };
    words.into_iter().take(take).collect::<Vec<_>>().join(" ")
}

pub fn rows(events: &[Event], into: &mut BTreeMap<String, Row>) {
    let starts: Vec<(u64, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Nemesis { t, phase, fault } if phase == "start" => Some((*t, kind(fault))),
            _ => None,
        })
        .collect();
    let acks = checker::ack_times(events);
    let end = acks.last().copied().unwrap_or(0);
    for (i, (from, k)) in starts.iter().enumerate() {
        let to = starts.get(i + 1).map(|s| s.0).unwrap_or(end);
        let row = into.entry(k.clone()).or_default();
        row.faults += 1;
        row.window_ms += to.saturating_sub(*from);
        let inside: Vec<u64> = acks
            .iter()
            .copied()
            .filter(|a| *a >= *from && *a < to)
            .collect();
        row.acked += inside.len() as u64;
        // Gaps overlapping the window, counted from the fault's start at the earliest.
        for w in acks.windows(2) {
            if w[1] > *from && w[0] < to {
                row.longest_gap_ms = row.longest_gap_ms.max(w[1] - w[0].max(*from));
            }
        }
    }
}

/// The markdown tables: per run, then per nemesis kind.
pub fn render(runs: &[(String, Vec<Event>)]) -> String {
    let mut out = String::from(
        "| run | duration s | acked | lost | duplicated | reordered | divergent | regressions | longest unavailability ms | ctp inputs / committed txns / kills / zombies | ctp lost / dup / aborted reads / regressions |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut kinds = BTreeMap::new();
    for (name, events) in runs {
        let r = checker::check(events);
        let duration = events
            .iter()
            .filter_map(|e| match e {
                Event::Produce { t, latency, .. } => Some(t + latency),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let (ctp_load, ctp_safety) = match &r.ctp {
            Some(c) => (
                format!(
                    "{} / {} / {} / {}",
                    c.inputs_acked, c.committed, c.kills, c.zombies
                ),
                format!(
                    "{} / {} / {} / {}",
                    c.lost.len(),
                    c.duplicated.len(),
                    c.aborted_reads.len(),
                    c.regressions.len()
                ),
            ),
            None => ("-".into(), "-".into()),
        };
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {ctp_load} | {ctp_safety} |\n",
            duration / 1000,
            r.acked,
            r.lost.len(),
            r.duplicated.len(),
            r.reordered.len(),
            r.divergent.len(),
            r.regressions.len(),
            r.longest_unavailable_ms
        ));
        rows(events, &mut kinds);
    }
    out.push_str("\n| nemesis | faults | time s | acked | longest gap between acks ms |\n|---|---|---|---|---|\n");
    for (k, row) in kinds {
        out.push_str(&format!(
            "| {k} | {} | {} | {} | {} |\n",
            row.faults,
            row.window_ms / 1000,
            row.acked,
            row.longest_gap_ms
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Outcome;

    fn ack(done: u64) -> Event {
        Event::Produce {
            t: done,
            latency: 0,
            producer: "p0".into(),
            partition: 0,
            value: format!("p0-{done}"),
            outcome: Outcome::Ok { offset: 0 },
        }
    }

    #[test]
    fn a_fault_owns_the_gap_that_began_in_its_window() {
        let start = |t, f: &str| Event::Nemesis {
            t,
            phase: "start".into(),
            fault: f.into(),
        };
        let events = vec![
            ack(0),
            start(100, "kill -9 node 2"),
            ack(150),
            ack(2150), // 2 s gap inside the kill's window
            start(3000, "pause node 1"),
            ack(3100),
            ack(3200),
        ];
        let mut kinds = BTreeMap::new();
        rows(&events, &mut kinds);
        assert_eq!(kinds["kill -9"].longest_gap_ms, 2000);
        assert_eq!(kinds["kill -9"].acked, 2);
        assert_eq!(kinds["pause"].faults, 1);
        assert_eq!(kind("partition minority [2]"), "partition minority");
    }
}
