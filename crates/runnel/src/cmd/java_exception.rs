//! Kafka errors written the way the Java tools print them: `Throwable.toString()` of the
//! exception Kafka's admin client raises for an error code
//! (`org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: <message>`), and
//! `getMessage()` (the broker's message, or Kafka's default text for the code).

use kafka_protocol::error::ResponseError;
use runnel_client::{render_error, ClientError};
use runnel_codes::{
    CLUSTER_AUTHORIZATION_FAILED, CORRUPT_MESSAGE, GROUP_AUTHORIZATION_FAILED, MESSAGE_TOO_LARGE,
    REQUEST_TIMED_OUT, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_SERVER_ERROR,
};

const PACKAGE: &str = "org.apache.kafka.common.errors";

/// The simple class name Kafka's `Errors` enum maps `code` to.
pub fn exception_class(code: i16) -> String {
    let fixed = match code {
        UNKNOWN_SERVER_ERROR => Some("UnknownServerException"),
        CORRUPT_MESSAGE => Some("CorruptRecordException"),
        REQUEST_TIMED_OUT => Some("TimeoutException"),
        MESSAGE_TOO_LARGE => Some("RecordTooLargeException"),
        TOPIC_AUTHORIZATION_FAILED => Some("TopicAuthorizationException"),
        GROUP_AUTHORIZATION_FAILED => Some("GroupAuthorizationException"),
        CLUSTER_AUTHORIZATION_FAILED => Some("ClusterAuthorizationException"),
        _ => None,
    };
    if let Some(name) = fixed {
        return name.to_owned();
    }
    match ResponseError::try_from_code(code) {
        Some(ResponseError::Unknown(_)) | None => "UnknownServerException".to_owned(),
        Some(err) => {
            let base = err.to_string();
            if base.ends_with("Exception") {
                base
            } else {
                format!("{base}Exception")
            }
        }
    }
}

/// Kafka's default message for `code` (`Errors.message()`), from the one error table.
pub fn default_message(code: i16) -> Option<&'static str> {
    runnel_codes::default_message(code)
}

/// `getMessage()` of the exception for `err`.
pub fn exception_message(err: &ClientError) -> String {
    match err {
        ClientError::Kafka {
            code,
            name,
            message,
        } => match message {
            Some(m) => m.clone(),
            None => default_message(*code).unwrap_or(name).to_owned(),
        },
        other => render_error(other),
    }
}

/// `toString()` of the exception for `err`: fully qualified class, `: `, message.
pub fn exception_line(err: &ClientError) -> String {
    let class = match err {
        ClientError::Kafka { code, .. } => exception_class(*code),
        ClientError::Timeout(..) => "TimeoutException".to_owned(),
        ClientError::Io(_) => "NetworkException".to_owned(),
        ClientError::Protocol(_) | ClientError::InvalidArgument(_) => {
            return render_error(err);
        }
    };
    format!("{PACKAGE}.{class}: {}", exception_message(err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_follow_kafka_errors() {
        assert_eq!(exception_class(80), "PreferredLeaderNotAvailableException");
        assert_eq!(exception_class(83), "EligibleLeadersNotAvailableException");
        assert_eq!(exception_class(84), "ElectionNotNeededException");
        assert_eq!(exception_class(3), "UnknownTopicOrPartitionException");
        assert_eq!(exception_class(17), "InvalidTopicException");
        assert_eq!(exception_class(7), "TimeoutException");
        assert_eq!(exception_class(31), "ClusterAuthorizationException");
        assert_eq!(exception_class(-1), "UnknownServerException");
    }

    // Every code has Kafka's default message now, not only the ones the replication tools met.
    #[test]
    fn lines_use_the_broker_message_or_the_default() {
        let e = ClientError::kafka(runnel_codes::PREFERRED_LEADER_NOT_AVAILABLE, None);
        assert_eq!(
            exception_line(&e),
            "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: The preferred leader was not available."
        );
        let e = ClientError::kafka(
            runnel_codes::ELIGIBLE_LEADERS_NOT_AVAILABLE,
            Some("No live ISR member for t-1".into()),
        );
        assert_eq!(
            exception_line(&e),
            "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: No live ISR member for t-1"
        );
        assert_eq!(
            exception_message(&ClientError::kafka(
                runnel_codes::UNKNOWN_TOPIC_OR_PARTITION,
                None
            )),
            "This server does not host this topic-partition."
        );
        assert_eq!(
            exception_message(&ClientError::kafka(
                runnel_codes::TOPIC_DELETION_DISABLED,
                None
            )),
            "Topic deletion is disabled."
        );
    }
}
