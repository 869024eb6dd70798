//! The Kafka error codes the coordinator answers with.

pub const NONE: i16 = 0;
pub const NOT_COORDINATOR: i16 = 16;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const INVALID_REQUEST: i16 = 42;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const INVALID_TXN_STATE: i16 = 48;
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
pub const CONCURRENT_TRANSACTIONS: i16 = 51;
pub const PRODUCER_FENCED: i16 = 90;
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

/// Clients older than the version that introduced PRODUCER_FENCED (KIP-588) do not know it:
/// Kafka's `KafkaApis` answers them INVALID_PRODUCER_EPOCH instead. `first_version` is the
/// first request version that may carry PRODUCER_FENCED (InitProducerId 4, AddPartitionsToTxn,
/// AddOffsetsToTxn and EndTxn 2).
pub fn for_version(code: i16, version: i16, first_version: i16) -> i16 {
    if code == PRODUCER_FENCED && version < first_version {
        INVALID_PRODUCER_EPOCH
    } else {
        code
    }
}
