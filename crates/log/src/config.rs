//! Per-partition log configuration, named after Kafka's topic-level properties.

/// The topic-level settings a partition log obeys. Field names follow Kafka's property names so
/// the broker can map `segment.bytes`, `retention.ms`, ... one to one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the next append would make the active segment larger.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first batch is older than this.
    pub segment_ms: i64,
    /// `retention.ms`: delete segments whose largest timestamp is older; -1 = forever.
    pub retention_ms: i64,
    /// `retention.bytes`: keep the partition below this size; -1 = unlimited.
    pub retention_bytes: i64,
    /// `index.interval.bytes`: bytes appended between two sparse index entries.
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: maximum size of one offset or time index file (a full one rolls).
    pub max_index_bytes: u32,
    /// `file.delete.delay.ms`: how long `.deleted` files are kept before removal.
    pub file_delete_delay_ms: u64,
    /// `flush.messages`: the broker fsyncs once this many messages are unflushed;
    /// `u64::MAX` leaves flushing to the OS (Kafka's default).
    pub flush_interval_messages: u64,
}

impl Default for LogConfig {
    /// Kafka's broker defaults (Appendix 1 of the spec).
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            retention_ms: 604_800_000,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            max_index_bytes: 10_485_760,
            file_delete_delay_ms: 60_000,
            flush_interval_messages: u64::MAX,
        }
    }
}

impl LogConfig {
    /// Segment size limit clamped so that byte positions always fit the index's `i32`.
    pub(crate) fn effective_segment_bytes(&self) -> u64 {
        self.segment_bytes.clamp(1, i32::MAX as u64)
    }
}
