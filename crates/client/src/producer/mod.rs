//! The producer: `send` partitions a record and appends it to a per-partition batch; a
//! background sender turns ready batches into Produce requests (one per broker, many
//! partitions each, several in flight) and completes every record's [`DeliveryFuture`].

mod accumulator;
mod config;
mod in_flight;
mod sender;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::{InitProducerIdRequest, ProducerId};
use tokio::sync::{watch, Notify, Semaphore};

pub use config::{parse_acks, ProducerConfig};

use crate::client::Client;
use crate::error::{ClientError, Result};
use crate::partitioner::Partitioner;
use crate::records::{BatchRecord, ProducerRecord, RecordMetadata};
use accumulator::{Accumulator, BatchOutcome};

/// Producer id and epoch from InitProducerId (idempotence).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProducerIdentity {
    pub id: i64,
    pub epoch: i16,
}

pub(crate) struct Inner {
    pub client: Arc<Client>,
    pub config: ProducerConfig,
    pub accumulator: Mutex<Accumulator>,
    /// Wakes the sender: new batch, ready batch, flush or close.
    pub wake: Notify,
    /// Signalled when the last outstanding batch completes.
    pub idle: Notify,
    /// Bytes of buffered records (`buffer.memory`).
    pub buffer: Semaphore,
    /// Number of `flush()` calls in progress: while > 0 every open batch is ready.
    pub flushing: AtomicUsize,
    pub closed: AtomicBool,
    pub identity: Option<ProducerIdentity>,
    /// In-flight request slots per broker.
    pub in_flight: Mutex<std::collections::HashMap<i32, Arc<Semaphore>>>,
    /// Per broker, the signal that the last request handed to a task has been written: the
    /// next request's task waits for it, so requests are written in the order they were made.
    pub write_turns: Mutex<std::collections::HashMap<i32, tokio::sync::oneshot::Receiver<()>>>,
}

impl Inner {
    pub fn lock_accumulator(&self) -> std::sync::MutexGuard<'_, Accumulator> {
        self.accumulator.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A Kafka producer. Dropping it sends what is buffered in the background; call
/// [`Producer::close`] (or [`Producer::flush`]) to wait for that.
pub struct Producer {
    inner: Arc<Inner>,
    partitioner: Partitioner,
    sender: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Resolves to where one sent record landed. Await it (it implements `IntoFuture`) or call
/// [`DeliveryFuture::wait`]; [`DeliveryFuture::try_result`] checks without waiting.
#[derive(Debug)]
pub struct DeliveryFuture {
    result: watch::Receiver<Option<BatchOutcome>>,
    topic: Arc<str>,
    partition: i32,
    index: i32,
    timestamp: i64,
}

impl DeliveryFuture {
    fn metadata(&self, outcome: &BatchOutcome) -> Result<RecordMetadata> {
        match outcome {
            Ok((base, log_append_time)) => Ok(RecordMetadata {
                topic: self.topic.to_string(),
                partition: self.partition,
                offset: if *base < 0 {
                    -1
                } else {
                    base + i64::from(self.index)
                },
                timestamp: if *log_append_time >= 0 {
                    *log_append_time
                } else {
                    self.timestamp
                },
            }),
            Err(e) => Err(duplicate(e)),
        }
    }

    /// The result if the batch has completed, without waiting.
    pub fn try_result(&self) -> Option<Result<RecordMetadata>> {
        self.result.borrow().as_ref().map(|o| self.metadata(o))
    }

    /// Waits for the batch holding this record to complete.
    pub async fn wait(mut self) -> Result<RecordMetadata> {
        loop {
            if let Some(r) = self.try_result() {
                return r;
            }
            if self.result.changed().await.is_err() {
                return self.try_result().unwrap_or_else(|| {
                    Err(ClientError::Protocol(
                        "the producer was dropped before the record was sent".into(),
                    ))
                });
            }
        }
    }

    /// The partition the record was assigned to.
    pub fn partition(&self) -> i32 {
        self.partition
    }
}

impl IntoFuture for DeliveryFuture {
    type Output = Result<RecordMetadata>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<RecordMetadata>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.wait())
    }
}

/// `ClientError` is not `Clone` (it wraps `io::Error`); a batch's error is shared by all of its
/// records, so each record gets an equivalent copy.
pub(crate) fn duplicate(e: &ClientError) -> ClientError {
    match e {
        ClientError::Kafka {
            code,
            name,
            message,
        } => ClientError::Kafka {
            code: *code,
            name,
            message: message.clone(),
        },
        ClientError::Io(io) => ClientError::Io(std::io::Error::new(io.kind(), io.to_string())),
        ClientError::Timeout(d, w) => ClientError::Timeout(*d, w.clone()),
        ClientError::Protocol(m) => ClientError::Protocol(m.clone()),
        ClientError::InvalidArgument(m) => ClientError::InvalidArgument(m.clone()),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Producer {
    /// Creates a producer; with `idempotence` it first obtains a producer id.
    pub async fn new(client: Arc<Client>, config: ProducerConfig) -> Result<Self> {
        let mut config = config;
        let identity = if config.idempotence {
            if config.acks != -1 {
                return Err(ClientError::InvalidArgument(
                    "enable.idempotence=true requires acks=all".into(),
                ));
            }
            config.max_in_flight = config.max_in_flight.min(5);
            Some(init_producer_id(&client).await?)
        } else {
            None
        };
        let buffer = Semaphore::new(config.buffer_memory.min(Semaphore::MAX_PERMITS));
        let inner = Arc::new(Inner {
            client,
            config: config.clone(),
            accumulator: Mutex::new(Accumulator::default()),
            wake: Notify::new(),
            idle: Notify::new(),
            buffer,
            flushing: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            identity,
            in_flight: Mutex::new(Default::default()),
            write_turns: Mutex::new(Default::default()),
        });
        let sender = tokio::spawn(sender::run(inner.clone()));
        Ok(Self {
            inner,
            partitioner: Partitioner::new(config.partitioner),
            sender: Some(sender),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &ProducerConfig {
        &self.inner.config
    }

    /// Queues a record. Waits only for partition metadata (first record of a topic) and for
    /// buffer space; the returned future resolves once the broker acknowledged the batch.
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture> {
        if self.inner.closed.load(Ordering::Relaxed) {
            return Err(ClientError::InvalidArgument(
                "the producer is closed".into(),
            ));
        }
        let partition_count = self.partition_count(&record.topic).await?;
        let partition = match record.partition {
            Some(p) if p >= 0 && (p as usize) < partition_count => p,
            Some(p) => {
                return Err(ClientError::kafka(
                    3,
                    Some(format!(
                        "partition {p} of topic '{}' (it has {partition_count})",
                        record.topic
                    )),
                ))
            }
            None => {
                self.partitioner
                    .partition(record.key.as_deref(), partition_count as u32) as i32
            }
        };
        let size = record.estimated_size();
        let max = self
            .inner
            .config
            .max_request_size
            .min(self.inner.config.buffer_memory);
        if size > max {
            return Err(ClientError::kafka(
                10,
                Some(format!("the record is {size} bytes, more than max.request.size / buffer.memory ({max})")),
            ));
        }
        let permit = self
            .inner
            .buffer
            .acquire_many(size as u32)
            .await
            .map_err(|_| ClientError::InvalidArgument("the producer is closed".into()))?;
        permit.forget();
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let batch_record = BatchRecord {
            key: record.key,
            value: record.value,
            headers: record.headers,
            timestamp,
        };
        let appended = self.inner.lock_accumulator().append(
            &record.topic,
            partition,
            batch_record,
            size,
            self.inner.config.batch_size,
            std::time::Instant::now(),
        );
        if appended.wake {
            self.inner.wake.notify_one();
        }
        Ok(DeliveryFuture {
            result: appended.result,
            topic: appended.topic,
            partition,
            index: appended.index,
            timestamp,
        })
    }

    async fn partition_count(&self, topic: &str) -> Result<usize> {
        if let Some(t) = self.inner.client.metadata().topics.get(topic) {
            if !t.partitions.is_empty() {
                return Ok(t.partitions.len());
            }
        }
        Ok(self
            .inner
            .client
            .topic(topic)
            .await?
            .partitions
            .len()
            .max(1))
    }

    /// Sends everything buffered now (ignoring linger) and waits until every batch completed.
    pub async fn flush(&self) {
        self.inner.flushing.fetch_add(1, Ordering::SeqCst);
        loop {
            let idle = self.inner.idle.notified();
            if self.inner.lock_accumulator().outstanding == 0 {
                break;
            }
            self.inner.wake.notify_one();
            let _ = tokio::time::timeout(Duration::from_millis(50), idle).await;
        }
        self.inner.flushing.fetch_sub(1, Ordering::SeqCst);
    }

    /// Flushes and stops the sender.
    pub async fn close(mut self) {
        self.flush().await;
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.wake.notify_one();
        if let Some(handle) = self.sender.take() {
            let _ = handle.await;
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        // The sender sends what is left and exits once nothing is outstanding.
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.wake.notify_one();
    }
}

async fn init_producer_id(client: &Client) -> Result<ProducerIdentity> {
    client
        .retry("InitProducerId", || async {
            let conn = client.any_connection().await?;
            let mut req = InitProducerIdRequest::default();
            req.transactional_id = None;
            req.transaction_timeout_ms = 60_000;
            req.producer_id = ProducerId(-1);
            req.producer_epoch = -1;
            let resp = conn.send(&req).await?;
            ClientError::check(resp.error_code, None)?;
            Ok(ProducerIdentity {
                id: resp.producer_id.0,
                epoch: resp.producer_epoch,
            })
        })
        .await
}
