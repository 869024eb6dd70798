//! ListTransactions (API 66, KIP-664; v1's duration filter, KIP-994; v2's transactional id
//! pattern, KIP-1152): the transactional ids this broker coordinates, filtered by state,
//! producer id, running time and a regular expression over the id.

use std::sync::Arc;

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::*;
use runnel_group::consumer_group::TopicRegex;
use runnel_txn::TxnState;

use super::str_bytes;
use crate::context::Broker;
use crate::errors::code::INVALID_REGULAR_EXPRESSION;

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
    // KIP-1152: a null or empty pattern filters nothing; one that does not compile fails the
    // whole request, as Kafka's TransactionStateManager answers it.
    let pattern = match id_pattern(&request, version) {
        Ok(p) => p,
        Err(()) => {
            return ListTransactionsResponse::default().with_error_code(INVALID_REGULAR_EXPRESSION)
        }
    };
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
        .filter(|t| {
            pattern
                .as_ref()
                .is_none_or(|p| p.is_full_match(&t.transactional_id))
        })
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

/// v2's pattern, compiled: the RE2 subset KIP-848's topic regexes use (Kafka compiles this one
/// with RE2/J too) and matched against the whole id, as Java's `Matcher.matches()`. `Ok(None)`:
/// no filter (v0-1, null, empty); `Err`: the pattern does not compile.
fn id_pattern(request: &ListTransactionsRequest, version: i16) -> Result<Option<TopicRegex>, ()> {
    match request.transactional_id_pattern.as_ref() {
        Some(p) if version >= 2 && !p.is_empty() => TopicRegex::new(p).map(Some).map_err(|_| ()),
        _ => Ok(None),
    }
}
