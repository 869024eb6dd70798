//! DescribeTransactions (API 65, KIP-664): the coordinator's state of each transactional id
//! this broker coordinates (NOT_COORDINATOR for the others, TRANSACTIONAL_ID_NOT_FOUND for
//! unknown ones).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::*;

use super::{str_bytes, topic_name};
use crate::context::Broker;

pub async fn handle(
    broker: &Arc<Broker>,
    request: DescribeTransactionsRequest,
    _version: i16,
) -> DescribeTransactionsResponse {
    let ids = request
        .transactional_ids
        .iter()
        .map(|id| id.0.to_string())
        .collect();
    let states = broker
        .txns
        .describe(ids)
        .await
        .into_iter()
        .map(|(id, described)| {
            let state = TransactionState::default()
                .with_transactional_id(TransactionalId(str_bytes(&id)))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1);
            match described {
                Err(code) => state
                    .with_error_code(code)
                    .with_transaction_state(str_bytes("")),
                Ok(m) => {
                    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                    for tp in &m.partitions {
                        topics.entry(&tp.topic).or_default().push(tp.partition);
                    }
                    state
                        .with_transaction_state(str_bytes(m.state.name()))
                        .with_transaction_timeout_ms(m.timeout_ms)
                        .with_transaction_start_time_ms(m.start_ms)
                        .with_producer_id(ProducerId(m.producer_id))
                        .with_producer_epoch(m.producer_epoch)
                        .with_topics(
                            topics
                                .into_iter()
                                .map(|(t, ps)| {
                                    TopicData::default()
                                        .with_topic(topic_name(t))
                                        .with_partitions(ps)
                                })
                                .collect(),
                        )
                }
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
