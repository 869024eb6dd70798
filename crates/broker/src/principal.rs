//! Who is on the other end of a connection, in Kafka's terms (`KafkaPrincipal`).
//!
//! Every connection starts as `User:ANONYMOUS` (Kafka's principal for PLAINTEXT and for an
//! unauthenticated TLS client); authentication (SASL, a client certificate) replaces it for the
//! rest of the connection. Authorization decides on this value, never on the address.

use std::fmt;

/// A principal: a type (`User`, or another an ACL names) and a name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KafkaPrincipal {
    pub principal_type: String,
    pub name: String,
}

impl KafkaPrincipal {
    pub const USER_TYPE: &'static str = "User";

    pub fn user(name: impl Into<String>) -> Self {
        KafkaPrincipal {
            principal_type: Self::USER_TYPE.to_string(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`, the principal of a connection that has not authenticated.
    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// What a connection knows about itself once accepted: the peer, the listener it came in on and
/// the principal it has authenticated as (anonymous until it does).
#[derive(Clone, Debug)]
pub struct ConnectionIdentity {
    pub peer: std::net::SocketAddr,
    /// The listener's name (`PLAINTEXT`, `SASL_SSL`, or a custom name from
    /// `listener.security.protocol.map`).
    pub listener: String,
    pub principal: KafkaPrincipal,
}

impl ConnectionIdentity {
    pub fn anonymous(peer: std::net::SocketAddr, listener: impl Into<String>) -> Self {
        ConnectionIdentity {
            peer,
            listener: listener.into(),
            principal: KafkaPrincipal::anonymous(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_as_type_colon_name() {
        assert_eq!(KafkaPrincipal::anonymous().to_string(), "User:ANONYMOUS");
        assert_eq!(KafkaPrincipal::user("alice").to_string(), "User:alice");
    }
}
