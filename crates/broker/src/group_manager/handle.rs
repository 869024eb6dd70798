//! The typed entry points of the group task (one method per group API) and the answers a
//! request gets when the task cannot serve it.

use bytes::Bytes;
use runnel_group::{
    ConsumerGroupDescription, ConsumerHeartbeat, ConsumerHeartbeatResponse, GroupDescription,
    HeartbeatRequest, JoinRequest, JoinResponse, OffsetCommitRequest, SyncRequest, SyncResponse,
    TxnOffsetCommitRequest,
};
use tokio::sync::{mpsc, oneshot};

use super::*;

/// Cloneable access to the group task.
#[derive(Clone)]
pub struct GroupHandle {
    pub(super) tx: mpsc::Sender<Command>,
}

impl GroupHandle {
    async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(make(reply)).await.ok()?;
        rx.await.ok()
    }

    pub async fn join(&self, req: JoinRequest) -> JoinResponse {
        let member_id = req.member_id.clone();
        self.call(|r| Command::Join(req, r))
            .await
            .unwrap_or_else(|| join_error(COORDINATOR_NOT_AVAILABLE, member_id))
    }

    pub async fn sync(&self, req: SyncRequest) -> SyncResponse {
        self.call(|r| Command::Sync(req, r))
            .await
            .unwrap_or_else(|| sync_error(COORDINATOR_NOT_AVAILABLE))
    }

    pub async fn heartbeat(&self, req: HeartbeatRequest) -> i16 {
        self.call(|r| Command::Heartbeat(req, r))
            .await
            .unwrap_or(COORDINATOR_NOT_AVAILABLE)
    }

    pub async fn leave(
        &self,
        group_id: String,
        members: Vec<(String, Option<String>)>,
    ) -> (i16, Vec<i16>) {
        let n = members.len();
        self.call(|r| Command::Leave(group_id, members, r))
            .await
            .unwrap_or((
                COORDINATOR_NOT_AVAILABLE,
                vec![COORDINATOR_NOT_AVAILABLE; n],
            ))
    }

    pub async fn commit(&self, req: OffsetCommitRequest) -> (i16, PartitionCodes) {
        self.call(|r| Command::Commit(req, r))
            .await
            .unwrap_or((COORDINATOR_NOT_AVAILABLE, Vec::new()))
    }

    /// OffsetFetch; with `require_stable`, partitions with pending transactional offsets
    /// answer UNSTABLE_OFFSET_COMMIT.
    pub async fn fetch(
        &self,
        group_id: String,
        partitions: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
        member: Option<FetchMember>,
    ) -> FetchResult {
        self.call(|r| Command::Fetch(group_id, partitions, require_stable, member, r))
            .await
            .unwrap_or((COORDINATOR_NOT_AVAILABLE, Vec::new()))
    }

    /// TxnOffsetCommit: a code per requested partition, in order.
    pub async fn txn_commit(&self, req: TxnOffsetCommitRequest) -> PartitionCodes {
        let fallback: PartitionCodes = req
            .offsets
            .iter()
            .map(|o| (o.topic.clone(), o.partition, COORDINATOR_NOT_AVAILABLE))
            .collect();
        self.call(|r| Command::TxnCommit(req, r))
            .await
            .unwrap_or(fallback)
    }

    /// The marker of `producer_id`'s transaction is replicated on `__consumer_offsets`
    /// partition `partition`: its pending offsets there are committed or dropped. Returns
    /// how many offsets became committed.
    pub async fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        commit: bool,
    ) -> usize {
        self.call(|r| Command::TxnCompleted(partition, producer_id, commit, r))
            .await
            .unwrap_or(0)
    }

    pub async fn list(&self, filter: ListFilter) -> Vec<ListedGroup> {
        self.call(|r| Command::List(filter, r))
            .await
            .unwrap_or_default()
    }

    pub async fn describe(&self, group_ids: Vec<String>) -> Vec<GroupDescription> {
        let ids = group_ids.clone();
        self.call(|r| Command::Describe(group_ids, r))
            .await
            .unwrap_or_else(|| {
                ids.into_iter()
                    .map(|g| describe_error(g, COORDINATOR_NOT_AVAILABLE))
                    .collect()
            })
    }

    pub async fn delete(&self, group_ids: Vec<String>) -> Vec<(String, i16)> {
        let ids = group_ids.clone();
        self.call(|r| Command::Delete(group_ids, r))
            .await
            .unwrap_or_else(|| {
                ids.into_iter()
                    .map(|g| (g, COORDINATOR_NOT_AVAILABLE))
                    .collect()
            })
    }

    /// KIP-848 ConsumerGroupHeartbeat.
    pub async fn consumer_heartbeat(
        &self,
        req: ConsumerHeartbeat,
        client_id: String,
        client_host: String,
    ) -> ConsumerHeartbeatResponse {
        self.call(|r| Command::ConsumerHeartbeat(req, client_id, client_host, r))
            .await
            .unwrap_or(ConsumerHeartbeatResponse {
                error_code: COORDINATOR_NOT_AVAILABLE,
                error_message: None,
                member_id: None,
                member_epoch: 0,
                heartbeat_interval_ms: 5000,
                assignment: None,
            })
    }

    pub async fn consumer_describe(&self, group_ids: Vec<String>) -> Vec<ConsumerGroupDescription> {
        let ids = group_ids.clone();
        self.call(|r| Command::ConsumerDescribe(group_ids, r))
            .await
            .unwrap_or_else(|| {
                ids.into_iter()
                    .map(|g| consumer_describe_error(g, COORDINATOR_NOT_AVAILABLE))
                    .collect()
            })
    }

    pub async fn delete_offsets(
        &self,
        group_id: String,
        partitions: Vec<(String, Vec<i32>)>,
    ) -> (i16, PartitionCodes) {
        self.call(|r| Command::DeleteOffsets(group_id, partitions, r))
            .await
            .unwrap_or((COORDINATOR_NOT_AVAILABLE, Vec::new()))
    }
}

pub fn join_error(code: i16, member_id: String) -> JoinResponse {
    JoinResponse {
        error_code: code,
        generation_id: -1,
        protocol_type: None,
        protocol_name: None,
        leader: String::new(),
        member_id,
        members: Vec::new(),
        skip_assignment: false,
    }
}

pub fn sync_error(code: i16) -> SyncResponse {
    SyncResponse {
        error_code: code,
        protocol_type: None,
        protocol_name: None,
        assignment: Bytes::new(),
    }
}

pub fn describe_error(group_id: String, code: i16) -> GroupDescription {
    GroupDescription {
        error_code: code,
        group_id,
        state: String::new(),
        protocol_type: String::new(),
        protocol: String::new(),
        members: Vec::new(),
    }
}

pub fn consumer_describe_error(group_id: String, code: i16) -> ConsumerGroupDescription {
    ConsumerGroupDescription {
        group_id,
        error_code: code,
        error_message: None,
        state: String::new(),
        group_epoch: -1,
        assignment_epoch: -1,
        assignor_name: String::new(),
        members: Vec::new(),
    }
}
