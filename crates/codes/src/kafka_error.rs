//! [`KafkaError`]: a Kafka error code with the message that goes out as `error_message`, the
//! typed form of what used to travel as an `(i16, String)` pair.

/// A Kafka error code and its human-readable message. The code is what the client acts on; the
/// message is for people (the response's `error_message`, logs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{} ({code}): {message}", crate::name(*.code).unwrap_or("UNKNOWN"))]
pub struct KafkaError {
    pub code: i16,
    pub message: String,
}

impl KafkaError {
    pub fn new(code: i16, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// `code` with Kafka's default message for it (empty when Kafka has none).
    pub fn with_default_message(code: i16) -> Self {
        Self::new(code, crate::default_message(code).unwrap_or_default())
    }

    /// Kafka's name of this error's code, "UNKNOWN" for a code Kafka does not define.
    pub fn name(&self) -> &'static str {
        crate::name(self.code).unwrap_or("UNKNOWN")
    }

    pub fn is_retriable(&self) -> bool {
        crate::is_retriable(self.code)
    }
}
