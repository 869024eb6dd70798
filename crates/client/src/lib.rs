//! runnel-client: a Kafka client that speaks only the Kafka wire protocol (via kafka-protocol),
//! so it works against Runnel and against Apache Kafka alike.
//!
//! * [`Connection`]: one broker socket with ApiVersions negotiation, pipelining and timeouts.
//! * [`Client`]: the cluster handle (bootstrap, metadata cache, connection per broker, retry
//!   policy).
//! * [`Admin`]: topics, partitions, configs, offsets, records deletion, cluster description.
//! * [`Producer`]: batching per partition into v2 record batches, Java-compatible murmur2
//!   partitioning, compression, acks, retries after leader changes.
//! * [`Consumer`]: assigned partitions polled with Fetch.
//! * [`GroupConsumer`]: consumer groups (classic protocol): coordinator lookup, join / sync
//!   with client-side assignors (`group::assignors`), heartbeats, commits.
//!
//! Errors are [`ClientError`]s carrying Kafka's error names; [`render_error`] turns one into
//! the single line the CLI prints.

pub mod admin;
pub mod client;
pub mod connection;
pub mod error;
mod fetcher;
pub mod frame;
pub mod group;
pub mod metadata;
pub mod murmur2;
pub mod partitioner;
pub mod sasl;
pub mod security;
pub mod stream;
pub mod tls;
pub mod versions;

pub use admin::Admin;
pub use client::{Client, ClientConfig};
pub use connection::{Connection, ConnectionConfig};
pub use error::{render_error, ClientError, Result};
pub use metadata::{BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo};
pub use partitioner::{Partitioner, PartitionerKind};
pub use security::{Security, SecurityProtocol};
pub mod consumer;
pub mod producer;
pub mod records;

pub use consumer::{AutoOffsetReset, Consumer, ConsumerConfig, StartPosition};
pub use group::{GroupConfig, GroupConsumer, OffsetAndMetadata, TopicPartition};
pub use producer::{DeliveryFuture, Producer, ProducerConfig};
pub use records::{ConsumerRecord, ProducerRecord, RecordMetadata};
