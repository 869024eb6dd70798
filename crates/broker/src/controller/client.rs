//! How request handlers reach the active controller, wherever it is.
//!
//! On a single node it is the local shell. In a cluster the local shell (on controller nodes)
//! is tried first and every voter after it: whichever is the quorum leader answers, the others
//! say NOT_CONTROLLER, and the client keeps going round (bounded by a deadline) while an
//! election settles. Admin requests thereby reach the controller from any broker (KRaft's
//! forwarding) and an in-flight request either completes or gets a retriable error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use runnel_metadata::controller::ControllerOp;
use runnel_metadata::{codes, ApiError};
use runnel_raft::{RpcRequest, RpcResponse, TcpTransport, Transport};

use crate::controller::rpc::{OpAnswer, OpFrame, QUORUM_STATUS};
use crate::controller::shell::ControllerHandle;

/// How long an admin request may wait for an active controller (Kafka's default request timeout).
const ADMIN_DEADLINE: Duration = Duration::from_secs(30);
/// One remote call's bound: a partitioned peer must not hold the request for long.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How often a call in flight checks whether the quorum has named another leader.
const LEADER_POLL: Duration = Duration::from_millis(50);

#[derive(Clone)]
struct Remote {
    voters: BTreeMap<i32, String>,
    transport: Arc<TcpTransport>,
}

#[derive(Clone)]
pub struct ControllerClient {
    node_id: i32,
    local: Option<ControllerHandle>,
    quorum: Option<Arc<runnel_raft::MetadataQuorum>>,
    remote: Option<Remote>,
}

/// A remote answer as the operation's response type.
fn decode<T: serde::de::DeserializeOwned>(
    op: &str,
    value: serde_json::Value,
) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| ApiError {
        code: codes::UNKNOWN_SERVER_ERROR,
        message: format!("unexpected controller answer to {op}: {e}"),
    })
}

/// The deadline passed with no active controller answering.
fn timed_out(deadline: Duration, last: Option<ApiError>) -> ApiError {
    let why = last.map_or_else(|| "no controller was asked".to_string(), |e| e.message);
    ApiError {
        code: codes::REQUEST_TIMED_OUT,
        message: format!(
            "no active controller answered within {} ms ({why})",
            deadline.as_millis()
        ),
    }
}

/// The remote voters to ask in one round: the one the quorum names as leader first (a dead or
/// stopped former leader then costs nothing once the election is known), then the others by
/// id; this node itself only when it has no local shell (asked before the round).
fn remote_order(
    voters: &BTreeMap<i32, String>,
    node_id: i32,
    has_local: bool,
    leader: Option<i32>,
) -> Vec<i32> {
    let askable = |id: i32| voters.contains_key(&id) && !(id == node_id && has_local);
    let first = leader.filter(|&id| askable(id));
    first
        .into_iter()
        .chain(
            voters
                .keys()
                .copied()
                .filter(|&id| askable(id) && Some(id) != first),
        )
        .collect()
}

/// What a call does after `refused` answered NOT_CONTROLLER itself (it was reached).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// Ask the other voters.
    Remote,
    /// Pause and start the round again.
    Pause,
}

/// Only the quorum leader can be the active controller, so the named leader refusing means
/// its controller is not active yet (just elected): it is asked again after the pause rather
/// than the other voters, one of which may be the frozen former leader, holding the call for
/// its whole bound (caught: a CreateTopics answered 13.7 s after its leader froze, 3.7 s for
/// the election plus the 10 s bound). Any other refusal moves on to the next voter (the named
/// leader may be stale knowledge).
fn after_refusal(refused: i32, leader: Option<i32>) -> Round {
    if leader == Some(refused) {
        Round::Pause
    } else {
        Round::Remote
    }
}

impl ControllerClient {
    /// Single node: the local shell is always the active controller.
    pub fn local(handle: ControllerHandle) -> Self {
        ControllerClient {
            node_id: -1,
            local: Some(handle),
            quorum: None,
            remote: None,
        }
    }

    /// Cluster member: `local` is this node's shell when it is a controller.
    pub fn cluster(
        node_id: i32,
        local: Option<ControllerHandle>,
        quorum: Arc<runnel_raft::MetadataQuorum>,
        voters: BTreeMap<i32, String>,
        cluster_id: &str,
    ) -> Self {
        // The controller listener's security (TLS / SASL with this node's own credentials).
        let transport = TcpTransport::with_security(cluster_id, quorum.security());
        ControllerClient {
            node_id,
            local,
            quorum: Some(quorum),
            remote: Some(Remote {
                voters,
                transport: Arc::new(transport),
            }),
        }
    }

    /// Runs `op` at the active controller within Kafka's default request timeout.
    pub async fn run<O: ControllerOp>(&self, op: O) -> Result<O::Response, ApiError> {
        self.run_within(op, ADMIN_DEADLINE).await
    }

    /// Runs `op` at whichever node is the active controller, retrying until `deadline`: this
    /// node's shell first (locally, no encoding), then the voters over the quorum listener.
    pub async fn run_within<O: ControllerOp>(
        &self,
        op: O,
        deadline: Duration,
    ) -> Result<O::Response, ApiError> {
        let frame = OpFrame::new(&op)?;
        let local = |handle: ControllerHandle| {
            let op = op.clone();
            async move { handle.run(op).await }
        };
        self.call(&frame, local, deadline).await
    }

    /// Sends `frame` to whichever node is the active controller, retrying until `deadline`:
    /// an election in progress (NOT_CONTROLLER everywhere) or a dead or frozen leader
    /// (unreachable, or silent) is waited out, each round asking first the node the quorum
    /// names as leader, and starting over as soon as it names another. When the deadline
    /// passes without an answer, REQUEST_TIMED_OUT, as Kafka's forwarding answers. The local
    /// shell is asked through `local` (no encoding); a remote answer is decoded into `T`.
    async fn call<T, F, Fut>(
        &self,
        frame: &OpFrame,
        local: F,
        deadline: Duration,
    ) -> Result<T, ApiError>
    where
        T: serde::de::DeserializeOwned,
        F: Fn(ControllerHandle) -> Fut,
        Fut: std::future::Future<Output = Result<T, ApiError>>,
    {
        let until = Instant::now() + deadline;
        let mut last = None;
        loop {
            let leader = self.leader();
            let mut round = Round::Remote;
            if let Some(handle) = &self.local {
                match local(handle.clone()).await {
                    Err(e) if e.code == codes::NOT_CONTROLLER => {
                        round = after_refusal(self.node_id, leader);
                        last = Some(e);
                    }
                    answer => return answer,
                }
            }
            let mut leader_moved = false;
            if let (Some(remote), Round::Remote) = (&self.remote, round) {
                for id in remote_order(&remote.voters, self.node_id, self.local.is_some(), leader) {
                    let Some(address) = remote.voters.get(&id) else {
                        continue;
                    };
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    let bound = CALL_TIMEOUT.min(left);
                    // A frozen (SIGSTOPped) or partitioned node holds a call until its bound;
                    // once the quorum names another leader, that one is asked at once instead.
                    let answer = tokio::select! {
                        answer = self.call_remote(remote, id, address, frame, bound) => Some(answer),
                        () = self.leader_moves_from(leader) => None,
                    };
                    let Some(answer) = answer else {
                        leader_moved = true;
                        break;
                    };
                    match answer {
                        Ok(Err(e)) if e.code == codes::NOT_CONTROLLER => {
                            last = Some(e);
                            if after_refusal(id, leader) == Round::Pause {
                                break;
                            }
                        }
                        Ok(answer) => return decode(&frame.op, answer?),
                        Err(e) => last = Some(e),
                    }
                }
            }
            if leader_moved {
                continue;
            }
            if Instant::now() + RETRY_PAUSE >= until {
                return Err(timed_out(deadline, last));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// The quorum leader as this node knows it now.
    fn leader(&self) -> Option<i32> {
        self.quorum.as_ref().and_then(|q| q.leader())
    }

    /// Returns once the quorum names another leader than `from` (never on a single node).
    async fn leader_moves_from(&self, from: Option<i32>) {
        if self.quorum.is_none() {
            return std::future::pending().await;
        }
        while self.leader() == from {
            tokio::time::sleep(LEADER_POLL).await;
        }
    }

    async fn call_remote(
        &self,
        remote: &Remote,
        id: i32,
        address: &str,
        frame: &OpFrame,
        bound: Duration,
    ) -> Result<OpAnswer, ApiError> {
        let unreachable = |why: String| ApiError {
            code: codes::NOT_CONTROLLER,
            message: format!("controller {id} at {address} unreachable: {why}"),
        };
        let value = serde_json::to_value(frame).map_err(|e| unreachable(e.to_string()))?;
        let response = remote
            .transport
            .call(
                u64::try_from(id).unwrap_or(0),
                address,
                RpcRequest::App(value),
                bound,
            )
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        match response {
            RpcResponse::App(value) => {
                serde_json::from_value(value).map_err(|e| unreachable(e.to_string()))
            }
            RpcResponse::Error(e) => Err(unreachable(e)),
            _ => Err(unreachable("unexpected response kind".into())),
        }
    }

    /// The quorum's replication state as the leader sees it (None on a single node).
    pub async fn quorum_status(&self) -> Result<Option<runnel_raft::QuorumStatus>, ApiError> {
        if self.remote.is_none() {
            return Ok(None);
        }
        let frame = OpFrame {
            op: QUORUM_STATUS.to_string(),
            request: serde_json::Value::Null,
        };
        let quorum = self.quorum.clone();
        let local = |_: ControllerHandle| {
            let quorum = quorum.clone();
            async move {
                match quorum {
                    Some(q) if q.is_leader() => Ok(q.status()),
                    _ => Err(ApiError {
                        code: codes::NOT_CONTROLLER,
                        message: "this node is not the quorum leader".into(),
                    }),
                }
            }
        };
        self.call(&frame, local, ADMIN_DEADLINE).await.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn voters(ids: &[i32]) -> BTreeMap<i32, String> {
        ids.iter().map(|&i| (i, format!("127.0.0.1:{i}"))).collect()
    }

    #[test]
    fn named_leader_first_own_shell_never() {
        let v = voters(&[1, 2, 3]);
        assert_eq!(remote_order(&v, 1, true, Some(3)), [3, 2]);
        assert_eq!(remote_order(&v, 1, true, None), [2, 3]);
        assert_eq!(remote_order(&v, 1, true, Some(1)), [2, 3]);
        // A broker-only node asks every voter, itself included if listed.
        assert_eq!(remote_order(&v, 4, false, Some(2)), [2, 1, 3]);
        // A leader outside the voters (stale knowledge) is not asked.
        assert_eq!(remote_order(&v, 1, true, Some(9)), [2, 3]);
    }

    #[test]
    fn a_refusal_by_the_named_leader_pauses_the_round() {
        // This node's own shell is the named leader but not active yet.
        assert_eq!(after_refusal(1, Some(1)), Round::Pause);
        // The named remote leader refused.
        assert_eq!(after_refusal(3, Some(3)), Round::Pause);
        // Anyone else refusing: go on to the others.
        assert_eq!(after_refusal(1, Some(3)), Round::Remote);
        assert_eq!(after_refusal(2, None), Round::Remote);
    }

    #[test]
    fn the_deadline_answer_is_request_timed_out() {
        let e = timed_out(
            Duration::from_millis(1500),
            Some(ApiError {
                code: codes::NOT_CONTROLLER,
                message: "controller 2 at x unreachable: refused".into(),
            }),
        );
        assert_eq!(e.code, codes::REQUEST_TIMED_OUT);
        assert!(
            e.message.contains("1500 ms") && e.message.contains("refused"),
            "{}",
            e.message
        );
    }

    proptest! {
        #[test]
        fn every_other_voter_once(
            ids in proptest::collection::btree_set(0i32..10, 1..6),
            node_id in 0i32..10,
            has_local: bool,
            leader in proptest::option::of(0i32..12),
        ) {
            let v = voters(&ids.iter().copied().collect::<Vec<_>>());
            let order = remote_order(&v, node_id, has_local, leader);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            let expected: Vec<i32> = ids
                .iter()
                .copied()
                .filter(|&id| !(id == node_id && has_local))
                .collect();
            prop_assert_eq!(sorted, expected);
            if let Some(l) = leader.filter(|l| ids.contains(l) && !(*l == node_id && has_local)) {
                prop_assert_eq!(order.first().copied(), Some(l));
            }
        }
    }
}
