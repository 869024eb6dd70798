//! Who may fetch as a follower (Kafka's `Partition.fetchRecords` -> `followerReplicaOrThrow`
//! and KIP-903's broker epoch in Fetch v15's `ReplicaState`).
//!
//! A follower fetch reads up to the leader's log end (above the HW) and its position moves the
//! HW and the ISR. So the leader accepts it only from a broker that is a replica of the
//! partition (not the leader itself), registered, with its *current* broker epoch. Kafka
//! accepts a missing epoch (-1, Fetch < v15) for compatibility; Runnel's brokers always send
//! theirs, so a fetch without one cannot be told from a client posing as a follower and is
//! refused like a non-replica. Both refusals are 6 NOT_LEADER_OR_FOLLOWER, Kafka's answer.

use crate::codes;

/// A replica id and broker epoch as carried by a Fetch request (`-1` epoch: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerIdentity {
    pub replica_id: i32,
    pub broker_epoch: i64,
}

/// Checks a follower fetch: `replicas` is the partition's assignment, `leader` this broker,
/// `registered_epoch` the fetching broker's registration epoch in the leader's image (`None`
/// if it is not registered). `Err` is the Kafka error code for the partition.
pub fn check_follower_fetch(
    who: FollowerIdentity,
    leader: i32,
    replicas: &[i32],
    registered_epoch: Option<i64>,
) -> Result<(), i16> {
    if who.replica_id == leader || !replicas.contains(&who.replica_id) {
        return Err(codes::NOT_LEADER_OR_FOLLOWER);
    }
    match registered_epoch {
        Some(epoch) if who.broker_epoch >= 0 && who.broker_epoch == epoch => Ok(()),
        _ => Err(codes::NOT_LEADER_OR_FOLLOWER),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(replica_id: i32, broker_epoch: i64) -> FollowerIdentity {
        FollowerIdentity {
            replica_id,
            broker_epoch,
        }
    }

    #[test]
    fn a_replica_with_its_current_epoch_is_accepted() {
        assert_eq!(
            check_follower_fetch(who(2, 7), 1, &[1, 2, 3], Some(7)),
            Ok(())
        );
    }

    #[test]
    fn non_replicas_and_the_leader_itself_are_refused() {
        let refused = Err(codes::NOT_LEADER_OR_FOLLOWER);
        assert_eq!(
            check_follower_fetch(who(4, 7), 1, &[1, 2, 3], Some(7)),
            refused
        );
        assert_eq!(
            check_follower_fetch(who(1, 7), 1, &[1, 2, 3], Some(7)),
            refused
        );
    }

    #[test]
    fn a_missing_stale_or_guessed_epoch_is_refused() {
        let refused = Err(codes::NOT_LEADER_OR_FOLLOWER);
        assert_eq!(
            check_follower_fetch(who(2, -1), 1, &[1, 2], Some(7)),
            refused
        );
        assert_eq!(
            check_follower_fetch(who(2, 6), 1, &[1, 2], Some(7)),
            refused
        );
        assert_eq!(
            check_follower_fetch(who(2, i64::MAX), 1, &[1, 2], Some(7)),
            refused
        );
        assert_eq!(check_follower_fetch(who(2, 7), 1, &[1, 2], None), refused);
    }
}
