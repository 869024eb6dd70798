//! The request decoded once for every pass of the long poll: who fetches (consumer or
//! follower), the records budget, and each partition once.

use std::collections::HashMap;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use runnel_metadata::image::MetadataImage;
use runnel_replication::FollowerIdentity;
use uuid::Uuid;

use crate::context::Broker;
use crate::handlers::fetch_follower_read::{self, ClientMetadata};
use crate::replica::partition::ReadBound;

/// The largest response a frame can carry (its size prefix is an INT32).
const FRAME_MAX: usize = i32::MAX as usize;
/// Bytes of a response that are not records, per partition and per topic (an overestimate),
/// so the records budget keeps the whole response within `i32::MAX`.
const PARTITION_OVERHEAD: usize = 64;
const TOPIC_OVERHEAD: usize = 64;

/// One topic of the response, in the order the request first named it.
pub(super) struct Topic {
    pub(super) name: TopicName,
    pub(super) topic_id: Uuid,
    /// The name to look partitions up by (v13+: resolved from the id; `None`: unknown id).
    pub(super) resolved: Option<String>,
}

/// One partition to answer, after duplicates were merged.
pub(super) struct Wanted {
    pub(super) topic: usize,
    pub(super) fetch: FetchPartition,
}

/// The request, decoded once for every pass of the long poll.
pub(super) struct Plan {
    pub(super) topics: Vec<Topic>,
    pub(super) wanted: Vec<Wanted>,
    pub(super) follower: Option<FollowerIdentity>,
    /// Records budget of one response.
    pub(super) max_bytes: usize,
    pub(super) min_bytes: usize,
    /// Fetch v4+ `isolation_level` 1: read_committed (never for followers).
    pub(super) read_committed: bool,
    /// Consumer fetches v11+: their rack (KIP-392; they may read at a follower).
    pub(super) client: Option<ClientMetadata>,
    pub(super) version: i16,
}

impl Plan {
    pub(super) fn new(broker: &Broker, request: FetchRequest, version: i16) -> Plan {
        let follower = follower_identity(&request, version);
        let read_committed = follower.is_none() && request.isolation_level == 1;
        let client = fetch_follower_read::client_metadata(&request, version, follower.is_some());
        let cap = i64::from(if follower.is_some() {
            broker.settings.replica_fetch_response_max_bytes
        } else {
            broker.settings.fetch_max_bytes
        });
        let max_bytes = i64::from(request.max_bytes).clamp(0, cap);
        let (topics, wanted) = merge_partitions(&broker.image(), request.topics, version);
        let overhead = wanted.len() * PARTITION_OVERHEAD + topics.len() * TOPIC_OVERHEAD;
        // `max_bytes` is clamped to 0..=cap above, so the conversion cannot fail.
        let max_bytes = usize::try_from(max_bytes)
            .unwrap_or(0)
            .min(FRAME_MAX.saturating_sub(overhead));
        let min_bytes = usize::try_from(request.min_bytes)
            .unwrap_or(0)
            .min(max_bytes);
        Plan {
            topics,
            wanted,
            follower,
            max_bytes,
            min_bytes,
            read_committed,
            client,
            version,
        }
    }

    /// Up to where this fetch reads (what its long poll waits for).
    pub(super) fn bound(&self) -> ReadBound {
        if self.follower.is_some() {
            ReadBound::LogEnd
        } else if self.read_committed {
            ReadBound::LastStable
        } else {
            ReadBound::HighWatermark
        }
    }
}

/// A follower fetch's identity (`replica_id >= 0`; v15+ in `ReplicaState`, KIP-903), `None`
/// for a consumer.
fn follower_identity(request: &FetchRequest, version: i16) -> Option<FollowerIdentity> {
    let follower = if version >= 15 {
        FollowerIdentity {
            replica_id: request.replica_state.replica_id.0,
            broker_epoch: request.replica_state.replica_epoch,
        }
    } else {
        FollowerIdentity {
            replica_id: request.replica_id.0,
            broker_epoch: -1,
        }
    };
    (follower.replica_id >= 0).then_some(follower)
}

/// The request's topics in the order it first named them, and its partitions once each (a
/// repeated partition keeps the last entry's position in the first one's place).
fn merge_partitions(
    image: &MetadataImage,
    requested: Vec<FetchTopic>,
    version: i16,
) -> (Vec<Topic>, Vec<Wanted>) {
    let mut topics: Vec<Topic> = Vec::new();
    let mut topic_of: HashMap<(Uuid, String), usize> = HashMap::new();
    let mut wanted: Vec<Wanted> = Vec::new();
    let mut seen: HashMap<(usize, i32), usize> = HashMap::new();
    for t in requested {
        let key = (t.topic_id, t.topic.0.to_string());
        let topic = *topic_of.entry(key).or_insert_with(|| {
            let resolved = if version >= 13 {
                image.topic_by_id(&t.topic_id).map(|ti| ti.name.clone())
            } else {
                Some(t.topic.0.to_string())
            };
            topics.push(Topic {
                name: t.topic.clone(),
                topic_id: t.topic_id,
                resolved,
            });
            topics.len() - 1
        });
        for fetch in t.partitions {
            match seen.get(&(topic, fetch.partition)) {
                Some(&at) => wanted[at].fetch = fetch,
                None => {
                    seen.insert((topic, fetch.partition), wanted.len());
                    wanted.push(Wanted { topic, fetch });
                }
            }
        }
    }
    (topics, wanted)
}
