//! Finding a group's coordinator (FindCoordinator, spec H.1) and talking to it. Every group
//! request must reach the broker leading the group's `__consumer_offsets` partition; any
//! other broker answers NOT_COORDINATOR, and a coordinator still loading the partition
//! answers COORDINATOR_LOAD_IN_PROGRESS. Both mean "look it up again and retry".

use std::sync::Arc;

use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::{Request, StrBytes};

use crate::client::Client;
use crate::connection::Connection;
use crate::error::{ClientError, Result};

pub use runnel_codes::{COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR};

/// Whether `code` means the coordinator must be looked up again.
pub fn is_coordinator_error(code: i16) -> bool {
    matches!(
        code,
        COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR
    )
}

/// The broker coordinating a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorInfo {
    /// Its node id.
    pub node_id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
}

impl CoordinatorInfo {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One FindCoordinator round trip for a group (key type 0).
pub async fn find_once(client: &Client, group: &str) -> Result<CoordinatorInfo> {
    find_key_once(client, group, 0).await
}

/// One FindCoordinator round trip for `key` of `key_type` (0 group, 1 transactional id), at
/// the negotiated version: v0-v3 send one key, v4 batches keys and answers per key.
pub async fn find_key_once(client: &Client, key: &str, key_type: i8) -> Result<CoordinatorInfo> {
    let conn = client.any_connection().await?;
    let version = conn.negotiated::<FindCoordinatorRequest>()?;
    let mut req = FindCoordinatorRequest::default();
    if version >= 1 {
        req.key_type = key_type;
    }
    if version >= 4 {
        req.coordinator_keys = vec![StrBytes::from_string(key.to_owned())];
    } else {
        req.key = StrBytes::from_string(key.to_owned());
    }
    let resp = conn
        .send_at(&req, version, client.config().connection.request_timeout)
        .await?;
    let (code, message, node, host, port) = if version >= 4 {
        let c = resp.coordinators.into_iter().next().ok_or_else(|| {
            ClientError::Protocol("FindCoordinator v4 response without coordinators".into())
        })?;
        (c.error_code, c.error_message, c.node_id.0, c.host, c.port)
    } else {
        (
            resp.error_code,
            resp.error_message,
            resp.node_id.0,
            resp.host,
            resp.port,
        )
    };
    ClientError::check(code, message.as_deref()).map_err(|e| with_group(e, key))?;
    Ok(CoordinatorInfo {
        node_id: node,
        host: host.to_string(),
        port,
    })
}

/// FindCoordinator with the client's retry policy (COORDINATOR_NOT_AVAILABLE is retriable:
/// `__consumer_offsets` may still be being created).
pub async fn find(client: &Client, group: &str) -> Result<CoordinatorInfo> {
    client
        .retry(&format!("coordinator of group '{group}'"), || {
            find_once(client, group)
        })
        .await
}

/// A connection to the coordinator: the client's shared connection to that broker when the
/// broker is in the metadata, else a new one to the advertised address.
pub async fn shared_connection(client: &Client, info: &CoordinatorInfo) -> Result<Arc<Connection>> {
    if client.metadata().brokers.contains_key(&info.node_id) {
        if let Ok(conn) = client.broker_connection(info.node_id).await {
            return Ok(conn);
        }
    }
    Connection::connect(&info.addr(), client.config().connection.clone()).await
}

/// Adds the group to a broker error's message, so a CLI line says which group failed.
pub fn with_group(err: ClientError, group: &str) -> ClientError {
    match err {
        ClientError::Kafka { code, message, .. } => ClientError::kafka(
            code,
            Some(match message {
                Some(m) => format!("group '{group}': {m}"),
                None => format!("group '{group}'"),
            }),
        ),
        other => other,
    }
}

/// Sends a request built for the negotiated version to `group`'s coordinator, looking the
/// coordinator up again and retrying when the response's `error_of` is a coordinator error.
/// Returns the version used with the response.
pub async fn send_to_coordinator<R, B, E>(
    client: &Client,
    group: &str,
    build: B,
    error_of: E,
) -> Result<(i16, R::Response)>
where
    R: Request,
    B: Fn(i16) -> Result<R>,
    E: Fn(&R::Response) -> i16,
{
    client
        .retry(&format!("api {} for group '{group}'", R::KEY), || async {
            let info = find_once(client, group).await?;
            let conn = shared_connection(client, &info).await?;
            let version = conn.negotiated::<R>()?;
            let req = build(version)?;
            let resp = conn
                .send_at(&req, version, client.config().connection.request_timeout)
                .await?;
            let code = error_of(&resp);
            if is_coordinator_error(code) {
                return Err(with_group(ClientError::kafka(code, None), group));
            }
            Ok((version, resp))
        })
        .await
}
