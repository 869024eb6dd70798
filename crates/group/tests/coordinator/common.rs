//! Test harness: a coordinator with deterministic member ids and a clock, plus helpers that
//! speak the protocol the way a Java consumer does.

use bytes::Bytes;
use runnel_group::codec::{self, GroupMetadataValue, OffsetsKey};
use runnel_group::subscription::encode_subscription_v0;
use runnel_group::*;

pub const SESSION: i32 = 10_000;
pub const REBALANCE: i32 = 30_000;

pub fn config() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

pub struct Harness {
    pub c: GroupCoordinator,
    pub now: i64,
    next_req: RequestId,
    /// Every record persisted so far, in order (Persist outputs and commit records).
    pub log: Vec<OffsetsRecord>,
}

pub fn coordinator(config: GroupConfig) -> GroupCoordinator {
    let mut n = 0u64;
    GroupCoordinator::with_member_id_generator(
        config,
        Box::new(move || {
            n += 1;
            format!("uuid{n}")
        }),
    )
}

pub fn protocols(topics: &[&str]) -> Vec<(String, Bytes)> {
    vec![("range".to_string(), encode_subscription_v0(topics))]
}

pub fn join_request(group: &str, member: &str, client: &str) -> JoinRequest {
    JoinRequest {
        group_id: group.into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: client.into(),
        client_host: format!("/10.0.0.{}", client.len()),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".into(),
        protocols: protocols(&["t"]),
        api_version: 5,
    }
}

pub fn sync_request(group: &str, generation: i32, member: &str) -> SyncRequest {
    SyncRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: vec![],
    }
}

pub fn heartbeat_request(group: &str, generation: i32, member: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
    }
}

pub fn commit_request(
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64)],
) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        offsets: offsets
            .iter()
            .map(|(t, p, o)| CommitOffset {
                topic: t.to_string(),
                partition: *p,
                offset: *o,
                leader_epoch: -1,
                metadata: Some(format!("m{o}")),
            })
            .collect(),
    }
}

pub fn join_of(outs: &[Output], req: RequestId) -> Option<JoinResponse> {
    outs.iter().find_map(|o| match o {
        Output::Join(r, resp) if *r == req => Some(resp.clone()),
        _ => None,
    })
}

pub fn sync_of(outs: &[Output], req: RequestId) -> Option<SyncResponse> {
    outs.iter().find_map(|o| match o {
        Output::Sync(r, resp) if *r == req => Some(resp.clone()),
        _ => None,
    })
}

pub fn persisted(outs: &[Output]) -> Vec<OffsetsRecord> {
    outs.iter()
        .flat_map(|o| match o {
            Output::Persist(r) => r.clone(),
            _ => vec![],
        })
        .collect()
}

/// The last group metadata value persisted for `group` in `records`.
pub fn last_group_value(records: &[OffsetsRecord], group: &str) -> Option<GroupMetadataValue> {
    records
        .iter()
        .rev()
        .find_map(|r| match codec::decode_key(&r.key) {
            Ok(OffsetsKey::Group { group: g }) if g == group => {
                Some(codec::decode_group_value(r.value.as_ref()?).unwrap())
            }
            _ => None,
        })
}

impl Harness {
    pub fn new(config: GroupConfig) -> Self {
        Harness {
            c: coordinator(config),
            now: 1_000_000,
            next_req: 1,
            log: Vec::new(),
        }
    }

    pub fn req_id(&mut self) -> RequestId {
        self.next_req += 1;
        self.next_req
    }

    fn record(&mut self, outs: &[Output]) {
        self.log.extend(persisted(outs));
        // Persist must precede every response of the same call.
        if let Some(p) = outs.iter().rposition(|o| matches!(o, Output::Persist(_))) {
            assert!(
                outs[..p].iter().all(|o| matches!(o, Output::Persist(_))),
                "a response precedes a Persist: {outs:?}"
            );
        }
        self.c.check_invariants().unwrap();
    }

    pub fn join(&mut self, req: JoinRequest) -> (RequestId, Vec<Output>) {
        let id = self.req_id();
        let outs = self.c.join(self.now, id, req);
        self.record(&outs);
        (id, outs)
    }

    pub fn sync(&mut self, req: SyncRequest) -> (RequestId, Vec<Output>) {
        let id = self.req_id();
        let outs = self.c.sync(self.now, id, req);
        self.record(&outs);
        (id, outs)
    }

    pub fn heartbeat(&mut self, group: &str, generation: i32, member: &str) -> i16 {
        let code = self
            .c
            .heartbeat(self.now, &heartbeat_request(group, generation, member));
        self.c.check_invariants().unwrap();
        code
    }

    pub fn leave(&mut self, group: &str, member: &str) -> (i16, Vec<i16>, Vec<Output>) {
        let r = self.c.leave(self.now, group, &[(member.to_string(), None)]);
        self.record(&r.2);
        r
    }

    pub fn commit(&mut self, req: &OffsetCommitRequest) -> (i16, Vec<(String, i32, i16)>) {
        let (top, codes, records) = self.c.commit_offsets(self.now, req, usize::MAX);
        self.log.extend(records);
        self.c.check_invariants().unwrap();
        (top, codes)
    }

    pub fn tick_to(&mut self, now: i64) -> Vec<Output> {
        self.now = now;
        let outs = self.c.tick(now);
        self.record(&outs);
        outs
    }

    pub fn advance(&mut self, ms: i64) -> Vec<Output> {
        self.tick_to(self.now + ms)
    }

    /// First JoinGroup (v5, dynamic): 79 with the generated id, then the second join, which
    /// is parked (returned request id) or answered.
    pub fn join_new(&mut self, group: &str, client: &str) -> (String, RequestId, Vec<Output>) {
        let (r, outs) = self.join(join_request(group, "", client));
        let resp = join_of(&outs, r).unwrap();
        assert_eq!(resp.error_code, errors::MEMBER_ID_REQUIRED);
        assert!(resp.member_id.starts_with(&format!("{client}-")));
        let id = resp.member_id;
        let (r2, outs2) = self.join(join_request(group, &id, client));
        (id, r2, outs2)
    }

    /// Forms a Stable group of `clients` (fresh group): joins, completes the join phase,
    /// syncs with the leader assigning `"<member>-assignment"` to each. Returns
    /// (generation, leader, member ids in client order).
    pub fn stable_group(&mut self, group: &str, clients: &[&str]) -> (i32, String, Vec<String>) {
        let mut ids = Vec::new();
        let mut parked = Vec::new();
        for c in clients {
            let (id, r, outs) = self.join_new(group, c);
            assert!(join_of(&outs, r).is_none(), "join should park");
            ids.push(id);
            parked.push(r);
        }
        let mut outs = self.advance(self.c.config().initial_rebalance_delay_ms as i64);
        outs.extend(self.advance(self.c.config().initial_rebalance_delay_ms as i64));
        let responses: Vec<JoinResponse> =
            parked.iter().map(|r| join_of(&outs, *r).unwrap()).collect();
        let generation = responses[0].generation_id;
        let leader = responses[0].leader.clone();
        self.complete_sync(group, generation, &leader, &ids);
        (generation, leader, ids)
    }

    /// Followers sync first (parked), then the leader with an assignment for everyone.
    pub fn complete_sync(&mut self, group: &str, generation: i32, leader: &str, ids: &[String]) {
        let mut parked = Vec::new();
        for id in ids.iter().filter(|id| *id != leader) {
            let (r, outs) = self.sync(sync_request(group, generation, id));
            assert!(sync_of(&outs, r).is_none(), "follower sync should park");
            parked.push((id.clone(), r));
        }
        let mut req = sync_request(group, generation, leader);
        req.assignments = ids
            .iter()
            .map(|id| (id.clone(), Bytes::from(format!("{id}-assignment"))))
            .collect();
        let (r, outs) = self.sync(req);
        parked.push((leader.to_string(), r));
        for (id, r) in parked {
            let s = sync_of(&outs, r).unwrap();
            assert_eq!(s.error_code, 0);
            assert_eq!(s.assignment, Bytes::from(format!("{id}-assignment")));
        }
    }
}
