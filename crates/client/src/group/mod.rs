//! Consumer groups, client side (spec H, classic protocol): the consumer protocol payloads,
//! the partition assignors the group leader runs, the coordinator lookup, and
//! [`GroupConsumer`], a consumer whose partitions are handed out by the group.
//!
//! The broker treats subscriptions and assignments as opaque bytes; everything about *who
//! reads what* is decided here, by whichever member the coordinator elected leader. That is
//! why this module must agree bit-for-bit with Java / librdkafka members of the same group.

pub mod assignors;
pub mod commit;
mod config;
mod consumer;
pub(crate) mod coordinator;
mod heartbeat;
mod membership;
pub mod protocol;
mod state;

pub use commit::{FetchedOffsets, OffsetAndMetadata};
pub use config::GroupConfig;
pub use consumer::GroupConsumer;
pub use coordinator::CoordinatorInfo;

/// One partition of one topic. Ordered by topic, then partition: the order every assignor
/// deals partitions in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic-partition.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
