//! One member of a classic group: identity, timeouts, supported protocols, assignment, the
//! requests it has parked, and its session deadline.

use bytes::Bytes;

use crate::api::RequestId;

/// Kafka's `NewMemberJoinTimeoutMs`: a member that joined for the first time and is parked in
/// the join phase has no session yet (it cannot heartbeat); it is dropped after this long so
/// clients that gave up on a long rebalance do not linger as defunct members.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 5 * 60 * 1000;

#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// `(name, metadata)` in preference order, names unique.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    /// A JoinGroup waiting for the join phase to complete.
    pub awaiting_join: Option<RequestId>,
    /// A SyncGroup waiting for the leader's assignment.
    pub awaiting_sync: Option<RequestId>,
    /// Joined for the first time and not yet through a completed join phase.
    pub is_new: bool,
    /// When the member's session (or, for a new member, its join wait) runs out.
    pub deadline_ms: i64,
    /// Order of first join; picks a successor leader deterministically.
    pub join_seq: u64,
}

impl Member {
    /// The metadata for `protocol`; empty if the member does not support it (which the
    /// protocol vote rules out for the chosen protocol).
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }

    /// Same protocols, same order, same metadata (Kafka's `MemberMetadata.matches`): a rejoin
    /// that matches does not need a rebalance.
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols.as_slice() == protocols
    }

    /// The member's most preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .find(|n| candidates.contains(n))
    }

    /// Whether the session has run out at `now`. Members parked in a join or sync satisfy
    /// their heartbeat automatically (the rebalance timeout governs them), except new members,
    /// whose deadline is the join wait (Kafka's `hasSatisfiedHeartbeat`).
    pub fn is_expired(&self, now_ms: i64) -> bool {
        let waiting = self.awaiting_join.is_some() || self.awaiting_sync.is_some();
        now_ms >= self.deadline_ms && (self.is_new || !waiting)
    }

    /// Pushes the session deadline out (heartbeat, join/sync completion, commit).
    pub fn refresh_session(&mut self, now_ms: i64) {
        self.deadline_ms = now_ms.saturating_add(i64::from(self.session_timeout_ms));
    }
}

/// Drops repeated protocol names (keeping the first, the most preferred), so a client listing
/// an assignor twice cannot skew the per-protocol support counts.
pub(crate) fn dedup_protocols(protocols: &[(String, Bytes)]) -> Vec<(String, Bytes)> {
    let mut out: Vec<(String, Bytes)> = Vec::with_capacity(protocols.len());
    for (n, m) in protocols {
        if !out.iter().any(|(o, _)| o == n) {
            out.push((n.clone(), m.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(protocols: &[(&str, &[u8])]) -> Member {
        Member {
            id: "m".into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: 100,
            session_timeout_ms: 10,
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|(n, m)| (n.to_string(), Bytes::copy_from_slice(m)))
                .collect(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            deadline_ms: 50,
            join_seq: 0,
        }
    }

    #[test]
    fn vote_picks_most_preferred_candidate() {
        let m = member(&[("range", b"a"), ("roundrobin", b"b")]);
        assert_eq!(m.vote(&["roundrobin", "range"]), Some("range"));
        assert_eq!(m.vote(&["roundrobin"]), Some("roundrobin"));
        assert_eq!(m.vote(&["sticky"]), None);
        assert_eq!(&m.metadata("roundrobin")[..], b"b");
        assert!(m.metadata("x").is_empty());
    }

    #[test]
    fn expiry_rules() {
        let mut m = member(&[("range", b"")]);
        assert!(!m.is_expired(49));
        assert!(m.is_expired(50));
        m.awaiting_join = Some(1);
        assert!(!m.is_expired(50), "parked members satisfy their heartbeat");
        m.is_new = true;
        assert!(m.is_expired(50), "new members expire while parked");
        m.refresh_session(100);
        assert_eq!(m.deadline_ms, 110);
    }

    #[test]
    fn dedup_keeps_first() {
        let p = vec![
            ("a".to_string(), Bytes::from_static(b"1")),
            ("a".to_string(), Bytes::from_static(b"2")),
            ("b".to_string(), Bytes::new()),
        ];
        let d = dedup_protocols(&p);
        assert_eq!(d.len(), 2);
        assert_eq!(&d[0].1[..], b"1");
    }
}
