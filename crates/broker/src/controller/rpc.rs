//! Controller operations between nodes: what a broker asks the active controller
//! (registration, heartbeats, forwarded admin requests), carried as JSON in the quorum
//! listener's `App` frames. A frame names the operation ([`ControllerOp::NAME`]) and carries
//! its request; the answer is its response or the error. [`serve`] holds the one registration
//! line per operation.

use std::sync::Arc;

use runnel_metadata::controller::{
    AllocateProducerIds, AlterConfigs, AlterPartition, AlterReassignments, BrokerHeartbeat,
    ControlledShutdown, ControllerOp, CreateAcls, CreatePartitions, CreateTopics, DeleteAcls,
    DeleteTopics, ElectLeaders, Events, RegisterBroker, ShutdownComplete,
};
use runnel_metadata::controller::{
    AlterUserScramCredentials, BootstrapFeatures, UpdateFeatureLevels,
};
use runnel_metadata::quota::AlterClientQuotas;
use runnel_metadata::{codes, ApiError};
use serde::{Deserialize, Serialize};

use crate::controller::shell::ControllerHandle;

/// DescribeQuorum's question, which the quorum leader answers (not a controller operation:
/// only the leader knows how far every replica got).
pub const QUORUM_STATUS: &str = "QuorumStatus";

/// One request frame: the operation's name and its request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpFrame {
    pub op: String,
    pub request: serde_json::Value,
}

/// One answer frame: the operation's response, or why there is none.
pub type OpAnswer = Result<serde_json::Value, ApiError>;

impl OpFrame {
    pub fn new<O: ControllerOp>(op: &O) -> Result<Self, ApiError> {
        Ok(OpFrame {
            op: O::NAME.to_string(),
            request: serde_json::to_value(op).map_err(|e| encode_error(O::NAME, e))?,
        })
    }
}

fn encode_error(what: &str, e: serde_json::Error) -> ApiError {
    ApiError {
        code: codes::UNKNOWN_SERVER_ERROR,
        message: format!("could not encode {what}: {e}"),
    }
}

/// Runs a frame against this node's controller shell (which answers NOT_CONTROLLER unless it
/// is the active controller). An unknown operation or an undecodable request is
/// INVALID_REQUEST; the shell range-checks every field before deciding.
pub async fn serve(
    handle: &ControllerHandle,
    quorum: Option<&runnel_raft::MetadataQuorum>,
    frame: OpFrame,
) -> OpAnswer {
    let OpFrame { op, request } = frame;
    match op.as_str() {
        CreateTopics::NAME => run::<CreateTopics>(handle, request).await,
        DeleteTopics::NAME => run::<DeleteTopics>(handle, request).await,
        CreatePartitions::NAME => run::<CreatePartitions>(handle, request).await,
        AlterConfigs::NAME => run::<AlterConfigs>(handle, request).await,
        AlterUserScramCredentials::NAME => run::<AlterUserScramCredentials>(handle, request).await,
        AlterClientQuotas::NAME => run::<AlterClientQuotas>(handle, request).await,
        BootstrapFeatures::NAME => run::<BootstrapFeatures>(handle, request).await,
        UpdateFeatureLevels::NAME => run::<UpdateFeatureLevels>(handle, request).await,
        CreateAcls::NAME => run::<CreateAcls>(handle, request).await,
        DeleteAcls::NAME => run::<DeleteAcls>(handle, request).await,
        RegisterBroker::NAME => run::<RegisterBroker>(handle, request).await,
        BrokerHeartbeat::NAME => run::<BrokerHeartbeat>(handle, request).await,
        AllocateProducerIds::NAME => run::<AllocateProducerIds>(handle, request).await,
        Events::NAME => run::<Events>(handle, request).await,
        ElectLeaders::NAME => run::<ElectLeaders>(handle, request).await,
        AlterPartition::NAME => run::<AlterPartition>(handle, request).await,
        AlterReassignments::NAME => run::<AlterReassignments>(handle, request).await,
        ControlledShutdown::NAME => run::<ControlledShutdown>(handle, request).await,
        ShutdownComplete::NAME => run::<ShutdownComplete>(handle, request).await,
        QUORUM_STATUS => quorum_status(quorum),
        other => Err(ApiError::invalid_request(format!(
            "unknown controller operation {other:?}"
        ))),
    }
}

async fn run<O: ControllerOp>(handle: &ControllerHandle, request: serde_json::Value) -> OpAnswer {
    let op: O = serde_json::from_value(request)
        .map_err(|e| ApiError::invalid_request(format!("undecodable {} request: {e}", O::NAME)))?;
    let response = handle.run(op).await?;
    serde_json::to_value(response).map_err(|e| encode_error(O::NAME, e))
}

fn quorum_status(quorum: Option<&runnel_raft::MetadataQuorum>) -> OpAnswer {
    match quorum {
        Some(q) if q.is_leader() => {
            serde_json::to_value(q.status()).map_err(|e| encode_error(QUORUM_STATUS, e))
        }
        Some(q) => Err(ApiError {
            code: codes::NOT_CONTROLLER,
            message: format!("not the quorum leader (leader: {:?})", q.leader()),
        }),
        None => Err(ApiError {
            code: codes::NOT_CONTROLLER,
            message: "no metadata quorum on this node".into(),
        }),
    }
}

/// The quorum listener's handler for `App` frames.
pub fn app_handler(
    handle: ControllerHandle,
    quorum: std::sync::Weak<runnel_raft::MetadataQuorum>,
) -> runnel_raft::AppHandler {
    Arc::new(move |value: serde_json::Value| {
        let handle = handle.clone();
        let quorum = quorum.upgrade();
        Box::pin(async move {
            let answer: OpAnswer = match serde_json::from_value::<OpFrame>(value) {
                Ok(frame) => serve(&handle, quorum.as_deref(), frame).await,
                Err(e) => Err(ApiError::invalid_request(format!(
                    "undecodable controller request: {e}"
                ))),
            };
            serde_json::to_value(answer).unwrap_or(serde_json::Value::Null)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn register(broker_id: i32, host: &str, port: u16) -> RegisterBroker {
        RegisterBroker {
            broker_id,
            incarnation_id: Uuid::from_u128(1),
            host: host.into(),
            port,
            rack: None,
            endpoints: Vec::new(),
        }
    }

    fn assert_refused(result: Result<(), ApiError>, what: &str) {
        let e = result.expect_err(what);
        assert_eq!(e.code, 42, "{what}");
    }

    /// Caught: the controller port took any field as sent, e.g. a producer-id count of
    /// 2^62 that exhausted the id space for good, negative broker ids and port 0.
    #[test]
    fn every_controller_request_field_is_range_checked() {
        assert!(register(1, "h", 9092).validate().is_ok());
        for bad in [
            register(-1, "h", 9092),
            register(1, "", 9092),
            register(1, &"h".repeat(256), 9092),
            register(1, "h", 0),
        ] {
            assert_refused(bad.validate(), &format!("{bad:?}"));
        }
        for bad in [
            AllocateProducerIds {
                broker_id: 1,
                count: 1 << 62,
            },
            AllocateProducerIds {
                broker_id: -3,
                count: 1000,
            },
        ] {
            assert_refused(bad.validate(), &format!("{bad:?}"));
        }
        assert_refused(
            BrokerHeartbeat {
                broker_id: 1,
                broker_epoch: -5,
                metadata_offset: 0,
                offline_dirs: Vec::new(),
            }
            .validate(),
            "negative broker epoch",
        );
        assert_refused(
            ControlledShutdown { broker_id: -1 }.validate(),
            "negative broker id",
        );
        assert!(AllocateProducerIds {
            broker_id: 1,
            count: 1000
        }
        .validate()
        .is_ok());
    }

    fn frame(op: &str, request: serde_json::Value) -> OpFrame {
        OpFrame {
            op: op.into(),
            request,
        }
    }

    /// Every frame from the quorum listener passes the operation's range checks before it
    /// reaches the controller: a bad field, an undecodable request and an unknown operation
    /// are INVALID_REQUEST, while a valid one reaches the (here absent) controller.
    #[tokio::test]
    async fn a_frame_is_checked_before_it_reaches_the_controller() {
        let handle = ControllerHandle::detached();
        let code = |answer: OpAnswer| answer.map(|_| ()).map_err(|e| e.code);
        let bad = OpFrame::new(&AllocateProducerIds {
            broker_id: 1,
            count: 1 << 62,
        })
        .expect("encodes");
        assert_eq!(code(serve(&handle, None, bad).await), Err(42));
        let undecodable = frame(RegisterBroker::NAME, serde_json::json!({"broker_id": "x"}));
        assert_eq!(code(serve(&handle, None, undecodable).await), Err(42));
        let unknown = frame("DropEverything", serde_json::Value::Null);
        assert_eq!(code(serve(&handle, None, unknown).await), Err(42));
        let good = OpFrame::new(&ControlledShutdown { broker_id: 1 }).expect("encodes");
        assert_eq!(
            code(serve(&handle, None, good).await),
            Err(codes::NOT_CONTROLLER)
        );
    }
}
