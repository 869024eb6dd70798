//! The shell's pipelined commits, deterministically: a scripted quorum decides when each
//! appended batch commits (or that leadership is lost), so the tests see exactly which
//! answers go out while which records are still in flight.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use runnel_metadata::codes;
use runnel_metadata::controller::{
    AlterPartition, BrokerHeartbeat, CreateTopicOutcome, CreateTopicRequest, CreateTopics,
};
use runnel_raft::QuorumError;
use uuid::Uuid;

use super::*;
use crate::controller::quorum::CommitFuture;

type Batch = (
    Vec<MetadataRecord>,
    oneshot::Sender<Result<i64, QuorumError>>,
);

struct Script {
    leader: bool,
    term: u64,
    committed: Arc<MetadataImage>,
    pending: VecDeque<Batch>,
    appended: usize,
}

/// A quorum of one node whose commits the test makes happen.
struct ScriptedQuorum {
    script: Mutex<Script>,
    published: watch::Sender<Arc<MetadataImage>>,
}

impl ScriptedQuorum {
    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap()
    }

    /// Batches appended so far (committed or not).
    fn appended(&self) -> usize {
        self.lock().appended
    }

    fn uncommitted(&self) -> usize {
        self.lock().pending.len()
    }

    fn committed(&self) -> Arc<MetadataImage> {
        self.lock().committed.clone()
    }

    /// Commits the oldest appended batch (as Raft would, in order) and publishes the image,
    /// as the metadata follower does.
    fn commit_one(&self) -> bool {
        let image = {
            let mut s = self.lock();
            let Some((records, done)) = s.pending.pop_front() else {
                return false;
            };
            let first = s.committed.offset + 1;
            let numbered: Vec<(i64, MetadataRecord)> = (first..).zip(records).collect();
            s.committed = Arc::new(s.committed.apply(&numbered).unwrap());
            let _ = done.send(Ok(first));
            s.committed.clone()
        };
        self.published.send_replace(image);
        true
    }

    fn commit_all(&self) {
        while self.commit_one() {}
    }

    /// Leadership moves away: every uncommitted batch is discarded.
    fn lose_leadership(&self) {
        let mut s = self.lock();
        s.leader = false;
        for (_, done) in s.pending.drain(..) {
            let _ = done.send(Err(QuorumError::NotLeader { leader: Some(2) }));
        }
    }

    fn elect(&self, term: u64) {
        let mut s = self.lock();
        s.leader = true;
        s.term = term;
    }
}

impl ControllerQuorum for ScriptedQuorum {
    fn is_leader(&self) -> bool {
        self.lock().leader
    }

    fn term(&self) -> u64 {
        self.lock().term
    }

    fn leader(&self) -> Option<i32> {
        if self.lock().leader {
            Some(1)
        } else {
            Some(2)
        }
    }

    fn last_committed_offset(&self) -> i64 {
        self.lock().committed.offset
    }

    fn append(
        &self,
        records: Vec<MetadataRecord>,
    ) -> Pin<Box<dyn Future<Output = Result<CommitFuture, QuorumError>> + Send + '_>> {
        Box::pin(async move {
            let mut s = self.lock();
            if !s.leader {
                return Err(QuorumError::NotLeader { leader: Some(2) });
            }
            let (done, rx) = oneshot::channel();
            s.pending.push_back((records, done));
            s.appended += 1;
            let committing: CommitFuture = Box::pin(async move {
                rx.await
                    .unwrap_or_else(|_| Err(QuorumError::Shutdown("script dropped".into())))
            });
            Ok(committing)
        })
    }
}

const T0: Uuid = Uuid::from_u128(0xAB);

fn epoch_of(broker_id: i32) -> i64 {
    10 + i64::from(broker_id)
}

/// Three unfenced brokers and topic `t0` with one partition led by broker 1, ISR 1, 2, 3.
fn bootstrap() -> MetadataImage {
    let mut records: Vec<MetadataRecord> = (1..=3)
        .map(|id| MetadataRecord::RegisterBroker {
            broker_id: id,
            incarnation_id: Uuid::from_u128(id as u128),
            broker_epoch: epoch_of(id),
            host: "localhost".into(),
            port: 9092,
            rack: None,
            fenced: false,
            endpoints: Vec::new(),
        })
        .collect();
    records.push(MetadataRecord::Topic {
        name: "t0".into(),
        topic_id: T0,
    });
    records.push(MetadataRecord::Partition {
        topic_id: T0,
        partition_id: 0,
        replicas: vec![1, 2, 3],
        isr: vec![1, 2, 3],
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: vec![],
        removing_replicas: vec![],
    });
    let numbered: Vec<(i64, MetadataRecord)> = (0..).zip(records).collect();
    MetadataImage::empty("c".into()).apply(&numbered).unwrap()
}

fn start() -> (Arc<ScriptedQuorum>, ControllerHandle) {
    let image = Arc::new(bootstrap());
    let (published, image_rx) = watch::channel(image.clone());
    let quorum = Arc::new(ScriptedQuorum {
        script: Mutex::new(Script {
            leader: true,
            term: 1,
            committed: image.clone(),
            pending: VecDeque::new(),
            appended: 0,
        }),
        published,
    });
    let backend = Backend {
        quorum: quorum.clone(),
        image_rx,
    };
    let shell = ControllerShell::new(
        ControllerConfig::default(),
        backend,
        image,
        Duration::from_secs(60),
    );
    (quorum, shell.spawn())
}

/// Waits (with a deadline) until `cond` holds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn create(name: &str, partitions: i32) -> CreateTopics {
    CreateTopics {
        requests: vec![CreateTopicRequest {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: 3,
            assignment: vec![],
            configs: vec![],
        }],
        validate_only: false,
    }
}

fn shrink_isr(partition_epoch: i32) -> AlterPartition {
    AlterPartition {
        topic_id: T0,
        partition: 0,
        broker_id: 1,
        leader_epoch: 0,
        partition_epoch,
        new_isr: vec![1, 2],
    }
}

fn heartbeat(broker_id: i32) -> BrokerHeartbeat {
    BrokerHeartbeat {
        broker_id,
        broker_epoch: epoch_of(broker_id),
        metadata_offset: 0,
        offline_dirs: Vec::new(),
    }
}

fn created(outcomes: &[CreateTopicOutcome]) -> bool {
    outcomes.len() == 1 && outcomes[0].result.is_ok()
}

/// Runs `op` to completion, committing whatever it appends.
async fn run_committed<O: ControllerOp>(
    quorum: &Arc<ScriptedQuorum>,
    handle: &ControllerHandle,
    op: O,
) -> Result<O::Response, ApiError> {
    let h = handle.clone();
    let task = tokio::spawn(async move { h.run(op).await });
    until("the operation's answer", || {
        quorum.commit_all();
        task.is_finished()
    })
    .await;
    task.await.unwrap()
}

/// Caught: the controller task waited for each commit, so while a CreateTopics of many
/// partitions was committing, AlterPartition (and every other operation) waited behind it.
/// Now AlterPartition is decided on the speculative image and appended while the CreateTopics
/// is uncommitted, heartbeats are answered, and each answer goes out when its records commit.
#[tokio::test]
async fn alter_partition_and_heartbeats_flow_while_a_large_create_topics_commits() {
    let (quorum, handle) = start();
    // The first operation activates the controller (term 1).
    let hb = run_committed(&quorum, &handle, heartbeat(1)).await;
    assert_eq!(hb, Ok(false));
    let before = quorum.committed().offset;
    let base = quorum.appended();

    let h = handle.clone();
    let big = tokio::spawn(async move { h.run(create("big", 5_000)).await });
    // Its topic and partition records, then the elections of all 5,000 partitions: appended.
    until("the CreateTopics batches appended", || {
        quorum.appended() >= base + 2
    })
    .await;
    let appended = quorum.appended();

    // Heartbeats are answered while nothing of it committed.
    for id in 1..=3 {
        let hb = tokio::time::timeout(Duration::from_secs(5), handle.run(heartbeat(id))).await;
        assert_eq!(hb.expect("heartbeat answered"), Ok(false));
    }
    // AlterPartition is decided and appended behind it, without waiting for its commit.
    let h = handle.clone();
    let alter = tokio::spawn(async move { h.run(shrink_isr(0)).await });
    until("the AlterPartition batch appended", || {
        quorum.appended() > appended
    })
    .await;
    assert_eq!(quorum.committed().offset, before, "nothing committed yet");
    assert!(
        !big.is_finished() && !alter.is_finished(),
        "no answer before its commit"
    );

    // The quorum commits in order; each answer goes out once its records did.
    quorum.commit_one();
    quorum.commit_one();
    let big = big.await.unwrap().unwrap();
    assert!(created(&big), "{big:?}");
    quorum.commit_all();
    assert_eq!(alter.await.unwrap(), Ok((vec![1, 2], 1)));
    let image = quorum.committed();
    assert_eq!(image.topic("big").unwrap().partitions.len(), 5_000);
    assert!(image
        .topic("big")
        .unwrap()
        .partitions
        .values()
        .all(|p| p.leader > 0));
    assert_eq!(image.partition("t0", 0).unwrap().isr, vec![1, 2]);
}

/// A failover mid-pipeline: what committed is acknowledged, what did not is answered
/// NOT_CONTROLLER and is gone; the next term decides on the committed image, not on the
/// dropped speculative one.
#[tokio::test]
async fn a_failover_mid_pipeline_acknowledges_exactly_what_committed() {
    let (quorum, handle) = start();
    assert_eq!(
        run_committed(&quorum, &handle, heartbeat(1)).await,
        Ok(false)
    );
    let base = quorum.appended();

    let h = handle.clone();
    let a = tokio::spawn(async move { h.run(create("a", 3)).await });
    until("a appended", || quorum.appended() >= base + 2).await;
    let h = handle.clone();
    let alter = tokio::spawn(async move { h.run(shrink_isr(0)).await });
    until("the ISR change appended", || quorum.appended() >= base + 3).await;
    let h = handle.clone();
    let b = tokio::spawn(async move { h.run(create("b", 3)).await });
    until("b appended", || quorum.appended() >= base + 5).await;

    // "a" (its topic batch and its elections) commits; then leadership is lost.
    quorum.commit_one();
    quorum.commit_one();
    let a = a.await.unwrap().unwrap();
    assert!(created(&a), "{a:?}");
    assert_eq!(quorum.uncommitted(), 3);
    quorum.lose_leadership();
    let alter = alter.await.unwrap();
    assert_eq!(alter.unwrap_err().code, codes::NOT_CONTROLLER);
    let b = b.await.unwrap().unwrap();
    assert_eq!(
        b[0].result.as_ref().unwrap_err().code,
        codes::NOT_CONTROLLER
    );

    // The log holds exactly the acknowledged operations.
    let image = quorum.committed();
    assert!(image.topic("a").is_some());
    assert!(image.topic("b").is_none());
    assert_eq!(image.partition("t0", 0).unwrap().isr, vec![1, 2, 3]);
    // Not the leader: refused.
    let e = handle.run(create("c", 1)).await.unwrap_err();
    assert_eq!(e.code, codes::NOT_CONTROLLER);

    // A new term: a fresh controller on the committed image. The dropped ISR change never
    // happened (partition epoch 0 is current), "a" exists, "b" can be created.
    quorum.elect(2);
    assert_eq!(
        run_committed(&quorum, &handle, shrink_isr(0)).await,
        Ok((vec![1, 2], 1))
    );
    let again = run_committed(&quorum, &handle, create("a", 3))
        .await
        .unwrap();
    assert_eq!(
        again[0].result.as_ref().unwrap_err().code,
        codes::TOPIC_ALREADY_EXISTS
    );
    let b = run_committed(&quorum, &handle, create("b", 3))
        .await
        .unwrap();
    assert!(created(&b), "{b:?}");
}

/// A batch the quorum rejects (or commits at other offsets than decided) reverts the
/// pipeline: the answers in flight get NOT_CONTROLLER, and the next operation re-activates
/// on the committed image.
#[tokio::test]
async fn a_failed_append_reverts_to_the_committed_image() {
    let (quorum, handle) = start();
    assert_eq!(
        run_committed(&quorum, &handle, heartbeat(1)).await,
        Ok(false)
    );
    let h = handle.clone();
    let alter = tokio::spawn(async move { h.run(shrink_isr(0)).await });
    until("the ISR change appended", || quorum.uncommitted() == 1).await;
    {
        let (_, done) = quorum.lock().pending.pop_front().unwrap();
        let _ = done.send(Err(QuorumError::Rejected("scripted".into())));
    }
    assert_eq!(
        alter.await.unwrap().unwrap_err().code,
        codes::NOT_CONTROLLER
    );
    // Still the leader of the same term: the next operation decides on the committed image.
    assert_eq!(
        run_committed(&quorum, &handle, shrink_isr(0)).await,
        Ok((vec![1, 2], 1))
    );
}

/// Caught by the replication simulation's pipelined controller: an operation that changed
/// nothing was answered at once, although what it read was still in flight, so a broker
/// could act on a decision that was then reverted (an AlterPartition "the ISR already is
/// [1, 2]" before the shrink to [1, 2] committed; a controlled shutdown told it may stop
/// before its leaderships moved). Now such an answer waits for the newest batch in flight
/// and fails with it.
#[tokio::test]
async fn an_answer_that_read_uncommitted_state_waits_for_it_and_fails_with_it() {
    let (quorum, handle) = start();
    assert_eq!(
        run_committed(&quorum, &handle, heartbeat(1)).await,
        Ok(false)
    );
    let base = quorum.appended();
    let h = handle.clone();
    let shrink = tokio::spawn(async move { h.run(shrink_isr(0)).await });
    until("the shrink appended", || quorum.appended() > base).await;
    // The same ISR at the speculative partition epoch: nothing to append.
    let h = handle.clone();
    let again = tokio::spawn(async move { h.run(shrink_isr(1)).await });
    // Something queued after it appends, so it has been decided.
    let h = handle.clone();
    let later = tokio::spawn(async move { h.run(create("later", 1)).await });
    until("the later batch appended", || quorum.appended() > base + 1).await;
    quorum.lose_leadership();
    for answer in [shrink.await.unwrap(), again.await.unwrap()] {
        assert_eq!(answer.unwrap_err().code, codes::NOT_CONTROLLER);
    }
    let later = later.await.unwrap().unwrap();
    assert_eq!(
        later[0].result.as_ref().unwrap_err().code,
        codes::NOT_CONTROLLER
    );
    assert_eq!(
        quorum.committed().partition("t0", 0).unwrap().isr,
        vec![1, 2, 3]
    );
}
