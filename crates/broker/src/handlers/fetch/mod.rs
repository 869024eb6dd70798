//! Fetch (API 1): whole batches from the log, up to the high watermark for consumers, with long
//! polling (`max_wait_ms` / `min_bytes`) woken by the progress of the requested partitions only
//! (a wake-up checks their offsets before reading anything). Sessionless (session id 0), which
//! KIP-227 allows: every response is a full response. v13+ name topics by id.
//!
//! Bounded as Kafka's `ReplicaManager.readFromLog` (KIP-74): the response carries at most
//! `min(max_bytes, fetch.max.bytes)` of records (`replica.fetch.response.max.bytes` for
//! follower fetches; a non-positive `max_bytes` is 0, not unlimited), each partition at most
//! its `partition_max_bytes`, and only the first batch of the response may exceed a limit. A
//! partition listed more than once is answered once (Kafka keys the request by partition: the
//! last entry's position, data in the first's place). Logs are located under the partition's
//! lock and read without it, on the blocking pool, never on the async workers.
//!
//! Consumers with `isolation_level = 1` (read_committed, KIP-98) read only below the last
//! stable offset, and get the aborted transactions overlapping what they may read
//! (`PartitionLog::aborted_txns`) so they drop those records; read_uncommitted gets `null`.
//!
//! Consumer fetches v11+ may be redirected to, or served by, a follower (KIP-392):
//! `fetch_follower_read`.
//!
//! Follower fetches (`replica_id >= 0`) read up to the log end and move the HW, so they are
//! accepted only from a replica of the partition with its current broker epoch (Fetch v15's
//!
//! One file per step: `plan` (the request decoded and checked once), `wait` (the long poll,
//! Kafka's `DelayedFetch`), `read` (one pass over the partitions), `admit` (whether a
//! partition may be read for this fetcher, and a follower's position), `response` (the
//! answer's assembly, KIP-951 leader hints).

use std::sync::Arc;

use kafka_protocol::messages::{FetchRequest, FetchResponse};

use crate::context::{Broker, RequestContext};

mod admit;
mod plan;
mod read;
mod response;
mod wait;

pub(super) use response::partition_error;

pub async fn handle(
    broker: &Arc<Broker>,
    mut request: FetchRequest,
    version: i16,
    ctx: &RequestContext,
) -> FetchResponse {
    let refused = super::fetch_authz::take_refused(broker, ctx, &mut request, version);
    let response = wait::fetch(broker, request, version).await;
    let mut response = super::fetch_authz::answer_refused(response, refused, version);
    if version >= 16 {
        response::add_leader_hints(broker, &mut response, version, &ctx.listener);
    }
    response
}
