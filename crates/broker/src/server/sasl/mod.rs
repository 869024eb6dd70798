//! A connection's SASL exchange (SaslHandshake 17, SaslAuthenticate 36), as a state machine.
//!
//! Pure: [`SaslSession::handshake`] and [`SaslSession::authenticate`] take the client's bytes
//! and return what to answer; the server shell does the I/O. Kafka's rules: before the
//! exchange completes only ApiVersions, SaslHandshake and SaslAuthenticate are served; a
//! failure answers SASL_AUTHENTICATION_FAILED and the connection is closed.

pub mod plain;
/// SCRAM and JAAS live in the client crate (both sides of each exchange in one place).
pub use runnel_client::sasl::{jaas, scram};

use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::errors::code::{
    ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
};
use scram::{ScramCredential, ScramMechanism, ServerExchange};

pub const PLAIN: &str = "PLAIN";

/// Looks a user's SCRAM credential up (the metadata image in the broker).
pub type ScramStore = Arc<dyn Fn(&str, ScramMechanism) -> Option<ScramCredential> + Send + Sync>;

/// A SASL listener's configuration.
#[derive(Clone)]
pub struct SaslConfig {
    /// `sasl.enabled.mechanisms`, in the listener's order.
    pub mechanisms: Vec<String>,
    /// PLAIN's users from the listener's JAAS entry.
    pub plain_users: BTreeMap<String, String>,
    pub scram: ScramStore,
    /// `connections.max.reauth.ms` (KIP-368): a session's lifetime; 0 (Kafka's default) means
    /// sessions never expire and re-authentication is not offered.
    pub max_reauth_ms: i64,
    /// `sasl.server.max.receive.size` (Kafka's 524288): the largest frame read before the
    /// connection's first authentication completes; a larger size prefix closes it unread.
    pub max_receive_size: usize,
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SaslConfig {{ mechanisms: {:?} }}", self.mechanisms)
    }
}

#[derive(Debug)]
enum State {
    /// Waiting for SaslHandshake.
    Start,
    /// Mechanism chosen; `raw` when SaslHandshake v0 announced unframed tokens.
    Chosen {
        mechanism: String,
        raw: bool,
    },
    /// SCRAM's first round is done.
    ScramSent {
        exchange: Box<ServerExchange>,
        mechanism: String,
        raw: bool,
    },
    Done,
}

/// The outcome of one SaslAuthenticate (or raw token).
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send these bytes; the exchange continues.
    Challenge(Vec<u8>),
    /// Send these bytes; the connection is now `principal_name`.
    Authenticated { response: Vec<u8>, user: String },
    /// Answer SASL_AUTHENTICATION_FAILED with this message, then close.
    Failed {
        message: String,
        user: Option<String>,
    },
}

pub struct SaslSession {
    config: Arc<SaslConfig>,
    state: State,
    /// Set while re-authenticating (KIP-368): the mechanism and user of the session being
    /// renewed, which must not change.
    renewing: Option<(String, String)>,
    /// The mechanism and user of the current (or last) successful authentication.
    authenticated: Option<(String, String)>,
    /// The client authenticated with SaslAuthenticate v1+, so it can re-authenticate.
    supports_reauth: bool,
}

/// SaslHandshake's outcome: the Kafka error code (0, UNSUPPORTED_SASL_MECHANISM 33 or
/// ILLEGAL_SASL_STATE 34) and the mechanisms to list.
#[derive(Debug, PartialEq, Eq)]
pub struct Handshake {
    pub error_code: i16,
    pub mechanisms: Vec<String>,
}

impl SaslSession {
    pub fn new(config: Arc<SaslConfig>) -> Self {
        SaslSession {
            config,
            state: State::Start,
            renewing: None,
            authenticated: None,
            supports_reauth: false,
        }
    }

    /// `sasl.server.max.receive.size` of the listener.
    pub fn max_receive_size(&self) -> usize {
        self.config.max_receive_size
    }

    pub fn is_authenticated(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// How long an authenticated session lasts (`connections.max.reauth.ms`), if it expires.
    pub fn session_lifetime_ms(&self) -> Option<i64> {
        (self.config.max_reauth_ms > 0).then_some(self.config.max_reauth_ms)
    }

    /// Records the SaslAuthenticate version that completed the exchange: v1+ clients are told
    /// the session lifetime and may re-authenticate (KIP-368).
    pub fn set_authenticate_version(&mut self, version: i16) {
        self.supports_reauth = version >= 1;
    }

    /// Whether a SaslHandshake now starts a re-authentication: the session is authenticated,
    /// sessions expire, and the client authenticated with SaslAuthenticate v1+ (Kafka's
    /// `connectedClientSupportsReauthentication`).
    pub fn can_reauthenticate(&self) -> bool {
        self.is_authenticated() && self.session_lifetime_ms().is_some() && self.supports_reauth
    }

    /// Starts a re-authentication: the next frames are a new SaslHandshake / SaslAuthenticate
    /// exchange that must use the same mechanism and name the same user.
    pub fn begin_reauthentication(&mut self) {
        self.renewing = self.authenticated.clone();
        self.state = State::Start;
    }

    /// A re-authentication is in progress (the old session still holds until it expires).
    pub fn is_reauthenticating(&self) -> bool {
        self.renewing.is_some() && !self.is_authenticated()
    }

    /// After SaslHandshake v0 the client sends raw SASL tokens, not SaslAuthenticate frames.
    pub fn expects_raw_token(&self) -> bool {
        matches!(
            self.state,
            State::Chosen { raw: true, .. } | State::ScramSent { raw: true, .. }
        )
    }

    pub fn handshake(&mut self, mechanism: &str, version: i16) -> Handshake {
        let mechanisms = self.config.mechanisms.clone();
        if !matches!(self.state, State::Start) {
            return Handshake {
                error_code: ILLEGAL_SASL_STATE,
                mechanisms,
            };
        }
        if !mechanisms.iter().any(|m| m == mechanism) {
            return Handshake {
                error_code: UNSUPPORTED_SASL_MECHANISM,
                mechanisms,
            };
        }
        if let Some((previous, _)) = &self.renewing {
            // KIP-368: a re-authentication keeps the mechanism, and uses SaslAuthenticate.
            if previous != mechanism {
                return Handshake {
                    error_code: UNSUPPORTED_SASL_MECHANISM,
                    mechanisms,
                };
            }
            if version == 0 {
                return Handshake {
                    error_code: ILLEGAL_SASL_STATE,
                    mechanisms,
                };
            }
        }
        self.state = State::Chosen {
            mechanism: mechanism.to_string(),
            raw: version == 0,
        };
        Handshake {
            error_code: 0,
            mechanisms,
        }
    }

    /// One client token; `server_nonce` is fresh randomness for SCRAM's first round.
    pub fn authenticate(&mut self, token: &[u8], server_nonce: &str) -> Step {
        match std::mem::replace(&mut self.state, State::Start) {
            State::Chosen { mechanism, .. } if mechanism == PLAIN => {
                match plain::authenticate(token, &self.config.plain_users) {
                    Ok(user) => self.done(PLAIN, Vec::new(), user),
                    Err(message) => failed(message, plain_user(token)),
                }
            }
            State::Chosen { mechanism, raw } => {
                let Some(m) = ScramMechanism::from_name(&mechanism) else {
                    return failed(format!("Unsupported SASL mechanism {mechanism}"), None);
                };
                let first = match scram::parse_client_first(token) {
                    Ok(first) => first,
                    Err(e) => return failed(e.to_string(), None),
                };
                let user = first.username.clone();
                let Some(credential) = (self.config.scram)(&user, m) else {
                    return failed(
                        "Authentication failed: Invalid user credentials".into(),
                        Some(user),
                    );
                };
                let (exchange, message) = scram::server_first(m, first, credential, server_nonce);
                self.state = State::ScramSent {
                    exchange: Box::new(exchange),
                    mechanism,
                    raw,
                };
                Step::Challenge(message.into_bytes())
            }
            State::ScramSent {
                exchange,
                mechanism,
                ..
            } => match exchange.client_final(token) {
                Ok(server_final) => {
                    let user = exchange.username().to_string();
                    self.done(&mechanism, server_final.into_bytes(), user)
                }
                Err(_) => failed(
                    "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM".into(),
                    Some(exchange.username().to_string()),
                ),
            },
            State::Start | State::Done => failed(
                "SaslAuthenticate before a successful SaslHandshake".into(),
                None,
            ),
        }
    }

    fn done(&mut self, mechanism: &str, response: Vec<u8>, user: String) -> Step {
        if let Some((_, previous)) = self.renewing.take() {
            if previous != user {
                // Kafka's ReauthInfo.ensurePrincipalUnchanged.
                return failed(
                    format!("Cannot change principals during re-authentication from User:{previous}: User:{user}"),
                    Some(user),
                );
            }
        }
        self.state = State::Done;
        self.authenticated = Some((mechanism.to_string(), user.clone()));
        Step::Authenticated { response, user }
    }
}

fn failed(message: String, user: Option<String>) -> Step {
    Step::Failed { message, user }
}

/// The user a PLAIN token names, for the failure log (never the password).
fn plain_user(token: &[u8]) -> Option<String> {
    let user = token.split(|&b| b == 0).nth(1)?;
    std::str::from_utf8(user).ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Arc<SaslConfig> {
        let cred = ScramCredential::new(ScramMechanism::Sha512, "bob-secret", b"salt", 4096);
        Arc::new(SaslConfig {
            mechanisms: vec!["PLAIN".into(), "SCRAM-SHA-512".into()],
            plain_users: [("alice".to_string(), "alice-secret".to_string())].into(),
            scram: Arc::new(move |user, m| {
                (user == "bob" && m == ScramMechanism::Sha512).then(|| cred.clone())
            }),
            max_reauth_ms: 0,
            max_receive_size: 524288,
        })
    }

    #[test]
    fn plain_exchange() {
        let mut s = SaslSession::new(config());
        assert_eq!(
            s.handshake("GSSAPI", 1).error_code,
            UNSUPPORTED_SASL_MECHANISM
        );
        assert_eq!(s.handshake("PLAIN", 1).error_code, 0);
        assert!(!s.expects_raw_token());
        assert_eq!(
            s.authenticate(b"\0alice\0alice-secret", "n"),
            Step::Authenticated {
                response: vec![],
                user: "alice".into()
            }
        );
        assert!(s.is_authenticated());
        assert_eq!(s.handshake("PLAIN", 1).error_code, ILLEGAL_SASL_STATE);
    }

    #[test]
    fn wrong_plain_password_fails_naming_only_the_user() {
        let mut s = SaslSession::new(config());
        s.handshake("PLAIN", 0);
        assert!(s.expects_raw_token());
        match s.authenticate(b"\0alice\0nope", "n") {
            Step::Failed { message, user } => {
                assert_eq!(user.as_deref(), Some("alice"));
                assert!(!message.contains("nope"));
            }
            other => panic!("{other:?}"),
        }
        assert!(!s.is_authenticated());
    }

    #[test]
    fn scram_exchange_and_failures() {
        for (password, ok) in [("bob-secret", true), ("wrong", false)] {
            let mut s = SaslSession::new(config());
            s.handshake("SCRAM-SHA-512", 1);
            let first = scram::client_first_message("bob", "cnonce");
            let Step::Challenge(server_first) = s.authenticate(first.as_bytes(), "snonce") else {
                panic!("no challenge");
            };
            let server_first = String::from_utf8(server_first).unwrap();
            let (client_final, signature) = scram::client_final_message(
                ScramMechanism::Sha512,
                password,
                &first,
                &server_first,
            )
            .unwrap();
            let step = s.authenticate(client_final.as_bytes(), "unused");
            if ok {
                assert_eq!(
                    step,
                    Step::Authenticated {
                        response: signature.into_bytes(),
                        user: "bob".into()
                    }
                );
            } else {
                assert!(matches!(step, Step::Failed { user: Some(u), .. } if u == "bob"));
            }
        }
        let mut s = SaslSession::new(config());
        s.handshake("SCRAM-SHA-512", 1);
        let unknown = scram::client_first_message("mallory", "c");
        assert!(matches!(
            s.authenticate(unknown.as_bytes(), "s"),
            Step::Failed { .. }
        ));
    }

    fn with_reauth(ms: i64) -> Arc<SaslConfig> {
        let mut c = (*config()).clone();
        c.max_reauth_ms = ms;
        Arc::new(c)
    }

    fn plain_login(s: &mut SaslSession, user: &str, password: &str) -> Step {
        assert_eq!(s.handshake("PLAIN", 1).error_code, 0);
        s.authenticate(format!("\0{user}\0{password}").as_bytes(), "n")
    }

    #[test]
    fn reauthentication_keeps_mechanism_and_principal() {
        let mut s = SaslSession::new(with_reauth(1000));
        assert!(matches!(
            plain_login(&mut s, "alice", "alice-secret"),
            Step::Authenticated { .. }
        ));
        assert_eq!(s.session_lifetime_ms(), Some(1000));
        // A SaslAuthenticate v0 client cannot re-authenticate.
        s.set_authenticate_version(0);
        assert!(!s.can_reauthenticate());
        s.set_authenticate_version(1);
        assert!(s.can_reauthenticate());
        s.begin_reauthentication();
        assert!(s.is_reauthenticating());
        assert!(matches!(
            plain_login(&mut s, "alice", "alice-secret"),
            Step::Authenticated { .. }
        ));
        assert!(!s.is_reauthenticating() && s.is_authenticated());
        // Another mechanism, a v0 handshake, or another user: refused.
        s.begin_reauthentication();
        assert_eq!(
            s.handshake("SCRAM-SHA-512", 1).error_code,
            UNSUPPORTED_SASL_MECHANISM
        );
        let mut s2 = SaslSession::new(with_reauth(1000));
        plain_login(&mut s2, "alice", "alice-secret");
        s2.set_authenticate_version(1);
        s2.begin_reauthentication();
        assert_eq!(s2.handshake("PLAIN", 0).error_code, ILLEGAL_SASL_STATE);
        let mut s3 = SaslSession::new(with_reauth(1000));
        plain_login(&mut s3, "alice", "alice-secret");
        s3.set_authenticate_version(1);
        s3.begin_reauthentication();
        let mut users = s3.config.plain_users.clone();
        users.insert("eve".into(), "eve-secret".into());
        s3.config = Arc::new(SaslConfig {
            plain_users: users,
            ..(*with_reauth(1000)).clone()
        });
        match plain_login(&mut s3, "eve", "eve-secret") {
            Step::Failed { message, user } => {
                assert_eq!(user.as_deref(), Some("eve"));
                assert!(message.contains("Cannot change principals"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn without_max_reauth_sessions_never_expire() {
        let mut s = SaslSession::new(config());
        plain_login(&mut s, "alice", "alice-secret");
        s.set_authenticate_version(2);
        assert_eq!(s.session_lifetime_ms(), None);
        assert!(!s.can_reauthenticate());
    }

    #[test]
    fn authenticate_before_handshake_fails() {
        let mut s = SaslSession::new(config());
        assert!(matches!(s.authenticate(b"x", "n"), Step::Failed { .. }));
    }
}
