//! Choosing a partition for a record (spec G): murmur2 for keys, round-robin for null keys.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::murmur2::java_partition;

/// How the producer picks a partition when the record does not name one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PartitionerKind {
    /// Java's behaviour for keyed records (murmur2) and round-robin for null keys, so the same
    /// key lands where a Java producer would put it.
    #[default]
    Default,
    /// Round-robin for every record, ignoring keys (Java's `RoundRobinPartitioner`).
    RoundRobin,
}

impl std::str::FromStr for PartitionerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "default" | "murmur2" | "murmur2_random" => Ok(Self::Default),
            "round_robin"
            | "roundrobin"
            | "org.apache.kafka.clients.producer.RoundRobinPartitioner" => Ok(Self::RoundRobin),
            other => Err(format!(
                "unknown partitioner '{other}' (use default or round_robin)"
            )),
        }
    }
}

/// A partitioner with its round-robin counter. One per producer; cheap to call per record.
#[derive(Debug, Default)]
pub struct Partitioner {
    kind: PartitionerKind,
    counter: AtomicU32,
}

impl Partitioner {
    /// A partitioner of the given kind whose round-robin counter starts at a random point,
    /// like kafkajs, so that many short-lived producers do not all hit partition 0 first.
    pub fn new(kind: PartitionerKind) -> Self {
        Self {
            kind,
            counter: AtomicU32::new(rand::random::<u32>()),
        }
    }

    /// A partitioner whose round-robin counter starts at `start` (deterministic, for tests).
    pub fn with_start(kind: PartitionerKind, start: u32) -> Self {
        Self {
            kind,
            counter: AtomicU32::new(start),
        }
    }

    /// The partition for a record with `key` in a topic with `num_partitions` partitions.
    /// `num_partitions` must be positive.
    pub fn partition(&self, key: Option<&[u8]>, num_partitions: u32) -> u32 {
        let n = num_partitions.max(1);
        match (self.kind, key) {
            (PartitionerKind::Default, Some(key)) => java_partition(key, n),
            _ => self.counter.fetch_add(1, Ordering::Relaxed) % n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyless_round_robin_cycles() {
        let p = Partitioner::with_start(PartitionerKind::Default, 0);
        let got: Vec<u32> = (0..7).map(|_| p.partition(None, 3)).collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn keyed_is_stable_and_java_compatible() {
        let p = Partitioner::new(PartitionerKind::Default);
        assert_eq!(p.partition(Some(b"kafka"), 3), 1);
        assert_eq!(p.partition(Some(b"kafka"), 6), 4);
        assert_eq!(p.partition(Some(b"kafka"), 10), 0);
        assert_eq!(p.partition(Some(b""), 10), 1);
    }

    #[test]
    fn round_robin_ignores_keys() {
        let p = Partitioner::with_start(PartitionerKind::RoundRobin, 5);
        assert_eq!(p.partition(Some(b"kafka"), 3), 2);
        assert_eq!(p.partition(Some(b"kafka"), 3), 0);
    }
}
