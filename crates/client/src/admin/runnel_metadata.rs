//! RunnelDescribeMetadata (API key 32000, Runnel only): the controller's metadata image as the
//! seed's ZooKeeper tree, and the partition / replica state-change log. Kafka has no API for
//! either (ZooKeeper was read directly), so Runnel adds one: request header v1, a JSON body,
//! response header v0, a JSON body. It is deliberately not advertised in ApiVersions (so Kafka
//! clients never see an API they cannot name), hence no negotiation: it is sent at v0 on a
//! connection that has done the normal ApiVersions handshake.

use serde::{Deserialize, Serialize};

use super::Admin;
use crate::error::{ClientError, Result};

/// The API key of RunnelDescribeMetadata, above Kafka's range so it can never collide.
pub const RUNNEL_DESCRIBE_METADATA_KEY: i16 = 32000;
/// The only version.
pub const RUNNEL_DESCRIBE_METADATA_VERSION: i16 = 0;

/// The request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "what", rename_all = "lowercase")]
pub enum MetadataQuery {
    /// The whole image: controller, brokers, topics with assignments and partition states.
    Tree,
    /// State-change events with a sequence number at or after `since`.
    Events {
        /// The first sequence number wanted (the previous answer's `next`).
        since: i64,
    },
    /// The answering broker's authentication counters (Kafka's metric names).
    Security,
}

/// `{"what":"security"}`'s answer: counter name (`failed-authentication-total`,
/// `successful-authentication-total`, `*-reauthentication-total`,
/// `expired-connections-killed-count`) to value, since the broker started.
pub type SecurityCounters = std::collections::BTreeMap<String, u64>;

/// `{"what":"tree"}`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataTree {
    /// The cluster id.
    pub cluster_id: String,
    /// The active controller's node id; `None` (or negative) while no controller is elected.
    #[serde(default)]
    pub controller: Option<i32>,
    /// The active controller's epoch (its Raft term).
    pub controller_epoch: i32,
    /// Registered brokers, fenced ones included.
    pub brokers: Vec<TreeBroker>,
    /// Topics with their partitions.
    pub topics: Vec<TreeTopic>,
}

/// One registered broker (`/brokers/ids/<id>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeBroker {
    /// Node id.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// `broker.rack`, if set.
    #[serde(default)]
    pub rack: Option<String>,
    /// Whether the controller has fenced it (no heartbeats, or not caught up).
    pub fenced: bool,
    /// The broker epoch of its current registration.
    pub epoch: i64,
}

/// One topic (`/brokers/topics/<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeTopic {
    /// Topic name.
    pub name: String,
    /// Topic id as Kafka prints it (URL-safe base64).
    pub id: String,
    /// Partitions.
    pub partitions: Vec<TreePartition>,
}

/// One partition's assignment and state (`/brokers/topics/<t>/partitions/<p>/state`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreePartition {
    /// Partition index.
    pub partition: i32,
    /// Assigned replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// Current leader; `None` or -1 when the partition is offline.
    #[serde(default)]
    pub leader: Option<i32>,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Partition epoch (bumped by every partition change).
    pub partition_epoch: i32,
    /// Epoch of the controller that last changed this partition.
    pub controller_epoch: i32,
}

/// `{"what":"events","since":N}`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateChangeEvents {
    /// Events in sequence order.
    pub events: Vec<StateChangeEvent>,
    /// The `since` to ask for next time.
    pub next: i64,
}

/// One partition or replica state transition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateChangeEvent {
    /// Sequence number in the controller's bounded event log.
    pub seq: i64,
    /// When the transition happened (ms since the epoch).
    pub time_ms: i64,
    /// The epoch of the controller that made it.
    pub controller_epoch: i32,
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The replica, for replica-state transitions; `None` for partition-state ones.
    #[serde(default)]
    pub replica: Option<i32>,
    /// State before (e.g. `NonExistentPartition`).
    pub from: String,
    /// State after (e.g. `NewPartition`).
    pub to: String,
    /// Free text: the leader and ISR chosen, the reason, ...
    #[serde(default)]
    pub detail: Option<String>,
}

/// What a Runnel broker sends instead of an answer when it cannot give one:
/// `{"error":{"code":41,"message":"..."}}` (a Kafka error code). Read leniently first, so the
/// error becomes e.g. NOT_CONTROLLER rather than a "missing field" decode error.
#[derive(Debug, Default, Deserialize)]
struct ErrorProbe {
    #[serde(default)]
    error: Option<ReportedError>,
}

#[derive(Debug, Deserialize)]
struct ReportedError {
    code: i16,
    #[serde(default)]
    message: Option<String>,
}

/// Decodes a response body: a reported error becomes a Kafka error, bad JSON a protocol error.
pub fn decode_answer<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T> {
    let text = std::str::from_utf8(body)
        .map_err(|e| ClientError::protocol("RunnelDescribeMetadata response is not UTF-8", e))?;
    if let Ok(ErrorProbe {
        error: Some(reported),
    }) = serde_json::from_str::<ErrorProbe>(text)
    {
        // A code of 0 with an error object would be a broker bug; report it as unknown.
        let code = if reported.code == 0 {
            -1
        } else {
            reported.code
        };
        return Err(ClientError::kafka(code, reported.message));
    }
    serde_json::from_str(text)
        .map_err(|e| ClientError::protocol("decoding RunnelDescribeMetadata response", e))
}

impl Admin {
    /// The metadata image as a tree (`runnel metadata --tree`).
    pub async fn describe_metadata_tree(&self) -> Result<MetadataTree> {
        self.runnel_describe_metadata(MetadataQuery::Tree).await
    }

    /// State-change events from sequence number `since` on (`runnel metadata --events`).
    pub async fn metadata_events(&self, since: i64) -> Result<StateChangeEvents> {
        self.runnel_describe_metadata(MetadataQuery::Events { since })
            .await
    }

    /// The authentication counters of the broker answering (`runnel metadata --security`).
    pub async fn security_counters(&self) -> Result<SecurityCounters> {
        self.runnel_describe_metadata(MetadataQuery::Security).await
    }

    async fn runnel_describe_metadata<T: serde::de::DeserializeOwned>(
        &self,
        query: MetadataQuery,
    ) -> Result<T> {
        let body = serde_json::to_vec(&query)
            .map_err(|e| ClientError::protocol("encoding RunnelDescribeMetadata", e))?;
        let conn = self.client.any_connection().await?;
        let answer = conn
            .send_raw(
                RUNNEL_DESCRIBE_METADATA_KEY,
                RUNNEL_DESCRIBE_METADATA_VERSION,
                &body,
                conn.request_timeout(),
            )
            .await
            .map_err(|e| explain_closed(e, conn.addr()))?;
        decode_answer(&answer)
    }
}

/// A broker that does not know API 32000 (Apache Kafka, an older Runnel) closes the
/// connection without answering; say so instead of reporting a bare network error.
fn explain_closed(err: ClientError, addr: &str) -> ClientError {
    match &err {
        ClientError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionAborted => {
            ClientError::kafka(
                35,
                Some(format!(
                    "{addr} closed the connection on RunnelDescribeMetadata (api key {RUNNEL_DESCRIBE_METADATA_KEY}); \
                     it is probably not a Runnel broker with cluster support"
                )),
            )
        }
        _ => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_bodies() {
        assert_eq!(
            serde_json::to_string(&MetadataQuery::Tree).unwrap(),
            r#"{"what":"tree"}"#
        );
        assert_eq!(
            serde_json::to_string(&MetadataQuery::Events { since: 17 }).unwrap(),
            r#"{"what":"events","since":17}"#
        );
        assert_eq!(
            serde_json::to_string(&MetadataQuery::Security).unwrap(),
            r#"{"what":"security"}"#
        );
    }

    #[test]
    fn decodes_the_tree_schema() {
        let tree: MetadataTree = decode_answer(
            br#"{"cluster_id":"c1","controller":1,"controller_epoch":3,
                "brokers":[{"id":1,"host":"127.0.0.1","port":9092,"rack":null,"fenced":false,"epoch":12}],
                "topics":[{"name":"t","id":"AAAAAAAAAAAAAAAAAAAAAA","partitions":[
                  {"partition":0,"replicas":[1,2,3],"leader":1,"leader_epoch":0,"isr":[1,2,3],
                   "partition_epoch":0,"controller_epoch":3}]}]}"#,
        )
        .unwrap();
        assert_eq!(tree.controller, Some(1));
        assert_eq!(tree.brokers[0].port, 9092);
        assert_eq!(tree.topics[0].partitions[0].isr, vec![1, 2, 3]);
    }

    #[test]
    fn decodes_events_with_and_without_replica() {
        let events: StateChangeEvents = decode_answer(
            br#"{"events":[
                {"seq":17,"time_ms":1700000000000,"controller_epoch":3,"topic":"t","partition":0,
                 "replica":null,"from":"NonExistentPartition","to":"NewPartition","detail":""},
                {"seq":18,"time_ms":1700000000001,"controller_epoch":3,"topic":"t","partition":0,
                 "replica":2,"from":"NewReplica","to":"OnlineReplica"}],"next":19}"#,
        )
        .unwrap();
        assert_eq!(events.next, 19);
        assert_eq!(events.events[0].replica, None);
        assert_eq!(events.events[1].replica, Some(2));
        assert_eq!(events.events[1].detail, None);
    }

    #[test]
    fn reported_errors_and_garbage() {
        let err =
            decode_answer::<MetadataTree>(br#"{"error":{"code":41,"message":"no controller"}}"#)
                .unwrap_err();
        assert_eq!(err.code(), Some(41));
        assert!(matches!(
            decode_answer::<MetadataTree>(b"{\"cluster_id\":"),
            Err(ClientError::Protocol(_))
        ));
        assert!(matches!(
            decode_answer::<MetadataTree>(b"\xff\xfe"),
            Err(ClientError::Protocol(_))
        ));
    }

    #[test]
    fn closed_connection_is_explained() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "closed");
        let err = explain_closed(ClientError::Io(io), "127.0.0.1:9092");
        assert_eq!(err.code(), Some(35));
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(matches!(
            explain_closed(ClientError::Io(refused), "x"),
            ClientError::Io(_)
        ));
    }
}
