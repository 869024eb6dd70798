//! Kafka error codes used by the request handlers (spec Appendix 2): the whole table of
//! `runnel_codes`, under the path the handlers use; and [`KafkaError`], a code with its
//! message, for errors that carry both.

pub use runnel_codes::KafkaError;

pub mod code {
    pub use runnel_codes::code::*;
}
