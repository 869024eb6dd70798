//! InitProducerId (API 22): idempotent producers get a fresh producer id (or, KIP-360, an
//! epoch bump of theirs); transactional producers are served by their transaction
//! coordinator (`txn_manager`, decisions in `runnel-txn`). v6 (KIP-939) adds two-phase
//! commit, which Runnel does not have: it answers as a Kafka broker with
//! `transaction.two.phase.commit.enable=false` (see `two_phase_commit_refusal`).

use std::sync::Arc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use runnel_txn::{errors, InitAnswer, InitRequest};

use crate::context::Broker;
use crate::errors::code;

fn failed(code: i16) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(code)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

fn granted(producer_id: i64, producer_epoch: i16) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    if let Some(id) = &request.transactional_id {
        return transactional(broker, &request, id.0.to_string(), version).await;
    }
    // KIP-360: a producer that already has an id asks for an epoch bump.
    if request.producer_id.0 >= 0 && request.producer_epoch >= 0 {
        let epoch = request.producer_epoch.checked_add(1);
        if let Some(epoch) = epoch.filter(|e| *e < i16::MAX) {
            return granted(request.producer_id.0, epoch);
        }
    }
    match broker.next_producer_id().await {
        Ok(id) => granted(id, 0),
        Err(e) => failed(e.code),
    }
}

async fn transactional(
    broker: &Arc<Broker>,
    request: &InitProducerIdRequest,
    transactional_id: String,
    version: i16,
) -> InitProducerIdResponse {
    if let Some(refused) = two_phase_commit_refusal(request, &transactional_id) {
        return failed(refused);
    }
    let mut req = InitRequest {
        transactional_id,
        timeout_ms: request.transaction_timeout_ms,
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        fresh_producer_id: None,
    };
    // At most twice: the coordinator asks for a producer id only when it has none to give.
    for _ in 0..2 {
        match broker.txns.init_producer_id(req.clone()).await {
            InitAnswer::Granted {
                producer_id,
                producer_epoch,
            } => return granted(producer_id, producer_epoch),
            // PRODUCER_FENCED is new in v4 (KIP-588): older clients get INVALID_PRODUCER_EPOCH.
            InitAnswer::Failed(code) => return failed(errors::for_version(code, version, 4)),
            InitAnswer::NeedProducerId => match broker.next_producer_id().await {
                Ok(id) => req.fresh_producer_id = Some(id),
                Err(e) => return failed(e.code),
            },
        }
    }
    failed(errors::CONCURRENT_TRANSACTIONS)
}

/// KIP-939's flags (v6; they decode as false before), refused as Kafka 4.1's
/// `TransactionCoordinator.handleInitProducerId` refuses them when two-phase commit is off,
/// after its empty-id check (which the coordinator makes here): `enable2Pc` gets
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (not a version error, so a client cannot tell the
/// feature is off from the missing ACL), `keepPreparedTxn` UNSUPPORTED_VERSION. The answer's
/// ongoing-transaction fields keep their default -1: there is never a prepared transaction
/// to report.
fn two_phase_commit_refusal(
    request: &InitProducerIdRequest,
    transactional_id: &str,
) -> Option<i16> {
    if transactional_id.is_empty() {
        None
    } else if request.enable_2_pc {
        Some(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if request.keep_prepared_txn {
        Some(code::UNSUPPORTED_VERSION)
    } else {
        None
    }
}
