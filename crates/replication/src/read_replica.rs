//! Fetch from the closest replica (KIP-392): which replica a consumer's Fetch v11+ is sent to
//! (`preferred_read_replica`), decided by the partition leader on every consumer fetch.
//!
//! `replica.selector.class` names the rule: unset, every consumer reads from the leader; Kafka's
//! `org.apache.kafka.common.replica.RackAwareReplicaSelector` ([`ReplicaSelector::RackAware`])
//! picks the leader when it is in the client's rack, else the most caught-up replica in that
//! rack, else the leader. The candidates are Kafka's `ReplicaManager.findPreferredReadReplica`:
//! the leader, and the followers that are in the ISR, whose broker is live (registered and
//! unfenced) and that hold the fetch offset (`log_start <= fetch_offset <= log_end`). Answering
//! the leader means "no preferred replica" (-1 on the wire). Because the ISR is consulted on each
//! fetch, a follower that falls out of it (`replica.lag.time.max.ms`) stops being preferred.

/// Kafka's class name of the rack-aware selector.
pub const RACK_AWARE_SELECTOR_CLASS: &str =
    "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// The rule `replica.selector.class` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaSelector {
    /// Unset (Kafka's default `null`): always the leader.
    LeaderOnly,
    /// Kafka's `RackAwareReplicaSelector`.
    RackAware,
}

impl ReplicaSelector {
    /// The selector a `replica.selector.class` value names; an unknown class is an error (Kafka
    /// fails to start on a class it cannot load).
    pub fn from_class_name(name: &str) -> Result<ReplicaSelector, String> {
        match name.trim() {
            "" => Ok(ReplicaSelector::LeaderOnly),
            RACK_AWARE_SELECTOR_CLASS => Ok(ReplicaSelector::RackAware),
            other => Err(format!(
                "replica.selector.class: unknown class '{other}' (supported: {RACK_AWARE_SELECTOR_CLASS})"
            )),
        }
    }
}

/// One replica as the leader sees it when choosing (Kafka's `ReplicaView`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaCandidate<'a> {
    pub broker_id: i32,
    /// The rack of its broker (`broker.rack`), if any.
    pub rack: Option<&'a str>,
    /// Its log end offset (for a follower: as of its last fetch; -1 if unknown).
    pub log_end_offset: i64,
    /// Its log start offset (for a follower: as of its last fetch; -1 if unknown).
    pub log_start_offset: i64,
    /// When it was last caught up (the leader: now).
    pub last_caught_up_time_ms: i64,
    /// In the ISR (the leader always is).
    pub in_isr: bool,
    /// Its broker is registered and unfenced (Kafka picks only replicas with an endpoint).
    pub live: bool,
}

/// The preferred read replica of a consumer fetch at `fetch_offset` from a client in
/// `client_rack`: `Some(follower)`, or `None` for the leader (also when nothing but the leader
/// qualifies, or the fetch offset is outside the leader's log: the leader answers that fetch
/// itself, with its error). Ties between equally caught-up followers go to the lowest id (Kafka
/// leaves them to a hash set's order).
pub fn preferred_read_replica(
    selector: ReplicaSelector,
    client_rack: Option<&str>,
    leader: &ReplicaCandidate<'_>,
    followers: &[ReplicaCandidate<'_>],
    fetch_offset: i64,
    now_ms: i64,
) -> Option<i32> {
    if selector == ReplicaSelector::LeaderOnly {
        return None;
    }
    let rack = client_rack.filter(|r| !r.is_empty())?;
    let in_leader_log =
        fetch_offset >= leader.log_start_offset && fetch_offset <= leader.log_end_offset;
    if !in_leader_log || leader.rack == Some(rack) {
        return None;
    }
    followers
        .iter()
        .filter(|f| f.broker_id != leader.broker_id && f.in_isr && f.live)
        .filter(|f| f.log_end_offset >= fetch_offset && f.log_start_offset <= fetch_offset)
        .filter(|f| f.rack == Some(rack))
        // Kafka's ReplicaView.comparator: highest LEO, then the shortest time since caught up.
        .max_by(|a, b| {
            a.log_end_offset
                .cmp(&b.log_end_offset)
                .then_with(|| {
                    let lag =
                        |c: &ReplicaCandidate<'_>| now_ms.saturating_sub(c.last_caught_up_time_ms);
                    lag(b).cmp(&lag(a))
                })
                .then_with(|| b.broker_id.cmp(&a.broker_id))
        })
        .map(|f| f.broker_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn replica(id: i32, rack: &'static str, leo: i64) -> ReplicaCandidate<'static> {
        ReplicaCandidate {
            broker_id: id,
            rack: (!rack.is_empty()).then_some(rack),
            log_end_offset: leo,
            log_start_offset: 0,
            last_caught_up_time_ms: 1_000,
            in_isr: true,
            live: true,
        }
    }

    const RA: ReplicaSelector = ReplicaSelector::RackAware;

    #[test]
    fn class_names() {
        assert_eq!(
            ReplicaSelector::from_class_name(""),
            Ok(ReplicaSelector::LeaderOnly)
        );
        assert_eq!(
            ReplicaSelector::from_class_name(RACK_AWARE_SELECTOR_CLASS),
            Ok(RA)
        );
        assert!(ReplicaSelector::from_class_name("com.example.Nope").is_err());
    }

    #[test]
    fn leader_only_and_rackless_clients_read_from_the_leader() {
        let leader = replica(1, "a", 10);
        let f = [replica(2, "b", 10)];
        let none = ReplicaSelector::LeaderOnly;
        assert_eq!(
            preferred_read_replica(none, Some("b"), &leader, &f, 5, 1_000),
            None
        );
        assert_eq!(
            preferred_read_replica(RA, None, &leader, &f, 5, 1_000),
            None
        );
        assert_eq!(
            preferred_read_replica(RA, Some(""), &leader, &f, 5, 1_000),
            None
        );
    }

    #[test]
    fn the_follower_in_the_clients_rack() {
        let leader = replica(1, "a", 10);
        let f = [replica(2, "b", 10), replica(3, "c", 10)];
        assert_eq!(
            preferred_read_replica(RA, Some("b"), &leader, &f, 5, 1_000),
            Some(2)
        );
        assert_eq!(
            preferred_read_replica(RA, Some("c"), &leader, &f, 5, 1_000),
            Some(3)
        );
        // No replica in the rack, or the leader in it: the leader.
        assert_eq!(
            preferred_read_replica(RA, Some("z"), &leader, &f, 5, 1_000),
            None
        );
        assert_eq!(
            preferred_read_replica(RA, Some("a"), &leader, &f, 5, 1_000),
            None
        );
    }

    #[test]
    fn the_most_caught_up_follower_of_the_rack() {
        let leader = replica(1, "a", 10);
        let mut f = [replica(2, "b", 8), replica(3, "b", 10), replica(4, "b", 9)];
        assert_eq!(
            preferred_read_replica(RA, Some("b"), &leader, &f, 5, 1_000),
            Some(3)
        );
        // Same LEO: the one caught up most recently, then the lowest id.
        f[0].log_end_offset = 10;
        f[1].last_caught_up_time_ms = 500;
        assert_eq!(
            preferred_read_replica(RA, Some("b"), &leader, &f, 5, 1_000),
            Some(2)
        );
        f[1].last_caught_up_time_ms = 1_000;
        assert_eq!(
            preferred_read_replica(RA, Some("b"), &leader, &f, 5, 1_000),
            Some(2)
        );
    }

    #[test]
    fn out_of_sync_dead_or_lacking_followers_are_not_chosen() {
        let leader = replica(1, "a", 10);
        let mut f = replica(2, "b", 10);
        f.in_isr = false;
        assert_eq!(
            preferred_read_replica(RA, Some("b"), &leader, &[f.clone()], 5, 1_000),
            None
        );
        f.in_isr = true;
        f.live = false;
        assert_eq!(
            preferred_read_replica(RA, Some("b"), &leader, &[f.clone()], 5, 1_000),
            None
        );
        f.live = true;
        f.log_end_offset = 4;
        assert_eq!(
            preferred_read_replica(RA, Some("b"), &leader, &[f.clone()], 5, 1_000),
            None
        );
        f.log_end_offset = 10;
        f.log_start_offset = 6;
        assert_eq!(
            preferred_read_replica(RA, Some("b"), &leader, &[f.clone()], 5, 1_000),
            None
        );
        f.log_start_offset = 0;
        // A fetch offset outside the leader's log is the leader's to answer.
        assert_eq!(
            preferred_read_replica(RA, Some("b"), &leader, &[f.clone()], 11, 1_000),
            None
        );
        assert_eq!(
            preferred_read_replica(RA, Some("b"), &leader, &[f], 10, 1_000),
            Some(2)
        );
    }

    proptest! {
        /// Whatever the replicas, the answer is `None` or a live in-sync follower in the
        /// client's rack (never the leader) holding the fetch offset, and no other such
        /// follower has a higher LEO; `None` only if the leader is in the rack or no follower
        /// qualifies.
        #[test]
        fn chosen_replica_qualifies(
            leader_rack in 0u8..3,
            client_rack in 0u8..4,
            fetch_offset in 0i64..20,
            followers in prop::collection::vec(
                (0u8..3, 0i64..20, 0i64..20, any::<bool>(), any::<bool>(), 0i64..2_000), 0..5),
        ) {
            const RACKS: [&str; 4] = ["a", "b", "c", "d"];
            let leader = ReplicaCandidate { broker_id: 0, rack: Some(RACKS[leader_rack as usize]),
                log_end_offset: 20, log_start_offset: 0, last_caught_up_time_ms: 2_000,
                in_isr: true, live: true };
            let fs: Vec<_> = followers.iter().enumerate().map(|(i, (r, leo, start, isr, live, t))| {
                ReplicaCandidate { broker_id: i as i32 + 1, rack: Some(RACKS[*r as usize]),
                    log_end_offset: *leo, log_start_offset: *start, last_caught_up_time_ms: *t,
                    in_isr: *isr, live: *live }
            }).collect();
            let rack = RACKS[client_rack as usize];
            let qualifies = |f: &ReplicaCandidate<'_>| f.in_isr && f.live && f.rack == Some(rack)
                && f.log_start_offset <= fetch_offset && f.log_end_offset >= fetch_offset;
            let got = preferred_read_replica(RA, Some(rack), &leader, &fs, fetch_offset, 2_000);
            match got {
                Some(id) => {
                    let f = fs.iter().find(|f| f.broker_id == id).unwrap();
                    prop_assert!(qualifies(f));
                    prop_assert!(leader.rack != Some(rack));
                    prop_assert!(fs.iter().filter(|o| qualifies(o)).all(|o| o.log_end_offset <= f.log_end_offset));
                }
                None => prop_assert!(leader.rack == Some(rack) || !fs.iter().any(qualifies)),
            }
        }
    }
}
