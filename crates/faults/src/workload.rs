//! The workload clients (the project's own client crate): idempotent acks=all producers
//! writing unique values `p<id>.<incarnation>-<seq>`, a consumer group that consumes and
//! commits, a watcher of the group's committed offsets, and the final read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use runnel_client::admin::OffsetSpec;
use runnel_client::{
    Admin, Client, ClientConfig, Consumer, ConsumerConfig, DeliveryFuture, GroupConfig,
    GroupConsumer, OffsetAndMetadata, Producer, ProducerConfig, ProducerRecord, StartPosition,
    TopicPartition,
};

use crate::history::{Event, Outcome, Recorder};

pub const GROUP: &str = "faults-queue";

/// Which workload a producer's values belong to (what its outcomes are recorded as).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The queue: `Produce` events, values `p<id>.<incarnation>-<seq>`.
    Queue,
    /// The inputs of the consume-transform-produce workload: `CtpInput` events, values
    /// `i<id>.<incarnation>-<seq>`.
    CtpInput,
}

#[derive(Clone)]
pub struct Setup {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: i32,
    pub rec: Recorder,
    pub stop: Arc<AtomicBool>,
    pub stream: Stream,
}

pub async fn client(bootstrap: &str) -> anyhow::Result<Arc<Client>> {
    let mut config = ClientConfig::new(bootstrap);
    config.retries = 20;
    config.connection.request_timeout = Duration::from_secs(5);
    Ok(Client::connect(config).await?)
}

/// Retries `client` until it connects or `deadline` passes.
pub async fn client_until(bootstrap: &str, deadline: Instant) -> anyhow::Result<Arc<Client>> {
    loop {
        match client(bootstrap).await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

struct Pending {
    t: u64,
    partition: i32,
    value: String,
    delivery: DeliveryFuture,
}

/// Records one produce outcome; whether it was acknowledged.
fn finish(
    s: &Setup,
    producer: &str,
    t: u64,
    partition: i32,
    value: String,
    r: runnel_client::Result<i64>,
) -> bool {
    let ok = r.is_ok();
    let outcome = match r {
        Ok(offset) => Outcome::Ok { offset },
        Err(e) => Outcome::Fail {
            error: e.to_string(),
        },
    };
    let (latency, producer) = (s.rec.now().saturating_sub(t), producer.to_string());
    s.rec.record(match s.stream {
        Stream::Queue => Event::Produce {
            t,
            latency,
            producer,
            partition,
            value,
            outcome,
        },
        Stream::CtpInput => Event::CtpInput {
            t,
            latency,
            producer,
            partition,
            value,
            outcome,
        },
    });
    ok
}

async fn new_producer(bootstrap: &str) -> anyhow::Result<Producer> {
    let config = ProducerConfig {
        acks: -1,
        idempotence: true,
        linger: Duration::from_millis(5),
        request_timeout: Duration::from_secs(5),
        retries: 30,
        ..ProducerConfig::default()
    };
    Ok(Producer::new(client(bootstrap).await?, config).await?)
}

/// Waits for the outstanding answers, each for at most 30 s (then: indeterminate).
async fn drain(s: &Setup, name: &str, pending: std::collections::VecDeque<Pending>) {
    for p in pending {
        let r = match tokio::time::timeout(Duration::from_secs(30), p.delivery.wait()).await {
            Ok(r) => r.map(|m| m.offset),
            Err(_) => Err(runnel_client::ClientError::Protocol(
                "no answer within 30 s".into(),
            )),
        };
        finish(s, name, p.t, p.partition, p.value, r);
    }
}

/// One producer: a fresh incarnation (new producer id) after any failed delivery, so a
/// sequence gap never wedges it. Runs until `stop`, then waits (bounded) for every answer.
pub async fn produce(s: Setup, id: usize, pace: Duration) {
    let mut seq = 0u64;
    let mut incarnation = 0u32;
    let partitions = u64::try_from(s.partitions).unwrap_or(1).max(1);
    let prefix = match s.stream {
        Stream::Queue => "p",
        Stream::CtpInput => "i",
    };
    while !s.stop.load(Ordering::SeqCst) {
        let name = format!("{prefix}{id}.{incarnation}");
        let producer = match new_producer(&s.bootstrap).await {
            Ok(p) => p,
            Err(e) => {
                s.rec.info(format!("{name}: cannot start: {e}"));
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let mut pending: std::collections::VecDeque<Pending> = Default::default();
        let mut failed = false;
        while !s.stop.load(Ordering::SeqCst) && !failed {
            let partition = i32::try_from(seq % partitions).unwrap_or(0);
            let value = format!("{name}-{seq}");
            seq += 1;
            let t = s.rec.now();
            let record =
                ProducerRecord::new(s.topic.clone(), value.clone()).with_partition(partition);
            match producer.send(record).await {
                Ok(delivery) => pending.push_back(Pending {
                    t,
                    partition,
                    value,
                    delivery,
                }),
                Err(e) => {
                    finish(&s, &name, t, partition, value, Err(e));
                    failed = true;
                }
            }
            for p in std::mem::take(&mut pending) {
                match p.delivery.try_result() {
                    Some(r) => {
                        failed |= !finish(&s, &name, p.t, p.partition, p.value, r.map(|m| m.offset))
                    }
                    None => pending.push_back(p),
                }
            }
            // A backlog cap far above one stuck partition's share, so a partition that
            // cannot make progress does not stall the others (unavailability is the cluster's).
            if pending.len() >= 3000 {
                if let Some(p) = pending.pop_front() {
                    let r = p.delivery.wait().await.map(|m| m.offset);
                    failed |= !finish(&s, &name, p.t, p.partition, p.value, r);
                }
            }
            tokio::time::sleep(pace).await;
        }
        drain(&s, &name, pending).await;
        producer.close().await;
        if failed {
            s.rec
                .info(format!("{name}: a delivery failed; next incarnation"));
        }
        incarnation += 1;
    }
}

/// A group member: polls, records what it read, commits its positions after every poll.
/// A member that fails is replaced by a new one (a new member id, a rebalance).
pub async fn consume(s: Setup, id: usize) {
    let mut incarnation = 0;
    while !s.stop.load(Ordering::SeqCst) {
        let name = format!("c{id}.{incarnation}");
        incarnation += 1;
        let client = match client(&s.bootstrap).await {
            Ok(c) => c,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let mut config = GroupConfig::new(GROUP);
        config.session_timeout = Duration::from_secs(6);
        config.heartbeat_interval = Duration::from_millis(1000);
        config.enable_auto_commit = false;
        config.fetch.auto_offset_reset = runnel_client::AutoOffsetReset::Earliest;
        let Ok(mut member) = GroupConsumer::new(client, config) else {
            return;
        };
        member.subscribe(&[s.topic.as_str()]);
        if let Err(e) = member_loop(&s, &name, &mut member).await {
            s.rec.info(format!("{name}: {e}; a new member takes over"));
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), member.close()).await;
    }
}

async fn member_loop(s: &Setup, name: &str, member: &mut GroupConsumer) -> anyhow::Result<()> {
    let mut errors = 0;
    while !s.stop.load(Ordering::SeqCst) {
        let records = match member.poll(Duration::from_millis(500)).await {
            Ok(r) => r,
            Err(e) => {
                errors += 1;
                if errors > 20 {
                    return Err(e.into());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let t = s.rec.now();
        for r in records {
            s.rec.record(Event::Read {
                t,
                reader: name.to_string(),
                partition: r.partition,
                offset: r.offset,
                value: String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into(),
            });
        }
        let offsets: Vec<(TopicPartition, OffsetAndMetadata)> = member
            .assignment()
            .into_iter()
            .filter_map(|tp| {
                let pos = member.position(&tp)?;
                Some((tp, OffsetAndMetadata::new(pos)))
            })
            .collect();
        let t = s.rec.now();
        match member.commit_offsets(offsets.clone()).await {
            Ok(()) => {
                errors = 0;
                let latency = s.rec.now().saturating_sub(t);
                for (tp, o) in offsets {
                    s.rec.record(Event::Commit {
                        t,
                        latency,
                        member: name.to_string(),
                        partition: tp.partition,
                        offset: o.offset,
                    });
                }
            }
            Err(_) => errors += 1,
        }
        if errors > 20 {
            anyhow::bail!("too many failed polls or commits");
        }
    }
    Ok(())
}

/// Fetches `group`'s committed offsets of the setup's topic every 300 ms (workload b: they
/// never go back), recorded as `CommittedSeen` (or `CtpCommittedSeen` for the
/// consume-transform-produce workload's input).
pub async fn watch_offsets(s: Setup, group: &'static str) {
    let mut admin = None;
    while !s.stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        if admin.is_none() {
            admin = client(&s.bootstrap).await.ok().map(Admin::new);
        }
        let Some(a) = admin.as_ref() else { continue };
        let t = s.rec.now();
        if let Ok(Ok(list)) =
            tokio::time::timeout(Duration::from_secs(5), a.list_group_offsets(group, None)).await
        {
            let latency = s.rec.now().saturating_sub(t);
            for (tp, o) in list {
                if let (true, Some(o)) = (tp.topic == s.topic, o) {
                    let (partition, offset) = (tp.partition, o.offset);
                    s.rec.record(match s.stream {
                        Stream::Queue => Event::CommittedSeen {
                            t,
                            latency,
                            partition,
                            offset,
                        },
                        Stream::CtpInput => Event::CtpCommittedSeen {
                            t,
                            latency,
                            partition,
                            offset,
                        },
                    });
                }
            }
        }
    }
}

/// Each partition's end offset (high watermark), retried until `deadline`.
pub(crate) async fn end_offsets(
    admin: &Admin,
    topic: &str,
    partitions: i32,
    deadline: Instant,
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let queries: Vec<(String, i32, OffsetSpec)> = (0..partitions)
        .map(|p| (topic.to_string(), p, OffsetSpec::Latest))
        .collect();
    loop {
        let mut out = BTreeMap::new();
        if let Ok(results) = admin.list_offsets(&queries).await {
            for ((_, p), r) in results {
                if let Ok(o) = r {
                    out.insert(p, o.offset);
                }
            }
        }
        if out.len() == usize::try_from(partitions).unwrap_or(0) {
            return Ok(out);
        }
        if Instant::now() > deadline {
            anyhow::bail!("end offsets of {}/{partitions} partitions only", out.len());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Reads every partition from its log start to its end offset; records a `FinalReadDone`.
pub async fn final_read(s: &Setup, within: Duration) {
    let deadline = Instant::now() + within;
    let (complete, detail) = match final_read_inner(s, deadline).await {
        Ok(n) => (true, format!("{n} records")),
        Err(e) => (false, e.to_string()),
    };
    s.rec.record(Event::FinalReadDone { complete, detail });
}

async fn final_read_inner(s: &Setup, deadline: Instant) -> anyhow::Result<usize> {
    let client = client_until(&s.bootstrap, deadline).await?;
    let admin = Admin::new(client.clone());
    let ends = end_offsets(&admin, &s.topic, s.partitions, deadline).await?;
    let mut consumer = Consumer::new(client, ConsumerConfig::default());
    consumer.assign(
        (0..s.partitions)
            .map(|p| (s.topic.clone(), p, StartPosition::Earliest))
            .collect(),
    );
    let mut n = 0;
    loop {
        let done = ends.iter().all(|(p, end)| {
            consumer
                .position(&s.topic, *p)
                .is_some_and(|pos| pos >= *end)
        });
        if done {
            return Ok(n);
        }
        if Instant::now() > deadline {
            anyhow::bail!("final read did not reach the end offsets {ends:?} in time");
        }
        let records = match consumer.poll(Duration::from_millis(500)).await {
            Ok(r) => r,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        for r in records {
            if r.offset >= ends[&r.partition] {
                continue;
            }
            n += 1;
            s.rec.record(Event::FinalRead {
                partition: r.partition,
                offset: r.offset,
                value: String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into(),
            });
        }
    }
}

/// A confluent-kafka (librdkafka) producer: `ck_producer.py` run by `python`, its outcome
/// lines recorded like the Rust producers'. Stops when `stop` is set (stdin closed, SIGTERM),
/// then waits (bounded) for its last answers.
pub async fn produce_confluent(s: Setup, id: usize, python: std::path::PathBuf, pace: Duration) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/ck_producer.py");
    let mut cmd = tokio::process::Command::new(&python);
    cmd.arg(script)
        .arg(&s.bootstrap)
        .arg(&s.topic)
        .arg(s.partitions.to_string())
        .arg(id.to_string())
        .arg(pace.as_millis().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    run_child_until_stop(
        s,
        cmd,
        format!("confluent-kafka producer {id}"),
        record_confluent,
    )
    .await;
}

/// Runs a workload child process (stdin and stdout piped) until `stop`, handing each of its
/// stdout lines to `record`; then closes its stdin and waits for it, bounded.
pub(crate) async fn run_child_until_stop(
    s: Setup,
    mut cmd: tokio::process::Command,
    what: String,
    record: fn(&Recorder, &str),
) {
    use tokio::io::AsyncBufReadExt;
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return s.rec.info(format!("{what}: {e}")),
    };
    let stdin = child.stdin.take();
    let Some(stdout) = child.stdout.take() else {
        return;
    };
    let rec = s.rec.clone();
    let reader = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            record(&rec, &line);
        }
    });
    while !s.stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(45), child.wait()).await;
    let _ = child.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
}

fn record_confluent(rec: &Recorder, line: &str) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return;
    };
    if let Some(info) = v.get("info").and_then(|i| i.as_str()) {
        return rec.info(info.to_string());
    }
    let latency = v.get("latency").and_then(|l| l.as_u64()).unwrap_or(0);
    let now = rec.now();
    let outcome = match (v.get("offset").and_then(|o| o.as_i64()), v.get("error")) {
        (Some(offset), None) => Outcome::Ok { offset },
        (_, e) => Outcome::Fail {
            error: e.and_then(|e| e.as_str()).unwrap_or("unknown").to_string(),
        },
    };
    rec.record(Event::Produce {
        t: now.saturating_sub(latency),
        latency,
        producer: v
            .get("producer")
            .and_then(|p| p.as_str())
            .unwrap_or("k?")
            .to_string(),
        partition: v
            .get("partition")
            .and_then(|p| p.as_i64())
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(-1),
        value: v
            .get("value")
            .and_then(|p| p.as_str())
            .unwrap_or_default()
            .to_string(),
        outcome,
    });
}
