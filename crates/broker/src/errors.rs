//! Kafka error codes used by the request handlers (spec Appendix 2): the whole table of
//! `runnel_codes`, under the path the handlers use.

pub mod code {
    pub use runnel_codes::code::*;
}
