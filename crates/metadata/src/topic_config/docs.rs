//! The documentation DescribeConfigs returns for each topic config key (with
//! `include_documentation`, v3+), in Runnel's words.

/// The documentation of a topic config key, if Kafka knows the key.
pub fn topic_config_doc(name: &str) -> Option<&'static str> {
    Some(match name {
        "cleanup.policy" => "A list of retention policies for old log segments: delete (remove segments past the retention time or size) and/or compact (keep the latest value of each key). An empty list disables both.",
        "compression.gzip.level" => "The compression level used when compression.type is gzip.",
        "compression.lz4.level" => "The compression level used when compression.type is lz4.",
        "compression.type" => "The final compression of the topic's batches: uncompressed, zstd, lz4, snappy, gzip, or producer (keep the codec the producer used).",
        "compression.zstd.level" => "The compression level used when compression.type is zstd.",
        "delete.retention.ms" => "How long delete tombstones are kept on a compacted topic, so a consumer reading from offset 0 sees the deletion.",
        "file.delete.delay.ms" => "How long a segment file removed from the log waits before it is deleted from disk.",
        "flush.messages" => "Forces an fsync of the log after this many messages.",
        "flush.ms" => "Forces an fsync of the log after this much time since the last one.",
        "follower.replication.throttled.replicas" => "The replicas (partitionId:brokerId pairs, or *) whose replication is throttled on the follower side.",
        "index.interval.bytes" => "How often (in bytes of log) an entry is added to the offset index.",
        "leader.replication.throttled.replicas" => "The replicas (partitionId:brokerId pairs, or *) whose replication is throttled on the leader side.",
        "local.retention.bytes" => "The most bytes a partition keeps on local disk when tiered storage is on (-2: retention.bytes).",
        "local.retention.ms" => "How long a segment stays on local disk when tiered storage is on (-2: retention.ms).",
        "max.compaction.lag.ms" => "The longest time a message stays ineligible for compaction.",
        "max.message.bytes" => "The largest record batch the topic accepts (after compression).",
        "message.downconversion.enable" => "Whether the broker may down-convert messages for old consumers.",
        "message.format.version" => "Deprecated: the message format version; ignored from format v2 on.",
        "message.timestamp.after.max.ms" => "How far in the future a message's timestamp may be relative to the broker's clock (CreateTime topics).",
        "message.timestamp.before.max.ms" => "How far in the past a message's timestamp may be relative to the broker's clock (CreateTime topics).",
        "message.timestamp.difference.max.ms" => "Deprecated: the largest difference allowed between a message's timestamp and the broker's clock.",
        "message.timestamp.type" => "Whether a message's timestamp is the producer's (CreateTime) or the broker's append time (LogAppendTime).",
        "min.cleanable.dirty.ratio" => "The share of a compacted log that must be uncompacted before the cleaner compacts it.",
        "min.compaction.lag.ms" => "The shortest time a message stays uncompacted.",
        "min.insync.replicas" => "With acks=all, the fewest in-sync replicas that must have a write for it to succeed (else NOT_ENOUGH_REPLICAS).",
        "preallocate" => "Whether segment files are preallocated on disk when created.",
        "remote.log.copy.disable" => "Whether copying segments to tiered storage is stopped for this topic.",
        "remote.log.delete.on.disable" => "Whether the topic's tiered segments are deleted when tiered storage is turned off.",
        "remote.storage.enable" => "Whether tiered storage is on for this topic.",
        "retention.bytes" => "The most bytes a partition keeps before old segments are deleted (delete policy); -1 means no limit.",
        "retention.ms" => "How long a segment is kept before it is deleted (delete policy); -1 means no limit.",
        "segment.bytes" => "The size at which the log rolls to a new segment file.",
        "segment.index.bytes" => "The size of the offset index of a segment.",
        "segment.jitter.ms" => "The most random jitter subtracted from segment.ms, so segments do not all roll at once.",
        "segment.ms" => "The time after which the log rolls to a new segment even if the current one is not full.",
        "unclean.leader.election.enable" => "Whether a replica outside the ISR may become leader as a last resort (data loss is possible).",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::keys::TOPIC_CONFIGS;
    use super::topic_config_doc;

    #[test]
    fn every_topic_key_is_documented() {
        for def in TOPIC_CONFIGS {
            assert!(
                topic_config_doc(def.name).is_some(),
                "{} has no documentation",
                def.name
            );
        }
    }
}
