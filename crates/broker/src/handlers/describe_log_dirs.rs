//! DescribeLogDirs (API 35): every log directory of the broker (`log.dirs`), the size of every
//! partition copy it holds and (v4, KIP-827) the filesystem's total and usable bytes. Kafka's
//! `kafka-log-dirs.sh --describe` and AdminClient `describeLogDirs` /
//! `describeReplicaLogDirs` ask it of each broker.
//!
//! As Kafka's `ReplicaManager.describeLogDirs`: one result per dir, by its absolute path; a
//! null topic list means every partition there, a list means only those of its partitions
//! (others are left out, not errors); an offline directory answers KAFKA_STORAGE_ERROR with
//! no topics. A replica moving between dirs (AlterReplicaLogDirs) shows twice: current in its
//! dir, and its future copy in the target dir with `is_future_key` and Kafka's lag
//! `current LEO - future LEO` (the copy's known end, see `runnel_log::log_dirs::moves`).
//! A current replica's `offset_lag` is Kafka's `max(HW - LEO, 0)`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};

use super::{str_bytes, topic_name};
use crate::context::Broker;
use crate::disk_space::{disk_space, DiskSpace};
use crate::errors::code;

/// One partition copy in a dir, as the response reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedLog {
    pub topic: String,
    pub partition: i32,
    pub size_bytes: u64,
    pub offset_lag: i64,
    /// The future copy of a replica moving into this dir.
    pub is_future: bool,
}

/// A directory's state when asked.
pub struct LogDirState {
    pub path: PathBuf,
    pub failed: bool,
    pub space: Option<DiskSpace>,
    pub logs: Vec<HostedLog>,
}

/// The absolute path a log dir is reported and addressed by (Kafka's `getAbsolutePath`).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Every log dir's state, read from the hosted partitions.
pub fn states(broker: &Broker) -> Vec<LogDirState> {
    let replicas = &broker.replicas;
    let dirs = replicas.logs();
    let mut states: Vec<LogDirState> = dirs
        .dirs()
        .iter()
        .map(|d| LogDirState {
            path: absolute(d.dir()),
            failed: d.dir_failure().is_some(),
            space: disk_space(d.dir()),
            logs: Vec::new(),
        })
        .collect();
    let mut leo_of = BTreeMap::new();
    for p in replicas.all() {
        let Some(i) = dirs.dir_of(&p.topic, p.index) else {
            continue;
        };
        let high_watermark = p.high_watermark();
        let log = p.lock_log();
        leo_of.insert((p.topic.clone(), p.index), log.log_end_offset());
        states[i].failed |= log.failure().is_some();
        states[i].logs.push(HostedLog {
            topic: p.topic.clone(),
            partition: p.index,
            size_bytes: log.size_bytes(),
            offset_lag: (high_watermark - log.log_end_offset()).max(0),
            is_future: false,
        });
    }
    for f in dirs.futures() {
        let Some(state) = states.get_mut(f.dir) else {
            continue;
        };
        let lag = leo_of
            .get(&(f.topic.clone(), f.partition))
            .map_or(-1, |leo| (leo - f.copied_to_offset).max(0));
        state.logs.push(HostedLog {
            topic: f.topic,
            partition: f.partition,
            size_bytes: f.size_bytes,
            offset_lag: lag,
            is_future: true,
        });
    }
    states
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    describe(&states(broker), request.topics.as_deref(), version)
}

/// The response for `requested` (None = every partition) against `dirs`.
pub fn describe(
    dirs: &[LogDirState],
    requested: Option<&[DescribableLogDirTopic]>,
    version: i16,
) -> DescribeLogDirsResponse {
    let results = dirs
        .iter()
        .map(|dir| {
            let mut result = DescribeLogDirsResult::default()
                .with_log_dir(str_bytes(&dir.path.to_string_lossy()))
                .with_total_bytes(-1)
                .with_usable_bytes(-1);
            if dir.failed {
                result.error_code = code::KAFKA_STORAGE_ERROR;
            } else {
                result.topics = topics(&dir.logs, requested);
                if let (Some(space), true) = (dir.space, version >= 4) {
                    result.total_bytes = i64::try_from(space.total_bytes).unwrap_or(i64::MAX);
                    result.usable_bytes = i64::try_from(space.usable_bytes).unwrap_or(i64::MAX);
                }
            }
            result
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(results)
}

fn topics(
    logs: &[HostedLog],
    requested: Option<&[DescribableLogDirTopic]>,
) -> Vec<DescribeLogDirsTopic> {
    let wanted = |log: &HostedLog| match requested {
        None => true,
        Some(topics) => topics
            .iter()
            .any(|t| t.topic.0.as_str() == log.topic && t.partitions.contains(&log.partition)),
    };
    let mut by_topic: BTreeMap<&str, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for log in logs.iter().filter(|l| wanted(l)) {
        by_topic.entry(&log.topic).or_default().push(
            DescribeLogDirsPartition::default()
                .with_partition_index(log.partition)
                .with_partition_size(i64::try_from(log.size_bytes).unwrap_or(i64::MAX))
                .with_offset_lag(log.offset_lag)
                .with_is_future_key(log.is_future),
        );
    }
    by_topic
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(topic_name(name))
                .with_partitions(partitions)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(topic: &str, partition: i32, size_bytes: u64) -> HostedLog {
        HostedLog {
            topic: topic.into(),
            partition,
            size_bytes,
            offset_lag: 0,
            is_future: false,
        }
    }

    fn dir(failed: bool) -> LogDirState {
        LogDirState {
            path: PathBuf::from("/data/runnel"),
            failed,
            space: Some(DiskSpace {
                total_bytes: 1000,
                usable_bytes: 400,
            }),
            logs: vec![log("b", 1, 30), log("a", 0, 10), log("b", 0, 20)],
        }
    }

    fn asked(topic: &str, partitions: &[i32]) -> DescribableLogDirTopic {
        DescribableLogDirTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(partitions.to_vec())
    }

    /// (topic, [(partition, size)]) of the single result.
    fn sizes(r: &DescribeLogDirsResponse) -> Vec<(String, Vec<(i32, i64)>)> {
        r.results[0]
            .topics
            .iter()
            .map(|t| {
                let parts = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.partition_size))
                    .collect();
                (t.name.0.to_string(), parts)
            })
            .collect()
    }

    #[test]
    fn null_topics_describe_every_hosted_partition_sorted() {
        let r = describe(&[dir(false)], None, 4);
        assert_eq!(
            sizes(&r),
            vec![
                ("a".into(), vec![(0, 10)]),
                ("b".into(), vec![(0, 20), (1, 30)])
            ]
        );
        let result = &r.results[0];
        assert_eq!(result.log_dir.as_str(), "/data/runnel");
        assert_eq!((result.total_bytes, result.usable_bytes), (1000, 400));
        assert_eq!(result.error_code, code::NONE);
    }

    #[test]
    fn a_topic_list_keeps_only_hosted_partitions_asked_for() {
        let requested = [asked("b", &[1, 7]), asked("zz", &[0])];
        let r = describe(&[dir(false)], Some(&requested), 4);
        assert_eq!(sizes(&r), vec![("b".into(), vec![(1, 30)])]);
        assert!(describe(&[dir(false)], Some(&[]), 4).results[0]
            .topics
            .is_empty());
    }

    #[test]
    fn space_is_reported_from_v4_only() {
        let result = &describe(&[dir(false)], None, 3).results[0];
        assert_eq!((result.total_bytes, result.usable_bytes), (-1, -1));
    }

    #[test]
    fn an_offline_directory_answers_storage_error_without_topics() {
        let result = &describe(&[dir(true)], None, 4).results[0];
        assert_eq!(result.error_code, code::KAFKA_STORAGE_ERROR);
        assert!(result.topics.is_empty());
    }

    /// One result per dir, each with only its own partitions; a moving replica's future copy
    /// in its target dir carries `is_future_key`.
    #[test]
    fn every_dir_answers_with_its_own_partitions_and_futures() {
        let mut second = dir(false);
        second.path = PathBuf::from("/data/two");
        second.logs = vec![HostedLog {
            is_future: true,
            offset_lag: 5,
            ..log("a", 0, 4)
        }];
        let r = describe(&[dir(false), second], None, 4);
        assert_eq!(r.results.len(), 2);
        assert_eq!(r.results[1].log_dir.as_str(), "/data/two");
        let future = &r.results[1].topics[0].partitions[0];
        assert!(future.is_future_key);
        assert_eq!((future.partition_size, future.offset_lag), (4, 5));
        assert!(r.results[0].topics[0]
            .partitions
            .iter()
            .all(|p| !p.is_future_key));
    }
}
