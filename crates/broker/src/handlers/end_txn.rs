//! EndTxn (API 26): PrepareCommit/PrepareAbort is made durable and answered; the
//! coordinator then writes the markers and Complete* in the background (`txn_manager`).
//!
//! v5 is transaction version 2 (KIP-890 part 2), decided on the request's version alone as
//! Kafka's `TransactionVersion.transactionVersionForEndTxn` (a v0-v4 client keeps the epoch
//! on a cluster finalized at 2, a v5 client bumps it on one finalized below): the epoch is
//! bumped at every transaction end and the answer carries the producer id and epoch the
//! client continues with (a new producer id, epoch 0, when the epochs ran out; -1/-1 on an
//! error, as Kafka).

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use runnel_txn::{errors, EndAnswer, EndRequest};

use crate::context::Broker;
use crate::txn_manager::Producer;

/// The first EndTxn version of transaction version 2.
const FIRST_V2_VERSION: i16 = 5;

pub async fn handle(broker: &Arc<Broker>, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    if version >= FIRST_V2_VERSION {
        return end_v2(broker, &request).await;
    }
    let who = Producer {
        transactional_id: request.transactional_id.0.to_string(),
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
    };
    let code = broker.txns.end_txn(who, request.committed).await;
    EndTxnResponse::default().with_error_code(errors::for_version(code, version, 2))
}

async fn end_v2(broker: &Arc<Broker>, request: &EndTxnRequest) -> EndTxnResponse {
    let mut req = EndRequest {
        transactional_id: request.transactional_id.0.to_string(),
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        commit: request.committed,
        fresh_producer_id: None,
    };
    let failed = |code: i16| {
        EndTxnResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    // At most twice: the coordinator asks for a producer id only when the bump exhausts the
    // epochs.
    for _ in 0..2 {
        match broker.txns.end_txn_v2(req.clone()).await {
            EndAnswer::Ended {
                producer_id,
                producer_epoch,
            } => {
                return EndTxnResponse::default()
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(producer_epoch)
            }
            EndAnswer::Failed(code) => return failed(code),
            EndAnswer::NeedProducerId => match broker.next_producer_id().await {
                Ok(id) => req.fresh_producer_id = Some(id),
                Err(e) => return failed(e.code),
            },
        }
    }
    failed(errors::CONCURRENT_TRANSACTIONS)
}
