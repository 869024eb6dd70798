//! The transactional workload (docs/faults.md): confluent-kafka transactional producers
//! (`ck_txn.py produce`, the project's client has no transactions) writing unique values in
//! transactions, about a third of them aborted on purpose, to their own topic; a
//! read_committed consumer following it during the run (`follow`); and the final
//! read_committed read after healing (`final`). Every line they print becomes an event of
//! the history; the checker (`txn_checker.rs`) judges them. The consume-transform-produce
//! workload (`ctp_workload.rs`) runs the same script's `process`, `follow` and `final` on its
//! topics; its lines are parsed here too.

use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use crate::history::{Event, Recorder};
use crate::workload::{run_child_until_stop, Setup};

pub const TXN_TOPIC: &str = "faults-txn";

fn script() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/ck_txn.py")
}

pub(crate) fn command(python: &std::path::Path, s: &Setup, mode: &str) -> tokio::process::Command {
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
            record_line(rec, line, Reads::Txn);
        },
    )
    .await;
}

/// Which topic a `ck_txn.py` reader reads: what its records are recorded as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// The transactional producers' topic: `TxnRead`, `TxnFinalRead`.
    Txn,
    /// The consume-transform-produce workload's output topic: `CtpRead`, `CtpFinalRead`.
    CtpOutput,
}

/// A read_committed consumer reading the topic from its start while the run goes on.
pub async fn follow(s: Setup, id: usize, python: std::path::PathBuf, reads: Reads) {
    let mut cmd = command(&python, &s, "follow");
    cmd.arg(id.to_string());
    let record: fn(&Recorder, &str) = match reads {
        Reads::Txn => |rec, line| {
            record_line(rec, line, Reads::Txn);
        },
        Reads::CtpOutput => |rec, line| {
            record_line(rec, line, Reads::CtpOutput);
        },
    };
    run_child_until_stop(s, cmd, format!("read_committed follower {id}"), record).await;
}

/// The final read_committed read; records its end (`TxnFinalReadDone`, or for the output
/// topic `CtpFinalReadDone` with `caught_up`) whatever happens.
pub async fn final_read(
    s: &Setup,
    python: &std::path::Path,
    within: Duration,
    reads: Reads,
    caught_up: bool,
) {
    let mut cmd = command(python, s, "final");
    cmd.arg(within.as_secs().to_string());
    let outcome = async {
        let mut child = cmd.spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let mut done = None;
        while let Some(line) = lines.next_line().await? {
            let this = record_line(&s.rec, &line, reads);
            if done.is_none() {
                done = this;
            }
        }
        let _ = child.wait().await;
        anyhow::Ok(done)
    };
    let (complete, detail) =
        match tokio::time::timeout(within + Duration::from_secs(30), outcome).await {
            Ok(Ok(Some(done))) => done,
            other => (
                false,
                format!("the final read_committed read did not finish: {other:?}"),
            ),
        };
    s.rec.record(match reads {
        Reads::Txn => Event::TxnFinalReadDone { complete, detail },
        Reads::CtpOutput => Event::CtpFinalReadDone {
            complete,
            caught_up,
            detail,
        },
    });
}

fn as_i32(v: &serde_json::Value) -> Option<i32> {
    v.as_i64().and_then(|p| i32::try_from(p).ok())
}

/// A `[partition, offset, value]` triple of a `ck_txn.py` line.
fn triple(v: &serde_json::Value) -> Option<(i32, i64, String)> {
    let r = v.as_array()?;
    Some((
        as_i32(r.first()?)?,
        r.get(1)?.as_i64()?,
        r.get(2)?.as_str()?.to_string(),
    ))
}

fn text(v: &serde_json::Value, key: &str) -> Option<String> {
    v.get(key).and_then(|x| x.as_str()).map(str::to_string)
}

/// Records one line of `ck_txn.py` (records read are recorded as `reads` says); its `done`
/// line is not recorded but returned (complete, detail), for the caller to record.
pub(crate) fn record_line(rec: &Recorder, line: &str, reads: Reads) -> Option<(bool, String)> {
    let v = serde_json::from_str::<serde_json::Value>(line).ok()?;
    if let Some(info) = text(&v, "info") {
        rec.info(info);
    } else if let Some((partition, offset, value)) = v.get("read").and_then(triple) {
        let t = rec.now();
        rec.record(match reads {
            Reads::Txn => Event::TxnRead {
                t,
                partition,
                offset,
                value,
            },
            Reads::CtpOutput => Event::CtpRead {
                t,
                partition,
                offset,
                value,
            },
        });
    } else if let Some((partition, offset, value)) = v.get("final").and_then(triple) {
        rec.record(match reads {
            Reads::Txn => Event::TxnFinalRead {
                partition,
                offset,
                value,
            },
            Reads::CtpOutput => Event::CtpFinalRead {
                partition,
                offset,
                value,
            },
        });
    } else if let Some(complete) = v.get("done").and_then(|d| d.as_bool()) {
        return Some((complete, text(&v, "detail").unwrap_or_default()));
    } else if let Some(txn) = text(&v, "txn") {
        record_txn(rec, &v, txn);
    } else if let Some(txn) = text(&v, "ctp") {
        record_ctp(rec, &v, txn);
    }
    None
}

/// (start, latency) of an outcome line that ends now.
fn timing(rec: &Recorder, v: &serde_json::Value) -> (u64, u64) {
    let latency = v.get("latency").and_then(|l| l.as_u64()).unwrap_or(0);
    (rec.now().saturating_sub(latency), latency)
}

fn record_txn(rec: &Recorder, v: &serde_json::Value, txn: String) {
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
    let (t, latency) = timing(rec, v);
    rec.record(Event::Txn {
        t,
        latency,
        txn,
        values,
        outcome: text(v, "outcome").unwrap_or_else(|| "unknown".into()),
        error: text(v, "error"),
    });
}

/// A processor transaction (`ck_txn.py process`).
fn record_ctp(rec: &Recorder, v: &serde_json::Value, txn: String) {
    let inputs = v
        .get("inputs")
        .and_then(|x| x.as_array())
        .map(|a| a.iter().filter_map(triple).collect())
        .unwrap_or_default();
    let offsets = v
        .get("offsets")
        .and_then(|x| x.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|po| {
                    let po = po.as_array()?;
                    Some((as_i32(po.first()?)?, po.get(1)?.as_i64()?))
                })
                .collect()
        })
        .unwrap_or_default();
    let (t, latency) = timing(rec, v);
    rec.record(Event::CtpTxn {
        t,
        latency,
        txn,
        inputs,
        offsets,
        outcome: text(v, "outcome").unwrap_or_else(|| "unknown".into()),
        error: text(v, "error"),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processor_and_output_lines_become_ctp_events() {
        let path = std::env::temp_dir().join(format!("runnel-faults-{}.jsonl", std::process::id()));
        let rec = Recorder::create(&path).unwrap();
        let txn = r#"{"ctp": "x0.1.0-4", "inputs": [[2, 17, "i0.0-9"]], "offsets": [[2, 18]], "outcome": "committed", "error": null, "latency": 12}"#;
        assert_eq!(record_line(&rec, txn, Reads::CtpOutput), None);
        let out = r#"{"final": [2, 5, "i0.0-9@17@x0.1.0-4"]}"#;
        assert_eq!(record_line(&rec, out, Reads::CtpOutput), None);
        let done = r#"{"done": true, "detail": "1 records"}"#;
        assert_eq!(
            record_line(&rec, done, Reads::CtpOutput),
            Some((true, "1 records".to_string()))
        );
        let events = rec.events();
        let _ = std::fs::remove_file(&path);
        assert!(matches!(
            &events[0],
            Event::CtpTxn { txn, inputs, offsets, outcome, .. }
                if txn == "x0.1.0-4" && inputs == &[(2, 17, "i0.0-9".to_string())]
                    && offsets == &[(2, 18)] && outcome == "committed"
        ));
        assert_eq!(
            events[1],
            Event::CtpFinalRead {
                partition: 2,
                offset: 5,
                value: "i0.0-9@17@x0.1.0-4".into()
            }
        );
        assert_eq!(events.len(), 2);
    }
}
