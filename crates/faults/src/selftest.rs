//! The self-test's must-fail scenarios: each one breaks the cluster's safety on purpose, and
//! the checker must report it as lost or divergent writes.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use runnel_client::Admin;

use crate::executor::Executor;
use crate::history::Event;
use crate::proxy::{Listener, Mode};
use crate::run::TOPIC;

fn nemesis(ex: &Executor, phase: &str, fault: &str) {
    ex.rec.info(format!("self-test {phase}: {fault}"));
    ex.rec.record(Event::Nemesis {
        t: ex.rec.now(),
        phase: phase.into(),
        fault: fault.into(),
    });
}

/// (leader, isr) of partition `p` as the cluster reports it now.
fn partition_state(ex: &Executor, p: i32) -> Option<(Option<i32>, Vec<i32>)> {
    let bootstrap = ex.bootstrap.clone();
    ex.runtime.block_on(async move {
        let client = crate::workload::client(&bootstrap).await.ok()?;
        let names = [TOPIC.to_string()];
        let topics = tokio::time::timeout(
            Duration::from_secs(5),
            Admin::new(client).describe_topics(Some(&names[..])),
        )
        .await
        .ok()?
        .ok()?;
        let part = topics.first()?.partition(p)?.clone();
        Some((part.leader, part.isr))
    })
}

fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while !f() {
        if Instant::now() > deadline {
            bail!("self-test: {what} did not happen within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// The leader's followers cannot fetch (their Kafka links to it are cut; the controller stays
/// reachable), so the leader shrinks the ISR to itself and, with min.insync.replicas=1, keeps
/// acknowledging alone. Then it is killed: with unclean.leader.election.enable=true the
/// controller elects an out-of-sync follower, and everything acknowledged since the shrink is
/// gone once the old leader returns and truncates.
pub fn unclean(ex: &Executor) -> anyhow::Result<()> {
    std::thread::sleep(Duration::from_secs(4));
    let (leader, _) = partition_state(ex, 0).context("describe the topic")?;
    let leader = leader.context("partition 0 has a leader")?;
    let followers: Vec<i32> = (1..=ex.nodes).filter(|n| *n != leader).collect();
    let fault = format!("followers {followers:?} cannot fetch from leader {leader}");
    nemesis(ex, "start", &fault);
    {
        let c = ex.cluster.lock().unwrap_or_else(|p| p.into_inner());
        for f in &followers {
            c.net
                .update((*f, leader, Listener::Kafka), |s| s.mode = Mode::Cut);
        }
    }
    wait_for(
        "the ISR shrinking to the leader",
        Duration::from_secs(45),
        || partition_state(ex, 0).is_some_and(|(_, isr)| isr == vec![leader]),
    )?;
    std::thread::sleep(Duration::from_secs(4));
    let kill = format!("kill -9 leader {leader} (the only in-sync replica)");
    nemesis(ex, "start", &kill);
    ex.cluster
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .kill9(leader);
    wait_for("an unclean election", Duration::from_secs(45), || {
        partition_state(ex, 0).is_some_and(|(l, _)| l.is_some_and(|l| l != leader))
    })?;
    std::thread::sleep(Duration::from_secs(3));
    ex.cluster
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .net
        .heal();
    nemesis(ex, "stop", &fault);
    ex.restart_dead();
    nemesis(ex, "stop", &kill);
    Ok(())
}

/// Lengths of the batches of a v2 log segment: (start, length) of each, walking the
/// 8-byte base offset and 4-byte batch length headers.
pub fn batch_spans(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + 12 <= bytes.len() {
        let len = i32::from_be_bytes([
            bytes[pos + 8],
            bytes[pos + 9],
            bytes[pos + 10],
            bytes[pos + 11],
        ]);
        let Ok(len) = usize::try_from(len) else { break };
        let total = 12 + len;
        if pos + total > bytes.len() {
            break;
        }
        out.push((pos, total));
        pos += total;
    }
    out
}

/// kill -9 of every node, then every replica of partition `0` loses its last `batches`
/// batches (as if every replica's unflushed page cache vanished in one power failure), then
/// every node starts again.
pub fn drop_acked(ex: &Executor, _partitions: i32) -> anyhow::Result<()> {
    const BATCHES: usize = 20;
    std::thread::sleep(Duration::from_secs(8));
    let fault =
        format!("all nodes kill -9, last {BATCHES} batches of {TOPIC}-0 cut from every replica");
    nemesis(ex, "start", &fault);
    let dirs: Vec<_> = {
        let mut c = ex.cluster.lock().unwrap_or_else(|p| p.into_inner());
        for id in 1..=ex.nodes {
            c.kill9(id);
        }
        c.nodes
            .iter()
            .map(|n| n.data_dir.join(format!("{TOPIC}-0")))
            .collect()
    };
    for dir in dirs {
        let Some(segment) = last_segment(&dir) else {
            continue;
        };
        let bytes = std::fs::read(&segment)?;
        let spans = batch_spans(&bytes);
        let keep = spans.len().saturating_sub(BATCHES);
        let cut_at = spans.get(keep).map(|(s, _)| *s).unwrap_or(bytes.len());
        let file = std::fs::OpenOptions::new().write(true).open(&segment)?;
        file.set_len(u64::try_from(cut_at).unwrap_or(0))?;
        file.sync_all()?;
        ex.rec.info(format!(
            "{}: {} of {} batches kept",
            segment.display(),
            keep,
            spans.len()
        ));
    }
    ex.restart_dead();
    nemesis(ex, "stop", &fault);
    Ok(())
}

fn last_segment(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .filter(|p| p.metadata().is_ok_and(|m| m.len() > 0))
        .collect();
    logs.sort();
    logs.pop()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_spans_walk_headers_and_stop_at_a_torn_tail() {
        let mut bytes = Vec::new();
        for len in [49i32, 61] {
            bytes.extend_from_slice(&0i64.to_be_bytes());
            bytes.extend_from_slice(&len.to_be_bytes());
            bytes.extend(std::iter::repeat_n(0u8, usize::try_from(len).unwrap()));
        }
        bytes.extend_from_slice(&[0u8; 5]);
        assert_eq!(batch_spans(&bytes), vec![(0, 61), (61, 73)]);
    }
}
