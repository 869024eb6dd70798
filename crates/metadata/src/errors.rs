//! Kafka error codes used by the metadata layer, and [`ApiError`], the per-item error value
//! that request handlers copy into `error_code` / `error_message` of a response.
//!
//! Errors are values, not panics: every validation failure caused by a client's request is
//! reported per topic (or per resource) with Kafka's code, so the broker can answer exactly
//! like Apache Kafka and the rest of the request still succeeds (spec C).

/// Kafka protocol error codes (spec Appendix 2): the whole table of `runnel_codes`, under the
/// path this crate's callers use.
pub mod codes {
    pub use runnel_codes::code::*;
}

/// Kafka's upper-case name of an error code (for logs and `Display`); "UNKNOWN" otherwise.
pub fn code_name(code: i16) -> &'static str {
    runnel_codes::name(code).unwrap_or("UNKNOWN")
}

/// A Kafka error code with the human-readable message sent as `error_message`: the one typed
/// error of every crate (`runnel_codes::KafkaError`, serialized as `{code, message}` between
/// brokers), under the name this crate's callers use.
pub type ApiError = runnel_codes::KafkaError;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_carry_the_right_codes() {
        assert_eq!(ApiError::invalid_partitions("x").code, 37);
        assert_eq!(ApiError::invalid_replication_factor("x").code, 38);
        assert_eq!(ApiError::invalid_replica_assignment("x").code, 39);
        assert_eq!(ApiError::invalid_config("x").code, 40);
        assert_eq!(ApiError::invalid_request("x").code, 42);
        assert_eq!(ApiError::invalid_topic("x").code, 17);
        assert_eq!(ApiError::topic_already_exists("x").code, 36);
        assert_eq!(ApiError::topic_deletion_disabled("x").code, 73);
        assert_eq!(ApiError::unknown_topic_id("x").code, 100);
        assert_eq!(ApiError::unknown_topic_or_partition("x").code, 3);
        assert_eq!(ApiError::unknown_server_error("x").code, -1);
        assert_eq!(ApiError::request_timed_out("x").code, 7);
    }

    #[test]
    fn display_names_the_code() {
        let e = ApiError::invalid_config("bad");
        assert_eq!(e.to_string(), "INVALID_CONFIG (40): bad");
    }
}
