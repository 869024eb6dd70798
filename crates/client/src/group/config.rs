//! Group consumer settings, with Kafka's property names and defaults so that
//! `--consumer-property k=v` means what it means to the Java consumer.
//!
//! `partition.assignment.strategy` defaults to `range,cooperative-sticky`, the Java client's
//! default since 3.0: `range` is chosen while any member lacks cooperative-sticky, and the
//! whole group can later move to cooperative-sticky by a rolling restart that drops `range`.
//! As in Java, the consumer follows the cooperative protocol only when *every* configured
//! assignor is cooperative; otherwise it is eager (revokes all partitions before re-joining).

use std::time::Duration;

use crate::consumer::ConsumerConfig;
use crate::error::{ClientError, Result};

use super::assignors::{by_name, Assignor};

/// Settings of a [`super::GroupConsumer`].
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.id`.
    pub group_id: String,
    /// `group.instance.id`: a static member keeps its slot across restarts.
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms` (45000).
    pub session_timeout: Duration,
    /// `max.poll.interval.ms` (300000), also sent as the rebalance timeout.
    pub max_poll_interval: Duration,
    /// `heartbeat.interval.ms` (3000).
    pub heartbeat_interval: Duration,
    /// `partition.assignment.strategy`, in preference order.
    pub assignors: Vec<String>,
    /// `enable.auto.commit` (true).
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms` (5000).
    pub auto_commit_interval: Duration,
    /// `client.rack`, sent in the subscription (v3).
    pub rack_id: Option<String>,
    /// Fetch settings and `auto.offset.reset` (default `latest`).
    pub fetch: ConsumerConfig,
}

impl GroupConfig {
    /// Defaults for group `group_id`.
    pub fn new(group_id: impl Into<String>) -> Self {
        Self {
            group_id: group_id.into(),
            group_instance_id: None,
            session_timeout: Duration::from_millis(45_000),
            max_poll_interval: Duration::from_millis(300_000),
            heartbeat_interval: Duration::from_millis(3_000),
            assignors: vec!["range".into(), "cooperative-sticky".into()],
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_millis(5_000),
            rack_id: None,
            fetch: ConsumerConfig::default(),
        }
    }

    /// Applies one consumer property. Returns `Ok(false)` for a property this client does
    /// not know (the caller decides whether to warn), an error for a bad value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool> {
        let bad = |why: &str| ClientError::InvalidArgument(format!("{key}={value}: {why}"));
        let ms = || -> Result<Duration> {
            value
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad("not a number of milliseconds"))
        };
        let int =
            || -> Result<i32> { value.trim().parse::<i32>().map_err(|_| bad("not a number")) };
        let boolean = || -> Result<bool> {
            match value.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(bad("use true or false")),
            }
        };
        match key {
            "group.id" => self.group_id = value.to_owned(),
            "group.instance.id" => {
                self.group_instance_id = (!value.is_empty()).then(|| value.to_owned())
            }
            "session.timeout.ms" => self.session_timeout = ms()?,
            "max.poll.interval.ms" => self.max_poll_interval = ms()?,
            "heartbeat.interval.ms" => self.heartbeat_interval = ms()?,
            "partition.assignment.strategy" => {
                let mut candidate = self.clone();
                candidate.assignors = value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                candidate.assignor_list()?;
                self.assignors = candidate.assignors;
            }
            "enable.auto.commit" => self.enable_auto_commit = boolean()?,
            "auto.commit.interval.ms" => self.auto_commit_interval = ms()?,
            "client.rack" => self.rack_id = (!value.is_empty()).then(|| value.to_owned()),
            "auto.offset.reset" => {
                self.fetch.auto_offset_reset =
                    value.parse().map_err(ClientError::InvalidArgument)?
            }
            "fetch.max.wait.ms" => self.fetch.max_wait = ms()?,
            "fetch.min.bytes" => self.fetch.min_bytes = int()?,
            "fetch.max.bytes" => self.fetch.max_bytes = int()?,
            "max.partition.fetch.bytes" => self.fetch.partition_max_bytes = int()?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The configured assignors, validated: at least one, all known, no duplicates.
    pub fn assignor_list(&self) -> Result<Vec<Box<dyn Assignor>>> {
        if self.assignors.is_empty() {
            return Err(ClientError::InvalidArgument(
                "partition.assignment.strategy is empty".into(),
            ));
        }
        let mut out: Vec<Box<dyn Assignor>> = Vec::new();
        for name in &self.assignors {
            let a = by_name(name).ok_or_else(|| {
                ClientError::InvalidArgument(format!(
                    "partition.assignment.strategy: unknown assignor '{name}' (use range, roundrobin, sticky or cooperative-sticky)"
                ))
            })?;
            if out.iter().any(|o| o.name() == a.name()) {
                return Err(ClientError::InvalidArgument(format!(
                    "partition.assignment.strategy lists '{}' twice",
                    a.name()
                )));
            }
            out.push(a);
        }
        Ok(out)
    }

    /// Checks the settings before joining.
    pub fn validate(&self) -> Result<()> {
        if self.group_id.is_empty() {
            return Err(ClientError::InvalidArgument("group.id is empty".into()));
        }
        if self.heartbeat_interval >= self.session_timeout {
            return Err(ClientError::InvalidArgument(
                "heartbeat.interval.ms must be lower than session.timeout.ms".into(),
            ));
        }
        self.assignor_list().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::AutoOffsetReset;

    #[test]
    fn kafka_defaults() {
        let c = GroupConfig::new("g");
        assert_eq!(c.session_timeout, Duration::from_secs(45));
        assert_eq!(c.heartbeat_interval, Duration::from_secs(3));
        assert_eq!(c.max_poll_interval, Duration::from_secs(300));
        assert_eq!(c.auto_commit_interval, Duration::from_secs(5));
        assert!(c.enable_auto_commit);
        assert_eq!(c.assignors, ["range", "cooperative-sticky"]);
        c.validate().unwrap();
    }

    #[test]
    fn properties() {
        let mut c = GroupConfig::new("g");
        assert!(c.set("auto.offset.reset", "earliest").unwrap());
        assert_eq!(c.fetch.auto_offset_reset, AutoOffsetReset::Earliest);
        assert!(c
            .set("partition.assignment.strategy", "cooperative-sticky")
            .unwrap());
        assert!(c.assignor_list().unwrap().iter().all(|a| a.cooperative()));
        assert!(c.set("partition.assignment.strategy", "bogus").is_err());
        assert!(c.set("session.timeout.ms", "x").is_err());
        assert!(!c.set("no.such.property", "1").unwrap());
        c.set("session.timeout.ms", "2000").unwrap();
        assert!(c.validate().is_err());
    }
}
