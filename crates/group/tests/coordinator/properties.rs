//! Property test: random sequences of client actions and clock ticks against one group,
//! checking the coordinator's invariants after every step and that every parked request is
//! answered exactly once.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;
use proptest::prelude::*;
use runnel_group::codec::{self, OffsetsKey};
use runnel_group::errors::*;
use runnel_group::subscription::encode_subscription_v0;
use runnel_group::*;

use crate::common::coordinator;

const SLOTS: usize = 4;
const GROUP: &str = "g";

#[derive(Debug, Clone)]
enum Op {
    Join {
        slot: usize,
        variant: u8,
        v4: bool,
    },
    Sync {
        slot: usize,
    },
    Heartbeat {
        slot: usize,
    },
    Leave {
        slot: usize,
    },
    Commit {
        slot: usize,
    },
    /// Forget the member id (a restarted client).
    Restart {
        slot: usize,
    },
    Tick {
        ms: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let slot = 0..SLOTS;
    prop_oneof![
        4 => (slot.clone(), 0u8..3, any::<bool>()).prop_map(|(slot, variant, v4)| Op::Join { slot, variant, v4 }),
        3 => slot.clone().prop_map(|slot| Op::Sync { slot }),
        2 => slot.clone().prop_map(|slot| Op::Heartbeat { slot }),
        1 => slot.clone().prop_map(|slot| Op::Leave { slot }),
        1 => slot.clone().prop_map(|slot| Op::Commit { slot }),
        1 => slot.prop_map(|slot| Op::Restart { slot }),
        3 => prop_oneof![0i64..100, 100i64..4000, 4000i64..40_000].prop_map(|ms| Op::Tick { ms }),
    ]
}

#[derive(Debug, Default, Clone)]
struct Client {
    member_id: String,
    generation: i32,
    /// Members the coordinator told us about when we were leader.
    leader_of: Vec<String>,
}

#[derive(Default)]
struct Model {
    clients: [Client; SLOTS],
    /// Parked request -> (slot, is_join).
    parked: HashMap<RequestId, (usize, bool)>,
    answered: HashSet<RequestId>,
    /// Generation -> leader identity (see `leader_identity`).
    leaders: BTreeMap<i32, String>,
    last_generation: Option<i32>,
    log: Vec<OffsetsRecord>,
}

fn instance(slot: usize) -> Option<String> {
    // Slot 0 is a static member.
    (slot == 0).then(|| "static-0".to_string())
}

/// Who a leader id stands for: the instance for a static member (its ids are
/// `<group.instance.id>-<uuid>`, and successive ids of one instance are the same client),
/// else the member id itself.
fn leader_identity(leader: &str) -> String {
    match instance(0) {
        Some(i) if leader.starts_with(&format!("{i}-")) => i,
        _ => leader.to_string(),
    }
}

fn protocols(variant: u8) -> Vec<(String, Bytes)> {
    match variant {
        0 => vec![("range".into(), encode_subscription_v0(&["t"]))],
        1 => vec![
            ("roundrobin".into(), encode_subscription_v0(&["t", "u"])),
            ("range".into(), encode_subscription_v0(&["t", "u"])),
        ],
        _ => vec![("sticky".into(), encode_subscription_v0(&["t"]))],
    }
}

impl Model {
    fn on_join(&mut self, slot: usize, resp: &JoinResponse) -> Result<(), TestCaseError> {
        let c = &mut self.clients[slot];
        match resp.error_code {
            NONE => {
                c.member_id = resp.member_id.clone();
                c.generation = resp.generation_id;
                c.leader_of = if resp.leader == resp.member_id {
                    resp.members.iter().map(|m| m.member_id.clone()).collect()
                } else {
                    Vec::new()
                };
                prop_assert!(resp.leader == resp.member_id || resp.members.is_empty());
                // One leader per generation, compared by client identity: a static leader
                // that restarts in a Stable group keeps leading the same generation under a
                // new member id (Kafka's `replaceStaticMember` renames `leaderId`). Its own
                // answer names the old id (so it does not assign), followers re-joining
                // afterwards are told the new one.
                let identity = leader_identity(&resp.leader);
                let leader = self
                    .leaders
                    .entry(resp.generation_id)
                    .or_insert(identity.clone());
                prop_assert_eq!(&*leader, &identity, "two leaders in one generation");
            }
            MEMBER_ID_REQUIRED => c.member_id = resp.member_id.clone(),
            UNKNOWN_MEMBER_ID | FENCED_INSTANCE_ID => c.member_id.clear(),
            _ => {}
        }
        Ok(())
    }

    /// Applies a call's outputs: `current` is the request just made (None for tick/leave).
    fn outputs(
        &mut self,
        outs: &[Output],
        current: Option<(RequestId, usize, bool)>,
    ) -> Result<(), TestCaseError> {
        let mut seen_response = false;
        for o in outs {
            let (r, join) = match o {
                Output::Persist(records) => {
                    prop_assert!(!seen_response, "Persist after a response");
                    self.log.extend(records.iter().cloned());
                    continue;
                }
                Output::Join(r, _) => (*r, true),
                Output::Sync(r, _) => (*r, false),
            };
            seen_response = true;
            prop_assert!(self.answered.insert(r), "request {} answered twice", r);
            let slot = match current {
                Some((cr, slot, is_join)) if cr == r => {
                    prop_assert_eq!(is_join, join);
                    slot
                }
                _ => {
                    let (slot, is_join) = self.parked.remove(&r).ok_or_else(|| {
                        TestCaseError::fail(format!("answer for unknown request {r}"))
                    })?;
                    prop_assert_eq!(is_join, join);
                    slot
                }
            };
            if let Output::Join(_, resp) = o {
                self.on_join(slot, resp)?;
            }
        }
        if let Some((r, slot, join)) = current {
            if !self.answered.contains(&r) {
                self.parked.insert(r, (slot, join));
            }
        }
        Ok(())
    }

    fn check(&mut self, c: &GroupCoordinator) -> Result<(), TestCaseError> {
        c.check_invariants().map_err(TestCaseError::fail)?;
        match c.generation_and_leader(GROUP) {
            None => {
                // Group deleted (expired): a new one starts over at generation 0.
                self.last_generation = None;
                self.leaders.clear();
            }
            Some((generation, _)) => {
                if let Some(last) = self.last_generation {
                    prop_assert!(generation >= last, "generation went back");
                }
                self.last_generation = Some(generation);
                let d = c.describe_group(GROUP);
                if d.state == "Stable" {
                    // Every member has an entry in the persisted group record.
                    let v = self
                        .log
                        .iter()
                        .rev()
                        .find_map(|r| match codec::decode_key(&r.key) {
                            Ok(OffsetsKey::Group { .. }) => r.value.as_ref(),
                            _ => None,
                        })
                        .map(|v| codec::decode_group_value(v).unwrap());
                    let v = v.ok_or_else(|| TestCaseError::fail("Stable without a record"))?;
                    prop_assert_eq!(v.generation, generation);
                    let mut persisted: Vec<&str> =
                        v.members.iter().map(|m| m.member_id.as_str()).collect();
                    let mut members: Vec<&str> =
                        d.members.iter().map(|m| m.member_id.as_str()).collect();
                    persisted.sort();
                    members.sort();
                    prop_assert_eq!(persisted, members);
                }
            }
        }
        Ok(())
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut c = coordinator(GroupConfig {
        initial_rebalance_delay_ms: 1000,
        offsets_retention_ms: 60_000,
        offsets_retention_check_interval_ms: 10_000,
        ..GroupConfig::default()
    });
    let mut m = Model::default();
    let mut now = 0i64;
    let mut next_req: RequestId = 0;
    for op in ops {
        match op {
            Op::Join { slot, variant, v4 } => {
                next_req += 1;
                let cl = &m.clients[slot];
                let req = JoinRequest {
                    group_id: GROUP.into(),
                    member_id: cl.member_id.clone(),
                    group_instance_id: instance(slot),
                    client_id: format!("client{slot}"),
                    client_host: "/127.0.0.1".into(),
                    session_timeout_ms: 6000,
                    rebalance_timeout_ms: 10_000,
                    protocol_type: "consumer".into(),
                    protocols: protocols(variant),
                    api_version: if v4 { 5 } else { 3 },
                };
                let outs = c.join(now, next_req, req);
                m.outputs(&outs, Some((next_req, slot, true)))?;
            }
            Op::Sync { slot } => {
                next_req += 1;
                let cl = m.clients[slot].clone();
                let req = SyncRequest {
                    group_id: GROUP.into(),
                    generation_id: cl.generation,
                    member_id: cl.member_id.clone(),
                    group_instance_id: instance(slot),
                    protocol_type: None,
                    protocol_name: None,
                    assignments: cl
                        .leader_of
                        .iter()
                        .map(|id| (id.clone(), Bytes::from(id.clone())))
                        .collect(),
                };
                let outs = c.sync(now, next_req, req);
                m.outputs(&outs, Some((next_req, slot, false)))?;
            }
            Op::Heartbeat { slot } => {
                let cl = &m.clients[slot];
                let code = c.heartbeat(
                    now,
                    &HeartbeatRequest {
                        group_id: GROUP.into(),
                        generation_id: cl.generation,
                        member_id: cl.member_id.clone(),
                        group_instance_id: instance(slot),
                    },
                );
                prop_assert!([
                    NONE,
                    REBALANCE_IN_PROGRESS,
                    ILLEGAL_GENERATION,
                    UNKNOWN_MEMBER_ID,
                    FENCED_INSTANCE_ID
                ]
                .contains(&code));
            }
            Op::Leave { slot } => {
                let id = m.clients[slot].member_id.clone();
                let (_, codes, outs) = c.leave(now, GROUP, &[(id, instance(slot))]);
                prop_assert_eq!(codes.len(), 1);
                m.outputs(&outs, None)?;
                if codes[0] == NONE {
                    m.clients[slot].member_id.clear();
                }
            }
            Op::Commit { slot } => {
                let cl = &m.clients[slot];
                let (_, codes, records) = c.commit_offsets(
                    now,
                    &OffsetCommitRequest {
                        group_id: GROUP.into(),
                        generation_id: cl.generation,
                        member_id: cl.member_id.clone(),
                        group_instance_id: instance(slot),
                        offsets: vec![CommitOffset {
                            topic: "t".into(),
                            partition: slot as i32,
                            offset: now,
                            leader_epoch: -1,
                            metadata: None,
                        }],
                    },
                    usize::MAX,
                );
                prop_assert_eq!(codes.len(), 1);
                prop_assert_eq!(records.is_empty(), codes[0].2 != NONE);
                m.log.extend(records);
            }
            Op::Restart { slot } => {
                m.clients[slot] = Client::default();
            }
            Op::Tick { ms } => {
                now += ms;
                let outs = c.tick(now);
                m.outputs(&outs, None)?;
            }
        }
        m.check(&c)?;
    }
    // With nobody acting any more, every parked request must be answered.
    for _ in 0..6 {
        now += 400_000;
        let outs = c.tick(now);
        m.outputs(&outs, None)?;
        m.check(&c)?;
    }
    prop_assert!(m.parked.is_empty(), "never answered: {:?}", m.parked);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_sessions_keep_invariants(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}
