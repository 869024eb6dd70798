//! DescribeLogDirs (API 35): the broker's log directory, the size of every partition it hosts
//! there and (v4, KIP-827) the filesystem's total and usable bytes. Kafka's
//! `kafka-log-dirs.sh --describe` and AdminClient `describeLogDirs` /
//! `describeReplicaLogDirs` ask it of each broker.
//!
//! As Kafka's `ReplicaManager.describeLogDirs`: a null topic list means every hosted
//! partition, a list means only those of its partitions hosted here (others are left out, not
//! errors); an offline directory answers KAFKA_STORAGE_ERROR with no topics. Runnel has one
//! log directory per broker and no replica movement between directories, so `is_future_key`
//! is always false. `offset_lag` is Kafka's `max(HW - LEO, 0)` for a current replica.

use std::collections::BTreeMap;
use std::path::Path;
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

/// One hosted partition's log, as the response reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedLog {
    pub topic: String,
    pub partition: i32,
    pub size_bytes: u64,
    pub offset_lag: i64,
}

/// The directory's state when asked.
pub struct LogDirState<'a> {
    pub path: &'a Path,
    pub failed: bool,
    pub space: Option<DiskSpace>,
    pub logs: Vec<HostedLog>,
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    let replicas = &broker.replicas;
    let path = replicas.logs().dir().to_path_buf();
    let mut failed = false;
    let logs = replicas
        .all()
        .into_iter()
        .map(|p| {
            let high_watermark = p.high_watermark();
            let log = p.lock_log();
            failed |= log.failure().is_some();
            HostedLog {
                topic: p.topic.clone(),
                partition: p.index,
                size_bytes: log.size_bytes(),
                offset_lag: (high_watermark - log.log_end_offset()).max(0),
            }
        })
        .collect();
    let state = LogDirState {
        path: &path,
        failed,
        space: disk_space(&path),
        logs,
    };
    describe(&state, request.topics.as_deref(), version)
}

/// The response for `requested` (None = every hosted partition) against `dir`.
pub fn describe(
    dir: &LogDirState<'_>,
    requested: Option<&[DescribableLogDirTopic]>,
    version: i16,
) -> DescribeLogDirsResponse {
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
    DescribeLogDirsResponse::default().with_results(vec![result])
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
                .with_offset_lag(log.offset_lag),
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
        }
    }

    fn dir(failed: bool) -> LogDirState<'static> {
        LogDirState {
            path: Path::new("/data/runnel"),
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
        let r = describe(&dir(false), None, 4);
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
        let r = describe(&dir(false), Some(&requested), 4);
        assert_eq!(sizes(&r), vec![("b".into(), vec![(1, 30)])]);
        assert!(describe(&dir(false), Some(&[]), 4).results[0]
            .topics
            .is_empty());
    }

    #[test]
    fn space_is_reported_from_v4_only() {
        let result = &describe(&dir(false), None, 3).results[0];
        assert_eq!((result.total_bytes, result.usable_bytes), (-1, -1));
    }

    #[test]
    fn an_offline_directory_answers_storage_error_without_topics() {
        let result = &describe(&dir(true), None, 4).results[0];
        assert_eq!(result.error_code, code::KAFKA_STORAGE_ERROR);
        assert!(result.topics.is_empty());
    }
}
