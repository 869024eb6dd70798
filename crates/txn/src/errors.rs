//! The Kafka error codes the coordinator answers with: the whole table of `runnel_codes`.

pub use runnel_codes::code::*;

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
