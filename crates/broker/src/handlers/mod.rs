//! Request handlers, one module per API family. Each takes the decoded request and returns the
//! response body; errors inside a response are Kafka error codes, never a closed connection.

pub mod api_versions;
pub mod configs;
pub mod consumer_group;
pub mod delete_records;
pub mod describe_cluster;
pub mod describe_quorum;
pub mod elect_leaders;
pub mod fetch;
pub mod groups;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod runnel_describe;
pub mod topics;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

/// Owned string from a protocol string.
pub fn topic_str(name: &TopicName) -> &str {
    name.0.as_str()
}

pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(str_bytes(s))
}

/// Checks a client's leader epoch against ours (KIP-320): -1 disables the check.
pub fn check_leader_epoch(requested: i32, current: i32) -> i16 {
    use crate::errors::code;
    if requested == -1 || requested == current {
        code::NONE
    } else if requested < current {
        code::FENCED_LEADER_EPOCH
    } else {
        code::UNKNOWN_LEADER_EPOCH
    }
}
