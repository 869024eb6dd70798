//! The long poll (Kafka's `DelayedFetch`): read once, and while the response has fewer than
//! `min_bytes` of records and no error, sleep until a requested partition has news or
//! `max_wait_ms` passes, then read again.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::plan::Plan;
use super::read::read_once;
use crate::context::Broker;
use crate::replica::partition::{any_progress, Progress, ReadBound};

// UNKNOWN_SERVER_ERROR: the read pass could not run (runtime shutting down).
use crate::errors::code::UNKNOWN_SERVER_ERROR;

pub(super) async fn fetch(
    broker: &Arc<Broker>,
    request: FetchRequest,
    version: i16,
) -> FetchResponse {
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + max_wait;
    let plan = Arc::new(Plan::new(broker, request, version));
    loop {
        // Subscribed before the read: an append in between is not missed.
        let mut watched = watch_partitions(broker, &plan);
        let (b, p) = (broker.clone(), plan.clone());
        let pass = tokio::task::spawn_blocking(move || read_once(&b, &p)).await;
        let Ok((response, bytes, errors)) = pass else {
            // The blocking pool is shutting down: nothing was read.
            return FetchResponse::default().with_error_code(UNKNOWN_SERVER_ERROR);
        };
        let now = tokio::time::Instant::now();
        if bytes >= plan.min_bytes || errors || now >= deadline {
            return response;
        }
        wait_for_news(&mut watched, plan.bound(), deadline).await;
    }
}

/// A requested partition hosted here, watched during the long poll.
struct Watched {
    fetch_offset: i64,
    seen: Progress,
    rx: tokio::sync::watch::Receiver<Progress>,
}

fn watch_partitions(broker: &Broker, plan: &Plan) -> Vec<Watched> {
    plan.wanted
        .iter()
        .filter_map(|w| {
            let name = plan.topics[w.topic].resolved.as_ref()?;
            let partition = broker.replicas.get(name, w.fetch.partition)?;
            let rx = partition.subscribe();
            let seen = *rx.borrow();
            Some(Watched {
                fetch_offset: w.fetch.fetch_offset,
                seen,
                rx,
            })
        })
        .collect()
}

/// Sleeps until one of the partitions has something past its fetch offset (or changed
/// leadership), or the deadline: the offsets are checked on every wake-up before anything is
/// read, so appends elsewhere, or below what this fetch waits for, cost it nothing.
async fn wait_for_news(watched: &mut [Watched], bound: ReadBound, deadline: tokio::time::Instant) {
    loop {
        // A closed watch is a partition that left this broker: the read reports it.
        let news = watched.iter().any(|w| {
            w.rx.has_changed().is_err()
                || w.rx.borrow().has_news_for(&w.seen, w.fetch_offset, bound)
        });
        if news {
            return;
        }
        tokio::select! {
            _ = any_progress(watched.iter_mut().map(|w| &mut w.rx)) => {}
            _ = tokio::time::sleep_until(deadline) => return,
        }
    }
}
