//! Issue 16: a KIP-848 member that changes its subscription many times in a row, leaving
//! (epoch -1) and rejoining (epoch 0) now and then, over TCP against the real binary with raw
//! ConsumerGroupHeartbeat v1 requests shaped as librdkafka sends them: the subscription once,
//! on the heartbeat after the change, then null as unchanged; owned partitions reported when
//! acknowledging; a rejoin with an empty owned list. Every answer is error-free and the member
//! converges to exactly its last subscription (librdkafka's 0045_subscribe_update "many
//! updates" pattern, unsubscribes included, without the client-side race that test hits).

mod support;

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::*;
use uuid::Uuid;

const MEMBER: &str = "churn-member-0000000001";

type Owned = BTreeMap<Uuid, BTreeSet<i32>>;

struct Member {
    wire: Wire,
    epoch: i32,
    owned: Owned,
}

impl Member {
    /// One heartbeat; asserts it succeeded and takes the assignment it carries, if any.
    fn heartbeat(&mut self, names: Option<&[String]>, ack: bool) {
        let owned = (ack || self.epoch == 0).then(|| {
            self.owned
                .iter()
                .map(|(t, ps)| {
                    TopicPartitions::default()
                        .with_topic_id(*t)
                        .with_partitions(ps.iter().copied().collect())
                })
                .collect()
        });
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g-churn")))
            .with_member_id(StrBytes::from_static_str(MEMBER))
            .with_member_epoch(self.epoch)
            .with_rebalance_timeout_ms(if self.epoch == 0 { 30_000 } else { -1 })
            .with_subscribed_topic_names(names.map(|ns| {
                ns.iter()
                    .map(|n| TopicName(StrBytes::from_string(n.clone())))
                    .collect()
            }))
            .with_subscribed_topic_regex(names.map(|_| StrBytes::from_static_str("")))
            .with_topic_partitions(owned);
        let resp: ConsumerGroupHeartbeatResponse =
            self.wire.call(ApiKey::ConsumerGroupHeartbeat, 1, &req);
        assert_eq!(resp.error_code, 0, "heartbeat failed: {resp:?}");
        self.epoch = resp.member_epoch;
        if let Some(a) = resp.assignment {
            self.owned = a
                .topic_partitions
                .iter()
                .map(|tp| (tp.topic_id, tp.partitions.iter().copied().collect()))
                .collect();
        }
    }

    fn leave(&mut self) {
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g-churn")))
            .with_member_id(StrBytes::from_static_str(MEMBER))
            .with_member_epoch(-1);
        let resp: ConsumerGroupHeartbeatResponse =
            self.wire.call(ApiKey::ConsumerGroupHeartbeat, 1, &req);
        assert_eq!(resp.error_code, 0, "leave failed: {resp:?}");
        self.epoch = 0;
        self.owned.clear();
    }
}

#[test]
fn a_member_changing_its_subscription_many_times_converges() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["offsets.topic.num.partitions=1"]);
    let names: Vec<String> = (0..22).map(|i| format!("churn{i}")).collect();
    let mut wire = broker.connect();
    for n in &names {
        assert_eq!(wire.create_topic(n, 4, 1, &[]).0, 0);
    }
    let mut ids: BTreeMap<String, Uuid> = BTreeMap::new();
    wait_until("every topic in the metadata", || {
        // v10+ carries topic ids.
        let Some(m) = Wire::try_connect(&broker.addr).and_then(|mut w| {
            w.try_call::<_, MetadataResponse>(
                ApiKey::Metadata,
                12,
                &MetadataRequest::default().with_topics(None),
            )
        }) else {
            return false;
        };
        ids = m
            .topics
            .iter()
            .filter_map(|t| Some((t.name.as_ref()?.0.to_string(), t.topic_id)))
            .collect();
        names.iter().all(|n| ids.contains_key(n))
    });
    wait_until("a group coordinator", || {
        let req = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g-churn"));
        Wire::try_connect(&broker.addr)
            .and_then(|mut w| {
                w.try_call::<_, FindCoordinatorResponse>(ApiKey::FindCoordinator, 3, &req)
            })
            .is_some_and(|r| r.error_code == 0)
    });
    let mut m = Member {
        wire: broker.connect(),
        epoch: 0,
        owned: Owned::new(),
    };
    for i in 0..names.len() {
        let window = &names[i..(i + 5).min(names.len())];
        // The change goes out on the next heartbeat, acknowledging nothing yet.
        m.heartbeat(Some(window), false);
        let unsubscribed = i % 7 == 0;
        if unsubscribed {
            m.leave();
        }
        if i % 5 == 0 || i == names.len() - 1 {
            let want: Owned = if unsubscribed {
                Owned::new()
            } else {
                window.iter().map(|n| (ids[n], (0..4).collect())).collect()
            };
            wait_until(&format!("update {i} converges"), || {
                if m.epoch != 0 {
                    m.heartbeat(None, true);
                }
                m.owned == want
            });
        }
    }
}
