//! The controller's partition and replica state machines (spec D.1, D.2; Kafka 2.8).
//!
//! A transition is legal only from one of the target's valid previous states. Illegal
//! transitions are reported as [`IllegalTransition`] values and never applied, so a bug or a
//! stale event cannot corrupt the controller's view; the controller logs them as events.

use std::fmt;

/// Partition states with Kafka's numeric codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PartitionState {
    New = 0,
    Online = 1,
    Offline = 2,
    NonExistent = 3,
}

/// Replica states with Kafka's numeric codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplicaState {
    New = 1,
    Online = 2,
    Offline = 3,
    DeletionStarted = 4,
    DeletionSuccessful = 5,
    DeletionIneligible = 6,
    NonExistent = 7,
}

impl PartitionState {
    pub const ALL: [PartitionState; 4] = [
        PartitionState::New,
        PartitionState::Online,
        PartitionState::Offline,
        PartitionState::NonExistent,
    ];

    /// Kafka's numeric code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Kafka's name (`NewPartition`, ...), as in its state-change log.
    pub fn name(self) -> &'static str {
        match self {
            PartitionState::New => "NewPartition",
            PartitionState::Online => "OnlinePartition",
            PartitionState::Offline => "OfflinePartition",
            PartitionState::NonExistent => "NonExistentPartition",
        }
    }

    /// The states this one may be entered from (D.1).
    pub fn valid_previous(self) -> &'static [PartitionState] {
        use PartitionState::*;
        match self {
            New => &[NonExistent],
            Online => &[New, Online, Offline],
            Offline => &[New, Online, Offline],
            NonExistent => &[Offline],
        }
    }

    /// Whether `from -> self` is legal.
    pub fn can_transition_from(self, from: Self) -> bool {
        self.valid_previous().contains(&from)
    }
}

impl ReplicaState {
    pub const ALL: [ReplicaState; 7] = [
        ReplicaState::New,
        ReplicaState::Online,
        ReplicaState::Offline,
        ReplicaState::DeletionStarted,
        ReplicaState::DeletionSuccessful,
        ReplicaState::DeletionIneligible,
        ReplicaState::NonExistent,
    ];

    /// Kafka's numeric code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Kafka's name (`NewReplica`, `ReplicaDeletionStarted`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReplicaState::New => "NewReplica",
            ReplicaState::Online => "OnlineReplica",
            ReplicaState::Offline => "OfflineReplica",
            ReplicaState::DeletionStarted => "ReplicaDeletionStarted",
            ReplicaState::DeletionSuccessful => "ReplicaDeletionSuccessful",
            ReplicaState::DeletionIneligible => "ReplicaDeletionIneligible",
            ReplicaState::NonExistent => "NonExistentReplica",
        }
    }

    /// The states this one may be entered from (D.2, Kafka 2.8).
    pub fn valid_previous(self) -> &'static [ReplicaState] {
        use ReplicaState::*;
        match self {
            New => &[NonExistent],
            Online => &[New, Online, Offline, DeletionIneligible],
            Offline => &[New, Online, Offline, DeletionIneligible],
            DeletionStarted => &[Offline],
            DeletionSuccessful => &[DeletionStarted],
            DeletionIneligible => &[Offline, DeletionStarted],
            NonExistent => &[DeletionSuccessful],
        }
    }

    /// Whether `from -> self` is legal.
    pub fn can_transition_from(self, from: Self) -> bool {
        self.valid_previous().contains(&from)
    }
}

impl fmt::Display for PartitionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for ReplicaState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A rejected transition: "Illegal state transition from X to Y for partition t-p" (or
/// "... for replica r of partition t-p").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IllegalTransition {
    pub topic: String,
    pub partition: i32,
    pub replica: Option<i32>,
    pub from: String,
    pub to: String,
}

impl fmt::Display for IllegalTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Illegal state transition from {} to {} for ",
            self.from, self.to
        )?;
        if let Some(r) = self.replica {
            write!(f, "replica {r} of ")?;
        }
        write!(f, "partition {}-{}", self.topic, self.partition)
    }
}

impl std::error::Error for IllegalTransition {}

/// Checks `from -> to` for a partition.
pub fn check_partition_transition(
    topic: &str,
    partition: i32,
    from: PartitionState,
    to: PartitionState,
) -> Result<(), IllegalTransition> {
    if to.can_transition_from(from) {
        Ok(())
    } else {
        Err(IllegalTransition {
            topic: topic.to_string(),
            partition,
            replica: None,
            from: from.name().into(),
            to: to.name().into(),
        })
    }
}

/// Checks `from -> to` for replica `replica` of a partition.
pub fn check_replica_transition(
    topic: &str,
    partition: i32,
    replica: i32,
    from: ReplicaState,
    to: ReplicaState,
) -> Result<(), IllegalTransition> {
    if to.can_transition_from(from) {
        Ok(())
    } else {
        Err(IllegalTransition {
            topic: topic.to_string(),
            partition,
            replica: Some(replica),
            from: from.name().into(),
            to: to.name().into(),
        })
    }
}

/// One entry of the controller's state-change log (Kafka's `state-change.log`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StateChangeEvent {
    pub time_ms: i64,
    pub controller_epoch: i32,
    pub topic: String,
    pub partition: i32,
    pub replica: Option<i32>,
    pub from: String,
    pub to: String,
    pub detail: String,
}
