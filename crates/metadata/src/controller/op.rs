//! One controller operation as one typed value (Kafka's `ControllerResult(records, response)`
//! model: `QuorumController.appendWriteEvent(name, deadline, () -> manager.op(request))`).
//!
//! A value of an operation type *is* its request (serde, since a broker reaches the active
//! controller over the quorum listener as JSON). The operation says what it is called on the
//! wire, which field ranges a frame from anyone must respect, how it decides (pure: records
//! plus the answer they stand for), and how that answer absorbs a failed commit. The broker's
//! controller shell runs every operation through one generic path (queue, decide on the
//! speculative image, append without waiting, settle, answer once committed: [`super::pipeline`])
//! and its client through one generic call, so adding an operation touches its
//! own decision file, the handler that asks for it and one registration line on the wire.

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{BrokerSessions, Controller};
use crate::errors::ApiError;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

/// What an operation decided: the records to commit and the answer they stand for (Kafka's
/// `ControllerResult`). The answer is given only once the records committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerResult<R> {
    pub records: Vec<MetadataRecord>,
    pub response: R,
}

impl<R> ControllerResult<R> {
    pub fn new(records: Vec<MetadataRecord>, response: R) -> Self {
        Self { records, response }
    }

    /// An answer that changes nothing.
    pub fn answer(response: R) -> Self {
        Self::new(Vec::new(), response)
    }
}

/// Everything a decision may read or change: the pure controller, the broker sessions (the
/// one piece of controller state that is not in the image) and the image it decides on, with
/// the clocks as arguments so a decision is deterministic.
pub struct OpContext<'a> {
    pub controller: &'a mut Controller,
    pub sessions: &'a mut BrokerSessions,
    pub image: &'a MetadataImage,
    /// Wall-clock milliseconds, for state-change events.
    pub now_ms: i64,
    /// The sessions' monotonic clock now.
    pub session_ms: i64,
    /// The sessions' monotonic clock when the request was received (before it waited in the
    /// queue): a heartbeat counts from when it arrived, not from when it was handled.
    pub received_ms: i64,
    /// A single node is its own metadata log, so a broker it registers is caught up at once.
    pub single_node: bool,
}

/// An answer given from the sessions alone, without waiting in the controller's queue
/// ([`ControllerOp::answer_early`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlyAnswer<R> {
    pub response: R,
    /// Also run the operation through the queue (nobody waits for it): it has records to
    /// commit, decided again there on the current image.
    pub then_queue: bool,
}

/// One controller operation; a value of the type is its request.
pub trait ControllerOp: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    /// The operation's name: its tag on the wire and in logs (Kafka's event name).
    const NAME: &'static str;
    type Response: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// Range checks on every field, before anything reaches the controller: anyone who can
    /// reach the controller port can send a frame, so nothing in one is trusted
    /// (INVALID_REQUEST). Deeper rules (topic names, partition counts, assignments) are the
    /// decision's.
    fn validate(&self) -> Result<(), ApiError> {
        Ok(())
    }

    /// The decision: the records to commit and the answer. An `Err` answers at once and
    /// commits nothing.
    fn decide(&self, ctx: &mut OpContext<'_>)
        -> Result<ControllerResult<Self::Response>, ApiError>;

    /// The answer when the decided records could not be committed (the quorum lost
    /// leadership, timed out, the log failed): by default the whole operation fails with
    /// `error`; per-item answers turn only their successes into it.
    fn absorb(response: Self::Response, error: ApiError) -> Result<Self::Response, ApiError> {
        let _ = response;
        Err(error)
    }

    /// Runs once the decided records are appended (only if there were any), on the
    /// speculative image that holds them (pipelined: before they commit; the answer still
    /// waits for the commit, and a failed commit rebuilds the sessions from the committed
    /// image): session bookkeeping and records that can only be decided on that image
    /// (appended next, in the same operation).
    fn committed(&self, ctx: &mut OpContext<'_>, response: &Self::Response) -> Vec<MetadataRecord> {
        let _ = (ctx, response);
        Vec::new()
    }

    /// An answer from the sessions alone, while the controller is active, without waiting
    /// behind queued commits (KRaft handles a heartbeat as its own event). `None`: queue it.
    fn answer_early(
        &self,
        sessions: &mut BrokerSessions,
        image: &MetadataImage,
        received_ms: i64,
    ) -> Option<Result<EarlyAnswer<Self::Response>, ApiError>> {
        let _ = (sessions, image, received_ms);
        None
    }
}

/// Per-item results committed in one batch: if the commit failed, every success becomes that
/// failure (the items that failed validation keep their own error).
pub fn absorb_each<T, U>(
    mut results: Vec<T>,
    error: &ApiError,
    slot: impl Fn(&mut T) -> &mut Result<U, ApiError>,
) -> Vec<T> {
    for r in results.iter_mut() {
        let r = slot(r);
        if r.is_ok() {
            *r = Err(error.clone());
        }
    }
    results
}

/// Longest host name or rack id accepted (a DNS name is at most 253 characters).
pub(super) const MAX_NAME_BYTES: usize = 255;
/// Most replicas one AlterPartition ISR or partition list may name.
pub(super) const MAX_LIST_LEN: usize = 10_000;

/// INVALID_REQUEST for a field out of range.
pub(super) fn bad_field(field: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::invalid_request(format!("invalid controller request field {field}: {why}"))
}

pub(super) fn check_broker_id(field: &str, id: i32) -> Result<(), ApiError> {
    if id < 0 {
        return Err(bad_field(field, format!("broker id {id} is negative")));
    }
    Ok(())
}

pub(super) fn check_name(field: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.len() > MAX_NAME_BYTES {
        return Err(bad_field(
            field,
            format!("length {} not in 1..={MAX_NAME_BYTES}", value.len()),
        ));
    }
    Ok(())
}
