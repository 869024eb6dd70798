//! The reading side of one connection: requests read one at a time, the SASL exchange (and
//! KIP-368 re-authentication) kept away from the dispatcher, every response handed to the
//! connection's writer (`pipeline`) in request order.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, BufReader};

use super::auth_failures::AUTH_STATS;
use super::authenticate::{pre_auth, PreAuth, Then};
use super::frame::{self, read_frame, Frame};
use super::{api_key, pipeline, sasl, server_nonce, within, Closed, Shared, READ_BUFFER};
use crate::dispatch::{dispatch_pipelined, dispatch_throttled, DispatchError, Dispatched};
use crate::principal::{ConnectionIdentity, KafkaPrincipal};
use crate::quota::Throttle;

/// Where the connection's SASL authentication stands.
struct Auth {
    sasl: Option<sasl::SaslSession>,
    /// KIP-368: when the current SASL session ends (connections.max.reauth.ms).
    session_expires: Option<tokio::time::Instant>,
    authenticated_before: bool,
}

/// A handled request's answer, not sent yet.
struct Answer {
    response: Option<Bytes>,
    then: Then,
    throttle: Option<Throttle>,
}

/// Reads and handles requests one at a time (a Produce waiting for replication lets the next
/// Produce in, `pipeline`), handing every response to the writer.
pub(super) async fn read_requests<R: AsyncRead + Send>(
    reader: R,
    mut responses: pipeline::Responses,
    mut identity: ConnectionIdentity,
    shared: &Shared,
) -> Closed {
    let reader = std::pin::pin!(reader);
    let mut reader = BufReader::with_capacity(READ_BUFFER, reader);
    let mut auth = Auth {
        sasl: shared.listener.sasl.clone().map(sasl::SaslSession::new),
        session_expires: None,
        authenticated_before: false,
    };
    loop {
        let frame = match read_request(&mut reader, &auth, &identity, shared).await {
            Ok(frame) => frame,
            Err(closed) => return closed,
        };
        let handled = match auth.check_session(&frame.bytes) {
            Ok(()) => handle(frame, &mut auth, &mut responses, &identity, shared).await,
            Err(closed) => Err(closed),
        };
        let sent = match handled {
            // A pipelined Produce: its response is the writer's now.
            Ok(None) => Ok(()),
            Ok(Some(answer)) => {
                send(answer, &mut auth, &mut responses, &mut identity, shared).await
            }
            Err(closed) => Err(closed),
        };
        if let Err(closed) = sent {
            return closed;
        }
    }
}

/// Reads the next whole request. The idle clock runs from the last response until a whole
/// request is in: bytes of a half-received frame do not reset it, so a trickling sender is
/// closed too.
async fn read_request<B: AsyncRead + Unpin>(
    reader: &mut B,
    auth: &Auth,
    identity: &ConnectionIdentity,
    shared: &Shared,
) -> Result<Frame, Closed> {
    let unauthenticated = auth.sasl.is_some() && !auth.authenticated_before;
    let read = within(shared.idle_timeout, async {
        read_frame(reader, auth.frame_limit(shared), &shared.memory)
            .await?
            .ok_or(Closed::Eof)
    })
    .await;
    match read {
        // Kafka fails the authentication ("invalid receive size"): counted, and the
        // connection closed without reading the body.
        Err(Closed::Frame(frame::FrameError::BadSize {
            size,
            max,
            property,
        })) if unauthenticated => {
            let reason =
                format!("a {size}-byte frame before authentication is over {property} ({max})");
            count_failed_authentication(shared, identity, &reason, None);
            Err(Closed::Authentication { reason, user: None })
        }
        read => read,
    }
}

/// Answers one request: the SASL exchange answers its own frames, everything else goes to
/// the dispatcher. `None`: a pipelined Produce now waiting beside the connection.
async fn handle(
    frame: Frame,
    auth: &mut Auth,
    responses: &mut pipeline::Responses,
    identity: &ConnectionIdentity,
    shared: &Shared,
) -> Result<Option<Answer>, Closed> {
    let Frame { bytes, lease } = frame;
    let pre = auth.sasl.as_mut().filter(|s| in_exchange(s, &bytes));
    let pipelined = pre.is_none() && pipeline::may_pipeline(&bytes);
    if !pipelined {
        // Handled as Kafka does, after every earlier response is out.
        responses.drain().await?;
    }
    let reply = match pre {
        Some(session) => match pre_auth(session, &bytes, &server_nonce()) {
            PreAuth::Dispatch => None,
            PreAuth::Refuse(reason, user) => {
                count_failed_authentication(shared, identity, &reason, user.as_deref());
                return Err(Closed::Authentication { reason, user });
            }
            PreAuth::Reply(reply, then) => Some((reply, then)),
        },
        None => None,
    };
    let (response, then, throttle) = match reply {
        Some((reply, then)) => (Some(reply), then, None),
        None if pipelined => match dispatch_pipelined(&shared.broker, bytes, identity).await {
            Ok(Dispatched::Waiting(waiting)) => {
                responses.pipeline(waiting, lease).await?;
                return Ok(None);
            }
            Ok(Dispatched::Done(response, throttle)) => (response, Then::Continue, throttle),
            Err(DispatchError(reason)) => return Err(Closed::BadRequest(reason)),
        },
        None => match dispatch_throttled(&shared.broker, bytes, identity).await {
            Ok((response, throttle)) => (response, Then::Continue, throttle),
            Err(DispatchError(reason)) => return Err(Closed::BadRequest(reason)),
        },
    };
    drop(lease);
    Ok(Some(Answer {
        response,
        then,
        throttle,
    }))
}

/// Sends an answer (held or followed by its client-quota throttle) and acts on what the
/// SASL exchange decided.
async fn send(
    answer: Answer,
    auth: &mut Auth,
    responses: &mut pipeline::Responses,
    identity: &mut ConnectionIdentity,
    shared: &Shared,
) -> Result<(), Closed> {
    let Answer {
        response,
        then,
        throttle,
    } = answer;
    // A failed authentication is counted before its error goes out, so whoever sees the
    // error also sees the count.
    if let Then::Close { reason, user } = &then {
        count_failed_authentication(shared, identity, reason, user.as_deref());
        if auth.authenticated_before {
            AUTH_STATS.reauth_failed();
        }
    }
    // Client quotas (KIP-219): hold the response of a client that does not throttle itself.
    if let Some(t) = throttle.filter(|t| !t.response_first) {
        tokio::time::sleep(t.time).await;
    }
    if let Some(response) = response {
        responses.write(response).await?;
    }
    // ... and mute the connection (read nothing more) for the throttle time.
    if let Some(t) = throttle.filter(|t| t.response_first) {
        tokio::time::sleep(t.time).await;
    }
    match then {
        Then::Continue => Ok(()),
        Then::Authenticated(user) => {
            tracing::debug!(peer = %identity.peer, %user, "authenticated");
            auth.authenticated();
            identity.principal = KafkaPrincipal::user(user);
            Ok(())
        }
        Then::Close { reason, user } => {
            // The writer flushes every response it writes.
            // Kafka delays the close (`connection.failed.authentication.delay.ms`): a client
            // that reads the response and the close together (kafka-python) would
            // otherwise see only a lost connection, not SASL_AUTHENTICATION_FAILED.
            tokio::time::sleep(shared.failed_auth_delay).await;
            Err(Closed::Authentication { reason, user })
        }
    }
}

impl Auth {
    /// Before the first authentication on a SASL listener, frames are bounded by
    /// `sasl.server.max.receive.size` (Kafka's `SaslServerAuthenticator`), not by
    /// `socket.request.max.bytes`: an unauthenticated client cannot make the broker take
    /// 100 MB of the pool.
    fn frame_limit(&self, shared: &Shared) -> frame::Limit {
        match &self.sasl {
            Some(session) if !self.authenticated_before => frame::Limit {
                bytes: session.max_receive_size().min(shared.max_request_bytes),
                property: "sasl.server.max.receive.size",
            },
            _ => frame::Limit {
                bytes: shared.max_request_bytes,
                property: "socket.request.max.bytes",
            },
        }
    }

    /// Starts a re-authentication (KIP-368), or closes a connection whose session expired:
    /// Kafka's Processor closes it on the next request that is not a re-authentication.
    fn check_session(&mut self, bytes: &[u8]) -> Result<(), Closed> {
        let Some(session) = self.sasl.as_mut() else {
            return Ok(());
        };
        let handshake = is_sasl_handshake(bytes);
        if handshake && session.can_reauthenticate() {
            // A re-authentication, before or after the session expired.
            session.begin_reauthentication();
        } else if self
            .session_expires
            .is_some_and(|at| tokio::time::Instant::now() >= at)
            && !(session.is_reauthenticating() && is_sasl_request(bytes))
        {
            return Err(Closed::Expired);
        }
        Ok(())
    }

    /// A (re-)authentication succeeded: the new session's expiry, counted.
    fn authenticated(&mut self) {
        let lifetime = self.sasl.as_ref().and_then(|s| s.session_lifetime_ms());
        self.session_expires = lifetime
            .map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms.unsigned_abs()));
        if self.authenticated_before {
            AUTH_STATS.reauth_succeeded();
        } else {
            AUTH_STATS.succeeded();
        }
        self.authenticated_before = true;
    }
}

/// Whether `frame` belongs to the SASL exchange rather than the dispatcher: every frame
/// before the first authentication; while re-authenticating, only the SASL frames (other
/// requests still run as the current principal, whose session has not expired).
fn in_exchange(session: &sasl::SaslSession, frame: &[u8]) -> bool {
    if session.is_reauthenticating() {
        is_sasl_request(frame)
    } else {
        !session.is_authenticated()
    }
}

/// Counts and (once per address and principal per interval) logs a failed authentication at
/// the moment it fails, as Kafka's `Selector` does before its delayed close. The name is the
/// one the client gave, never a secret.
fn count_failed_authentication(
    shared: &Shared,
    identity: &ConnectionIdentity,
    reason: &str,
    user: Option<&str>,
) {
    AUTH_STATS.failed(&shared.listener.name, identity.peer, user, reason);
}

fn is_sasl_handshake(frame: &[u8]) -> bool {
    api_key(frame) == Some(kafka_protocol::messages::ApiKey::SaslHandshake as i16)
}

fn is_sasl_request(frame: &[u8]) -> bool {
    is_sasl_handshake(frame)
        || api_key(frame) == Some(kafka_protocol::messages::ApiKey::SaslAuthenticate as i16)
}
