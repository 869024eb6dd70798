//! A consumer of explicitly assigned partitions (Kafka's `assign()`), and the settings shared
//! with the group consumer. The fetching itself lives in [`crate::fetcher`].

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use crate::fetcher::Fetcher;
use crate::records::ConsumerRecord;

/// Where to start reading an assigned partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartPosition {
    /// The log start offset.
    Earliest,
    /// The log end offset (only new records).
    Latest,
    /// An explicit offset.
    Offset(i64),
    /// The first offset with a timestamp >= this (ms); the end when none.
    Timestamp(i64),
}

/// What to do when the position is out of range (Kafka's `auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    /// Jump to the log start.
    Earliest,
    /// Jump to the log end.
    #[default]
    Latest,
    /// Fail the poll with OFFSET_OUT_OF_RANGE.
    None,
}

impl std::str::FromStr for AutoOffsetReset {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "earliest" => Ok(Self::Earliest),
            "latest" => Ok(Self::Latest),
            "none" => Ok(Self::None),
            other => Err(format!(
                "auto.offset.reset={other}: use earliest, latest or none"
            )),
        }
    }
}

/// Consumer settings (Kafka's names in the docs of each field).
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// `fetch.max.wait.ms`: how long the broker may hold a Fetch waiting for `min_bytes`.
    pub max_wait: Duration,
    /// `fetch.min.bytes`.
    pub min_bytes: i32,
    /// `fetch.max.bytes`: per Fetch response.
    pub max_bytes: i32,
    /// `max.partition.fetch.bytes`.
    pub partition_max_bytes: i32,
    /// `auto.offset.reset`.
    pub auto_offset_reset: AutoOffsetReset,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            auto_offset_reset: AutoOffsetReset::Latest,
        }
    }
}

/// A consumer of assigned partitions.
#[derive(Debug)]
pub struct Consumer {
    fetcher: Fetcher,
}

impl Consumer {
    /// A consumer with nothing assigned.
    pub fn new(client: Arc<Client>, config: ConsumerConfig) -> Self {
        Self {
            fetcher: Fetcher::new(client, config),
        }
    }

    /// Replaces the assignment with `partitions`, each read from its start position.
    pub fn assign(&mut self, partitions: Vec<(String, i32, StartPosition)>) {
        self.fetcher.assign(partitions);
    }

    /// Assigns every partition of `topic` from `start`; fails when the topic does not exist.
    pub async fn assign_topic(&mut self, topic: &str, start: StartPosition) -> Result<Vec<i32>> {
        let info = self.fetcher.client().topic(topic).await?;
        let parts: Vec<i32> = info.partitions.iter().map(|p| p.partition).collect();
        self.assign(
            parts
                .iter()
                .map(|&p| (topic.to_owned(), p, start))
                .collect(),
        );
        Ok(parts)
    }

    /// The cluster handle this consumer reads through.
    pub fn client(&self) -> &Arc<Client> {
        self.fetcher.client()
    }

    /// The assigned partitions.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        self.fetcher.assignment()
    }

    /// The next offset to read for a partition, once resolved.
    pub fn position(&self, topic: &str, partition: i32) -> Option<i64> {
        self.fetcher.position(topic, partition)
    }

    /// Moves a partition's position.
    pub fn seek(&mut self, topic: &str, partition: i32, start: StartPosition) {
        self.fetcher.seek(topic, partition, start);
    }

    /// Fetches records, waiting up to `timeout` for at least one. Returns an empty vector
    /// when nothing arrived in time.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        self.fetcher.poll(timeout).await
    }
}
