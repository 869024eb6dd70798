//! ListTransactions (API 66, KIP-664; v1's duration filter, KIP-994): the transactional ids
//! this broker coordinates, filtered by state, producer id and running time.

use std::sync::Arc;

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::*;
use runnel_txn::TxnState;

use super::str_bytes;
use crate::context::Broker;

pub async fn handle(
    broker: &Arc<Broker>,
    request: ListTransactionsRequest,
    version: i16,
) -> ListTransactionsResponse {
    let mut states = Vec::new();
    let mut unknown = Vec::new();
    for s in &request.state_filters {
        match TxnState::from_name(s.as_str()) {
            Some(state) => states.push(state),
            None => unknown.push(s.clone()),
        }
    }
    // Only unknown states asked for: nothing can match (an empty list would mean all).
    if states.is_empty() && !unknown.is_empty() {
        return ListTransactionsResponse::default().with_unknown_state_filters(unknown);
    }
    let pids = request.producer_id_filters.iter().map(|p| p.0).collect();
    let duration = if version >= 1 {
        request.duration_filter
    } else {
        -1
    };
    let listed = broker
        .txns
        .list(states, pids, duration)
        .await
        .into_iter()
        .map(|t| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(str_bytes(&t.transactional_id)))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(str_bytes(t.state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(listed)
}
