//! The transactional workload (docs/faults.md): confluent-kafka transactional producers
//! (`ck_txn.py produce`, the project's client has no transactions) writing unique values in
//! transactions, about a third of them aborted on purpose, to their own topic; a
//! read_committed consumer following it during the run (`follow`); and the final
//! read_committed read after healing (`final`). Every line they print becomes an event of
//! the history; the checker (`txn_checker.rs`) judges them.

use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use crate::history::{Event, Recorder};
use crate::workload::{run_child_until_stop, Setup};

pub const TXN_TOPIC: &str = "faults-txn";

fn script() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/ck_txn.py")
}

fn command(python: &std::path::Path, s: &Setup, mode: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(script())
        .arg(mode)
        .arg(&s.bootstrap)
        .arg(&s.topic)
        .arg(s.partitions.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// A transactional producer (`transactional.id` `faults-txn-<id>`).
pub async fn produce(s: Setup, id: usize, python: std::path::PathBuf, pace: Duration, seed: u64) {
    let mut cmd = command(&python, &s, "produce");
    cmd.arg(id.to_string())
        .arg(pace.as_millis().to_string())
        .arg(seed.to_string());
    run_child_until_stop(
        s,
        cmd,
        format!("transactional producer {id}"),
        |rec, line| {
            record_line(rec, line);
        },
    )
    .await;
}

/// A read_committed consumer reading the topic from its start while the run goes on.
pub async fn follow(s: Setup, id: usize, python: std::path::PathBuf) {
    let mut cmd = command(&python, &s, "follow");
    cmd.arg(id.to_string());
    run_child_until_stop(
        s,
        cmd,
        format!("read_committed follower {id}"),
        |rec, line| {
            record_line(rec, line);
        },
    )
    .await;
}

/// The final read_committed read; records a `TxnFinalReadDone` whatever happens.
pub async fn final_read(s: &Setup, python: &std::path::Path, within: Duration) {
    let mut cmd = command(python, s, "final");
    cmd.arg(within.as_secs().to_string());
    let outcome = async {
        let mut child = cmd.spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let mut done = false;
        while let Some(line) = lines.next_line().await? {
            done |= record_line(&s.rec, &line);
        }
        let _ = child.wait().await;
        anyhow::Ok(done)
    };
    let done = tokio::time::timeout(within + Duration::from_secs(30), outcome).await;
    match done {
        Ok(Ok(true)) => {}
        other => s.rec.record(Event::TxnFinalReadDone {
            complete: false,
            detail: format!("the final read_committed read did not finish: {other:?}"),
        }),
    }
}

fn as_i32(v: &serde_json::Value) -> Option<i32> {
    v.as_i64().and_then(|p| i32::try_from(p).ok())
}

/// Records one line of `ck_txn.py`; true for its `done` line.
fn record_line(rec: &Recorder, line: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return false;
    };
    if let Some(info) = v.get("info").and_then(|i| i.as_str()) {
        rec.info(info.to_string());
        return false;
    }
    let record = |key: &str| -> Option<(i32, i64, String)> {
        let r = v.get(key)?.as_array()?;
        Some((
            as_i32(r.first()?)?,
            r.get(1)?.as_i64()?,
            r.get(2)?.as_str()?.to_string(),
        ))
    };
    if let Some((partition, offset, value)) = record("read") {
        rec.record(Event::TxnRead {
            t: rec.now(),
            partition,
            offset,
            value,
        });
    } else if let Some((partition, offset, value)) = record("final") {
        rec.record(Event::TxnFinalRead {
            partition,
            offset,
            value,
        });
    } else if let Some(complete) = v.get("done").and_then(|d| d.as_bool()) {
        let detail = v
            .get("detail")
            .and_then(|d| d.as_str())
            .unwrap_or_default()
            .to_string();
        rec.record(Event::TxnFinalReadDone { complete, detail });
        return true;
    } else if let Some(txn) = v.get("txn").and_then(|t| t.as_str()) {
        let latency = v.get("latency").and_then(|l| l.as_u64()).unwrap_or(0);
        let values = v
            .get("values")
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|pv| {
                        let pv = pv.as_array()?;
                        Some((as_i32(pv.first()?)?, pv.get(1)?.as_str()?.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let now = rec.now();
        rec.record(Event::Txn {
            t: now.saturating_sub(latency),
            latency,
            txn: txn.to_string(),
            values,
            outcome: v
                .get("outcome")
                .and_then(|o| o.as_str())
                .unwrap_or("unknown")
                .to_string(),
            error: v.get("error").and_then(|e| e.as_str()).map(str::to_string),
        });
    }
    false
}
