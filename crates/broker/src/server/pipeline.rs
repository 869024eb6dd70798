//! Pipelined Produce responses on one connection.
//!
//! Kafka reads a connection's next request only once the previous response is out, so
//! responses keep request order. An acks=all Produce spends nearly all of its time waiting for
//! the followers, and a producer that keeps several requests in flight on one connection
//! (librdkafka with `linger.ms=0` sends one per message) would then be served one replication
//! round trip per request, far below its rate. Here a Produce whose records are appended goes
//! on waiting for its replication *beside* the connection: the next Produce is read, checked and
//! appended meanwhile (appends keep request order), and the responses are written in request
//! order by one writer. Every other request first waits until all earlier responses are
//! written, and is handled and answered before the next is read, as before: it sees what the
//! produces before it did, replicated, exactly as with Kafka. What a client sees changes only
//! in speed.
//!
//! A Produce is only pipelined when no client quota could throttle it (a throttle mutes the
//! connection, `crate::quota`; those go the whole way before the next read), and at most
//! [`MAX_WAITING`] wait behind the one being answered: then reading stops until it is. Each
//! waiting response keeps its frame's request memory (`queued.max.request.bytes`) until it is
//! written.

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::memory::Lease;
use super::{within, Closed};
use crate::dispatch::Waiting;

/// Responses one connection may have queued behind the one being answered.
pub(super) const MAX_WAITING: usize = 32;

/// Whether a request frame may be pipelined behind waiting Produce responses: only a Produce
/// (by its api key; anything else is handled after every earlier response is written).
pub(super) fn may_pipeline(frame: &[u8]) -> bool {
    super::api_key(frame) == Some(ApiKey::Produce as i16)
}

/// What the writer gets, in request order.
enum Outgoing {
    /// A response to write; `written` hears when it is.
    Ready {
        response: Bytes,
        written: oneshot::Sender<()>,
    },
    /// A Produce response still waiting for replication (`None` for acks=0), and the request
    /// memory of its frame.
    Waiting { response: Waiting, lease: Lease },
    /// Everything before it is written.
    Barrier(oneshot::Sender<()>),
}

/// The reading side's handle on the connection's responses.
pub(super) struct Responses {
    tx: mpsc::Sender<Outgoing>,
    /// Whether a pipelined response may still be unwritten.
    waiting: bool,
}

/// The writer is gone (it failed, and its own reason ends the connection).
fn writer_gone<T>(_: T) -> Closed {
    Closed::Write(std::io::Error::other("the response writer stopped"))
}

impl Responses {
    /// Queues a Produce response that waits for replication; waits while [`MAX_WAITING`] are.
    pub(super) async fn pipeline(&mut self, response: Waiting, lease: Lease) -> Result<(), Closed> {
        self.waiting = true;
        self.tx
            .send(Outgoing::Waiting { response, lease })
            .await
            .map_err(writer_gone)
    }

    /// Waits until every response queued so far is written.
    pub(super) async fn drain(&mut self) -> Result<(), Closed> {
        if !self.waiting {
            return Ok(());
        }
        let (done, written) = oneshot::channel();
        self.tx
            .send(Outgoing::Barrier(done))
            .await
            .map_err(writer_gone)?;
        written.await.map_err(writer_gone)?;
        self.waiting = false;
        Ok(())
    }

    /// Writes `response` after every earlier one and waits until it is written.
    pub(super) async fn write(&mut self, response: Bytes) -> Result<(), Closed> {
        let (written, done) = oneshot::channel();
        self.tx
            .send(Outgoing::Ready { response, written })
            .await
            .map_err(writer_gone)?;
        done.await.map_err(writer_gone)?;
        self.waiting = false;
        Ok(())
    }
}

/// The writer of one connection's responses: what [`Responses`] queues, in order, each within
/// `connections.max.idle.ms`. Ends with the reason the connection closes, or `None` once the
/// reading side is done and everything queued is written.
pub(super) struct Writer {
    rx: mpsc::Receiver<Outgoing>,
}

/// A connection's response queue: the reading side's handle and the writer.
pub(super) fn responses() -> (Responses, Writer) {
    let (tx, rx) = mpsc::channel(MAX_WAITING);
    (Responses { tx, waiting: false }, Writer { rx })
}

impl Writer {
    pub(super) async fn run<W: AsyncWrite>(
        mut self,
        writer: W,
        idle: Option<std::time::Duration>,
    ) -> Option<Closed> {
        let mut writer = std::pin::pin!(writer);
        while let Some(out) = self.rx.recv().await {
            let (response, notify) = match out {
                Outgoing::Ready { response, written } => (Some(response), Some(written)),
                Outgoing::Waiting { response, lease } => {
                    let response = match response.await {
                        Ok(response) => response,
                        Err(crate::dispatch::DispatchError(reason)) => {
                            return Some(Closed::BadRequest(reason))
                        }
                    };
                    drop(lease);
                    (response, None)
                }
                Outgoing::Barrier(done) => (None, Some(done)),
            };
            if let Some(response) = response {
                let written = within(idle, async {
                    writer.write_all(&response).await.map_err(Closed::Write)?;
                    writer.flush().await.map_err(Closed::Write)
                })
                .await;
                if let Err(closed) = written {
                    return Some(closed);
                }
            }
            if let Some(notify) = notify {
                // The reading side may have stopped waiting (it is ending): nothing to tell.
                let _ = notify.send(());
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::Poll;

    use tokio::io::AsyncReadExt;

    use super::super::memory::RequestMemory;
    use super::*;

    fn frame(key: i16) -> Vec<u8> {
        let mut f = key.to_be_bytes().to_vec();
        f.extend_from_slice(&[0, 9, 0, 0, 0, 1]);
        f
    }

    #[test]
    fn only_produce_requests_are_pipelined() {
        assert!(may_pipeline(&frame(ApiKey::Produce as i16)));
        for key in [
            ApiKey::Fetch,
            ApiKey::Metadata,
            ApiKey::ApiVersions,
            ApiKey::InitProducerId,
        ] {
            assert!(!may_pipeline(&frame(key as i16)), "{key:?}");
        }
        assert!(!may_pipeline(&[]));
        assert!(!may_pipeline(&[0]));
    }

    /// A lease of 1 KiB, what a small frame holds.
    async fn leased(memory: &RequestMemory) -> Lease {
        let mut lease = memory.lease();
        lease.grow(1024).await;
        lease
    }

    /// Whether `f` is still pending after one poll.
    async fn pending<F: Future + Unpin>(f: &mut F) -> bool {
        std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *f).poll(cx).is_pending()))
            .await
    }

    /// Two pipelined responses, the first waiting for its replication, the second ready at
    /// once: nothing is written before the first, a drain (what any other request does first)
    /// waits for both, each keeps its request memory until written, and everything queued is
    /// written once the reading side is done.
    #[tokio::test]
    async fn responses_go_out_in_request_order_and_a_drain_waits_for_the_waiting() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let (mut responses, writer) = responses();
        let writing = tokio::spawn(writer.run(server, None));
        let memory = RequestMemory::new(1 << 20);
        let (replicate, replicated) = oneshot::channel::<()>();
        let first: Waiting = Box::pin(async move {
            let _ = replicated.await;
            Ok(Some(Bytes::from_static(b"first,")))
        });
        let second: Waiting = Box::pin(async { Ok(Some(Bytes::from_static(b"second,"))) });
        responses
            .pipeline(first, leased(&memory).await)
            .await
            .unwrap();
        responses
            .pipeline(second, leased(&memory).await)
            .await
            .unwrap();
        let full = memory.capacity_bytes();
        {
            let mut drained = std::pin::pin!(responses.drain());
            for _ in 0..10 {
                tokio::task::yield_now().await;
                assert!(
                    pending(&mut drained).await,
                    "drained before the first is answered"
                );
            }
            assert_eq!(memory.available_bytes(), full - 2048, "both leases held");
            replicate.send(()).unwrap();
            drained.await.unwrap();
        }
        assert_eq!(
            memory.available_bytes(),
            full,
            "leases given back once written"
        );
        responses.write(Bytes::from_static(b"third")).await.unwrap();
        drop(responses);
        assert!(writing.await.unwrap().is_none(), "the writer ends cleanly");
        let mut out = String::new();
        client.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "first,second,third");
    }

    #[tokio::test]
    async fn a_response_that_cannot_be_encoded_ends_the_connection() {
        let (_client, server) = tokio::io::duplex(1 << 16);
        let (mut responses, writer) = responses();
        let writing = tokio::spawn(writer.run(server, None));
        let bad: Waiting =
            Box::pin(async { Err(crate::dispatch::DispatchError("too large".into())) });
        let memory = RequestMemory::new(1 << 20);
        responses.pipeline(bad, memory.lease()).await.unwrap();
        assert!(responses.drain().await.is_err());
        assert!(matches!(
            writing.await.unwrap(),
            Some(Closed::BadRequest(reason)) if reason == "too large"
        ));
    }
}
