//! Issue 10 §7: the broker-session rules as data. A case is an image (three brokers, one
//! partition replicated on all of them), the sessions' history, and events at given times; the
//! outcome is every record the production controller commits for them (the event's own, then
//! `on_commit`'s until it has nothing left), or the error code that refuses an event. The
//! driver is the sequence `controller/shell.rs` and the replication simulation run.

use runnel_metadata::*;
use uuid::Uuid;

const TIMEOUT: i64 = 9_000;
const TOPIC_ID: Uuid = Uuid::from_u128(0x70);

#[derive(Debug, Clone, Copy)]
enum Event {
    Heartbeat {
        broker: i32,
        epoch: i64,
        offset: i64,
    },
    /// The controller's periodic session check.
    Expire,
    /// A registration by another process (incarnation) of `broker`.
    Register {
        broker: i32,
    },
    ControlledShutdown(i32),
    ShutdownComplete(i32),
}

struct Case {
    name: &'static str,
    /// (id, epoch, fenced, in controlled shutdown); epochs 10, 11, 12 by convention.
    brokers: [(i32, i64, bool, bool); 3],
    leader: i32,
    isr: &'static [i32],
    /// (broker, last heard, offset of its registration): the sessions before the events.
    sessions: &'static [(i32, i64, i64)],
    events: &'static [(i64, Event)],
    expect: Result<Vec<MetadataRecord>, i16>,
}

const UP: [(i32, i64, bool, bool); 3] = [
    (1, 10, false, false),
    (2, 11, false, false),
    (3, 12, false, false),
];
const ALL_HEARD_AT_0: &[(i32, i64, i64)] = &[(1, 0, 0), (2, 0, 0), (3, 0, 0)];

fn incarnation(id: i32) -> Uuid {
    Uuid::from_u128(id as u128 + 1)
}

fn fenced(broker_id: i32, broker_epoch: i64, fenced: bool) -> MetadataRecord {
    MetadataRecord::BrokerRegistrationChange {
        broker_id,
        broker_epoch,
        fenced: Some(fenced),
        in_controlled_shutdown: None,
    }
}

fn change(leader: Option<i32>, isr: &[i32]) -> MetadataRecord {
    MetadataRecord::PartitionChange {
        topic_id: TOPIC_ID,
        partition_id: 0,
        leader,
        isr: Some(isr.to_vec()),
        replicas: None,
        adding_replicas: None,
        removing_replicas: None,
    }
}

fn image(case: &Case) -> MetadataImage {
    let mut records = Vec::new();
    for &(id, epoch, fenced, shutting_down) in &case.brokers {
        records.push(MetadataRecord::RegisterBroker {
            broker_id: id,
            incarnation_id: incarnation(id),
            broker_epoch: epoch,
            host: "h".into(),
            port: 9092,
            rack: None,
            fenced,
            endpoints: Vec::new(),
        });
        if shutting_down {
            records.push(MetadataRecord::BrokerRegistrationChange {
                broker_id: id,
                broker_epoch: epoch,
                fenced: None,
                in_controlled_shutdown: Some(true),
            });
        }
    }
    records.push(MetadataRecord::Topic {
        name: "t".into(),
        topic_id: TOPIC_ID,
    });
    records.push(MetadataRecord::Partition {
        topic_id: TOPIC_ID,
        partition_id: 0,
        replicas: vec![1, 2, 3],
        isr: case.isr.to_vec(),
        leader: case.leader,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: vec![],
        removing_replicas: vec![],
    });
    let numbered: Vec<(i64, MetadataRecord)> = (0..).zip(records).collect();
    MetadataImage::empty("c".into()).apply(&numbered).unwrap()
}

/// The records one event leads to before `on_commit`, or its error code.
fn decide(
    ctl: &mut Controller,
    sessions: &mut BrokerSessions,
    image: &MetadataImage,
    now: i64,
    event: Event,
) -> Result<Vec<MetadataRecord>, i16> {
    Ok(match event {
        Event::Heartbeat {
            broker,
            epoch,
            offset,
        } => {
            let outcome = sessions
                .heartbeat(image, broker, epoch, offset, now)
                .map_err(|e| e.code)?;
            if outcome.unfence {
                ctl.unfence_registration(image, broker, epoch)
            } else {
                Vec::new()
            }
        }
        Event::Expire => sessions
            .expired(image, now)
            .into_iter()
            .flat_map(|b| ctl.fence_broker(image, b))
            .collect(),
        Event::Register { broker } => {
            let other = Uuid::from_u128(0xbad);
            sessions
                .check_registration(image, broker, other, now)
                .map_err(|e| e.code)?;
            ctl.register_broker(
                image,
                runnel_metadata::controller::RegisterBroker {
                    broker_id: broker,
                    incarnation_id: other,
                    host: "h".into(),
                    port: 9092,
                    rack: None,
                    endpoints: Vec::new(),
                },
            )
            .map_err(|e| e.code)?
        }
        Event::ControlledShutdown(broker) => ctl.controlled_shutdown(image, broker).0,
        Event::ShutdownComplete(broker) => {
            let records = ctl.shutdown_complete(image, broker);
            if !records.is_empty() {
                sessions.remove(broker);
            }
            records
        }
    })
}

fn commit(image: &mut MetadataImage, records: &[MetadataRecord]) {
    let first = image.offset + 1;
    let numbered: Vec<(i64, MetadataRecord)> = (first..).zip(records.iter().cloned()).collect();
    *image = image.apply(&numbered).unwrap();
}

fn run(case: &Case) -> Result<Vec<MetadataRecord>, i16> {
    let mut image = image(case);
    let mut ctl = Controller::new(ControllerConfig::default(), 1, 7);
    assert!(
        ctl.on_commit(&image, 0).is_empty(),
        "{}: a settled image",
        case.name
    );
    let mut sessions = BrokerSessions::new(TIMEOUT);
    for &(b, heard, registered_at) in case.sessions {
        let epoch = image.brokers[&b].epoch;
        sessions.registered(b, incarnation(b), epoch, registered_at, heard);
    }
    let mut all = Vec::new();
    for &(now, event) in case.events {
        let mut records = decide(&mut ctl, &mut sessions, &image, now, event)?;
        while !records.is_empty() {
            commit(&mut image, &records);
            all.extend(records);
            records = ctl.on_commit(&image, now);
        }
    }
    Ok(all)
}

fn cases() -> Vec<Case> {
    let mut fenced_3 = UP;
    fenced_3[2].2 = true;
    let mut shutting_down_1 = UP;
    shutting_down_1[0].3 = true;
    vec![
        Case {
            name: "a silent broker's session expires after the timeout; its leadership moves",
            brokers: UP,
            leader: 1,
            isr: &[1, 2, 3],
            sessions: &[(1, 0, 0), (2, 5_000, 0), (3, 5_000, 0)],
            events: &[(TIMEOUT, Event::Expire), (TIMEOUT + 1, Event::Expire)],
            expect: Ok(vec![fenced(1, 10, true), change(Some(2), &[2, 3])]),
        },
        Case {
            name: "a heartbeat renews the session; the silent followers leave the ISR",
            brokers: UP,
            leader: 1,
            isr: &[1, 2, 3],
            sessions: ALL_HEARD_AT_0,
            events: &[
                (
                    8_000,
                    Event::Heartbeat {
                        broker: 1,
                        epoch: 10,
                        offset: 0,
                    },
                ),
                (8_000 + TIMEOUT, Event::Expire),
            ],
            expect: Ok(vec![
                fenced(2, 11, true),
                fenced(3, 12, true),
                change(None, &[1]),
            ]),
        },
        Case {
            name: "a heartbeat of another registration is STALE_BROKER_EPOCH",
            brokers: UP,
            leader: 1,
            isr: &[1, 2, 3],
            sessions: ALL_HEARD_AT_0,
            events: &[(
                100,
                Event::Heartbeat {
                    broker: 1,
                    epoch: 9,
                    offset: 0,
                },
            )],
            expect: Err(codes::STALE_BROKER_EPOCH),
        },
        Case {
            name: "a heartbeat of an unknown broker is BROKER_ID_NOT_REGISTERED",
            brokers: UP,
            leader: 1,
            isr: &[1, 2, 3],
            sessions: ALL_HEARD_AT_0,
            events: &[(
                100,
                Event::Heartbeat {
                    broker: 7,
                    epoch: 1,
                    offset: 0,
                },
            )],
            expect: Err(codes::BROKER_ID_NOT_REGISTERED),
        },
        Case {
            name: "a fenced broker stays fenced until it replayed its registration",
            brokers: fenced_3,
            leader: 1,
            isr: &[1, 2],
            sessions: &[(1, 0, 0), (2, 0, 0), (3, 0, 42)],
            events: &[
                (
                    100,
                    Event::Heartbeat {
                        broker: 3,
                        epoch: 12,
                        offset: 41,
                    },
                ),
                (
                    200,
                    Event::Heartbeat {
                        broker: 3,
                        epoch: 12,
                        offset: 42,
                    },
                ),
            ],
            expect: Ok(vec![fenced(3, 12, false)]),
        },
        Case {
            name: "a fenced broker's session never expires (it is fenced already)",
            brokers: fenced_3,
            leader: 1,
            isr: &[1, 2],
            sessions: &[(1, 990_000, 0), (2, 990_000, 0), (3, 0, 42)],
            events: &[(999_000, Event::Expire)],
            expect: Ok(vec![]),
        },
        Case {
            name: "another process may not take a live broker's id (DUPLICATE_BROKER_REGISTRATION)",
            brokers: UP,
            leader: 1,
            isr: &[1, 2, 3],
            sessions: ALL_HEARD_AT_0,
            events: &[(TIMEOUT, Event::Register { broker: 1 })],
            expect: Err(codes::DUPLICATE_BROKER_REGISTRATION),
        },
        Case {
            name: "controlled shutdown moves the leadership to a live in-sync replica",
            brokers: UP,
            leader: 1,
            isr: &[1, 2, 3],
            sessions: ALL_HEARD_AT_0,
            events: &[(0, Event::ControlledShutdown(1))],
            expect: Ok(vec![
                MetadataRecord::BrokerRegistrationChange {
                    broker_id: 1,
                    broker_epoch: 10,
                    fenced: None,
                    in_controlled_shutdown: Some(true),
                },
                change(Some(2), &[2, 3]),
            ]),
        },
        Case {
            name: "only a broker in controlled shutdown may end its session",
            brokers: shutting_down_1,
            leader: 2,
            isr: &[2, 3],
            sessions: ALL_HEARD_AT_0,
            events: &[
                (0, Event::ShutdownComplete(2)),
                (0, Event::ShutdownComplete(1)),
            ],
            expect: Ok(vec![fenced(1, 10, true)]),
        },
    ]
}

#[test]
fn broker_session_rules_as_data() {
    for case in cases() {
        assert_eq!(run(&case), case.expect, "{}", case.name);
    }
}

/// Once the session expired the id is free: the new process registers fenced, which fences
/// the old process's leadership in the same settle (the records after the registration).
#[test]
fn an_expired_id_is_free_and_the_registration_moves_its_leadership() {
    let case = Case {
        name: "re-registration after expiry",
        brokers: UP,
        leader: 1,
        isr: &[1, 2, 3],
        sessions: &[(1, 0, 0), (2, 5_000, 0), (3, 5_000, 0)],
        events: &[(TIMEOUT + 1, Event::Register { broker: 1 })],
        expect: Ok(vec![]),
    };
    let records = run(&case).expect("registered");
    assert!(
        matches!(
            &records[0],
            MetadataRecord::RegisterBroker { broker_id: 1, fenced: true, broker_epoch, .. } if *broker_epoch > 10
        ),
        "{records:?}"
    );
    assert_eq!(records[1..], [change(Some(2), &[2, 3])]);
}
