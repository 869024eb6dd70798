//! The `*_authorized_operations` bitfields of Metadata (v8+) and DescribeCluster, as Kafka's
//! `AuthHelper.authorizedOperations` computes them: one bit per `AclOperation` code the
//! principal may perform on the resource (`Utils.to32BitField`). Runnel has no authorizer, and
//! without one Kafka allows every operation the resource type supports
//! (`AclEntry.supportedOperations`). A field that was not asked for keeps the schema's default,
//! `i32::MIN`.

/// Kafka's `AclOperation` codes (org.apache.kafka.common.acl.AclOperation).
mod acl {
    pub const READ: u8 = 3;
    pub const WRITE: u8 = 4;
    pub const CREATE: u8 = 5;
    pub const DELETE: u8 = 6;
    pub const ALTER: u8 = 7;
    pub const DESCRIBE: u8 = 8;
    pub const CLUSTER_ACTION: u8 = 9;
    pub const DESCRIBE_CONFIGS: u8 = 10;
    pub const ALTER_CONFIGS: u8 = 11;
    pub const IDEMPOTENT_WRITE: u8 = 12;
}

/// The schema's default: "not requested".
pub const NOT_REQUESTED: i32 = i32::MIN;

/// `AclEntry.supportedOperations(TOPIC)`.
const TOPIC: &[u8] = &[
    acl::READ,
    acl::WRITE,
    acl::CREATE,
    acl::DESCRIBE,
    acl::DELETE,
    acl::ALTER,
    acl::DESCRIBE_CONFIGS,
    acl::ALTER_CONFIGS,
];

/// `AclEntry.supportedOperations(CLUSTER)`.
const CLUSTER: &[u8] = &[
    acl::CREATE,
    acl::CLUSTER_ACTION,
    acl::DESCRIBE_CONFIGS,
    acl::ALTER_CONFIGS,
    acl::IDEMPOTENT_WRITE,
    acl::ALTER,
    acl::DESCRIBE,
];

/// `Utils.to32BitField`: bit `code` set for every operation code (all below 32).
const fn bit_field(codes: &[u8]) -> i32 {
    let mut field = 0i32;
    let mut i = 0;
    while i < codes.len() {
        field |= 1 << codes[i];
        i += 1;
    }
    field
}

/// Every topic operation: what an unauthorized-free broker allows on any topic.
pub const ALL_TOPIC_OPERATIONS: i32 = bit_field(TOPIC);
/// Every cluster operation.
pub const ALL_CLUSTER_OPERATIONS: i32 = bit_field(CLUSTER);

/// The topic field of a response: all operations when asked for, else the default.
pub fn topic_operations(requested: bool) -> i32 {
    if requested {
        ALL_TOPIC_OPERATIONS
    } else {
        NOT_REQUESTED
    }
}

/// The cluster field of a response: all operations when asked for, else the default.
pub fn cluster_operations(requested: bool) -> i32 {
    if requested {
        ALL_CLUSTER_OPERATIONS
    } else {
        NOT_REQUESTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_bit_fields() {
        // The values a Kafka broker without an authorizer answers (bits 3-8, 10, 11 for a
        // topic; 5, 7-12 for the cluster).
        assert_eq!(ALL_TOPIC_OPERATIONS, 3576);
        assert_eq!(ALL_CLUSTER_OPERATIONS, 8096);
        assert_eq!(topic_operations(false), -2147483648);
        assert_eq!(cluster_operations(false), -2147483648);
        assert_eq!(cluster_operations(true), 8096);
    }
}
