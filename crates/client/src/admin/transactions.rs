//! Transaction administration (what kafka-transactions.sh's `list` and `describe` use):
//! ListTransactions from every broker (each knows only the transactional ids it coordinates),
//! DescribeTransactions at the id's transaction coordinator (FindCoordinator key type 1).

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest, ProducerId,
    TopicName, TransactionalId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use crate::error::{ClientError, Result};
use crate::group::coordinator::{find_key_once, is_coordinator_error, shared_connection};
use crate::group::TopicPartition;

/// One row of ListTransactions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionListing {
    pub transactional_id: String,
    /// The broker that listed it (its coordinator).
    pub coordinator: i32,
    pub producer_id: i64,
    pub state: String,
}

/// A DescribeTransactions answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    pub coordinator: i32,
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: String,
    pub timeout_ms: i32,
    /// -1: no transaction open.
    pub start_ms: i64,
    pub partitions: Vec<TopicPartition>,
}

/// One producer of a partition (DescribeProducers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerDescription {
    pub producer_id: i64,
    pub producer_epoch: i32,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    /// -1: none.
    pub coordinator_epoch: i32,
    /// -1: no open transaction.
    pub current_txn_start_offset: i64,
}

impl Admin {
    /// Aborts a (hanging) transaction on one partition, as Kafka's `Admin.abortTransaction`:
    /// an ABORT marker for the producer, sent to the partition's leader with WriteTxnMarkers.
    pub async fn abort_transaction(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<()> {
        self.client
            .retry(
                &format!("WriteTxnMarkers (abort) to {topic}-{partition}"),
                || async {
                    let meta = self
                        .client
                        .refresh_metadata(Some(&[topic.to_owned()]))
                        .await?;
                    let leader = meta.leader_for(topic, partition).ok_or_else(|| {
                        ClientError::kafka(
                            runnel_codes::NOT_LEADER_OR_FOLLOWER,
                            Some(format!("{topic}-{partition} has no leader")),
                        )
                    })?;
                    let conn = self.client.broker_connection(leader).await?;
                    let marker = WritableTxnMarker::default()
                        .with_producer_id(ProducerId(producer_id))
                        .with_producer_epoch(producer_epoch)
                        .with_transaction_result(false)
                        .with_coordinator_epoch(coordinator_epoch)
                        .with_topics(vec![WritableTxnMarkerTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                            .with_partition_indexes(vec![partition])]);
                    let req = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
                    let resp = conn.send(&req).await?;
                    let code = resp
                        .markers
                        .iter()
                        .flat_map(|m| &m.topics)
                        .flat_map(|t| &t.partitions)
                        .find(|p| p.partition_index == partition)
                        .map(|p| p.error_code)
                        .ok_or_else(|| {
                            ClientError::Protocol(
                                "WriteTxnMarkers answer without the partition".into(),
                            )
                        })?;
                    ClientError::check(code, Some(&format!("{topic}-{partition}")))
                },
            )
            .await
    }

    /// DescribeProducers of one partition at its leader.
    pub async fn describe_producers(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<ProducerDescription>> {
        self.client
            .retry(
                &format!("DescribeProducers of {topic}-{partition}"),
                || async {
                    let meta = self
                        .client
                        .refresh_metadata(Some(&[topic.to_owned()]))
                        .await?;
                    let leader = meta.leader_for(topic, partition).ok_or_else(|| {
                        ClientError::kafka(
                            runnel_codes::NOT_LEADER_OR_FOLLOWER,
                            Some(format!("{topic}-{partition} has no leader")),
                        )
                    })?;
                    let conn = self.client.broker_connection(leader).await?;
                    let req = DescribeProducersRequest::default().with_topics(vec![
                        TopicRequest::default()
                            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                            .with_partition_indexes(vec![partition]),
                    ]);
                    let resp = conn.send(&req).await?;
                    let p = resp
                        .topics
                        .into_iter()
                        .flat_map(|t| t.partitions)
                        .find(|p| p.partition_index == partition)
                        .ok_or_else(|| {
                            ClientError::Protocol(
                                "DescribeProducers answer without the partition".into(),
                            )
                        })?;
                    ClientError::check(p.error_code, Some(&format!("{topic}-{partition}")))?;
                    Ok(p.active_producers.into_iter().map(producer).collect())
                },
            )
            .await
    }

    /// DescribeProducers of many partitions in one request per broker, as Kafka's
    /// `Admin.describeProducers`: at `broker` when given (`DescribeProducersOptions.brokerId`;
    /// a follower answers too, from its replicated producer state), else at each partition's
    /// leader. Any partition's error fails the call (the tool's `all().get()`).
    pub async fn describe_producers_of(
        &self,
        partitions: &[TopicPartition],
        broker: Option<i32>,
    ) -> Result<Vec<(TopicPartition, Vec<ProducerDescription>)>> {
        let mut topics: Vec<String> = partitions.iter().map(|p| p.topic.clone()).collect();
        topics.sort();
        topics.dedup();
        self.client
            .retry("DescribeProducers", || async {
                let meta = self.client.refresh_metadata(Some(&topics)).await?;
                let mut by_broker: std::collections::BTreeMap<
                    i32,
                    std::collections::BTreeMap<String, Vec<i32>>,
                > = std::collections::BTreeMap::new();
                for tp in partitions {
                    let target = match broker {
                        Some(b) => b,
                        None => meta.leader_for(&tp.topic, tp.partition).ok_or_else(|| {
                            ClientError::kafka(
                                6,
                                Some(format!("{}-{} has no leader", tp.topic, tp.partition)),
                            )
                        })?,
                    };
                    by_broker
                        .entry(target)
                        .or_default()
                        .entry(tp.topic.clone())
                        .or_default()
                        .push(tp.partition);
                }
                let mut out = Vec::new();
                for (target, wanted) in &by_broker {
                    let conn = self.client.broker_connection(*target).await?;
                    let req = DescribeProducersRequest::default().with_topics(
                        wanted
                            .iter()
                            .map(|(t, ps)| {
                                TopicRequest::default()
                                    .with_name(TopicName(StrBytes::from_string(t.clone())))
                                    .with_partition_indexes(ps.clone())
                            })
                            .collect(),
                    );
                    let resp = conn.send(&req).await?;
                    for t in resp.topics {
                        for p in t.partitions {
                            let tp = TopicPartition {
                                topic: t.name.0.to_string(),
                                partition: p.partition_index,
                            };
                            ClientError::check(
                                p.error_code,
                                Some(&format!("{}-{}", tp.topic, tp.partition)),
                            )?;
                            out.push((tp, p.active_producers.into_iter().map(producer).collect()));
                        }
                    }
                }
                Ok(out)
            })
            .await
    }

    /// ListTransactions of every broker for the given producer ids only (KIP-664's
    /// `ListTransactionsOptions.filterProducerIds`), as `find-hanging` looks them up.
    pub async fn list_transactions_of_producers(
        &self,
        producer_ids: &[i64],
    ) -> Result<Vec<TransactionListing>> {
        let req = ListTransactionsRequest::default()
            .with_producer_id_filters(producer_ids.iter().map(|p| ProducerId(*p)).collect());
        self.list_transactions_of_every_broker(req).await
    }

    /// The transactions of every broker, optionally only those in `states`.
    pub async fn list_transactions(&self, states: &[String]) -> Result<Vec<TransactionListing>> {
        let req = ListTransactionsRequest::default().with_state_filters(
            states
                .iter()
                .map(|s| StrBytes::from_string(s.clone()))
                .collect(),
        );
        let mut out = self.list_transactions_of_every_broker(req).await?;
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(out)
    }

    /// Sends `req` to every broker (each coordinates its own share of transactional ids).
    async fn list_transactions_of_every_broker(
        &self,
        req: ListTransactionsRequest,
    ) -> Result<Vec<TransactionListing>> {
        let meta = self.client.refresh_metadata(Some(&[])).await?;
        let mut out = Vec::new();
        for broker in meta.brokers.keys() {
            let listed = self
                .client
                .retry(
                    &format!("ListTransactions from broker {broker}"),
                    || async {
                        let conn = self.client.broker_connection(*broker).await?;
                        let resp = conn.send(&req).await?;
                        ClientError::check(resp.error_code, None)?;
                        Ok(resp.transaction_states)
                    },
                )
                .await?;
            out.extend(listed.into_iter().map(|t| TransactionListing {
                transactional_id: t.transactional_id.0.to_string(),
                coordinator: *broker,
                producer_id: t.producer_id.0,
                state: t.transaction_state.to_string(),
            }));
        }
        Ok(out)
    }

    /// DescribeTransactions of one transactional id at its coordinator.
    pub async fn describe_transaction(&self, id: &str) -> Result<TransactionDescription> {
        self.client
            .retry(&format!("DescribeTransactions of '{id}'"), || async {
                let info = find_key_once(&self.client, id, 1).await?;
                let conn = shared_connection(&self.client, &info).await?;
                let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![
                    TransactionalId(StrBytes::from_string(id.to_owned())),
                ]);
                let resp = conn.send(&req).await?;
                let state = resp.transaction_states.into_iter().next().ok_or_else(|| {
                    ClientError::Protocol("DescribeTransactions response without states".into())
                })?;
                if is_coordinator_error(state.error_code) {
                    return Err(ClientError::kafka(state.error_code, None));
                }
                ClientError::check(state.error_code, Some(&format!("transactional id '{id}'")))?;
                Ok(TransactionDescription {
                    coordinator: info.node_id,
                    transactional_id: state.transactional_id.0.to_string(),
                    producer_id: state.producer_id.0,
                    producer_epoch: state.producer_epoch,
                    state: state.transaction_state.to_string(),
                    timeout_ms: state.transaction_timeout_ms,
                    start_ms: state.transaction_start_time_ms,
                    partitions: state
                        .topics
                        .iter()
                        .flat_map(|t| {
                            t.partitions.iter().map(|p| TopicPartition {
                                topic: t.topic.0.to_string(),
                                partition: *p,
                            })
                        })
                        .collect(),
                })
            })
            .await
    }
}

fn producer(
    s: kafka_protocol::messages::describe_producers_response::ProducerState,
) -> ProducerDescription {
    ProducerDescription {
        producer_id: s.producer_id.0,
        producer_epoch: s.producer_epoch,
        last_sequence: s.last_sequence,
        last_timestamp: s.last_timestamp,
        coordinator_epoch: s.coordinator_epoch,
        current_txn_start_offset: s.current_txn_start_offset,
    }
}
