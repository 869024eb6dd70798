//! Fetching assigned partitions: positions are resolved with ListOffsets, records fetched
//! with Fetch from each partition's leader (one request per leader, all of its partitions,
//! leaders in parallel). Shared by the assign-only [`crate::Consumer`] and the group
//! consumer, which differ only in who decides the assignment.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::admin::{offsets_core, OffsetSpec};
use crate::client::Client;
use crate::consumer::{AutoOffsetReset, ConsumerConfig, StartPosition};
use crate::error::{ClientError, Result};
use crate::group::TopicPartition;
use crate::records::{decode_batches, ConsumerRecord};

#[derive(Debug, Clone)]
struct Assigned {
    topic: String,
    partition: i32,
    start: StartPosition,
    position: Option<i64>,
}

/// A partition to fetch from its leader: (topic, partition, position).
type FetchTarget = (String, i32, i64);

/// The fetch machinery shared by [`crate::Consumer`] and [`crate::group::GroupConsumer`]: the
/// assigned partitions with their positions, position resolution, and Fetch rounds.
#[derive(Debug)]
pub(crate) struct Fetcher {
    client: Arc<Client>,
    config: ConsumerConfig,
    assigned: Vec<Assigned>,
}

type FetchOutcome = Result<Vec<(String, i32, i16, Option<bytes::Bytes>)>>;

impl Fetcher {
    /// A fetcher with nothing assigned.
    pub fn new(client: Arc<Client>, config: ConsumerConfig) -> Self {
        Self {
            client,
            config,
            assigned: Vec::new(),
        }
    }

    /// Replaces the assignment with `partitions`, each read from its start position.
    pub fn assign(&mut self, partitions: Vec<(String, i32, StartPosition)>) {
        self.assigned = partitions
            .into_iter()
            .map(|(topic, partition, start)| Assigned {
                topic,
                partition,
                position: match start {
                    StartPosition::Offset(o) if o >= 0 => Some(o),
                    _ => None,
                },
                start,
            })
            .collect();
    }

    /// Adds partitions, keeping the positions of those already assigned.
    pub fn add(&mut self, partitions: Vec<(String, i32, StartPosition)>) {
        for (topic, partition, start) in partitions {
            if self
                .assigned
                .iter()
                .any(|a| a.topic == topic && a.partition == partition)
            {
                continue;
            }
            self.assigned.push(Assigned {
                topic,
                partition,
                position: match start {
                    StartPosition::Offset(o) if o >= 0 => Some(o),
                    _ => None,
                },
                start,
            });
        }
    }

    /// Drops partitions from the assignment.
    pub fn remove(&mut self, partitions: &[TopicPartition]) {
        self.assigned.retain(|a| {
            !partitions
                .iter()
                .any(|tp| tp.topic == a.topic && tp.partition == a.partition)
        });
    }

    /// The resolved positions (next offset to read) of the assigned partitions.
    pub fn positions(&self) -> Vec<(TopicPartition, i64)> {
        self.assigned
            .iter()
            .filter_map(|a| {
                a.position
                    .map(|p| (TopicPartition::new(a.topic.clone(), a.partition), p))
            })
            .collect()
    }

    /// The cluster handle this fetcher reads through.
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// The assigned partitions.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        self.assigned
            .iter()
            .map(|a| (a.topic.clone(), a.partition))
            .collect()
    }

    /// The next offset to read for a partition, once resolved.
    pub fn position(&self, topic: &str, partition: i32) -> Option<i64> {
        self.assigned
            .iter()
            .find(|a| a.topic == topic && a.partition == partition)
            .and_then(|a| a.position)
    }

    /// Moves a partition's position.
    pub fn seek(&mut self, topic: &str, partition: i32, start: StartPosition) {
        if let Some(a) = self
            .assigned
            .iter_mut()
            .find(|a| a.topic == topic && a.partition == partition)
        {
            a.start = start;
            a.position = match start {
                StartPosition::Offset(o) if o >= 0 => Some(o),
                _ => None,
            };
        }
    }

    /// Resolves positions that are not known yet (earliest / latest / timestamp).
    async fn resolve_positions(&mut self) -> Result<()> {
        let queries: Vec<(String, i32, OffsetSpec)> = self
            .assigned
            .iter()
            .filter(|a| a.position.is_none())
            .map(|a| {
                let spec = match a.start {
                    StartPosition::Earliest => OffsetSpec::Earliest,
                    StartPosition::Timestamp(ts) => OffsetSpec::Timestamp(ts),
                    StartPosition::Latest | StartPosition::Offset(_) => OffsetSpec::Latest,
                };
                (a.topic.clone(), a.partition, spec)
            })
            .collect();
        if queries.is_empty() {
            return Ok(());
        }
        let results = offsets_core::list_offsets(&self.client, &queries).await?;
        let mut late = Vec::new();
        for ((topic, partition), r) in results {
            let listed = r?;
            if listed.offset < 0 {
                // No record at or after the timestamp: start at the end, like Java's seek.
                late.push((topic.clone(), partition, OffsetSpec::Latest));
                continue;
            }
            if let Some(a) = self
                .assigned
                .iter_mut()
                .find(|a| a.topic == topic && a.partition == partition)
            {
                a.position = Some(listed.offset);
            }
        }
        if !late.is_empty() {
            for ((topic, partition), r) in offsets_core::list_offsets(&self.client, &late).await? {
                let listed = r?;
                if let Some(a) = self
                    .assigned
                    .iter_mut()
                    .find(|a| a.topic == topic && a.partition == partition)
                {
                    a.position = Some(listed.offset.max(0));
                }
            }
        }
        Ok(())
    }

    /// Fetches records, waiting up to `timeout` for at least one. Returns an empty vector
    /// when nothing arrived in time.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        let deadline = Instant::now() + timeout;
        loop {
            self.resolve_positions().await?;
            let (by_leader, mut leaderless) = self.fetch_targets();
            if !leaderless.is_empty() {
                leaderless.sort();
                leaderless.dedup();
                self.client.refresh_metadata(Some(&leaderless)).await?;
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            let max_wait = self.config.max_wait.min(remaining);
            let mut tasks = tokio::task::JoinSet::new();
            for (leader, parts) in by_leader {
                let client = self.client.clone();
                let config = self.config.clone();
                tasks.spawn(fetch_from(client, config, leader, parts, max_wait));
            }
            let mut records = Vec::new();
            let mut refresh: Vec<String> = Vec::new();
            while let Some(joined) = tasks.join_next().await {
                let outcome =
                    joined.map_err(|e| ClientError::Protocol(format!("fetch task failed: {e}")))?;
                let parts = match outcome {
                    Ok(parts) => parts,
                    Err(e) if e.is_retriable() => {
                        tracing::debug!(error = %e, "fetch failed; will retry");
                        refresh.push(String::new());
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                for (topic, partition, code, data) in parts {
                    self.apply_partition(
                        &topic,
                        partition,
                        code,
                        data,
                        &mut records,
                        &mut refresh,
                    )?;
                }
            }
            if !refresh.is_empty() {
                refresh.retain(|t| !t.is_empty());
                refresh.sort();
                refresh.dedup();
                if let Err(e) = self.client.refresh_metadata(Some(&refresh)).await {
                    tracing::debug!(error = %e, "metadata refresh failed");
                }
                tokio::time::sleep(self.client.config().retry_backoff.min(remaining)).await;
            }
            if !records.is_empty() || Instant::now() >= deadline {
                return Ok(records);
            }
            if self.assigned.is_empty() {
                tokio::time::sleep(remaining).await;
                return Ok(records);
            }
        }
    }

    /// The assigned partitions with a position, grouped by leader as (topic, partition,
    /// position), and the topics of those without a known leader.
    fn fetch_targets(&self) -> (BTreeMap<i32, Vec<FetchTarget>>, Vec<String>) {
        let meta = self.client.metadata();
        let mut by_leader: BTreeMap<i32, Vec<FetchTarget>> = BTreeMap::new();
        let mut leaderless = Vec::new();
        for a in &self.assigned {
            let Some(position) = a.position else { continue };
            match meta.leader_for(&a.topic, a.partition) {
                Some(leader) => by_leader.entry(leader).or_default().push((
                    a.topic.clone(),
                    a.partition,
                    position,
                )),
                None => leaderless.push(a.topic.clone()),
            }
        }
        (by_leader, leaderless)
    }

    fn apply_partition(
        &mut self,
        topic: &str,
        partition: i32,
        code: i16,
        data: Option<bytes::Bytes>,
        records: &mut Vec<ConsumerRecord>,
        refresh: &mut Vec<String>,
    ) -> Result<()> {
        let reset = self.config.auto_offset_reset;
        let Some(a) = self
            .assigned
            .iter_mut()
            .find(|a| a.topic == topic && a.partition == partition)
        else {
            return Ok(());
        };
        let Some(position) = a.position else {
            return Ok(());
        };
        match code {
            0 => {
                let Some(data) = data else { return Ok(()) };
                let (mut got, next) = decode_batches(topic, partition, data, position)?;
                let after_last = got.last().map(|r| r.offset + 1);
                let new_position = after_last.into_iter().chain(next).max().unwrap_or(position);
                a.position = Some(new_position.max(position));
                records.append(&mut got);
                Ok(())
            }
            1 => match reset {
                AutoOffsetReset::None => Err(ClientError::kafka(
                    1,
                    Some(format!(
                        "offset {position} of {topic}-{partition} is out of range"
                    )),
                )),
                AutoOffsetReset::Earliest | AutoOffsetReset::Latest => {
                    a.start = if reset == AutoOffsetReset::Earliest {
                        StartPosition::Earliest
                    } else {
                        StartPosition::Latest
                    };
                    a.position = None;
                    Ok(())
                }
            },
            code if crate::error::is_retriable_code(code) => {
                refresh.push(topic.to_owned());
                Ok(())
            }
            code => Err(ClientError::kafka(
                code,
                Some(format!("fetching {topic}-{partition}")),
            )),
        }
    }
}

async fn fetch_from(
    client: Arc<Client>,
    config: ConsumerConfig,
    leader: i32,
    parts: Vec<(String, i32, i64)>,
    max_wait: Duration,
) -> FetchOutcome {
    let conn = client.broker_connection(leader).await?;
    let version = conn.negotiated::<FetchRequest>()?;
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX);
    req.min_bytes = config.min_bytes;
    req.max_bytes = config.max_bytes;
    req.isolation_level = 0;
    for (topic, partition, offset) in parts {
        let mut fp = FetchPartition::default();
        fp.partition = partition;
        fp.fetch_offset = offset;
        fp.partition_max_bytes = config.partition_max_bytes;
        match req.topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(t) => t.partitions.push(fp),
            None => {
                let mut t = FetchTopic::default();
                t.topic = TopicName(StrBytes::from_string(topic));
                t.partitions.push(fp);
                req.topics.push(t);
            }
        }
    }
    let timeout = client.config().connection.request_timeout + max_wait;
    let resp = conn.send_at(&req, version, timeout).await?;
    ClientError::check(resp.error_code, None)?;
    Ok(resp
        .responses
        .into_iter()
        .flat_map(|t| {
            let topic = t.topic.0.to_string();
            t.partitions
                .into_iter()
                .map(move |p| (topic.clone(), p.partition_index, p.error_code, p.records))
        })
        .collect())
}
