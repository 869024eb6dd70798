//! What a SASL listener does with a frame before the connection has authenticated.
//!
//! [`pre_auth`] is pure (the frame and the session in, the answer out); the connection task
//! writes the answer and acts on [`Then`]. Kafka's rule: only ApiVersions, SaslHandshake and
//! SaslAuthenticate are served before authentication; anything else closes the connection.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::sasl::{SaslSession, Step, SASL_AUTHENTICATION_FAILED};
use crate::dispatch::{encode_response, supported_range};

/// What to do after writing the reply.
#[derive(Debug, PartialEq, Eq)]
pub enum Then {
    Continue,
    Authenticated(String),
    /// Close the connection; `reason` (naming the user, never a secret) and `user` (the name
    /// the client gave, if any) are for the log line.
    Close {
        reason: String,
        user: Option<String>,
    },
}

#[derive(Debug)]
pub enum PreAuth {
    /// An ApiVersions request: the dispatcher answers it as usual.
    Dispatch,
    Reply(Bytes, Then),
    /// Close without answering; the reason and the user the client named, if any.
    Refuse(String, Option<String>),
}

/// Handles one frame on a connection that has not authenticated yet.
pub fn pre_auth(session: &mut SaslSession, frame: &Bytes, server_nonce: &str) -> PreAuth {
    if session.expects_raw_token() {
        // SaslHandshake v0: the token travels unframed and so does the answer.
        return match session.authenticate(frame, server_nonce) {
            Step::Challenge(bytes) => PreAuth::Reply(raw_frame(&bytes), Then::Continue),
            Step::Authenticated { response, user } => {
                PreAuth::Reply(raw_frame(&response), Then::Authenticated(user))
            }
            Step::Failed { message, user } => {
                PreAuth::Refuse(close_reason(user.clone(), message), user)
            }
        };
    }
    let mut peek = &frame[..];
    if peek.len() < 8 {
        return PreAuth::Refuse("frame too short for a request header".into(), None);
    }
    let raw_key = peek.get_i16();
    let version = peek.get_i16();
    match ApiKey::try_from(raw_key) {
        Ok(ApiKey::ApiVersions) => PreAuth::Dispatch,
        Ok(key @ (ApiKey::SaslHandshake | ApiKey::SaslAuthenticate)) => {
            match sasl_request(session, key, version, frame.clone(), server_nonce) {
                Ok(reply) => reply,
                Err(reason) => PreAuth::Refuse(reason, None),
            }
        }
        _ => PreAuth::Refuse(
            format!("unexpected request (api key {raw_key}) before SASL authentication"),
            None,
        ),
    }
}

fn close_reason(user: Option<String>, message: String) -> String {
    match user {
        Some(user) => format!("authentication of User:{user} failed: {message}"),
        None => format!("authentication failed: {message}"),
    }
}

fn sasl_request(
    session: &mut SaslSession,
    key: ApiKey,
    version: i16,
    mut buf: Bytes,
    server_nonce: &str,
) -> Result<PreAuth, String> {
    let Some((lo, hi)) = supported_range(key) else {
        return Err(format!("unsupported api {key:?}"));
    };
    if version < lo || version > hi {
        return Err(format!("unsupported {key:?} version {version}"));
    }
    let malformed =
        |e: &dyn std::fmt::Display| format!("malformed {key:?} v{version} request: {e}");
    let header = RequestHeader::decode(&mut buf, key.request_header_version(version))
        .map_err(|e| malformed(&e))?;
    let correlation_id = header.correlation_id;
    let encode = |body: &dyn EncodeBody| body.encode(version, correlation_id);
    if key == ApiKey::SaslHandshake {
        let request = SaslHandshakeRequest::decode(&mut buf, version).map_err(|e| malformed(&e))?;
        let outcome = session.handshake(&request.mechanism, version);
        let response = SaslHandshakeResponse::default()
            .with_error_code(outcome.error_code)
            .with_mechanisms(
                outcome
                    .mechanisms
                    .into_iter()
                    .map(StrBytes::from_string)
                    .collect(),
            );
        let then = if outcome.error_code == 0 {
            Then::Continue
        } else {
            Then::Close {
                reason: format!("SaslHandshake refused mechanism '{}'", &*request.mechanism),
                user: None,
            }
        };
        return Ok(PreAuth::Reply(encode(&response)?, then));
    }
    let request = SaslAuthenticateRequest::decode(&mut buf, version).map_err(|e| malformed(&e))?;
    let (response, then) = match session.authenticate(&request.auth_bytes, server_nonce) {
        Step::Challenge(bytes) => (
            SaslAuthenticateResponse::default().with_auth_bytes(bytes.into()),
            Then::Continue,
        ),
        Step::Authenticated { response, user } => {
            session.set_authenticate_version(version);
            // KIP-368: v1+ tells the client when to re-authenticate (0: never).
            let lifetime = session.session_lifetime_ms().unwrap_or(0);
            (
                SaslAuthenticateResponse::default()
                    .with_auth_bytes(response.into())
                    .with_session_lifetime_ms(if version >= 1 { lifetime } else { 0 }),
                Then::Authenticated(user),
            )
        }
        Step::Failed { message, user } => (
            SaslAuthenticateResponse::default()
                .with_error_code(SASL_AUTHENTICATION_FAILED)
                .with_error_message(Some(StrBytes::from_string(message.clone()))),
            Then::Close {
                reason: close_reason(user.clone(), message),
                user,
            },
        ),
    };
    Ok(PreAuth::Reply(encode(&response)?, then))
}

/// The two SASL responses, encoded with their API's header.
trait EncodeBody {
    fn encode(&self, version: i16, correlation_id: i32) -> Result<Bytes, String>;
}

impl EncodeBody for SaslHandshakeResponse {
    fn encode(&self, version: i16, correlation_id: i32) -> Result<Bytes, String> {
        encode_response(ApiKey::SaslHandshake, version, correlation_id, self).map_err(|e| e.0)
    }
}

impl EncodeBody for SaslAuthenticateResponse {
    fn encode(&self, version: i16, correlation_id: i32) -> Result<Bytes, String> {
        encode_response(ApiKey::SaslAuthenticate, version, correlation_id, self).map_err(|e| e.0)
    }
}

/// A raw SASL token with its size prefix (SaslHandshake v0's framing).
fn raw_frame(token: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + token.len());
    // A token is at most a few hundred bytes; the frame reader bounds what came in.
    out.put_u32(token.len() as u32);
    out.put_slice(token);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::super::sasl::SaslConfig;
    use super::*;
    use kafka_protocol::messages::RequestHeader;
    use kafka_protocol::protocol::Encodable;
    use std::sync::Arc;

    fn session() -> SaslSession {
        SaslSession::new(Arc::new(SaslConfig {
            mechanisms: vec!["PLAIN".into()],
            plain_users: [("alice".to_string(), "pw".to_string())].into(),
            scram: Arc::new(|_, _| None),
            max_reauth_ms: 0,
            max_receive_size: 524288,
        }))
    }

    fn request<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Bytes {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    #[test]
    fn other_apis_are_refused_before_authentication() {
        let metadata = request(
            ApiKey::Metadata,
            12,
            &kafka_protocol::messages::MetadataRequest::default(),
        );
        assert!(matches!(
            pre_auth(&mut session(), &metadata, "n"),
            PreAuth::Refuse(..)
        ));
        let versions = request(
            ApiKey::ApiVersions,
            3,
            &kafka_protocol::messages::ApiVersionsRequest::default(),
        );
        assert!(matches!(
            pre_auth(&mut session(), &versions, "n"),
            PreAuth::Dispatch
        ));
    }

    #[test]
    fn framed_plain_success_and_failure() {
        for (password, ok) in [("pw", true), ("bad", false)] {
            let mut s = session();
            let hs =
                SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
            let PreAuth::Reply(_, Then::Continue) =
                pre_auth(&mut s, &request(ApiKey::SaslHandshake, 1, &hs), "n")
            else {
                panic!("handshake");
            };
            let token = format!("\0alice\0{password}");
            let auth = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
            let PreAuth::Reply(reply, then) =
                pre_auth(&mut s, &request(ApiKey::SaslAuthenticate, 2, &auth), "n")
            else {
                panic!("authenticate");
            };
            let mut body = reply.slice(4..);
            let _header = kafka_protocol::messages::ResponseHeader::decode(&mut body, 1).unwrap();
            let response = SaslAuthenticateResponse::decode(&mut body, 2).unwrap();
            if ok {
                assert_eq!(then, Then::Authenticated("alice".into()));
                assert_eq!(response.error_code, 0);
            } else {
                assert!(
                    matches!(then, Then::Close { ref reason, .. } if reason.contains("User:alice"))
                );
                assert_eq!(response.error_code, SASL_AUTHENTICATION_FAILED);
            }
        }
    }

    #[test]
    fn v0_handshake_takes_raw_tokens() {
        let mut s = session();
        let hs = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
        pre_auth(&mut s, &request(ApiKey::SaslHandshake, 0, &hs), "n");
        let raw = Bytes::from_static(b"\0alice\0pw");
        let PreAuth::Reply(reply, Then::Authenticated(user)) = pre_auth(&mut s, &raw, "n") else {
            panic!("raw token");
        };
        assert_eq!(user, "alice");
        assert_eq!(&reply[..], &[0, 0, 0, 0]);
    }
}
