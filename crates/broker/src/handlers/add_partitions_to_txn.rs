//! AddPartitionsToTxn (API 24): v0-v3 from a transactional producer (one transaction, its
//! partitions join it), v4+ from a partition leader (KIP-890 part 1: a batch of transactions,
//! `verify_only` asks whether each is ongoing with those partitions; without it, part 2's
//! implicit add for a Produce v12 / TxnOffsetCommit v5 of a transaction version 2 client,
//! Kafka's `transactionVersionForAddPartitionsToTxn`: v4+ is version 2). Translation only:
//! decisions in `runnel-txn`, sequencing and persistence in `txn_manager`.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::*;
use runnel_txn::{errors, TopicPartition};

use super::topic_name;
use crate::context::Broker;
use crate::txn_manager::Producer;

use crate::errors::code::{OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_OR_PARTITION};

pub async fn handle(
    broker: &Arc<Broker>,
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version <= 3 {
        let txn = AddPartitionsToTxnTransaction::default()
            .with_transactional_id(request.v3_and_below_transactional_id)
            .with_producer_id(request.v3_and_below_producer_id)
            .with_producer_epoch(request.v3_and_below_producer_epoch)
            .with_topics(request.v3_and_below_topics);
        let result = one(broker, txn, version).await;
        return AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(result.topic_results);
    }
    let mut results = Vec::with_capacity(request.transactions.len());
    for txn in request.transactions {
        results.push(one(broker, txn, version).await);
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

async fn one(
    broker: &Arc<Broker>,
    txn: AddPartitionsToTxnTransaction,
    version: i16,
) -> AddPartitionsToTxnResult {
    let partitions = flatten(&txn.topics);
    let who = Producer {
        transactional_id: txn.transactional_id.0.to_string(),
        producer_id: txn.producer_id.0,
        producer_epoch: txn.producer_epoch,
    };
    let codes = if txn.verify_only {
        broker.txns.verify_partitions(who, partitions.clone()).await
    } else {
        // A partition that does not exist fails the request; the others are not attempted.
        let image = broker.image();
        let unknown: Vec<bool> = partitions
            .iter()
            .map(|tp| {
                image
                    .topic(&tp.topic)
                    .is_none_or(|t| !t.partitions.contains_key(&tp.partition))
            })
            .collect();
        if unknown.iter().any(|u| *u) {
            unknown
                .iter()
                .map(|u| {
                    if *u {
                        UNKNOWN_TOPIC_OR_PARTITION
                    } else {
                        OPERATION_NOT_ATTEMPTED
                    }
                })
                .collect()
        } else {
            let client_txn_version = if version >= 4 { runnel_txn::TV_2 } else { 0 };
            let code = broker
                .txns
                .add_partitions(who, partitions.clone(), client_txn_version)
                .await;
            vec![errors::for_version(code, version, 2); partitions.len()]
        }
    };
    AddPartitionsToTxnResult::default()
        .with_transactional_id(txn.transactional_id)
        .with_topic_results(results(&partitions, &codes))
}

fn flatten(topics: &[AddPartitionsToTxnTopic]) -> Vec<TopicPartition> {
    topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.name.0.to_string(), *p))
        })
        .collect()
}

/// Per-topic results in request order (`codes` is parallel to `partitions`).
fn results(partitions: &[TopicPartition], codes: &[i16]) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut out: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (tp, code) in partitions.iter().zip(codes) {
        let result = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(tp.partition)
            .with_partition_error_code(*code);
        match out.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(t) => t.results_by_partition.push(result),
            None => out.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(topic_name(&tp.topic))
                    .with_results_by_partition(vec![result]),
            ),
        }
    }
    out
}
