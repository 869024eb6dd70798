//! [`MetadataQuorum`]: one node of the Raft-replicated metadata log, the API the broker uses.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::ServerState;
use runnel_metadata::{MetadataImage, MetadataRecord};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::committed::CommittedReader;
use crate::config::QuorumConfig;
use crate::error::QuorumError;
use crate::learner::join_loop;
use crate::network::client::{TcpTransport, Transport};
use crate::network::raft_network::NetworkFactory;
use crate::network::security::{plaintext, ChannelSecurity};
use crate::network::server::{serve_rpc_secured, AppHandler, AppSlot};
use crate::state_machine::{Shared, StateMachine};
use crate::status::{QuorumStatus, ReplicaStatus};
use crate::storage::log::LogStore;
use crate::storage::snapshot::SnapshotStore;
use crate::types::{ApplyResult, Node, NodeId, Raft, TypeConfig};

/// A batch appended by [`MetadataQuorum::append`]: resolves with its first offset once it is
/// committed and applied on this node, or with why it was not.
pub struct Committing {
    rx: tokio::sync::oneshot::Receiver<openraft::raft::ClientWriteResult<TypeConfig>>,
}

impl std::future::Future for Committing {
    type Output = Result<i64, QuorumError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let answer = std::task::ready!(std::pin::Pin::new(&mut self.rx).poll(cx));
        std::task::Poll::Ready(match answer {
            Err(_) => Err(QuorumError::Shutdown(
                "the Raft core stopped before the batch committed".into(),
            )),
            Ok(Ok(resp)) => match resp.data {
                ApplyResult::Applied { first_offset, .. } => Ok(first_offset),
                ApplyResult::Rejected { reason } => Err(QuorumError::Rejected(reason)),
                ApplyResult::NoRecords => Err(QuorumError::Raft(
                    "a record batch was applied as no records".into(),
                )),
            },
            Ok(Err(ClientWriteError::ForwardToLeader(f))) => Err(QuorumError::NotLeader {
                leader: f.leader_id.and_then(|l| i32::try_from(l).ok()),
            }),
            Ok(Err(e)) => Err(QuorumError::Raft(e.to_string())),
        })
    }
}

/// A running member (voter or observer) of the metadata quorum.
pub struct MetadataQuorum {
    node_id: i32,
    raft: Raft,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    app: AppSlot,
    /// How the controller listener's connections are secured (both directions).
    security: Arc<dyn ChannelSecurity>,
}

impl MetadataQuorum {
    /// Starts the node over TCP: Raft RPCs are served on `listener` (the controller listener)
    /// and sent to peers' listeners. A voter (its id is in `voters`) takes part in elections;
    /// any other node is an observer that joins as a learner and only follows.
    ///
    /// The cluster membership is initialized exactly once, deterministically: the lowest voter
    /// id initializes it when its storage is empty, the others wait to hear from it. A fresh
    /// cluster therefore forms with no manual step, but not before the lowest voter has started
    /// once.
    pub async fn start(config: QuorumConfig, listener: TcpListener) -> Result<Self, QuorumError> {
        Self::start_secured(config, listener, plaintext()).await
    }

    /// [`MetadataQuorum::start`] on a secured controller listener: every accepted connection
    /// must pass `security`'s handshake before a frame of it is read, and every connection
    /// this node opens to a peer authenticates through it with the node's own credentials.
    pub async fn start_secured(
        config: QuorumConfig,
        listener: TcpListener,
        security: Arc<dyn ChannelSecurity>,
    ) -> Result<Self, QuorumError> {
        let transport = Arc::new(TcpTransport::with_security(
            config.cluster_id.clone(),
            security.clone(),
        ));
        Self::start_inner(config, transport, Some(listener), security).await
    }

    /// [`MetadataQuorum::start`] with any [`Transport`] (the simulation tests use an in-process
    /// one); without a listener nothing is served here and the transport must deliver requests
    /// to [`crate::handle_request`] itself.
    pub async fn start_with_transport(
        config: QuorumConfig,
        transport: Arc<dyn Transport>,
        listener: Option<TcpListener>,
    ) -> Result<Self, QuorumError> {
        Self::start_inner(config, transport, listener, plaintext()).await
    }

    async fn start_inner(
        config: QuorumConfig,
        transport: Arc<dyn Transport>,
        listener: Option<TcpListener>,
        security: Arc<dyn ChannelSecurity>,
    ) -> Result<Self, QuorumError> {
        config.validate()?;
        let raft_config = config.raft_config()?;
        let node_id = config.node_id as NodeId;
        let observer_address = match (&config.observer_address, &listener) {
            _ if config.is_voter() => None,
            (Some(a), _) => Some(a.clone()),
            (None, Some(l)) => Some(l.local_addr()?.to_string()),
            (None, None) => {
                return Err(QuorumError::Config(
                    "an observer needs an address the leader can replicate to".into(),
                ))
            }
        };
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            QuorumError::Storage(format!("cannot create {}: {e}", config.data_dir.display()))
        })?;
        let log = LogStore::open(&config.data_dir)?;
        let snapshots = Arc::new(SnapshotStore::open(config.data_dir.clone())?);
        let state_machine = StateMachine::open(snapshots, config.cluster_id.clone())?;
        let shared = state_machine.shared();
        let backoff = Duration::from_millis(config.heartbeat_interval_ms.max(10));
        let network = NetworkFactory::new(transport.clone(), backoff);
        let raft = Raft::new(node_id, raft_config, network, log, state_machine)
            .await
            .map_err(|e| QuorumError::Shutdown(e.to_string()))?;

        let mut tasks = Vec::new();
        let app = AppSlot::default();
        if let Some(listener) = listener {
            tasks.push(tokio::spawn(serve_rpc_secured(
                listener,
                raft.clone(),
                app.clone(),
                config.cluster_id.clone(),
                security.clone(),
                config.max_connections,
            )));
        }
        let voters: BTreeMap<NodeId, Node> = config
            .voters
            .iter()
            .map(|(id, addr)| (*id as NodeId, Node { addr: addr.clone() }))
            .collect();
        if voters.keys().next() == Some(&node_id) {
            let initialized = raft
                .is_initialized()
                .await
                .map_err(|e| QuorumError::Shutdown(e.to_string()))?;
            if !initialized {
                match raft.initialize(voters.clone()).await {
                    Ok(()) => tracing::info!(node_id, "initialized the metadata quorum membership"),
                    // Someone else's log reached us first: already part of a cluster.
                    Err(RaftError::APIError(InitializeError::NotAllowed(e))) => {
                        tracing::debug!(error = %e, "membership already initialized")
                    }
                    Err(e) => return Err(QuorumError::Raft(e.to_string())),
                }
            }
        }
        if let Some(address) = observer_address {
            let voter_addrs = voters.into_iter().map(|(id, n)| (id, n.addr)).collect();
            let retry = Duration::from_millis(config.election_timeout_max_ms);
            tasks.push(tokio::spawn(join_loop(
                raft.clone(),
                transport,
                node_id,
                address,
                voter_addrs,
                retry,
            )));
        }
        Ok(MetadataQuorum {
            app,
            security,
            node_id: config.node_id,
            raft,
            shared,
            tasks,
        })
    }

    /// Leader only: commits `records` as one atomic batch and returns the offset of its first
    /// record (for an empty batch, the offset the next record will get).
    ///
    /// Resolves once the batch is committed and applied here. Not bounded in time: while the
    /// quorum is unreachable it waits (callers wrap it in a timeout; on timeout the outcome is
    /// unknown, the batch may still commit later, but always as a whole). If leadership is lost
    /// first, the batch may still be committed by the next leader (then this returns its
    /// offset) or discarded (`NotLeader`).
    pub async fn propose(&self, records: Vec<MetadataRecord>) -> Result<i64, QuorumError> {
        self.append(records).await?.await
    }

    /// Leader only: appends `records` as one atomic batch without waiting for its commit
    /// (KRaft's pipelined append). Batches appended one after another are logged in that
    /// order. The returned future resolves as [`MetadataQuorum::propose`] does: with the
    /// batch's first offset once it is committed and applied here, or with why it was not.
    pub async fn append(&self, records: Vec<MetadataRecord>) -> Result<Committing, QuorumError> {
        let rx = self
            .raft
            .client_write_ff(records)
            .await
            .map_err(|e| QuorumError::Shutdown(e.to_string()))?;
        Ok(Committing { rx })
    }

    /// A reader of every committed record from offset 0 (or the snapshot's image if the log
    /// before it is gone). Each call returns an independent cursor.
    pub fn committed(&self) -> CommittedReader {
        CommittedReader::new(self.shared.clone(), 0)
    }

    /// A reader starting at `offset` (e.g. after an image the caller loaded itself).
    pub fn committed_from(&self, offset: i64) -> CommittedReader {
        CommittedReader::new(self.shared.clone(), offset)
    }

    /// The metadata image after the last committed record on this node.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.shared.lock().image.clone()
    }

    /// The offset of the last committed record *on this node* (-1: none). After a restart
    /// this is only what the local snapshot and log hold, not what the quorum committed: a
    /// node whose metadata directory was wiped starts at -1. Whether a node has caught up is
    /// decided against the leader's committed offset instead (see
    /// [`QuorumStatus::leader_applied_own_term`]).
    pub fn last_committed_offset(&self) -> i64 {
        self.shared.lock().image.offset
    }

    /// The current leader as this node knows it.
    pub fn leader(&self) -> Option<i32> {
        self.raft
            .metrics()
            .borrow()
            .current_leader
            .map(|l| l as i32)
    }

    /// True if this node is the leader (the active controller).
    pub fn is_leader(&self) -> bool {
        let m = self.raft.metrics().borrow().clone();
        m.state == ServerState::Leader && m.current_leader == Some(self.node_id as NodeId)
    }

    /// The current Raft term: the controller epoch.
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    /// This node's id.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The quorum as this node sees it; replication progress is only known on the leader.
    pub fn status(&self) -> QuorumStatus {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership().clone();
        let log_end = m.last_log_index.map_or(0, |i| i + 1);
        let replica = |id: NodeId| {
            let matched = if id == self.node_id as NodeId {
                Some(m.last_log_index)
            } else {
                m.replication
                    .as_ref()
                    .and_then(|r| r.get(&id))
                    .map(|l| l.map(|l| l.index))
            };
            let end = matched.map(|i| i.map_or(0, |i| i + 1));
            ReplicaStatus {
                node_id: id as i32,
                address: membership
                    .get_node(&id)
                    .map(|n| n.addr.clone())
                    .unwrap_or_default(),
                log_end_offset: end,
                lag: end.map(|e| log_end.saturating_sub(e)),
            }
        };
        let voters: Vec<ReplicaStatus> = membership.voter_ids().map(replica).collect();
        let observers: Vec<ReplicaStatus> = membership.learner_ids().map(replica).collect();
        QuorumStatus {
            node_id: self.node_id,
            leader_id: m.current_leader.map(|l| l as i32),
            leader_epoch: m.current_term,
            high_watermark: m.last_applied.map_or(0, |l| l.index + 1),
            last_record_offset: self.last_committed_offset(),
            log_end_offset: log_end,
            leader_applied_own_term: m.state == ServerState::Leader
                && m.current_leader == Some(self.node_id as NodeId)
                && m.last_applied
                    .is_some_and(|l| l.leader_id.term == m.current_term),
            voters,
            observers,
        }
    }

    /// How this node secures connections to other nodes' controller listeners (what the
    /// broker's controller RPCs must use too: [`TcpTransport::with_security`]).
    pub fn security(&self) -> Arc<dyn ChannelSecurity> {
        self.security.clone()
    }

    /// Installs the handler for application requests ([`crate::RpcRequest::App`]) arriving on
    /// this node's listener. Only the first call has an effect.
    pub fn set_app_handler(&self, handler: AppHandler) {
        let _ = self.app.set(handler);
    }

    /// The openraft handle, for custom transports ([`crate::handle_request`]) and tests.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Stops the node: Raft first (no more votes or appends), then the RPC server (closing
    /// the listener and its connections) and the observer loop; readers see the end.
    pub async fn shutdown(self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "the Raft core did not stop cleanly");
        }
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks {
            let _ = task.await;
        }
        self.shared.close();
    }
}
