//! Real-process fault test: three brokers, a topic with RF 3 and `min.insync.replicas=2`, and
//! the project's own idempotent producer (acks=all) writing sequence-numbered records while the
//! test `kill -9`s the leader, restarts it, and kills another broker. At the end every
//! acknowledged record is in the log exactly once, in production order per partition, and a
//! preferred-leader election puts every leadership back on its preferred replica.
//!
//! Two deterministic, protocol-level tests pin down the broker side of it: a new leader knows
//! the idempotent producers of the log it replicated, and a deposed leader does not acknowledge
//! an acks=all write the new leader never had.
//!
//! The longer, randomised version of the first scenario is `scripts/chaos`.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    create_topics_request, elect_leaders_request, produce_request, ApiKey, BrokerId,
    CreateTopicsRequest, CreateTopicsResponse, ElectLeadersRequest, ElectLeadersResponse,
    InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse, ProducerId,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use runnel_client::admin::{ElectionType, NewTopic, OffsetSpec};
use runnel_client::{
    Admin, Client, ClientConfig, Consumer, ConsumerConfig, DeliveryFuture, Producer,
    ProducerConfig, ProducerRecord, StartPosition,
};
use support::cluster::*;
use support::*;

const TOPIC: &str = "fault";
const PARTITIONS: i32 = 3;

/// What happened to one sent record: its sequence number, the partition it was sent to, and
/// the acknowledged offset (-1 when acknowledged as a duplicate of an earlier attempt) or the
/// error.
type Outcome = (u64, i32, Result<i64, String>);

/// Everything the producer task reports when it stops.
struct Produced {
    outcomes: Vec<Outcome>,
    elapsed: Duration,
}

fn partition_of(seq: u64) -> i32 {
    (seq % PARTITIONS as u64) as i32
}

/// Writes records whose value is their sequence number (partition = seq % 3) until `stop`,
/// then flushes and reports every record's outcome. `progress` counts outcomes as they come,
/// so the test can wait for progress.
async fn produce(bootstrap: String, stop: Arc<AtomicBool>, progress: Arc<Progress>) -> Produced {
    let started = Instant::now();
    let client = Client::connect(ClientConfig::new(&bootstrap))
        .await
        .expect("producer connects");
    let config = ProducerConfig {
        acks: -1,
        idempotence: true,
        linger: Duration::from_millis(5),
        request_timeout: Duration::from_secs(10),
        // Enough for any failover in this test (backoff is capped at 1 s); a record that still
        // fails is reported, not silently dropped.
        retries: 40,
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client, config)
        .await
        .expect("idempotent producer (InitProducerId)");
    let mut pending: std::collections::VecDeque<(u64, i32, DeliveryFuture)> = Default::default();
    let mut outcomes = Vec::new();
    let finish =
        |seq: u64, partition: i32, r: runnel_client::Result<runnel_client::RecordMetadata>| {
            let r = r.map(|m| m.offset).map_err(|e| e.to_string());
            match &r {
                Ok(_) => {
                    progress.acked[partition as usize].fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => progress.failed(seq, partition, e),
            }
            (seq, partition, r)
        };
    let mut seq = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let partition = partition_of(seq);
        let record = ProducerRecord::new(TOPIC, seq.to_string()).with_partition(partition);
        match producer.send(record).await {
            Ok(delivery) => pending.push_back((seq, partition, delivery)),
            Err(e) => {
                let e = format!("send: {e}");
                progress.failed(seq, partition, &e);
                outcomes.push((seq, partition, Err(e)));
            }
        }
        seq += 1;
        // Collect every completed send (partitions complete independently).
        for (s, p, d) in std::mem::take(&mut pending) {
            match d.try_result() {
                Some(r) => outcomes.push(finish(s, p, r)),
                None => pending.push_back((s, p, d)),
            }
        }
        // Bounded backlog: while the cluster fails over, wait for the oldest record.
        if pending.len() >= 2000 {
            let (s, p, d) = pending.pop_front().expect("front");
            outcomes.push(finish(s, p, d.wait().await));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    producer.flush().await;
    for (s, p, d) in pending {
        outcomes.push(finish(s, p, d.wait().await));
    }
    producer.close().await;
    Produced {
        outcomes,
        elapsed: started.elapsed(),
    }
}

/// Every partition of the topic, as every running node sees it, when they all agree.
fn agreed_states(cluster: &Cluster) -> Option<Vec<PartitionState>> {
    agreed_topic_states(cluster, TOPIC).filter(|s| s.len() == PARTITIONS as usize)
}

/// Every partition of `topic`, as every running node sees it, when they all agree.
fn agreed_topic_states(cluster: &Cluster, topic: &str) -> Option<Vec<PartitionState>> {
    let mut views = cluster
        .alive()
        .into_iter()
        .map(|i| partition_states(&cluster.addr(i), topic));
    let first = views.next()??;
    for view in views {
        if view? != first {
            return None;
        }
    }
    (!first.is_empty()).then_some(first)
}

/// What the producer got so far: acknowledgements per partition, and the first failures.
#[derive(Default)]
struct Progress {
    acked: [AtomicUsize; PARTITIONS as usize],
    failures: AtomicUsize,
    first_failures: Mutex<Vec<String>>,
}

impl Progress {
    fn counts(&self) -> Vec<usize> {
        self.acked
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .collect()
    }

    fn failed(&self, seq: u64, partition: i32, error: &str) {
        self.failures.fetch_add(1, Ordering::SeqCst);
        let mut first = self
            .first_failures
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if first.len() < 5 {
            first.push(format!("seq {seq} (partition {partition}): {error}"));
        }
    }
}

/// Waits until every partition has `more` further acknowledgements. A partition that stays
/// stuck means the producer's sends fail or keep being retried (the failures are in the
/// message; RUNNEL_TEST_CLIENT_LOG=runnel_client=debug shows the retries).
fn wait_for_progress(progress: &Progress, more: usize, what: &str) {
    let from = progress.counts();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = progress.counts();
        if now.iter().zip(&from).all(|(n, f)| *n >= f + more) {
            return;
        }
        if Instant::now() >= deadline {
            let first = progress
                .first_failures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            panic!(
                "timed out waiting for {what}: acknowledged per partition {from:?} -> {now:?} in \
                 {DEADLINE:?}; {} sends failed, first: {first:?}",
                progress.failures.load(Ordering::SeqCst),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills (SIGKILL) the node `victim`, waits until every partition has a leader on another
/// node and the producer got acknowledgements again, restarts it, and waits until it is back
/// in every ISR. Returns how long the failover took (kill to a new leader everywhere).
fn kill9_and_recover(cluster: &mut Cluster, victim: i32, progress: &Progress) -> Duration {
    let index = cluster.index_of(victim);
    let before = agreed_states(cluster).expect("states before the kill");
    let killed = Instant::now();
    cluster.kill9(index);
    wait_until(
        "a new leader, not the killed node, for every partition",
        || {
            agreed_states(cluster).is_some_and(|s| {
                s.iter().zip(&before).all(|(p, b)| {
                    p.leader > 0 && p.leader != victim && p.leader_epoch >= b.leader_epoch
                })
            })
        },
    );
    let failover = killed.elapsed();
    wait_for_progress(progress, 50, "acknowledgements from the new leaders");
    cluster.restart(index);
    wait_until("the restarted node back in every ISR", || {
        agreed_states(cluster).is_some_and(|s| s.iter().all(|p| p.isr == vec![1, 2, 3]))
    });
    wait_for_progress(progress, 50, "acknowledgements with the full ISR again");
    failover
}

/// Reads every partition from the beginning up to `end`; returns (partition -> [(offset, seq)]).
async fn consume_all(bootstrap: &str, end: &HashMap<i32, i64>) -> BTreeMap<i32, Vec<(i64, u64)>> {
    let client = Client::connect(ClientConfig::new(bootstrap))
        .await
        .expect("consumer connects");
    let mut consumer = Consumer::new(client, ConsumerConfig::default());
    consumer
        .assign_topic(TOPIC, StartPosition::Earliest)
        .await
        .expect("assign the topic");
    let mut out: BTreeMap<i32, Vec<(i64, u64)>> = BTreeMap::new();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let done = (0..PARTITIONS).all(|p| {
            consumer
                .position(TOPIC, p)
                .is_some_and(|pos| pos >= end[&p])
        });
        if done {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "the consumer did not reach the end offsets {end:?} in time"
        );
        for r in consumer
            .poll(Duration::from_millis(500))
            .await
            .expect("poll")
        {
            if r.offset >= end[&r.partition] {
                continue;
            }
            let value = r.value.as_deref().unwrap_or_default();
            let seq: u64 = std::str::from_utf8(value)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| {
                    panic!(
                        "not a sequence number at {}@{}: {value:?}",
                        r.partition, r.offset
                    )
                });
            out.entry(r.partition).or_default().push((r.offset, seq));
        }
    }
}

#[test]
fn acks_all_idempotent_producer_loses_and_duplicates_nothing_across_kill9s() {
    let test_started = Instant::now();
    // The client's own tracing (retries, errors), e.g. RUNNEL_TEST_CLIENT_LOG=runnel_client=debug.
    if let Ok(filter) = std::env::var("RUNNEL_TEST_CLIENT_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
    let mut cluster = Cluster::start(
        3,
        &[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=300",
            // The explicit preferred election at the end must be what moves leaders back.
            "auto.leader.rebalance.enable=false",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    let bootstrap = cluster.bootstrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let admin = rt.block_on(async {
        Admin::new(
            Client::connect(ClientConfig::new(&bootstrap))
                .await
                .expect("admin connects"),
        )
    });
    let mut topic = NewTopic::new(TOPIC, PARTITIONS, 3);
    topic.configs = vec![("min.insync.replicas".into(), "2".into())];
    let created = rt
        .block_on(admin.create_topics(&[topic], false, Duration::from_secs(10)))
        .expect("CreateTopics");
    assert!(created[0].1.is_ok(), "create {TOPIC}: {:?}", created[0].1);
    wait_until("a leader and a full ISR for every partition", || {
        agreed_states(&cluster)
            .is_some_and(|s| s.iter().all(|p| p.leader > 0 && p.isr == vec![1, 2, 3]))
    });
    let preferred: Vec<i32> = agreed_states(&cluster)
        .unwrap()
        .iter()
        .map(|p| p.replicas[0])
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(Progress::default());
    let producer = rt.spawn(produce(bootstrap.clone(), stop.clone(), progress.clone()));
    wait_for_progress(&progress, 100, "the first acknowledgements");

    // 1. kill -9 the leader of partition 0, restart it.
    let first = agreed_states(&cluster).unwrap()[0].leader;
    let failover1 = kill9_and_recover(&mut cluster, first, &progress);
    // 2. kill -9 another broker: a leader again (the one of the lowest partition it leads).
    let second = agreed_states(&cluster)
        .unwrap()
        .iter()
        .map(|p| p.leader)
        .find(|l| *l != first)
        .expect("a partition led by another node than the first victim");
    let failover2 = kill9_and_recover(&mut cluster, second, &progress);

    stop.store(true, Ordering::SeqCst);
    let produced = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), producer)
            .await
            .expect("the producer finishes (flush) in time")
            .expect("producer task")
    });

    // Preferred-leader election; then every partition is led by its first replica again.
    let leaders_before: Vec<i32> = agreed_states(&cluster)
        .unwrap()
        .iter()
        .map(|p| p.leader)
        .collect();
    let results = rt
        .block_on(admin.elect_leaders(ElectionType::Preferred, None, Duration::from_secs(10)))
        .expect("ElectLeaders");
    for (tp, r) in &results {
        // ELECTION_NOT_NEEDED (84): already led by its preferred replica.
        assert!(
            r.is_ok() || r.as_ref().err().and_then(|e| e.code()) == Some(84),
            "preferred election for {tp}: {r:?}"
        );
    }
    wait_until("every partition led by its preferred replica", || {
        agreed_states(&cluster).is_some_and(|s| {
            s.iter()
                .all(|p| p.leader == p.replicas[0] && p.isr == vec![1, 2, 3])
        })
    });
    let after: Vec<i32> = agreed_states(&cluster)
        .unwrap()
        .iter()
        .map(|p| p.leader)
        .collect();
    assert_eq!(after, preferred, "the preferred replicas lead again");

    // Every acknowledged offset must be below the high watermark the consumer reads to.
    let mut acked_end: HashMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    for (_, p, r) in &produced.outcomes {
        if let Ok(offset) = r {
            let e = acked_end.get_mut(p).unwrap();
            *e = (*e).max(offset + 1);
        }
    }
    let mut end: HashMap<i32, i64> = HashMap::new();
    wait_until("high watermarks covering every acknowledged offset", || {
        let queries: Vec<(String, i32, OffsetSpec)> = (0..PARTITIONS)
            .map(|p| (TOPIC.to_string(), p, OffsetSpec::Latest))
            .collect();
        let Ok(listed) = rt.block_on(admin.list_offsets(&queries)) else {
            return false;
        };
        end = listed
            .into_iter()
            .filter_map(|((_, p), r)| r.ok().map(|o| (p, o.offset)))
            .collect();
        (0..PARTITIONS).all(|p| end.get(&p).is_some_and(|e| *e >= acked_end[&p]))
    });
    let consumed = rt.block_on(consume_all(&bootstrap, &end));

    // The checks.
    let acked_seqs: Vec<u64> = produced
        .outcomes
        .iter()
        .filter(|(_, _, r)| r.is_ok())
        .map(|(s, _, _)| *s)
        .collect();
    let failed: Vec<&Outcome> = produced
        .outcomes
        .iter()
        .filter(|(_, _, r)| r.is_err())
        .collect();
    let mut count: HashMap<u64, usize> = HashMap::new();
    let mut disorder = Vec::new();
    let mut misplaced = Vec::new();
    for (p, records) in &consumed {
        for w in records.windows(2) {
            if w[1].1 <= w[0].1 {
                disorder.push((*p, w[0], w[1]));
            }
        }
        for (offset, seq) in records {
            *count.entry(*seq).or_default() += 1;
            if partition_of(*seq) != *p {
                misplaced.push((*p, *offset, *seq));
            }
        }
    }
    let mut duplicates: Vec<(u64, usize)> = count
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(s, n)| (*s, *n))
        .collect();
    duplicates.sort();
    let missing: Vec<u64> = acked_seqs
        .iter()
        .copied()
        .filter(|s| !count.contains_key(s))
        .collect();
    let where_dup: Vec<String> = duplicates
        .iter()
        .take(10)
        .map(|(s, _)| {
            let p = partition_of(*s);
            let offsets: Vec<i64> = consumed[&p]
                .iter()
                .filter(|(_, v)| v == s)
                .map(|(o, _)| *o)
                .collect();
            format!("{s} at {p}@{offsets:?}")
        })
        .collect();
    let summary = format!(
        "sent {}, acked {}, failed {}, consumed {}, missing {}, duplicates {}, out of order {}, \
         misplaced {}; victims {first} then {second}, failovers {failover1:?} / {failover2:?}; \
         leaders before the election {leaders_before:?}, after {after:?}; producing took {:?}, \
         the test {:?}",
        produced.outcomes.len(),
        acked_seqs.len(),
        failed.len(),
        count.values().sum::<usize>(),
        missing.len(),
        duplicates.len(),
        disorder.len(),
        misplaced.len(),
        produced.elapsed,
        test_started.elapsed(),
    );
    eprintln!("{summary}");
    assert!(
        missing.is_empty(),
        "acknowledged records missing (first: {:?}): {summary}",
        &missing[..missing.len().min(20)]
    );
    assert!(
        duplicates.is_empty(),
        "records present more than once ({}): {summary}",
        where_dup.join("; ")
    );
    assert!(
        disorder.is_empty(),
        "records out of production order (first: {:?}): {summary}",
        &disorder[..disorder.len().min(10)]
    );
    assert!(
        misplaced.is_empty(),
        "records in the wrong partition: {misplaced:?}"
    );
    assert!(
        failed.is_empty(),
        "sends failed although two of three brokers were always up (first: {:?}): {summary}",
        &failed[..failed.len().min(5)]
    );
    assert!(
        acked_seqs.len() > 1000,
        "too little was produced: {summary}"
    );
}

/// The broker side of the scenario above, deterministic and at the protocol level: the replica
/// that takes over leadership knows the idempotent producer from the log it replicated. The
/// retry of a batch whose acknowledgement died with the old leader is answered with the
/// original offset (not appended twice), and the next batch in sequence is accepted (not
/// refused with OUT_OF_ORDER_SEQUENCE_NUMBER). Whichever follower is elected, one restarted
/// after the first batch (its producer state rebuilt from its log at startup) or one never
/// restarted, both must hold.
#[test]
fn the_new_leader_knows_the_idempotent_producer_from_the_replicated_log() {
    let mut cluster = Cluster::start(
        3,
        &[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=300",
            "auto.leader.rebalance.enable=false",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    let topic = "handover";
    let mut wire = Wire::connect(&cluster.addr(0));
    let created = wire.create_topic(topic, 1, 3, &[("min.insync.replicas", "2")]);
    assert_eq!(created.0, 0, "{created:?}");
    let full_isr = |cluster: &Cluster| {
        agreed_topic_states(cluster, topic)
            .is_some_and(|s| s[0].leader > 0 && s[0].isr == vec![1, 2, 3])
    };
    wait_until("a leader and a full ISR", || full_isr(&cluster));
    let leader = agreed_topic_states(&cluster, topic).unwrap()[0].leader;
    let mut to_leader = Wire::connect(&cluster.addr(cluster.index_of(leader)));
    let init: InitProducerIdResponse = to_leader.call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(init.error_code, 0);
    let batch = |seq: i32, vals: &[&str]| {
        idempotent_batch(init.producer_id.0, init.producer_epoch, seq, vals)
    };
    assert_eq!(
        to_leader.produce(topic, 0, batch(0, &["a", "b"]), -1),
        (0, 0)
    );
    // Restart one follower: it rebuilds its producer state from its log (sequences 0-1).
    let restarted = (1..=3).find(|id| *id != leader).unwrap();
    cluster.restart(cluster.index_of(restarted));
    wait_until("the restarted follower back in the ISR", || {
        full_isr(&cluster)
    });
    let mut to_leader = Wire::connect(&cluster.addr(cluster.index_of(leader)));
    // acks=all: every replica has sequences 2-3 once this is acknowledged.
    assert_eq!(
        to_leader.produce(topic, 0, batch(2, &["c", "d"]), -1),
        (0, 2)
    );
    cluster.kill9(cluster.index_of(leader));
    wait_until("a new leader", || {
        agreed_topic_states(&cluster, topic)
            .is_some_and(|s| s[0].leader > 0 && s[0].leader != leader)
    });
    let successor = agreed_topic_states(&cluster, topic).unwrap()[0].leader;
    let kind = if successor == restarted {
        "the restarted follower"
    } else {
        "the follower never restarted"
    };
    let mut to_new = Wire::connect(&cluster.addr(cluster.index_of(successor)));
    wait_until("the new leader serves the partition", || {
        to_new.fetch(topic, 0, 0, 100).0 == 0
    });
    assert_eq!(
        to_new.produce(topic, 0, batch(2, &["c", "d"]), -1),
        (0, 2),
        "{kind} ({successor}) answers the retry of a replicated batch with its offset"
    );
    assert_eq!(
        to_new.produce(topic, 0, batch(4, &["e"]), -1),
        (0, 4),
        "{kind} ({successor}) takes the next sequence"
    );
    assert_eq!(
        values(&to_new.fetch_all(topic, 0, 0)),
        vec!["a", "b", "c", "d", "e"],
        "every record once, in order, on {kind} ({successor})"
    );
}

/// A leader that loses its leadership while an acks=all write waits for its followers must not
/// acknowledge that write once its high watermark passes the offset again: by then it has
/// truncated the write away (the new leader never had it) and the offset holds another record.
/// Kafka answers such a waiting produce with NOT_LEADER_OR_FOLLOWER when the leader changes.
///
/// Made deterministic with SIGSTOP (session and lag timeouts longer than the freezes keep frozen
/// nodes registered and in the ISR): the preferred replica P is frozen while the old leader L appends the write
/// W, P is elected while frozen, L is frozen and P resumed, so P leads without W and takes
/// another record at W's offset; then L resumes, truncates W, copies that record, and its HW
/// passes W's offset while W's produce still waits.
#[test]
fn a_deposed_leader_does_not_acknowledge_a_write_the_new_leader_never_had() {
    let mut cluster = Cluster::start(
        3,
        &[
            // Long enough for the freezes below (a few seconds), short enough for the restart
            // of P, which waits for its previous session to expire.
            "broker.session.timeout.ms=10000",
            "broker.heartbeat.interval.ms=300",
            "replica.lag.time.max.ms=10000",
            "auto.leader.rebalance.enable=false",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    let topic = "deposed";
    // Roles: T, the quorum leader (the controller), is never frozen; P is the preferred
    // replica; L leads first.
    let (t, _, _) = quorum(&cluster.addr(0)).expect("a quorum leader");
    let others: Vec<i32> = (1..=3).filter(|id| *id != t).collect();
    let (p, l) = (others[0], others[1]);
    let mut wire = Wire::connect(&cluster.addr(0));
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("deposed")))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![
                create_topics_request::CreatableReplicaAssignment::default()
                    .with_partition_index(0)
                    .with_broker_ids(vec![BrokerId(p), BrokerId(l), BrokerId(t)]),
            ])]);
    let created: CreateTopicsResponse = wire.call(ApiKey::CreateTopics, 5, &create);
    assert_eq!(created.topics[0].error_code, 0);
    let full_isr = |cluster: &Cluster| {
        agreed_topic_states(cluster, topic)
            .is_some_and(|s| s[0].leader > 0 && s[0].isr == vec![1, 2, 3])
    };
    wait_until("a leader and a full ISR", || full_isr(&cluster));
    // Controlled shutdown of P moves the leadership to the next in-sync replica, L.
    assert!(cluster.stop(cluster.index_of(p)));
    let t_addr = cluster.addr(cluster.index_of(t));
    wait_until("L leading", || {
        partition_states(&t_addr, topic).is_some_and(|s| s[0].leader == l)
    });
    cluster.restart(cluster.index_of(p));
    wait_until("P back in the ISR, L leading", || {
        full_isr(&cluster) && agreed_topic_states(&cluster, topic).unwrap()[0].leader == l
    });
    let (pi, li) = (cluster.index_of(p), cluster.index_of(l));

    cluster.pause(pi);
    // A fetch P sent before freezing is answered (empty) by L after its long-poll wait (500 ms);
    // W must come later, or P would find it in its socket buffer when it resumes.
    std::thread::sleep(Duration::from_millis(1500));
    let leader_addr = cluster.addr(li);
    let waiting = std::thread::spawn(move || {
        let mut wire = Wire::connect(&leader_addr);
        let req = ProduceRequest::default()
            .with_acks(-1)
            // L's HW passes W's offset about a second after L resumes.
            .with_timeout_ms(8_000)
            .with_topic_data(vec![produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("deposed")))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch(
                            &[(None, "acknowledged?")],
                            kafka_protocol::records::Compression::None,
                        ))),
                ])]);
        let resp: ProduceResponse = wire.call(ApiKey::Produce, 9, &req);
        let p = &resp.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    });
    let log_of = |index: usize| {
        cluster.nodes[index]
            .data_dir
            .join("deposed-0")
            .join("00000000000000000000.log")
    };
    let has_w = |index: usize| {
        std::fs::read(log_of(index)).is_ok_and(|b| b.windows(13).any(|w| w == b"acknowledged?"))
    };
    wait_until("L to append W", || has_w(li));
    // Elect the frozen P (in the ISR, registered), freeze L, resume P.
    let mut to_t = Wire::connect(&t_addr);
    let elect = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(10_000)
        .with_topic_partitions(Some(vec![elect_leaders_request::TopicPartitions::default(
        )
        .with_topic(TopicName(StrBytes::from_static_str("deposed")))
        .with_partitions(vec![0])]));
    let resp: ElectLeadersResponse = to_t.call(ApiKey::ElectLeaders, 1, &elect);
    assert_eq!(resp.error_code, 0);
    wait_until("P elected while frozen", || {
        partition_states(&t_addr, topic).is_some_and(|s| s[0].leader == p)
    });
    cluster.pause(li);
    cluster.resume(pi);
    let mut to_p = Wire::connect(&cluster.addr(pi));
    wait_until("P leading and taking another record", || {
        let b = batch(
            &[(None, "other")],
            kafka_protocol::records::Compression::None,
        );
        to_p.produce(topic, 0, b, 1).0 == 0
    });
    let p_had_w = has_w(pi);
    cluster.resume(li);
    let (code, offset) = waiting.join().expect("the waiting producer");
    wait_until("P's HW past W's offset", || {
        to_p.fetch(topic, 0, 0, 100).1 > offset.max(0)
    });
    let log = values(&to_p.fetch_all(topic, 0, 0));
    eprintln!(
        "L={l} answered W with ({code}, {offset}); P={p} had W when it led: {p_had_w}; P's log {log:?}"
    );
    if code == 0 {
        assert!(
            log.contains(&"acknowledged?".to_string()),
            "the deposed leader {l} acknowledged W at offset {offset}, but the new leader {p}'s \
             log is {log:?}"
        );
    }
}
