//! AlterReplicaLogDirs (API 34, v1-v2 as Kafka 4.x; KIP-113): move replicas hosted here to
//! another of this broker's log dirs. As Kafka's `ReplicaManager.alterReplicaLogDirs`, per
//! partition (a partition named under two dirs goes to the last one, as Kafka's map does):
//! * a topic name too long for the `-future` directory name: INVALID_TOPIC_EXCEPTION;
//! * a path that is not one of `log.dirs`: LOG_DIR_NOT_FOUND; an offline one:
//!   KAFKA_STORAGE_ERROR;
//! * the dir is remembered for the partition (Kafka's `preferredLogDirs`) unless its copy is
//!   there already, so a replica created later goes there;
//! * not hosted here: UNKNOWN_TOPIC_OR_PARTITION if the metadata lacks it, else
//!   REPLICA_NOT_AVAILABLE (Kafka's NOT_LEADER_OR_FOLLOWER, kept as that for this API);
//! * hosted: NONE, and a move starts (`replica::log_dir_moves`) unless the replica is in that
//!   dir already (a no-op; a move elsewhere in flight is abandoned) or moving there already.
//!
//! The answer does not wait for the copy: DescribeLogDirs shows the future replica until it
//! replaces the current one (kafka-reassign-partitions.sh --verify polls it).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse};
use runnel_log::log_dirs::MoveStart;

use super::topic_name;
use crate::context::Broker;
use crate::errors::code;

/// Kafka's limit on a partition directory name (KAFKA-4893): the `-future` name must fit.
const MAX_DIR_NAME: usize = 255;

/// What the broker knows of one asked partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// Index of the asked dir among `log.dirs`, if it is one.
    pub dir: Option<usize>,
    pub dir_online: bool,
    pub in_image: bool,
    pub hosted: bool,
    /// The hosted replica's dir failed.
    pub replica_offline: bool,
    /// Length of `<t>-<p>.<32 hex>-future`.
    pub future_name_len: usize,
}

/// The pure decision for one partition: `Ok(dir)` = move (or keep) it there, else the code.
pub fn decide(f: &Facts) -> Result<usize, i16> {
    if f.future_name_len > MAX_DIR_NAME {
        return Err(code::INVALID_TOPIC_EXCEPTION);
    }
    let Some(dir) = f.dir else {
        return Err(code::LOG_DIR_NOT_FOUND);
    };
    if !f.dir_online || f.replica_offline {
        return Err(code::KAFKA_STORAGE_ERROR);
    }
    if !f.hosted {
        return Err(if f.in_image {
            code::REPLICA_NOT_AVAILABLE
        } else {
            code::UNKNOWN_TOPIC_OR_PARTITION
        });
    }
    Ok(dir)
}

/// Every (topic, partition) asked, with the path it should go to (the last one named wins).
pub fn targets(request: &AlterReplicaLogDirsRequest) -> BTreeMap<(String, i32), String> {
    let mut out = BTreeMap::new();
    for dir in &request.dirs {
        for topic in &dir.topics {
            for &p in &topic.partitions {
                out.insert((topic.name.0.to_string(), p), dir.path.to_string());
            }
        }
    }
    out
}

/// The response: one entry per asked partition, grouped by topic.
pub fn response(results: &BTreeMap<(String, i32), i16>) -> AlterReplicaLogDirsResponse {
    let mut by_topic: BTreeMap<&str, Vec<AlterReplicaLogDirPartitionResult>> = BTreeMap::new();
    for ((topic, partition), &error) in results {
        by_topic.entry(topic).or_default().push(
            AlterReplicaLogDirPartitionResult::default()
                .with_partition_index(*partition)
                .with_error_code(error),
        );
    }
    AlterReplicaLogDirsResponse::default().with_results(
        by_topic
            .into_iter()
            .map(|(t, partitions)| {
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(topic_name(t))
                    .with_partitions(partitions)
            })
            .collect(),
    )
}

/// Every asked partition answered `error` (an unauthorized request).
pub fn refuse_all(request: &AlterReplicaLogDirsRequest, error: i16) -> AlterReplicaLogDirsResponse {
    response(&targets(request).into_keys().map(|k| (k, error)).collect())
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let image = broker.image();
    let logs = broker.replicas.logs();
    let rate = broker
        .settings
        .replica_alter_log_dirs_io_max_bytes_per_second;
    let mut results = BTreeMap::new();
    for ((topic, partition), path) in targets(&request) {
        let dir = logs.index_of(&path);
        let current = logs.dir_of(&topic, partition);
        let hosted = broker.replicas.get(&topic, partition).is_some() && current.is_some();
        let facts = Facts {
            dir,
            dir_online: dir.is_some_and(|d| logs.dirs()[d].dir_failure().is_none()),
            in_image: image.partition(&topic, partition).is_some(),
            hosted,
            replica_offline: current.is_some_and(|c| logs.dirs()[c].dir_failure().is_some()),
            future_name_len: topic.len() + partition.to_string().len() + 41,
        };
        let outcome = match decide(&facts) {
            Ok(target) => start(broker, &topic, partition, target, rate),
            Err(e) => {
                // Kafka records the preferred dir once the dir checks passed, before it finds
                // the replica missing: a replica created later goes there.
                if let (Some(d), true) = (
                    dir,
                    e == code::REPLICA_NOT_AVAILABLE || e == code::UNKNOWN_TOPIC_OR_PARTITION,
                ) {
                    logs.prefer(&topic, partition, d);
                }
                Err(e)
            }
        };
        results.insert((topic, partition), outcome.err().unwrap_or(code::NONE));
    }
    response(&results)
}

/// Starts (or keeps) the move of a hosted replica to dir `target`.
fn start(
    broker: &Arc<Broker>,
    topic: &str,
    partition: i32,
    target: usize,
    rate: i64,
) -> Result<(), i16> {
    match broker.replicas.logs().start_move(topic, partition, target) {
        Ok(Some(MoveStart::Started(mv))) => {
            crate::replica::log_dir_moves::spawn(
                Arc::clone(&broker.replicas),
                topic.to_string(),
                partition,
                mv,
                rate,
            );
            Ok(())
        }
        Ok(Some(MoveStart::AlreadyThere | MoveStart::InProgress)) => Ok(()),
        Ok(None) => Err(code::REPLICA_NOT_AVAILABLE),
        Err(e) => {
            tracing::warn!(topic, partition, error = %e, "cannot start a replica move");
            Err(code::KAFKA_STORAGE_ERROR)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::alter_replica_log_dirs_request::{
        AlterReplicaLogDir, AlterReplicaLogDirTopic,
    };

    fn facts() -> Facts {
        Facts {
            dir: Some(1),
            dir_online: true,
            in_image: true,
            hosted: true,
            replica_offline: false,
            future_name_len: 48,
        }
    }

    #[test]
    fn each_refusal_has_kafkas_code_in_kafkas_order() {
        assert_eq!(decide(&facts()), Ok(1));
        let with = |f: fn(&mut Facts)| {
            let mut x = facts();
            f(&mut x);
            decide(&x)
        };
        assert_eq!(with(|f| f.dir = None), Err(code::LOG_DIR_NOT_FOUND));
        assert_eq!(
            with(|f| f.dir_online = false),
            Err(code::KAFKA_STORAGE_ERROR)
        );
        assert_eq!(
            with(|f| f.replica_offline = true),
            Err(code::KAFKA_STORAGE_ERROR)
        );
        assert_eq!(with(|f| f.hosted = false), Err(code::REPLICA_NOT_AVAILABLE));
        assert_eq!(
            with(|f| {
                f.hosted = false;
                f.in_image = false
            }),
            Err(code::UNKNOWN_TOPIC_OR_PARTITION)
        );
        assert_eq!(
            with(|f| {
                f.future_name_len = 256;
                f.dir = None
            }),
            Err(code::INVALID_TOPIC_EXCEPTION)
        );
        // An unknown dir is reported before an unknown partition.
        assert_eq!(
            with(|f| {
                f.dir = None;
                f.in_image = false;
                f.hosted = false
            }),
            Err(code::LOG_DIR_NOT_FOUND)
        );
    }

    #[test]
    fn a_partition_named_twice_goes_to_the_last_dir_and_is_answered_once() {
        let dir = |path: &str, p: &[i32]| {
            AlterReplicaLogDir::default()
                .with_path(path.to_string().into())
                .with_topics(vec![AlterReplicaLogDirTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(p.to_vec())])
        };
        let request = AlterReplicaLogDirsRequest::default()
            .with_dirs(vec![dir("/a", &[0, 1]), dir("/b", &[1])]);
        let t = targets(&request);
        assert_eq!(t.get(&("t".to_string(), 0)).map(String::as_str), Some("/a"));
        assert_eq!(t.get(&("t".to_string(), 1)).map(String::as_str), Some("/b"));
        let r = refuse_all(&request, code::CLUSTER_AUTHORIZATION_FAILED);
        assert_eq!(r.results.len(), 1);
        assert_eq!(r.results[0].partitions.len(), 2);
        assert!(r.results[0]
            .partitions
            .iter()
            .all(|p| p.error_code == code::CLUSTER_AUTHORIZATION_FAILED));
    }
}
