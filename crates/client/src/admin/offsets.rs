//! ListOffsets and DeleteRecords: partition-level requests that must reach each partition's
//! leader, so they are grouped per leader and retried after a metadata refresh when
//! leadership moved.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, DeleteRecordsRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, ItemResults};
use crate::client::Client;
use crate::error::{ClientError, Result};
use crate::metadata::ClusterMetadata;

/// Which offset ListOffsets should find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset (-2).
    Earliest,
    /// The log end offset / high watermark (-1).
    Latest,
    /// The offset of the record with the largest timestamp (-3, ListOffsets v7+).
    MaxTimestamp,
    /// The first offset whose timestamp is >= the given milliseconds.
    Timestamp(i64),
}

impl OffsetSpec {
    /// The wire value of the `timestamp` field.
    pub fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::MaxTimestamp => -3,
            OffsetSpec::Timestamp(ts) => ts,
        }
    }
}

/// One ListOffsets answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The offset found (-1 when no record matches a timestamp query).
    pub offset: i64,
    /// The timestamp of that record (-1 for earliest/latest).
    pub timestamp: i64,
    /// Leader epoch of that record (-1 when unknown).
    pub leader_epoch: i32,
}

type Tp = (String, i32);

/// Runs `send` against the leader of each pending partition, grouped per leader, until every
/// partition has a non-retriable answer or retries run out.
async fn per_leader<Q: Clone, T, F, Fut>(
    client: &Client,
    items: Vec<(Tp, Q)>,
    send: F,
) -> Result<Vec<(Tp, Result<T>)>>
where
    F: Fn(i32, Vec<(Tp, Q)>) -> Fut,
    Fut: Future<Output = Result<Vec<(Tp, Result<T>)>>>,
{
    let mut pending = items;
    let mut done = Vec::new();
    let mut attempt = 0u32;
    let mut backoff = client.config().retry_backoff;
    loop {
        let meta = metadata_for(client, &pending, attempt).await?;
        let mut retry = Vec::new();
        let by_leader = group_by_leader(&meta, pending, &mut done, &mut retry);
        for (leader, group) in by_leader {
            let originals = group.clone();
            match send(leader, group).await {
                Ok(results) => {
                    for (tp, r) in results {
                        match r {
                            Err(e) if e.is_retriable() => {
                                if let Some(orig) = originals.iter().find(|(k, _)| *k == tp) {
                                    retry.push((orig.clone(), e));
                                }
                            }
                            r => done.push((tp, r)),
                        }
                    }
                }
                Err(e) if e.is_retriable() => retry.extend(originals.into_iter().map(|o| {
                    (
                        o,
                        ClientError::kafka(runnel_codes::NETWORK_EXCEPTION, Some(e.to_string())),
                    )
                })),
                Err(e) => return Err(e),
            }
        }
        if retry.is_empty() {
            return Ok(done);
        }
        attempt += 1;
        if attempt > client.config().retries {
            done.extend(retry.into_iter().map(|((tp, _), e)| (tp, Err(e))));
            return Ok(done);
        }
        pending = retry.into_iter().map(|(item, _)| item).collect();
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(client.config().retry_backoff_max);
    }
}

/// The metadata to route by: the cached one on the first attempt if it knows every topic,
/// else a refresh of the pending partitions' topics.
async fn metadata_for<Q>(
    client: &Client,
    pending: &[(Tp, Q)],
    attempt: u32,
) -> Result<Arc<ClusterMetadata>> {
    let mut topics: Vec<String> = pending.iter().map(|((t, _), _)| t.clone()).collect();
    topics.sort();
    topics.dedup();
    let cached = client.metadata();
    if attempt == 0 && topics.iter().all(|t| cached.topics.contains_key(t)) {
        return Ok(cached);
    }
    client.refresh_metadata(Some(&topics)).await
}

/// The pending partitions grouped by leader; an unknown partition is answered at once
/// (`done`), one without a leader waits for the next attempt (`retry`).
fn group_by_leader<Q, T>(
    meta: &ClusterMetadata,
    pending: Vec<(Tp, Q)>,
    done: &mut Vec<(Tp, Result<T>)>,
    retry: &mut Vec<((Tp, Q), ClientError)>,
) -> BTreeMap<i32, Vec<(Tp, Q)>> {
    let mut by_leader: BTreeMap<i32, Vec<(Tp, Q)>> = BTreeMap::new();
    for item in pending {
        let ((topic, partition), _) = &item;
        let leader = match meta.topics.get(topic).map(|t| t.partition(*partition)) {
            None => Err(ClientError::kafka(
                runnel_codes::UNKNOWN_TOPIC_OR_PARTITION,
                Some(format!("topic '{topic}'")),
            )),
            Some(None) => Err(ClientError::kafka(
                runnel_codes::UNKNOWN_TOPIC_OR_PARTITION,
                Some(format!("{topic}-{partition}")),
            )),
            Some(Some(p)) => Ok(p.leader),
        };
        match leader {
            Err(e) => done.push((item.0, Err(e))),
            Ok(Some(leader)) => by_leader.entry(leader).or_default().push(item),
            Ok(None) => retry.push((
                item,
                ClientError::kafka(runnel_codes::LEADER_NOT_AVAILABLE, None),
            )),
        }
    }
    by_leader
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// Groups `(tp, q)` pairs by topic, preserving first-seen order.
fn group_by_topic<Q>(items: Vec<(Tp, Q)>) -> Vec<(String, Vec<(i32, Q)>)> {
    let mut out: Vec<(String, Vec<(i32, Q)>)> = Vec::new();
    for ((topic, partition), q) in items {
        match out.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, parts)) => parts.push((partition, q)),
            None => out.push((topic, vec![(partition, q)])),
        }
    }
    out
}

/// ListOffsets for many partitions; the core shared by [`Admin`] and the consumer.
pub(crate) async fn list_offsets(
    client: &Client,
    queries: &[(String, i32, OffsetSpec)],
) -> Result<ItemResults<Tp, ListedOffset>> {
    let items = queries
        .iter()
        .map(|(t, p, spec)| ((t.clone(), *p), *spec))
        .collect();
    per_leader(client, items, |leader, group| async move {
        let conn = client.broker_connection(leader).await?;
        let version = conn.negotiated::<ListOffsetsRequest>()?;
        if version < 7 && group.iter().any(|(_, s)| *s == OffsetSpec::MaxTimestamp) {
            return Err(ClientError::kafka(
                35,
                Some("max-timestamp offsets need ListOffsets v7".into()),
            ));
        }
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(-1);
        req.topics = group_by_topic(group)
            .into_iter()
            .map(|(topic, parts)| {
                let mut t = ListOffsetsTopic::default();
                t.name = topic_name(&topic);
                t.partitions = parts
                    .into_iter()
                    .map(|(p, spec)| {
                        let mut lp = ListOffsetsPartition::default();
                        lp.partition_index = p;
                        lp.timestamp = spec.wire();
                        lp
                    })
                    .collect();
                t
            })
            .collect();
        let resp = conn
            .send_at(&req, version, client.config().connection.request_timeout)
            .await?;
        let mut out = Vec::new();
        for t in resp.topics {
            let topic = t.name.0.to_string();
            for p in t.partitions {
                let tp = (topic.clone(), p.partition_index);
                let r = ClientError::check(p.error_code, None).map(|()| ListedOffset {
                    topic: topic.clone(),
                    partition: p.partition_index,
                    offset: p.offset,
                    timestamp: p.timestamp,
                    leader_epoch: p.leader_epoch,
                });
                out.push((tp, r));
            }
        }
        Ok(out)
    })
    .await
}

impl Admin {
    /// Looks up offsets (earliest, latest, max timestamp, by timestamp) per partition.
    pub async fn list_offsets(
        &self,
        queries: &[(String, i32, OffsetSpec)],
    ) -> Result<ItemResults<(String, i32), ListedOffset>> {
        list_offsets(&self.client, queries).await
    }

    /// Deletes records before `offset` in each partition (-1 = up to the high watermark);
    /// returns each partition's new low watermark.
    pub async fn delete_records(
        &self,
        requests: &[(String, i32, i64)],
        timeout: Duration,
    ) -> Result<ItemResults<(String, i32), i64>> {
        let client = &self.client;
        let items = requests
            .iter()
            .map(|(t, p, o)| ((t.clone(), *p), *o))
            .collect();
        let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        per_leader(client, items, |leader, group| async move {
            let conn = client.broker_connection(leader).await?;
            let mut req = DeleteRecordsRequest::default();
            req.timeout_ms = timeout_ms;
            req.topics = group_by_topic(group)
                .into_iter()
                .map(|(topic, parts)| {
                    let mut t = DeleteRecordsTopic::default();
                    t.name = topic_name(&topic);
                    t.partitions = parts
                        .into_iter()
                        .map(|(p, offset)| {
                            let mut dp = DeleteRecordsPartition::default();
                            dp.partition_index = p;
                            dp.offset = offset;
                            dp
                        })
                        .collect();
                    t
                })
                .collect();
            let version = conn.negotiated::<DeleteRecordsRequest>()?;
            let rpc_timeout = timeout + client.config().connection.request_timeout;
            let resp = conn.send_at(&req, version, rpc_timeout).await?;
            Ok(resp
                .topics
                .into_iter()
                .flat_map(|t| {
                    let topic = t.name.0.to_string();
                    t.partitions.into_iter().map(move |p| {
                        let r = ClientError::check(p.error_code, None).map(|()| p.low_watermark);
                        ((topic.clone(), p.partition_index), r)
                    })
                })
                .collect())
        })
        .await
    }
}
