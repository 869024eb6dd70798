//! The controller's imperative shell: one task, one bounded queue, every decision in order.
//!
//! The pure [`Controller`] decides; this task applies the records to a candidate image first (so
//! an inconsistent record is never made durable), appends them to the metadata log, publishes the
//! new image, and then lets the state machines react (`on_commit`) until they have nothing left
//! to change — the seed's "persist the plan, then drive partitions and replicas Online".

use std::sync::Arc;

use runnel_metadata::{
    AlterConfigOp, ApiError, ConfigResource, Controller, CreatePartitionsRequest,
    CreateTopicOutcome, CreateTopicRequest, MetadataImage, MetadataRecord, StateChangeEvent,
    TopicRef,
};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::metadata_log::MetadataLog;
use crate::publisher::Publisher;

/// Queue bound: callers wait (backpressure) rather than the controller buffering without limit.
const QUEUE_CAPACITY: usize = 1024;

pub type DeleteTopicResult = (TopicRef, Option<String>, Result<Uuid, ApiError>);

enum Command {
    CreateTopics {
        requests: Vec<CreateTopicRequest>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<CreateTopicOutcome>>,
    },
    DeleteTopics {
        topics: Vec<TopicRef>,
        api_version: i16,
        reply: oneshot::Sender<Vec<DeleteTopicResult>>,
    },
    CreatePartitions {
        requests: Vec<CreatePartitionsRequest>,
        validate_only: bool,
        reply: oneshot::Sender<Vec<(String, Result<(), ApiError>)>>,
    },
    AlterConfigs {
        resource: ConfigResource,
        ops: Vec<(String, AlterConfigOp, Option<String>)>,
        incremental: bool,
        validate_only: bool,
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    RegisterBroker {
        broker_id: i32,
        host: String,
        port: u16,
        rack: Option<String>,
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    AllocateProducerIds {
        broker_id: i32,
        count: i64,
        reply: oneshot::Sender<Result<i64, ApiError>>,
    },
    Events {
        reply: oneshot::Sender<Vec<StateChangeEvent>>,
    },
}

/// Cheap, cloneable access to the controller task.
#[derive(Clone)]
pub struct ControllerHandle {
    tx: mpsc::Sender<Command>,
}

fn unavailable() -> ApiError {
    ApiError {
        code: runnel_metadata::codes::NOT_CONTROLLER,
        message: "the controller is not available".into(),
    }
}

impl ControllerHandle {
    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, ApiError> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(make(reply)).await.map_err(|_| unavailable())?;
        rx.await.map_err(|_| unavailable())
    }

    pub async fn create_topics(
        &self,
        requests: Vec<CreateTopicRequest>,
        validate_only: bool,
    ) -> Result<Vec<CreateTopicOutcome>, ApiError> {
        self.call(|reply| Command::CreateTopics {
            requests,
            validate_only,
            reply,
        })
        .await
    }

    pub async fn delete_topics(
        &self,
        topics: Vec<TopicRef>,
        api_version: i16,
    ) -> Result<Vec<DeleteTopicResult>, ApiError> {
        self.call(|reply| Command::DeleteTopics {
            topics,
            api_version,
            reply,
        })
        .await
    }

    pub async fn create_partitions(
        &self,
        requests: Vec<CreatePartitionsRequest>,
        validate_only: bool,
    ) -> Result<Vec<(String, Result<(), ApiError>)>, ApiError> {
        self.call(|reply| Command::CreatePartitions {
            requests,
            validate_only,
            reply,
        })
        .await
    }

    pub async fn alter_configs(
        &self,
        resource: ConfigResource,
        ops: Vec<(String, AlterConfigOp, Option<String>)>,
        incremental: bool,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        self.call(|reply| Command::AlterConfigs {
            resource,
            ops,
            incremental,
            validate_only,
            reply,
        })
        .await?
    }

    pub async fn register_broker(
        &self,
        broker_id: i32,
        host: String,
        port: u16,
        rack: Option<String>,
    ) -> Result<(), ApiError> {
        self.call(|reply| Command::RegisterBroker {
            broker_id,
            host,
            port,
            rack,
            reply,
        })
        .await?
    }

    pub async fn allocate_producer_ids(&self, broker_id: i32, count: i64) -> Result<i64, ApiError> {
        self.call(|reply| Command::AllocateProducerIds {
            broker_id,
            count,
            reply,
        })
        .await?
    }

    pub async fn events(&self) -> Result<Vec<StateChangeEvent>, ApiError> {
        self.call(|reply| Command::Events { reply }).await
    }
}

/// Owns the pure controller, the metadata log and the current image.
pub struct ControllerShell {
    controller: Controller,
    log: Box<dyn MetadataLog>,
    image: Arc<MetadataImage>,
    publisher: Publisher,
}

fn storage_error(e: impl std::fmt::Display) -> ApiError {
    ApiError {
        code: 56, // KAFKA_STORAGE_ERROR
        message: format!("metadata log write failed: {e}"),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl ControllerShell {
    pub fn new(
        controller: Controller,
        log: Box<dyn MetadataLog>,
        image: Arc<MetadataImage>,
        publisher: Publisher,
    ) -> Self {
        ControllerShell {
            controller,
            log,
            image,
            publisher,
        }
    }

    /// Starts the task; returns the handle used by request handlers.
    pub fn spawn(mut self) -> ControllerHandle {
        let (tx, mut rx) = mpsc::channel(QUEUE_CAPACITY);
        tokio::spawn(async move {
            // Drive any partition left half-way (e.g. by a crash between commits) first.
            if let Err(e) = self.settle() {
                tracing::error!(error = %e.message, "controller could not settle state machines");
            }
            while let Some(command) = rx.recv().await {
                self.handle(command);
            }
        });
        ControllerHandle { tx }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::CreateTopics {
                requests,
                validate_only,
                reply,
            } => {
                let (mut outcomes, records) =
                    self.controller
                        .create_topics(&self.image, &requests, validate_only);
                if let Err(e) = self.commit(records) {
                    for outcome in &mut outcomes {
                        if outcome.result.is_ok() {
                            outcome.result = Err(e.clone());
                        }
                    }
                }
                let _ = reply.send(outcomes);
            }
            Command::DeleteTopics {
                topics,
                api_version,
                reply,
            } => {
                let (mut results, records) =
                    self.controller
                        .delete_topics(&self.image, &topics, api_version);
                if let Err(e) = self.commit(records) {
                    for r in &mut results {
                        if r.2.is_ok() {
                            r.2 = Err(e.clone());
                        }
                    }
                }
                let _ = reply.send(results);
            }
            Command::CreatePartitions {
                requests,
                validate_only,
                reply,
            } => {
                let (mut results, records) =
                    self.controller
                        .create_partitions(&self.image, &requests, validate_only);
                if let Err(e) = self.commit(records) {
                    for r in &mut results {
                        if r.1.is_ok() {
                            r.1 = Err(e.clone());
                        }
                    }
                }
                let _ = reply.send(results);
            }
            Command::AlterConfigs {
                resource,
                ops,
                incremental,
                validate_only,
                reply,
            } => {
                let (result, records) = self.controller.alter_configs(
                    &self.image,
                    &resource,
                    &ops,
                    incremental,
                    validate_only,
                );
                let result = result.and_then(|()| self.commit(records));
                let _ = reply.send(result);
            }
            Command::RegisterBroker {
                broker_id,
                host,
                port,
                rack,
                reply,
            } => {
                let result = self
                    .controller
                    .register_broker(&self.image, broker_id, Uuid::new_v4(), host, port, rack)
                    .and_then(|records| self.commit(records))
                    .and_then(|()| {
                        let records = self.controller.unfence_broker(&self.image, broker_id);
                        self.commit(records)
                    });
                let _ = reply.send(result);
            }
            Command::AllocateProducerIds {
                broker_id,
                count,
                reply,
            } => {
                let (first, records) =
                    self.controller
                        .allocate_producer_ids(&self.image, broker_id, count);
                let _ = reply.send(self.commit(records).map(|()| first));
            }
            Command::Events { reply } => {
                let _ = reply.send(self.controller.events().cloned().collect());
            }
        }
    }

    /// Makes `records` durable and visible, then lets the state machines react until stable.
    fn commit(&mut self, records: Vec<MetadataRecord>) -> Result<(), ApiError> {
        self.commit_once(records)?;
        self.settle()
    }

    fn settle(&mut self) -> Result<(), ApiError> {
        // Bounded: each round moves partitions forward; a controller that keeps emitting
        // records forever is a bug we want to see, not a hang.
        for _ in 0..16 {
            let follow_up = self.controller.on_commit(&self.image, now_ms());
            if follow_up.is_empty() {
                return Ok(());
            }
            self.commit_once(follow_up)?;
        }
        tracing::error!("controller state machines did not settle after 16 rounds");
        Ok(())
    }

    fn commit_once(&mut self, records: Vec<MetadataRecord>) -> Result<(), ApiError> {
        if records.is_empty() {
            return Ok(());
        }
        let first = self.log.next_offset();
        let numbered: Vec<(i64, MetadataRecord)> = records
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, r)| (first + i as i64, r))
            .collect();
        // Apply before appending: an inconsistent record must never become durable.
        let next = self.image.apply(&numbered).map_err(|e| ApiError {
            code: runnel_metadata::codes::UNKNOWN_SERVER_ERROR,
            message: format!("controller produced an inconsistent record: {e}"),
        })?;
        let appended_at = self.log.append(&records).map_err(storage_error)?;
        debug_assert_eq!(appended_at, first, "metadata log offsets must be dense");
        self.image = Arc::new(next);
        self.publisher.publish(self.image.clone());
        Ok(())
    }
}
