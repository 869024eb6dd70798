//! [`GroupConsumer`]: a consumer whose partitions are assigned by its group (spec H.2).
//!
//! `poll` drives everything that changes partitions, in this order: find the coordinator
//! (FindCoordinator), join (JoinGroup, answering MEMBER_ID_REQUIRED once), let the leader
//! assign (the chosen assignor over every member's subscription), SyncGroup, start each new
//! partition at its committed offset (OffsetFetch; none -> `auto.offset.reset`), then fetch.
//! Heartbeats run in a background task and only raise flags that the next `poll` handles.
//!
//! Offsets are committed (OffsetCommit with our generation) every `auto.commit.interval.ms`
//! when auto-commit is on, on [`GroupConsumer::commit`], before partitions are revoked, and on
//! [`GroupConsumer::close`]. Eager protocols revoke everything before re-joining; with
//! cooperative-sticky only the partitions that move are revoked, followed by a second round.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{OffsetCommitRequest, OffsetFetchRequest};

use super::assignors::Assignor;
use super::commit::{
    offset_commit_error, offset_commit_request, offset_fetch_request, offset_fetch_results,
    Committer, FetchedOffsets, OffsetAndMetadata,
};
use super::config::GroupConfig;
use super::coordinator::{find, is_coordinator_error, with_group};
use super::heartbeat::{spawn, HeartbeatTiming};
use super::membership::{
    decode_members, join_group, leader_assign, leave_group, sync_group, Identity, Timeouts,
};
use super::protocol::{decode_assignment, encode_subscription, Subscription, SUBSCRIPTION_VERSION};
use super::state::Shared;
use super::TopicPartition;
use crate::client::Client;
use crate::connection::Connection;
use crate::consumer::{AutoOffsetReset, StartPosition};
use crate::error::{ClientError, Result};
use crate::fetcher::Fetcher;
use crate::records::ConsumerRecord;

// MEMBER_ID_REQUIRED (KIP-394): re-send JoinGroup with the id the coordinator chose.
use runnel_codes::{
    ILLEGAL_GENERATION, MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
};
/// How many consecutive failed rebalance attempts (not counting ordinary re-join requests)
/// `poll` tolerates before returning the error.
const MAX_REBALANCE_FAILURES: u32 = 20;
/// Longest single fetch wait inside `poll`, so rebalance flags are noticed promptly.
const POLL_SLICE: Duration = Duration::from_millis(500);

/// A member of a consumer group.
#[derive(Debug)]
pub struct GroupConsumer {
    client: Arc<Client>,
    config: GroupConfig,
    assignors: Vec<Box<dyn Assignor>>,
    cooperative: bool,
    shared: Shared,
    fetcher: Fetcher,
    topics: Vec<String>,
    assigned: BTreeSet<TopicPartition>,
    /// The last assignment and its generation, for sticky assignors' user data.
    previous: (Vec<TopicPartition>, i32),
    protocol: Option<String>,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
    last_commit: Instant,
}

impl Drop for GroupConsumer {
    fn drop(&mut self) {
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
    }
}

impl GroupConsumer {
    /// A consumer of group `config.group_id`; nothing happens on the wire until `poll`.
    pub fn new(client: Arc<Client>, config: GroupConfig) -> Result<Self> {
        config.validate()?;
        let assignors = config.assignor_list()?;
        let cooperative = assignors.iter().all(|a| a.cooperative());
        let identity = Identity {
            group: config.group_id.clone(),
            member_id: String::new(),
            instance_id: config.group_instance_id.clone(),
        };
        Ok(Self {
            fetcher: Fetcher::new(client.clone(), config.fetch.clone()),
            client,
            assignors,
            cooperative,
            shared: Shared::new(identity),
            config,
            topics: Vec::new(),
            assigned: BTreeSet::new(),
            previous: (Vec::new(), -1),
            protocol: None,
            heartbeat: None,
            last_commit: Instant::now(),
        })
    }

    /// Subscribes to `topics` (replacing the previous subscription); takes effect with a
    /// rebalance on the next `poll`.
    pub fn subscribe(&mut self, topics: &[&str]) {
        let mut topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        topics.sort();
        topics.dedup();
        if topics != self.topics {
            self.topics = topics;
            self.shared.lock().rejoin_needed = true;
        }
    }

    /// The partitions currently assigned to this member.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.assigned.iter().cloned().collect()
    }

    /// The coordinator-assigned member id ("" before joining).
    pub fn member_id(&self) -> String {
        self.shared.lock().identity.member_id.clone()
    }

    /// The current generation, -1 outside a generation.
    pub fn generation(&self) -> i32 {
        self.shared.lock().generation
    }

    /// The assignor the group chose.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// Whether this consumer follows the cooperative rebalance protocol.
    pub fn is_cooperative(&self) -> bool {
        self.cooperative
    }

    /// The next offset to read of an assigned partition, once known.
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        self.fetcher.position(&tp.topic, tp.partition)
    }

    /// Moves an assigned partition's position (the next commit stores it).
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) {
        self.fetcher
            .seek(&tp.topic, tp.partition, StartPosition::Offset(offset));
    }

    /// Fetches records of the assigned partitions, waiting up to `timeout` for some. A
    /// rebalance in progress is completed first, which may take longer than `timeout`.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        let deadline = Instant::now() + timeout;
        loop {
            self.shared.lock().last_poll = Instant::now();
            self.ensure_active().await?;
            self.maybe_auto_commit().await;
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Ok(Vec::new());
            }
            let records = self.fetcher.poll(remaining.min(POLL_SLICE)).await?;
            if !records.is_empty() {
                return Ok(records);
            }
        }
    }

    /// Commits the positions of every assigned partition and waits for the answer.
    pub async fn commit(&mut self) -> Result<()> {
        let offsets = self.current_offsets();
        self.commit_offsets(offsets).await
    }

    /// Commits explicit offsets (the next offset to read, per partition).
    pub async fn commit_offsets(
        &mut self,
        offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
    ) -> Result<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        let mut attempts = 0;
        loop {
            let (conn, who) = self.coordinator().await?;
            let (generation, stable) = {
                let st = self.shared.lock();
                (st.generation, st.stable)
            };
            if !stable || generation < 0 {
                return Err(ClientError::kafka(
                    27,
                    Some(format!(
                        "group '{}': not in an active generation, offsets not committed",
                        who.group
                    )),
                ));
            }
            let committer = Committer {
                generation,
                member_id: who.member_id.clone(),
                group_instance_id: who.instance_id.clone(),
            };
            let version = conn.negotiated::<OffsetCommitRequest>()?;
            let req = offset_commit_request(version, &who.group, &committer, &offsets);
            let resp = conn
                .send_at(
                    &req,
                    version,
                    self.client.config().connection.request_timeout,
                )
                .await;
            let code = match resp {
                Ok(resp) => offset_commit_error(&resp),
                Err(e) if e.is_retriable() => {
                    self.shared.lock().coordinator = None;
                    attempts += 1;
                    if attempts > self.client.config().retries {
                        return Err(e);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            if code == 0 {
                self.last_commit = Instant::now();
                return Ok(());
            }
            let handled = self.shared.on_group_error(code);
            if is_coordinator_error(code) && attempts < self.client.config().retries {
                attempts += 1;
                tokio::time::sleep(self.client.config().retry_backoff).await;
                continue;
            }
            let why = if handled {
                "commit failed: the group rebalanced and the partitions may now belong to another member"
            } else {
                "commit failed"
            };
            return Err(with_group(
                ClientError::kafka(code, Some(why.into())),
                &who.group,
            ));
        }
    }

    /// The committed offsets of `partitions` in this group.
    pub async fn committed(&mut self, partitions: &[TopicPartition]) -> Result<FetchedOffsets> {
        let mut attempts = 0;
        loop {
            let (conn, who) = self.coordinator().await?;
            let version = conn.negotiated::<OffsetFetchRequest>()?;
            let req = offset_fetch_request(version, &who.group, Some(partitions))?;
            let result = conn
                .send_at(
                    &req,
                    version,
                    self.client.config().connection.request_timeout,
                )
                .await
                .and_then(|resp| offset_fetch_results(resp, version));
            match result {
                Ok(r) => return Ok(r),
                Err(e)
                    if (e.code().is_some_and(is_coordinator_error)
                        || matches!(e, ClientError::Io(_)))
                        && attempts < self.client.config().retries =>
                {
                    attempts += 1;
                    self.shared.lock().coordinator = None;
                    tokio::time::sleep(self.client.config().retry_backoff).await;
                }
                Err(e) => return Err(with_group(e, &who.group)),
            }
        }
    }

    /// Commits (when auto-commit is on), leaves the group (dynamic members only; static
    /// members keep their slot until the session times out) and stops heartbeating.
    pub async fn close(mut self) -> Result<()> {
        let mut result = Ok(());
        if self.config.enable_auto_commit && self.shared.lock().stable {
            result = self.commit().await;
        }
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
        let (coordinator, who) = {
            let st = self.shared.lock();
            (st.coordinator.clone(), st.identity.clone())
        };
        if let Some((_, conn)) = coordinator {
            if !who.member_id.is_empty() && who.instance_id.is_none() {
                let wait = self.client.config().connection.request_timeout;
                match leave_group(&conn, &who, wait).await {
                    Ok(0) => {}
                    Ok(code) => tracing::debug!(code, "LeaveGroup refused"),
                    Err(e) => tracing::debug!(error = %e, "LeaveGroup failed"),
                }
            }
        }
        result
    }

    fn current_offsets(&self) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        self.fetcher
            .positions()
            .into_iter()
            .filter(|(tp, _)| self.assigned.contains(tp))
            .map(|(tp, offset)| (tp, OffsetAndMetadata::new(offset)))
            .collect()
    }

    async fn maybe_auto_commit(&mut self) {
        if !self.config.enable_auto_commit
            || self.last_commit.elapsed() < self.config.auto_commit_interval
        {
            return;
        }
        self.last_commit = Instant::now();
        if let Err(e) = self.commit().await {
            tracing::warn!(error = %e, "auto-commit failed");
        }
    }

    /// The coordinator connection, discovering the coordinator when unknown.
    async fn coordinator(&mut self) -> Result<(Arc<Connection>, Identity)> {
        {
            let st = self.shared.lock();
            if let Some((_, conn)) = &st.coordinator {
                if !conn.is_dead() {
                    return Ok((conn.clone(), st.identity.clone()));
                }
            }
        }
        let group = self.config.group_id.clone();
        let info = find(&self.client, &group).await?;
        let conn =
            Connection::connect(&info.addr(), self.client.config().connection.clone()).await?;
        tracing::debug!(group, coordinator = info.node_id, "coordinator found");
        let mut st = self.shared.lock();
        st.coordinator = Some((info, conn.clone()));
        Ok((conn, st.identity.clone()))
    }

    /// Drops partitions: commits their positions first unless they were lost.
    async fn revoke(&mut self, partitions: &[TopicPartition], lost: bool) {
        if partitions.is_empty() {
            return;
        }
        if !lost && self.config.enable_auto_commit {
            let offsets: Vec<_> = self
                .current_offsets()
                .into_iter()
                .filter(|(tp, _)| partitions.contains(tp))
                .collect();
            if let Err(e) = self.commit_offsets(offsets).await {
                tracing::warn!(error = %e, "commit before revoking partitions failed");
            }
        }
        tracing::debug!(?partitions, lost, "partitions revoked");
        self.fetcher.remove(partitions);
        for tp in partitions {
            self.assigned.remove(tp);
        }
    }

    /// Runs rebalance rounds until the member is in a stable generation with no re-join
    /// pending.
    async fn ensure_active(&mut self) -> Result<()> {
        if let Some(fatal) = self.shared.lock().fatal.take() {
            return Err(with_group(
                ClientError::kafka(fatal.code, Some(fatal.message)),
                &self.config.group_id,
            ));
        }
        let mut failures = 0u32;
        loop {
            let lost = std::mem::take(&mut self.shared.lock().partitions_lost);
            if lost {
                let all: Vec<_> = self.assigned.iter().cloned().collect();
                self.revoke(&all, true).await;
            }
            if self.topics.is_empty() || !self.shared.lock().rejoin_needed {
                return Ok(());
            }
            match self.rebalance().await {
                Ok(()) => failures = 0,
                Err(e) => {
                    let code = e.code();
                    let routine = matches!(
                        code,
                        Some(ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID | REBALANCE_IN_PROGRESS)
                    );
                    let handled = code.is_some_and(|c| self.shared.on_group_error(c));
                    let retriable = handled || e.is_retriable();
                    if !routine {
                        failures += 1;
                    }
                    if !retriable || failures > MAX_REBALANCE_FAILURES {
                        return Err(with_group(e, &self.config.group_id));
                    }
                    tracing::debug!(error = %e, "rebalance attempt failed; retrying");
                    if matches!(e, ClientError::Io(_) | ClientError::Timeout(..)) {
                        self.shared.lock().coordinator = None;
                    }
                    if !routine {
                        tokio::time::sleep(self.client.config().retry_backoff).await;
                    }
                }
            }
        }
    }

    /// One JoinGroup + SyncGroup round and the resulting partition changes.
    async fn rebalance(&mut self) -> Result<()> {
        if !self.cooperative {
            let all: Vec<_> = self.assigned.iter().cloned().collect();
            // Eager: commit and give up everything before joining (the commit still uses the
            // old generation, which the coordinator accepts while preparing the rebalance).
            self.revoke(&all, false).await;
        }
        self.shared.lock().stable = false;
        let (conn, mut who) = self.coordinator().await?;
        let protocols = self.protocols()?;
        let timeouts = Timeouts {
            session: self.config.session_timeout,
            rebalance: self.config.max_poll_interval,
        };
        let request_timeout = self.client.config().connection.request_timeout;
        let join = loop {
            let resp = join_group(&conn, &who, timeouts, &protocols, request_timeout).await?;
            if resp.error_code == MEMBER_ID_REQUIRED && who.member_id.is_empty() {
                who.member_id = resp.member_id.to_string();
                self.shared.lock().identity.member_id = who.member_id.clone();
                continue;
            }
            ClientError::check(resp.error_code, None)?;
            break resp;
        };
        who.member_id = join.member_id.to_string();
        let generation = join.generation_id;
        let protocol = join
            .protocol_name
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_default();
        {
            let mut st = self.shared.lock();
            st.identity.member_id = who.member_id.clone();
            st.generation = generation;
        }
        let assignments = if join.leader == join.member_id {
            let assignor = self
                .assignors
                .iter()
                .find(|a| a.name() == protocol)
                .ok_or_else(|| {
                    ClientError::kafka(
                        23,
                        Some(format!(
                            "the coordinator chose unknown assignor '{protocol}'"
                        )),
                    )
                })?;
            let members = decode_members(&join.members);
            leader_assign(&self.client, assignor.as_ref(), &members).await?
        } else {
            Vec::new()
        };
        let sync = sync_group(
            &conn,
            &who,
            generation,
            &protocol,
            assignments,
            request_timeout,
        )
        .await?;
        ClientError::check(sync.error_code, None)?;
        let assignment = decode_assignment(&sync.assignment)?;
        self.protocol = Some(protocol);
        self.apply_assignment(assignment.partitions, generation)
            .await
    }

    /// Revokes what we lost, starts what we gained, and marks the generation stable.
    async fn apply_assignment(
        &mut self,
        partitions: Vec<TopicPartition>,
        generation: i32,
    ) -> Result<()> {
        let new: BTreeSet<TopicPartition> = partitions.into_iter().collect();
        let revoked: Vec<_> = self.assigned.difference(&new).cloned().collect();
        let added: Vec<_> = new.difference(&self.assigned).cloned().collect();
        {
            let mut st = self.shared.lock();
            st.stable = true;
            // Cooperative: revoked partitions must be released in a second round.
            st.rejoin_needed = self.cooperative && !revoked.is_empty();
        }
        self.revoke(&revoked, false).await;
        if !added.is_empty() {
            let starts = self.start_positions(&added).await?;
            self.fetcher.add(starts);
        }
        self.assigned = new;
        self.previous = (self.assigned.iter().cloned().collect(), generation);
        tracing::debug!(generation, assigned = ?self.assigned, "joined group");
        if self.heartbeat.is_none() {
            let timing = HeartbeatTiming {
                interval: self.config.heartbeat_interval,
                max_poll_interval: self.config.max_poll_interval,
                request_timeout: self.client.config().connection.request_timeout,
            };
            self.heartbeat = Some(spawn(self.shared.clone(), timing));
        }
        Ok(())
    }

    /// Committed offsets of newly assigned partitions, `auto.offset.reset` for the rest.
    async fn start_positions(
        &mut self,
        added: &[TopicPartition],
    ) -> Result<Vec<(String, i32, StartPosition)>> {
        let committed = self.committed(added).await?;
        let reset = match self.config.fetch.auto_offset_reset {
            AutoOffsetReset::Earliest => Some(StartPosition::Earliest),
            AutoOffsetReset::Latest => Some(StartPosition::Latest),
            AutoOffsetReset::None => None,
        };
        let mut out = Vec::new();
        for tp in added {
            let found = committed
                .iter()
                .find(|(c, _)| c == tp)
                .and_then(|(_, r)| r.as_ref().ok().cloned().flatten());
            let start = match (found, reset) {
                (Some(om), _) => StartPosition::Offset(om.offset),
                (None, Some(reset)) => reset,
                (None, None) => {
                    return Err(ClientError::kafka(
                        1,
                        Some(format!(
                            "no committed offset for {tp} and auto.offset.reset=none"
                        )),
                    ))
                }
            };
            out.push((tp.topic.clone(), tp.partition, start));
        }
        Ok(out)
    }

    /// `(assignor name, subscription bytes)` in preference order.
    fn protocols(&self) -> Result<Vec<(String, Bytes)>> {
        let (previous, generation) = &self.previous;
        self.assignors
            .iter()
            .map(|a| {
                let sub = Subscription {
                    topics: self.topics.clone(),
                    user_data: a.user_data(previous, *generation),
                    // Eager members own nothing while joining (they revoked everything).
                    owned_partitions: if self.cooperative {
                        self.assigned.iter().cloned().collect()
                    } else {
                        Vec::new()
                    },
                    generation_id: *generation,
                    rack_id: self.config.rack_id.clone(),
                };
                Ok((
                    a.name().to_string(),
                    encode_subscription(&sub, SUBSCRIPTION_VERSION)?,
                ))
            })
            .collect()
    }
}
