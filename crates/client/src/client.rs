//! The cluster handle: bootstrap, metadata cache, one connection per broker, and the retry
//! policy (refresh metadata, back off, try again) that every higher-level operation shares.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::{Request, StrBytes};

use crate::connection::{Connection, ConnectionConfig};
use crate::error::{ClientError, Result};
use crate::metadata::{ClusterMetadata, TopicError, TopicInfo};

/// Settings of a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `host:port` addresses to bootstrap from (Kafka's `bootstrap.servers`).
    pub bootstrap: Vec<String>,
    /// Per-connection settings (client id, timeouts).
    pub connection: ConnectionConfig,
    /// How many times a retriable failure is retried.
    pub retries: u32,
    /// First backoff between retries; doubles up to `retry_backoff_max`.
    pub retry_backoff: Duration,
    /// Cap on the backoff.
    pub retry_backoff_max: Duration,
}

impl ClientConfig {
    /// A config for a comma-separated bootstrap list (`h1:9092,h2:9092`).
    pub fn new(bootstrap: &str) -> Self {
        Self {
            bootstrap: bootstrap
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            connection: ConnectionConfig::default(),
            retries: 10,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
        }
    }
}

/// A handle on one Kafka cluster. Share it with `Arc`; all methods take `&self`.
#[derive(Debug)]
pub struct Client {
    config: ClientConfig,
    bootstrap_conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    conns: tokio::sync::Mutex<HashMap<i32, Arc<Connection>>>,
    metadata: RwLock<Arc<ClusterMetadata>>,
}

impl Client {
    /// Connects to the first reachable bootstrap server and loads the broker list.
    pub async fn connect(config: ClientConfig) -> Result<Arc<Self>> {
        if config.bootstrap.is_empty() {
            return Err(ClientError::InvalidArgument(
                "the bootstrap server list is empty".into(),
            ));
        }
        let client = Arc::new(Self {
            config,
            bootstrap_conn: tokio::sync::Mutex::new(None),
            conns: tokio::sync::Mutex::new(HashMap::new()),
            metadata: RwLock::new(Arc::new(ClusterMetadata::default())),
        });
        client.refresh_metadata(Some(&[])).await?;
        Ok(client)
    }

    /// This client's configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The current metadata snapshot (may be stale; see [`Client::refresh_metadata`]).
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.metadata
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Fetches metadata for `topics` (`None` = all topics, `Some(&[])` = brokers only) and
    /// merges it into the cache. Returns the new snapshot and per-topic errors.
    pub async fn refresh_metadata_with_errors(
        &self,
        topics: Option<&[String]>,
    ) -> Result<(Arc<ClusterMetadata>, Vec<TopicError>)> {
        let conn = self.any_connection().await?;
        let version = conn.negotiated::<MetadataRequest>()?;
        let mut req = MetadataRequest::default();
        req.topics = topics.map(|names| {
            names
                .iter()
                .map(|n| {
                    let mut t = MetadataRequestTopic::default();
                    t.name = Some(TopicName(StrBytes::from_string(n.clone())));
                    t
                })
                .collect()
        });
        if version >= 4 {
            req.allow_auto_topic_creation = false;
        }
        let resp = match conn
            .send_at(&req, version, self.config.connection.request_timeout)
            .await
        {
            Ok(resp) => resp,
            Err(e) => {
                // The bootstrap connection may be dead; drop it so the next call reconnects.
                self.bootstrap_conn.lock().await.take();
                return Err(e);
            }
        };
        let full = topics.is_none();
        let mut guard = self.metadata.write().unwrap_or_else(|p| p.into_inner());
        let (meta, errors) = ClusterMetadata::merge(&guard, &resp, full);
        let meta = Arc::new(meta);
        *guard = meta.clone();
        Ok((meta, errors))
    }

    /// Like [`Client::refresh_metadata_with_errors`] without the per-topic errors.
    pub async fn refresh_metadata(
        &self,
        topics: Option<&[String]>,
    ) -> Result<Arc<ClusterMetadata>> {
        Ok(self.refresh_metadata_with_errors(topics).await?.0)
    }

    /// Metadata of one topic, refreshing when it is unknown or has partitions without a leader
    /// (a freshly created topic), with bounded retries. UNKNOWN_TOPIC_OR_PARTITION when it
    /// does not exist.
    pub async fn topic(&self, name: &str) -> Result<TopicInfo> {
        if let Some(t) = self.metadata().topics.get(name) {
            if t.partitions.iter().all(|p| p.leader.is_some()) {
                return Ok(t.clone());
            }
        }
        let names = [name.to_owned()];
        self.retry(&format!("metadata for {name}"), || async {
            let (meta, errors) = self.refresh_metadata_with_errors(Some(&names)).await?;
            if let Some(err) = errors.iter().find(|e| e.name == name) {
                return Err(ClientError::kafka(
                    err.error_code,
                    Some(format!("topic '{name}'")),
                ));
            }
            let topic = meta.topics.get(name).ok_or_else(|| {
                ClientError::kafka(
                    runnel_codes::UNKNOWN_TOPIC_OR_PARTITION,
                    Some(format!("topic '{name}'")),
                )
            })?;
            if topic.partitions.iter().any(|p| p.leader.is_none()) {
                return Err(ClientError::kafka(
                    5,
                    Some(format!("topic '{name}' has partitions without a leader")),
                ));
            }
            Ok(topic.clone())
        })
        .await
    }

    /// A live connection to any broker: the bootstrap connection, re-established as needed
    /// from the bootstrap list and then from known brokers.
    pub async fn any_connection(&self) -> Result<Arc<Connection>> {
        let mut guard = self.bootstrap_conn.lock().await;
        if let Some(conn) = guard.as_ref() {
            if !conn.is_dead() {
                return Ok(conn.clone());
            }
        }
        let mut candidates = self.config.bootstrap.clone();
        candidates.extend(self.metadata().brokers.values().map(|b| b.addr()));
        let mut last_err = None;
        for addr in candidates {
            match Connection::connect(&addr, self.config.connection.clone()).await {
                Ok(conn) => {
                    *guard = Some(conn.clone());
                    return Ok(conn);
                }
                Err(e) => {
                    tracing::debug!(%addr, error = %e, "bootstrap connect failed");
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| ClientError::InvalidArgument("no bootstrap servers".into())))
    }

    /// The connection to broker `id`, opened on first use and replaced when it dies.
    pub async fn broker_connection(&self, id: i32) -> Result<Arc<Connection>> {
        if let Some(conn) = self.conns.lock().await.get(&id) {
            if !conn.is_dead() {
                return Ok(conn.clone());
            }
        }
        let addr = match self.metadata().brokers.get(&id) {
            Some(b) => b.addr(),
            None => {
                let meta = self.refresh_metadata(Some(&[])).await?;
                meta.brokers.get(&id).map(|b| b.addr()).ok_or_else(|| {
                    ClientError::kafka(
                        8,
                        Some(format!("broker {id} is not in the cluster metadata")),
                    )
                })?
            }
        };
        let conn = Connection::connect(&addr, self.config.connection.clone()).await?;
        let mut conns = self.conns.lock().await;
        match conns.get(&id) {
            Some(existing) if !existing.is_dead() => Ok(existing.clone()),
            _ => {
                conns.insert(id, conn.clone());
                Ok(conn)
            }
        }
    }

    /// The connection to the controller (admin requests), or any broker when the controller
    /// is not known (KRaft brokers report a random broker, which forwards).
    pub async fn controller_connection(&self) -> Result<Arc<Connection>> {
        match self.metadata().controller_id {
            Some(id) => match self.broker_connection(id).await {
                Ok(conn) => Ok(conn),
                Err(_) => self.any_connection().await,
            },
            None => self.any_connection().await,
        }
    }

    /// Sends `req` to the controller with the negotiated version.
    pub async fn send_to_controller<R: Request>(&self, req: &R) -> Result<R::Response> {
        self.controller_connection().await?.send(req).await
    }

    /// Runs `op` until it succeeds, fails with a non-retriable error, or retries run out.
    /// Before each retry: refresh metadata when the error says leadership moved, then back off
    /// exponentially.
    pub async fn retry<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut backoff = self.config.retry_backoff;
        let mut attempt = 0;
        loop {
            match op().await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retriable() && attempt < self.config.retries => {
                    attempt += 1;
                    tracing::debug!(what, attempt, error = %e, "retrying");
                    if e.needs_metadata_refresh() {
                        if let Err(refresh) = self.refresh_metadata(Some(&[])).await {
                            tracing::debug!(error = %refresh, "metadata refresh failed");
                        }
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.config.retry_backoff_max);
                }
                Err(e) => return Err(e),
            }
        }
    }
}
