//! Coordinator configuration: the broker properties of spec H / Appendix 1 that shape group
//! behaviour. The shell fills it from the broker configuration; the defaults are Kafka's.

/// Settings of the group coordinator (Kafka property names in the field docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`: a JoinGroup with a shorter session timeout gets 26.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`: a JoinGroup with a longer session timeout gets 26.
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an Empty group
    /// waits for more members, so a fleet starting together gets one generation, not many.
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size`: members per group (and, as a Runnel bound, pending member ids).
    pub max_size: usize,
    /// `offset.metadata.max.bytes`: longer commit metadata gets 12 OFFSET_METADATA_TOO_LARGE.
    /// Like Kafka, the length is counted in UTF-16 code units (Java's `String.length`).
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes` in milliseconds (KIP-211 semantics, spec H.6).
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`: how often `tick` scans for expired offsets
    /// (scanning every tick would be wasted work: retention is measured in days).
    pub offsets_retention_check_interval_ms: i64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: i32::MAX as usize,
            offset_metadata_max_bytes: 4_096,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1_000,
            offsets_retention_check_interval_ms: 600_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_kafka() {
        let c = GroupConfig::default();
        assert_eq!(c.min_session_timeout_ms, 6000);
        assert_eq!(c.max_session_timeout_ms, 1_800_000);
        assert_eq!(c.initial_rebalance_delay_ms, 3000);
        assert_eq!(c.max_size, i32::MAX as usize);
        assert_eq!(c.offset_metadata_max_bytes, 4096);
        assert_eq!(c.offsets_retention_ms, 10_080 * 60 * 1000);
        assert_eq!(c.offsets_retention_check_interval_ms, 600_000);
    }
}
