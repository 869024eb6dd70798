//! InitProducerId (API 22) for idempotent producers. Transactions are not supported yet, so a
//! transactional id is refused with a clear error instead of being half-served.

use std::sync::Arc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::context::Broker;
use crate::errors::code;

pub async fn handle(
    broker: &Arc<Broker>,
    request: InitProducerIdRequest,
    _version: i16,
) -> InitProducerIdResponse {
    let failed = |code: i16| {
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if request.transactional_id.is_some() {
        return failed(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    }
    // KIP-360: a producer that already has an id asks for an epoch bump.
    if request.producer_id.0 >= 0 && request.producer_epoch >= 0 {
        let epoch = request.producer_epoch.checked_add(1);
        if let Some(epoch) = epoch.filter(|e| *e < i16::MAX) {
            return InitProducerIdResponse::default()
                .with_producer_id(request.producer_id)
                .with_producer_epoch(epoch);
        }
    }
    match broker.next_producer_id().await {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => failed(e.code),
    }
}
