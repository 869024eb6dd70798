//! EndTxn (API 26): PrepareCommit/PrepareAbort is made durable and answered; the
//! coordinator then writes the markers and Complete* in the background (`txn_manager`).

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};
use runnel_txn::errors;

use crate::context::Broker;
use crate::txn_manager::Producer;

pub async fn handle(broker: &Arc<Broker>, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    let who = Producer {
        transactional_id: request.transactional_id.0.to_string(),
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
    };
    let code = broker.txns.end_txn(who, request.committed).await;
    EndTxnResponse::default().with_error_code(errors::for_version(code, version, 2))
}
