use super::*;

#[test]
fn the_table_is_sorted_by_code_and_has_no_duplicate_code_or_name() {
    for pair in ALL.windows(2) {
        assert!(
            pair[0].code < pair[1].code,
            "{:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    let mut names: Vec<&str> = ALL.iter().map(|e| e.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ALL.len(), "a name appears twice");
}

#[test]
fn the_table_is_dense_from_minus_one_to_the_last_code() {
    // Kafka numbers its errors without gaps; a gap means a row was lost.
    let codes: Vec<i16> = ALL.iter().map(|e| e.code).collect();
    let expected: Vec<i16> = (-1..=SHARE_SESSION_LIMIT_REACHED).collect();
    assert_eq!(codes, expected);
}

#[test]
fn spot_checks_against_kafkas_errors_enum() {
    assert_eq!(
        (UNKNOWN_SERVER_ERROR, NONE, OFFSET_OUT_OF_RANGE),
        (-1, 0, 1)
    );
    assert_eq!(UNKNOWN_TOPIC_OR_PARTITION, 3);
    assert_eq!(NOT_LEADER_OR_FOLLOWER, 6);
    assert_eq!(NOT_COORDINATOR, 16);
    assert_eq!(INVALID_TOPIC_EXCEPTION, 17);
    assert_eq!(INVALID_REQUEST, 42);
    assert_eq!(INVALID_PRODUCER_EPOCH, 47);
    assert_eq!(KAFKA_STORAGE_ERROR, 56);
    assert_eq!(FENCED_LEADER_EPOCH, 74);
    assert_eq!(PRODUCER_FENCED, 90);
    assert_eq!(UNKNOWN_TOPIC_ID, 100);
    assert_eq!(STALE_MEMBER_EPOCH, 113);
    assert_eq!(MISMATCHED_ENDPOINT_TYPE, 114);
    assert_eq!(TRANSACTION_ABORTABLE, 120);
    assert_eq!(VOTER_NOT_FOUND, 127);
    assert_eq!(INVALID_REGULAR_EXPRESSION, 128);
    assert_eq!(name(16), Some("NOT_COORDINATOR"));
    assert_eq!(name(134), None);
    assert_eq!(name(-2), None);
}

#[test]
fn retriability_follows_kafkas_exception_hierarchy() {
    // RetriableException subclasses in Kafka 3.9.
    for code in [
        CORRUPT_MESSAGE,
        UNKNOWN_TOPIC_OR_PARTITION,
        LEADER_NOT_AVAILABLE,
        NOT_LEADER_OR_FOLLOWER,
        REQUEST_TIMED_OUT,
        NETWORK_EXCEPTION,
        COORDINATOR_LOAD_IN_PROGRESS,
        NOT_COORDINATOR,
        NOT_ENOUGH_REPLICAS,
        NOT_CONTROLLER,
        CONCURRENT_TRANSACTIONS,
        KAFKA_STORAGE_ERROR,
        FENCED_LEADER_EPOCH,
        UNKNOWN_TOPIC_ID,
    ] {
        assert!(is_retriable(code), "{code} {:?}", name(code));
    }
    for code in [
        UNKNOWN_SERVER_ERROR,
        NONE,
        OFFSET_OUT_OF_RANGE,
        INVALID_REQUEST,
        INVALID_PRODUCER_EPOCH,
        PRODUCER_FENCED,
        TOPIC_AUTHORIZATION_FAILED,
        INVALID_REGULAR_EXPRESSION,
    ] {
        assert!(!is_retriable(code), "{code} {:?}", name(code));
    }
    assert!(!is_retriable(i16::MAX), "an unknown code is not retriable");
}

#[test]
fn default_messages_are_kafkas() {
    assert_eq!(
        default_message(NOT_COORDINATOR),
        Some("This is not the correct coordinator.")
    );
    assert_eq!(
        default_message(UNKNOWN_TOPIC_OR_PARTITION),
        Some("This server does not host this topic-partition.")
    );
    assert_eq!(default_message(NONE), None);
    assert_eq!(default_message(1000), None);
    assert!(ALL
        .iter()
        .filter(|e| e.code != NONE)
        .all(|e| !e.message.is_empty()));
}

#[test]
fn kafka_error_displays_name_code_and_message() {
    let e = KafkaError::new(INVALID_CONFIG, "bad");
    assert_eq!(e.to_string(), "INVALID_CONFIG (40): bad");
    assert_eq!(KafkaError::new(999, "x").to_string(), "UNKNOWN (999): x");
    let d = KafkaError::with_default_message(NOT_CONTROLLER);
    assert_eq!(
        d.message,
        "This is not the correct controller for this cluster."
    );
    assert!(d.is_retriable());
}

/// kafka-protocol's `ResponseError` is an independent transcription of Kafka's enum: the names
/// (CamelCase there) and retriability must agree, except where it departs from Kafka.
#[test]
fn names_and_retriability_agree_with_kafka_protocols_table() {
    use kafka_protocol::error::ResponseError;
    for e in ALL.iter().filter(|e| e.code != NONE) {
        let theirs = ResponseError::try_from_code(e.code).expect("a non-zero code is an error");
        assert!(
            !matches!(theirs, ResponseError::Unknown(_)),
            "{e:?} unknown to kafka-protocol"
        );
        assert_eq!(screaming_snake(&theirs.to_string()), e.name, "{e:?}");
        // Kafka's ConcurrentTransactionsException extends RetriableException (3.9 and trunk);
        // kafka-protocol 0.18 marks it non-retriable.
        if e.code != CONCURRENT_TRANSACTIONS {
            assert_eq!(theirs.is_retriable(), e.retriable, "{e:?}");
        }
    }
}

fn screaming_snake(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}
