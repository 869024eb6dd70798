//! The transaction coordinator's pure core (KIP-98, Kafka's `TransactionCoordinator` and
//! `TransactionStateManager`), deterministic and time-driven (`now_ms` is an argument).
//!
//! * [`state`]: the transaction states and their legal transitions.
//! * [`metadata`]: what the coordinator knows about one transactional id.
//! * [`codec`]: the `__transaction_state` key/value records in Kafka's binary layout.
//! * [`coordinator`]: the decisions (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
//!   EndTxn, EndTxn v5's epoch bump of transaction version 2, markers done, timeouts,
//!   expiry): state + request + now in, records to write and
//!   the answer out. The shell writes the records (acks=all) and reports back.

pub mod codec;
pub mod coordinator;
pub mod errors;
pub mod metadata;
pub mod state;

pub use coordinator::{
    Decision, EndAnswer, EndRequest, InitAnswer, InitRequest, MarkerJob, TxnConfig, TxnCoordinator,
    TxnListing, Write,
};
pub use metadata::{TopicPartition, TxnMetadata, TV_2};
pub use state::TxnState;
