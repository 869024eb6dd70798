//! The recorded history of a run: one JSON object a line (`history.jsonl` in the run dir).
//! Times are milliseconds since the run started. Every event is what a client or the nemesis
//! saw; the checker judges only this.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The outcome of one produce: acknowledged at an offset, or failed (indeterminate in Kafka:
/// a failed send may still have been written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    Ok { offset: i64 },
    Fail { error: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A fault began (`start`) or healed (`stop`).
    Nemesis {
        t: u64,
        phase: String,
        fault: String,
    },
    /// Whether the live, unpaused nodes still held a pairwise-connected majority from `t` on.
    Topology { t: u64, majority_connected: bool },
    /// One produced value: invoked at `t`, completed `latency` ms later.
    Produce {
        t: u64,
        latency: u64,
        producer: String,
        partition: i32,
        value: String,
        outcome: Outcome,
    },
    /// A record a group consumer read while the run went on.
    Read {
        t: u64,
        reader: String,
        partition: i32,
        offset: i64,
        value: String,
    },
    /// A record of the final read (every partition from its log start, after healing).
    FinalRead {
        partition: i32,
        offset: i64,
        value: String,
    },
    /// Whether the final read reached every partition's end offset.
    FinalReadDone { complete: bool, detail: String },
    /// A successful offset commit (`offset` = next to read), completed at `t + latency`.
    Commit {
        t: u64,
        latency: u64,
        member: String,
        partition: i32,
        offset: i64,
    },
    /// A committed offset fetched from the coordinator, invoked at `t`.
    CommittedSeen {
        t: u64,
        latency: u64,
        partition: i32,
        offset: i64,
    },
    /// One transaction of the transactional workload, completed at `t + latency`. `outcome`:
    /// `committed` (commit confirmed), `aborted` (commit never requested: none of its values
    /// may ever be read committed) or `unknown` (commit requested, not confirmed).
    Txn {
        t: u64,
        latency: u64,
        txn: String,
        values: Vec<(i32, String)>,
        outcome: String,
        error: Option<String>,
    },
    /// A record a read_committed consumer read while the run went on.
    TxnRead {
        t: u64,
        partition: i32,
        offset: i64,
        value: String,
    },
    /// A record of the final read_committed read of the transactional topic.
    TxnFinalRead {
        partition: i32,
        offset: i64,
        value: String,
    },
    /// Whether that read reached every partition's high watermark (no transaction open).
    TxnFinalReadDone { complete: bool, detail: String },
    /// An input record of the consume-transform-produce workload (`ctp_workload.rs`): one
    /// produced value, as `Produce` but of the input topic.
    CtpInput {
        t: u64,
        latency: u64,
        producer: String,
        partition: i32,
        value: String,
        outcome: Outcome,
    },
    /// One transaction of the processor, completed at `t + latency`: the input records it
    /// consumed (partition, offset, value), the offsets it committed with the transaction
    /// (partition, next offset to read) and its outcome, as for `Txn`.
    CtpTxn {
        t: u64,
        latency: u64,
        txn: String,
        inputs: Vec<(i32, i64, String)>,
        offsets: Vec<(i32, i64)>,
        outcome: String,
        error: Option<String>,
    },
    /// An output record a read_committed consumer read while the run went on.
    CtpRead {
        t: u64,
        partition: i32,
        offset: i64,
        value: String,
    },
    /// A record of the final read_committed read of the output topic.
    CtpFinalRead {
        partition: i32,
        offset: i64,
        value: String,
    },
    /// Whether that read reached every partition's high watermark, after the processor had
    /// consumed every input (`caught_up`: its committed offsets reached the input's end).
    CtpFinalReadDone {
        complete: bool,
        caught_up: bool,
        detail: String,
    },
    /// The processor group's committed offset of an input partition, fetched (invoked at `t`).
    CtpCommittedSeen {
        t: u64,
        latency: u64,
        partition: i32,
        offset: i64,
    },
    /// The processor's harness: `action` is `start`, `kill -9`, `pause` (a zombie: a new
    /// process takes over while it is stopped), `resume` or `exited`, of process `launch`.
    CtpProcess { t: u64, action: String, launch: u32 },
    /// Something a person should know (a node that exited on its own, a producer restart).
    Info { t: u64, message: String },
}

/// Appends events to `history.jsonl` and keeps them in memory for the checker.
#[derive(Clone)]
pub struct Recorder {
    started: Instant,
    inner: Arc<Mutex<(std::fs::File, Vec<Event>)>>,
}

impl Recorder {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::create(path)?;
        Ok(Self {
            started: Instant::now(),
            inner: Arc::new(Mutex::new((file, Vec::new()))),
        })
    }

    /// Milliseconds since the run started.
    pub fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn record(&self, event: Event) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Ok(line) = serde_json::to_string(&event) {
            let _ = writeln!(guard.0, "{line}");
        }
        guard.1.push(event);
    }

    pub fn info(&self, message: impl Into<String>) {
        let message = message.into();
        eprintln!("[{:>7.1}s] {message}", self.now() as f64 / 1000.0);
        self.record(Event::Info {
            t: self.now(),
            message,
        });
    }

    /// Looks at the events so far without copying them.
    pub fn scan<R>(&self, f: impl FnOnce(&[Event]) -> R) -> R {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&guard.1)
    }

    pub fn events(&self) -> Vec<Event> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let _ = (&guard.0).flush();
        guard.1.clone()
    }
}

/// Reads a `history.jsonl` back (for `--check DIR`: re-judging a recorded run).
pub fn load(path: &Path) -> anyhow::Result<Vec<Event>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Ok(serde_json::from_str(l)?))
        .collect()
}
