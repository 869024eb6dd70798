//! Kafka errors written the way the Java tools print them: `Throwable.toString()` of the
//! exception Kafka's admin client raises for an error code
//! (`org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: <message>`), and
//! `getMessage()` (the broker's message, or Kafka's default text for the code).

use kafka_protocol::error::ResponseError;
use runnel_client::{render_error, ClientError};

const PACKAGE: &str = "org.apache.kafka.common.errors";

/// The simple class name Kafka's `Errors` enum maps `code` to.
pub fn exception_class(code: i16) -> String {
    let fixed = match code {
        -1 => Some("UnknownServerException"),
        2 => Some("CorruptRecordException"),
        7 => Some("TimeoutException"),
        10 => Some("RecordTooLargeException"),
        29 => Some("TopicAuthorizationException"),
        30 => Some("GroupAuthorizationException"),
        31 => Some("ClusterAuthorizationException"),
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

/// Kafka's default message for the codes the replication tools meet.
pub fn default_message(code: i16) -> Option<&'static str> {
    Some(match code {
        -1 => "The server experienced an unexpected error when processing the request.",
        3 => "This server does not host this topic-partition.",
        5 => "There is no leader for this topic-partition as we are in the middle of a leadership election.",
        7 => "The request timed out.",
        29 => "Topic authorization failed.",
        31 => "Cluster authorization failed.",
        35 => "The version of API is not supported.",
        38 => "Replication factor is below 1 or larger than the number of available brokers.",
        39 => "Replica assignment is invalid.",
        41 => "This is not the correct controller for this cluster.",
        42 => "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
        60 => "A partition reassignment is in progress.",
        80 => "The preferred leader was not available.",
        83 => "Eligible topic partition leaders are not available.",
        84 => "Leader election not needed for topic partition.",
        85 => "No partition reassignment is in progress.",
        _ => return None,
    })
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

    #[test]
    fn lines_use_the_broker_message_or_the_default() {
        let e = ClientError::kafka(80, None);
        assert_eq!(
            exception_line(&e),
            "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: The preferred leader was not available."
        );
        let e = ClientError::kafka(83, Some("No live ISR member for t-1".into()));
        assert_eq!(
            exception_line(&e),
            "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: No live ISR member for t-1"
        );
        assert_eq!(
            exception_message(&ClientError::kafka(3, None)),
            "This server does not host this topic-partition."
        );
        assert_eq!(
            exception_message(&ClientError::kafka(73, None)),
            "TOPIC_DELETION_DISABLED"
        );
    }
}
