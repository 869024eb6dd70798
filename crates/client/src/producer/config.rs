//! Producer settings, parsable from Kafka's producer property names so that CLI flags like
//! `--producer-property linger.ms=5` mean what they mean for the Java producer.

use std::time::Duration;

use kafka_protocol::records::Compression;

use crate::error::{ClientError, Result};
use crate::partitioner::PartitionerKind;
use crate::records::parse_compression;

/// Settings of a [`crate::Producer`]. Defaults follow the Java producer where it matters.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// `acks`: 0 (no response), 1 (leader), -1 (all in-sync replicas).
    pub acks: i16,
    /// `linger.ms`: how long a partially filled batch may wait for more records.
    pub linger: Duration,
    /// `batch.size`: bytes at which a partition's batch is closed and sent.
    pub batch_size: usize,
    /// `compression.type`.
    pub compression: Compression,
    /// `retries`: how often a batch is retried after a retriable error.
    pub retries: u32,
    /// `request.timeout.ms`: the Produce timeout (sent to the broker) and round-trip limit.
    pub request_timeout: Duration,
    /// `delivery.timeout.ms`: how long after its creation a batch may wait for a leader and
    /// be retried before it fails (Kafka's bound on retries, and the only bound on waiting
    /// for metadata, which counts no attempt).
    pub delivery_timeout: Duration,
    /// `retry.backoff.ms`.
    pub retry_backoff: Duration,
    /// `buffer.memory`: bytes of records buffered before `send` waits.
    pub buffer_memory: usize,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight: usize,
    /// `max.request.size`: bytes per record and per Produce request.
    pub max_request_size: usize,
    /// `partitioner`: how keyless / keyed records are spread.
    pub partitioner: PartitionerKind,
    /// `enable.idempotence`: InitProducerId and sequence numbers.
    pub idempotence: bool,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            acks: -1,
            linger: Duration::from_millis(5),
            batch_size: 16384,
            compression: Compression::None,
            retries: 10,
            request_timeout: Duration::from_secs(30),
            delivery_timeout: Duration::from_secs(120),
            retry_backoff: Duration::from_millis(100),
            buffer_memory: 32 * 1024 * 1024,
            max_in_flight: 5,
            max_request_size: 1024 * 1024,
            partitioner: PartitionerKind::Default,
            idempotence: false,
        }
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T> {
    value
        .trim()
        .parse()
        .map_err(|_| ClientError::InvalidArgument(format!("{key}={value}: not a valid number")))
}

/// Parses Kafka's `acks` values (`0`, `1`, `-1`, `all`).
pub fn parse_acks(value: &str) -> Result<i16> {
    match value.trim() {
        "all" | "-1" => Ok(-1),
        "0" => Ok(0),
        "1" => Ok(1),
        other => Err(ClientError::InvalidArgument(format!(
            "acks={other}: use 0, 1, -1 or all"
        ))),
    }
}

impl ProducerConfig {
    /// Applies one Kafka producer property. Returns `Ok(false)` for properties this producer
    /// does not use (the caller decides whether to warn), `Err` for invalid values.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool> {
        match key {
            "acks" | "request.required.acks" => self.acks = parse_acks(value)?,
            "linger.ms" => self.linger = Duration::from_millis(parse_num(key, value)?),
            "batch.size" => self.batch_size = parse_num::<usize>(key, value)?.max(1),
            "compression.type" | "compression.codec" => {
                self.compression = parse_compression(value)?
            }
            "retries" => {
                self.retries = parse_num::<u64>(key, value)?.min(u64::from(u32::MAX)) as u32
            }
            "request.timeout.ms" => {
                self.request_timeout = Duration::from_millis(parse_num(key, value)?)
            }
            "delivery.timeout.ms" => {
                self.delivery_timeout = Duration::from_millis(parse_num(key, value)?)
            }
            "retry.backoff.ms" => {
                self.retry_backoff = Duration::from_millis(parse_num(key, value)?)
            }
            "buffer.memory" => self.buffer_memory = parse_num(key, value)?,
            "max.in.flight.requests.per.connection" => {
                self.max_in_flight = parse_num::<usize>(key, value)?.max(1)
            }
            "max.request.size" => self.max_request_size = parse_num(key, value)?,
            "partitioner" | "partitioner.class" => {
                self.partitioner = value.parse().map_err(ClientError::InvalidArgument)?
            }
            "enable.idempotence" => {
                self.idempotence = match value.trim() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(ClientError::InvalidArgument(format!(
                            "enable.idempotence={other}: use true or false"
                        )))
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Builds a config from `key=value` properties; returns it with the keys it ignored.
    pub fn from_properties<'a>(
        props: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(Self, Vec<String>)> {
        let mut config = Self::default();
        let mut ignored = Vec::new();
        for (k, v) in props {
            if !config.set(k, v)? {
                ignored.push(k.to_owned());
            }
        }
        Ok((config, ignored))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_property_names() {
        let (c, ignored) = ProducerConfig::from_properties([
            ("acks", "all"),
            ("linger.ms", "7"),
            ("batch.size", "65536"),
            ("compression.type", "zstd"),
            ("bootstrap.servers", "x:1"),
            ("enable.idempotence", "true"),
            ("delivery.timeout.ms", "9000"),
        ])
        .unwrap();
        assert_eq!(c.acks, -1);
        assert_eq!(c.linger, Duration::from_millis(7));
        assert_eq!(c.batch_size, 65536);
        assert_eq!(c.compression, Compression::Zstd);
        assert!(c.idempotence);
        assert_eq!(c.delivery_timeout, Duration::from_secs(9));
        assert_eq!(ignored, vec!["bootstrap.servers".to_string()]);
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(ProducerConfig::from_properties([("acks", "2")]).is_err());
        assert!(ProducerConfig::from_properties([("linger.ms", "soon")]).is_err());
        assert!(ProducerConfig::from_properties([("compression.type", "brotli")]).is_err());
    }
}
