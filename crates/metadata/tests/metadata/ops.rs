//! Issue 10 §2: controller operations as typed values. The driver is the broker shell's
//! `run_op` sequence (decide, commit, `committed`, commit its records, settle; a failed commit
//! reaches the answer through `absorb`), run on the pure controller and sessions, so the
//! operations are tested as data: image + request in, records + response out.

use runnel_metadata::controller::{
    AllocateProducerIds, AlterPartition, BrokerHeartbeat, ControlledShutdown, ControllerOp,
    CreateTopics, DeleteTopics, ElectLeaders, OpContext, RegisterBroker, ShutdownComplete,
};
use runnel_metadata::*;
use uuid::Uuid;

use crate::common::{req, Harness};

const TIMEOUT: i64 = 9_000;

struct Shell {
    h: Harness,
    sessions: BrokerSessions,
    single_node: bool,
    /// The sessions' clock.
    now: i64,
}

impl Shell {
    fn new(brokers: &[i32], single_node: bool) -> Self {
        Shell {
            h: Harness::with_brokers(brokers),
            sessions: BrokerSessions::new(TIMEOUT),
            single_node,
            now: 1_000,
        }
    }

    fn context(&mut self) -> OpContext<'_> {
        OpContext {
            controller: &mut self.h.controller,
            sessions: &mut self.sessions,
            image: &self.h.image,
            now_ms: self.h.now_ms,
            session_ms: self.now,
            received_ms: self.now,
            single_node: self.single_node,
        }
    }

    /// Runs `op` as the shell does; `fail_commit` makes its commit fail with that error.
    /// Returns the answer and how many records were committed (the operation's, its
    /// follow-ups and the state machines').
    fn run<O: ControllerOp>(
        &mut self,
        op: &O,
        fail_commit: Option<ApiError>,
    ) -> (Result<O::Response, ApiError>, i64) {
        op.validate().map_err(|e| e.code).expect("valid request");
        let decided = match op.decide(&mut self.context()) {
            Ok(d) => d,
            Err(e) => return (Err(e), 0),
        };
        if decided.records.is_empty() {
            return (Ok(decided.response), 0);
        }
        if let Some(e) = fail_commit {
            return (O::absorb(decided.response, e), 0);
        }
        let offset = self.h.image.offset;
        self.h.commit(decided.records);
        let follow_up = op.committed(&mut self.context(), &decided.response);
        self.h.commit(follow_up);
        (Ok(decided.response), self.h.image.offset - offset)
    }
}

fn timed_out() -> ApiError {
    ApiError {
        code: codes::REQUEST_TIMED_OUT,
        message: "the metadata quorum did not commit in time".into(),
    }
}

#[test]
fn a_failed_commit_turns_only_the_successes_into_its_error() {
    let mut shell = Shell::new(&[1, 2, 3], false);
    let op = CreateTopics {
        requests: vec![req("a", 1, 3), req("bad topic", 1, 3), req("b", 2, 4)],
        validate_only: false,
    };
    let (answer, committed) = shell.run(&op, Some(timed_out()));
    let outcomes = answer.expect("per-topic answers");
    assert_eq!(committed, 0);
    let codes: Vec<i16> = outcomes
        .iter()
        .map(|o| o.result.as_ref().err().map_or(0, |e| e.code))
        .collect();
    // "a" was decided and then lost its commit; the others failed validation on their own.
    assert_eq!(codes, [codes::REQUEST_TIMED_OUT, 17, 38]);

    let (answer, committed) = shell.run(&op, None);
    assert!(answer.expect("answers")[0].result.is_ok());
    assert!(committed > 0);
    assert!(shell.h.image.topic("a").is_some());

    // An operation without per-item answers fails as a whole.
    let alloc = AllocateProducerIds {
        broker_id: 1,
        count: PRODUCER_ID_BLOCK_SIZE,
    };
    let (answer, _) = shell.run(&alloc, Some(timed_out()));
    assert_eq!(answer.unwrap_err().code, codes::REQUEST_TIMED_OUT);
}

fn endpoint(name: &str, port: u16, security_protocol: i16) -> runnel_metadata::BrokerEndpoint {
    runnel_metadata::BrokerEndpoint {
        name: name.into(),
        host: "localhost".into(),
        port,
        security_protocol,
    }
}

fn register(id: i32, incarnation: u128) -> RegisterBroker {
    RegisterBroker {
        broker_id: id,
        incarnation_id: Uuid::from_u128(incarnation),
        host: "localhost".into(),
        port: 9092,
        rack: None,
        endpoints: Vec::new(),
    }
}

#[test]
fn registration_starts_a_session_and_a_single_node_unfences_at_once() {
    for single_node in [false, true] {
        let mut shell = Shell::new(&[], single_node);
        let (epoch, _) = shell.run(&register(4, 9), None);
        let epoch = epoch.expect("registered");
        let broker = shell.h.image.brokers.get(&4).expect("in the image");
        assert_eq!(broker.epoch, epoch);
        assert_eq!(broker.fenced, !single_node, "single node: {single_node}");
        // `committed` started the session: another incarnation is refused while it lives.
        let (dup, _) = shell.run(&register(4, 10), None);
        assert_eq!(dup.unwrap_err().code, 101);
        shell.now += TIMEOUT + 1;
        let (taken_over, _) = shell.run(&register(4, 10), None);
        assert!(taken_over.is_ok());
    }
}

#[test]
fn a_caught_up_heartbeat_is_answered_early_and_queues_its_unfencing() {
    let mut shell = Shell::new(&[], false);
    let epoch = shell.run(&register(5, 1), None).0.expect("registered");
    let beat = BrokerHeartbeat {
        broker_id: 5,
        broker_epoch: epoch,
        metadata_offset: shell.h.image.offset,
        offline_dirs: Vec::new(),
    };
    let early = beat
        .answer_early(&mut shell.sessions, &shell.h.image, shell.now)
        .expect("heartbeats are answered early")
        .expect("valid heartbeat");
    assert!(early.response, "still fenced when answered");
    assert!(early.then_queue, "its unfencing is queued");
    // Queued, the same heartbeat commits the unfencing and answers unfenced.
    let (fenced, committed) = shell.run(&beat, None);
    assert_eq!(fenced, Ok(false));
    assert_eq!(committed, 1);
    assert!(!shell.h.image.brokers[&5].fenced);
    // A heartbeat of another registration is STALE_BROKER_EPOCH, early or queued.
    let stale = BrokerHeartbeat {
        broker_epoch: epoch + 1,
        ..beat
    };
    let early = stale.answer_early(&mut shell.sessions, &shell.h.image, shell.now);
    assert_eq!(early.map(|r| r.map_err(|e| e.code)), Some(Err(77)));
    assert_eq!(shell.run(&stale, None).0.unwrap_err().code, 77);
}

#[test]
fn shutdown_complete_fences_and_ends_the_session() {
    let mut shell = Shell::new(&[], false);
    let epoch = shell.run(&register(6, 1), None).0.expect("registered");
    let beat = BrokerHeartbeat {
        broker_id: 6,
        broker_epoch: epoch,
        metadata_offset: shell.h.image.offset,
        offline_dirs: Vec::new(),
    };
    assert_eq!(shell.run(&beat, None).0, Ok(false));
    // Not in controlled shutdown: nothing happens and the session lives on.
    let (_, committed) = shell.run(&ShutdownComplete { broker_id: 6 }, None);
    assert_eq!(committed, 0);
    assert!(shell
        .sessions
        .has_live_session(&shell.h.image, 6, shell.now));
    let (remaining, _) = shell.run(&ControlledShutdown { broker_id: 6 }, None);
    assert_eq!(remaining, Ok(0));
    let (_, committed) = shell.run(&ShutdownComplete { broker_id: 6 }, None);
    assert_eq!(committed, 1);
    assert!(shell.h.image.brokers[&6].fenced);
    // The session ended: another process of the id registers at once.
    assert!(shell.run(&register(6, 2), None).0.is_ok());
}

#[test]
fn each_operation_range_checks_its_fields() {
    let bad: Vec<(&str, Result<(), ApiError>)> = vec![
        (
            "negative api version",
            DeleteTopics {
                topics: Vec::new(),
                api_version: -1,
            }
            .validate(),
        ),
        (
            "negative partition",
            ElectLeaders {
                election: ElectionType::Preferred,
                partitions: Some(vec![("t".into(), -1)]),
            }
            .validate(),
        ),
        (
            "negative ISR member",
            AlterPartition {
                topic_id: Uuid::from_u128(7),
                partition: 0,
                broker_id: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                new_isr: vec![1, -2],
            }
            .validate(),
        ),
        (
            "ISR too long",
            AlterPartition {
                topic_id: Uuid::from_u128(7),
                partition: 0,
                broker_id: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                new_isr: vec![1; 10_001],
            }
            .validate(),
        ),
        (
            "negative metadata offset",
            BrokerHeartbeat {
                broker_id: 1,
                broker_epoch: 0,
                metadata_offset: -2,
                offline_dirs: Vec::new(),
            }
            .validate(),
        ),
        (
            "rack too long",
            RegisterBroker {
                rack: Some("r".repeat(256)),
                ..register(1, 1)
            }
            .validate(),
        ),
        (
            "listener port 0",
            RegisterBroker {
                endpoints: vec![endpoint("SASL_PLAINTEXT", 0, 2)],
                ..register(1, 1)
            }
            .validate(),
        ),
        (
            "unknown security protocol",
            RegisterBroker {
                endpoints: vec![endpoint("X", 9093, 4)],
                ..register(1, 1)
            }
            .validate(),
        ),
        (
            "listener named twice",
            RegisterBroker {
                endpoints: vec![endpoint("A", 9093, 0), endpoint("A", 9094, 0)],
                ..register(1, 1)
            }
            .validate(),
        ),
        (
            "too many listeners",
            RegisterBroker {
                endpoints: (0..65)
                    .map(|i| endpoint(&format!("L{i}"), 9093, 0))
                    .collect(),
                ..register(1, 1)
            }
            .validate(),
        ),
    ];
    for (what, result) in bad {
        assert_eq!(result.map_err(|e| e.code), Err(42), "{what}");
    }
}
