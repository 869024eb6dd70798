//! `load` rebuilds groups and offsets from the persisted records.

use bytes::Bytes;
use runnel_group::codec::{self, GroupMetadataValue, MemberMetadataValue};
use runnel_group::*;

use crate::common::*;

fn static_join(group: &str, instance: &str) -> JoinRequest {
    JoinRequest {
        group_instance_id: Some(instance.into()),
        ..join_request(group, "", instance)
    }
}

#[test]
fn load_round_trip() {
    let mut h = Harness::new(config());
    // A Stable group with offsets.
    let (gen, _, ids) = h.stable_group("g", &["c1", "c2", "c3"]);
    h.commit(&commit_request(
        "g",
        gen,
        &ids[1],
        &[("t", 0, 5), ("t", 1, 6)],
    ));
    h.commit(&commit_request("g", gen, &ids[2], &[("t", 1, 7)]));
    // A Stable group with a static member that restarted (record rewritten with the new id).
    let (r, _) = h.join(static_join("st", "i1"));
    let a = join_of(&h.advance(0), r).unwrap();
    h.complete_sync(
        "st",
        a.generation_id,
        &a.member_id,
        std::slice::from_ref(&a.member_id),
    );
    let (r, outs) = h.join(static_join("st", "i1"));
    assert_eq!(join_of(&outs, r).unwrap().error_code, 0);
    // Simple commits only.
    h.commit(&commit_request("s", -1, "", &[("x", 3, 30)]));
    // A group whose members all left, keeping offsets.
    let (gen_e, _, e_ids) = h.stable_group("e", &["c1"]);
    h.commit(&commit_request("e", gen_e, &e_ids[0], &[("t", 0, 1)]));
    h.leave("e", &e_ids[0]);
    // A deleted group.
    let (gen_d, _, d_ids) = h.stable_group("d", &["c1"]);
    h.commit(&commit_request("d", gen_d, &d_ids[0], &[("t", 0, 1)]));
    h.leave("d", &d_ids[0]);
    let (_, tombstones) = h.c.delete_groups(&["d".into()]);
    h.log.extend(tombstones);
    // Offsets deleted one by one.
    h.commit(&commit_request("s", -1, "", &[("y", 0, 1)]));
    let (_, _, tombstones) = h.c.delete_offsets("s", &[("y".into(), vec![0])]);
    h.log.extend(tombstones);

    let mut loaded = coordinator(config());
    loaded.load(h.now, h.log.clone());
    loaded.check_invariants().unwrap();
    assert_eq!(loaded.list_groups(&[]), h.c.list_groups(&[]));
    let ids: Vec<&str> = h.c.groups().collect();
    assert_eq!(ids, vec!["e", "g", "s", "st"]);
    for id in ids {
        assert_eq!(loaded.describe_group(id), h.c.describe_group(id), "{id}");
        assert_eq!(
            loaded.fetch_offsets(id, None),
            h.c.fetch_offsets(id, None),
            "{id}"
        );
        assert_eq!(
            loaded.generation_and_leader(id),
            h.c.generation_and_leader(id),
            "{id}"
        );
    }
    assert_eq!(loaded.describe_group("d").state, "Dead");
    // Loaded members can carry on: heartbeat, commit, and a new member triggers a rebalance.
    let mut hb = heartbeat_request("g", gen, &ids_of(&loaded, "g")[0]);
    assert_eq!(loaded.heartbeat(h.now, &hb), 0);
    hb.generation_id = gen + 1;
    assert_eq!(loaded.heartbeat(h.now, &hb), errors::ILLEGAL_GENERATION);
    // Sessions restart at load time: nobody heartbeats, everyone expires.
    loaded.tick(h.now + SESSION as i64);
    assert_eq!(loaded.describe_group("g").state, "Empty");
}

fn ids_of(c: &GroupCoordinator, group: &str) -> Vec<String> {
    c.describe_group(group)
        .members
        .into_iter()
        .map(|m| m.member_id)
        .collect()
}

#[test]
fn load_skips_garbage_and_honours_order() {
    let offset = |g: &str, o: i64| OffsetsRecord {
        key: codec::offset_key(g, "t", 0),
        value: Some(codec::offset_value(&CommittedOffset {
            offset: o,
            leader_epoch: 3,
            metadata: String::new(),
            commit_timestamp: 1,
        })),
    };
    let group_value = GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 4,
        protocol: Some("range".into()),
        leader: Some("m2".into()),
        current_state_timestamp: 10,
        members: ["m1", "m2"]
            .iter()
            .map(|id| MemberMetadataValue {
                member_id: id.to_string(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "h".into(),
                rebalance_timeout: 1000,
                session_timeout: 6000,
                subscription: Bytes::new(),
                assignment: Bytes::from_static(b"a"),
            })
            .collect(),
    };
    let records = vec![
        offset("a", 1),
        OffsetsRecord {
            key: Bytes::from_static(&[0, 9, 1]),
            value: None,
        },
        OffsetsRecord {
            key: codec::offset_key("a", "t", 1),
            value: Some(Bytes::from_static(&[0, 7])),
        },
        offset("a", 2),
        offset("b", 1),
        OffsetsRecord {
            key: codec::offset_key("b", "t", 0),
            value: None,
        },
        OffsetsRecord {
            key: codec::group_key("g"),
            value: Some(codec::group_value(&group_value)),
        },
        OffsetsRecord {
            key: codec::group_key("gone"),
            value: Some(codec::group_value(&group_value)),
        },
        OffsetsRecord {
            key: codec::group_key("gone"),
            value: None,
        },
    ];
    let mut c = coordinator(config());
    c.load(0, records);
    c.check_invariants().unwrap();
    let ids: Vec<&str> = c.groups().collect();
    assert_eq!(ids, vec!["a", "g"]);
    let (_, offs) = c.fetch_offsets("a", None);
    assert_eq!(offs.len(), 1);
    assert_eq!(offs[0].2.as_ref().unwrap().offset, 2);
    assert_eq!(offs[0].2.as_ref().unwrap().leader_epoch, 3);
    let d = c.describe_group("g");
    assert_eq!(d.state, "Stable");
    assert_eq!(d.members.len(), 2);
    assert_eq!(c.generation_and_leader("g"), Some((4, Some("m2".into()))));
    // Over capacity after load: rebalance.
    let mut c = coordinator(GroupConfig {
        max_size: 1,
        ..config()
    });
    c.load(
        0,
        vec![OffsetsRecord {
            key: codec::group_key("g"),
            value: Some(codec::group_value(&group_value)),
        }],
    );
    assert_eq!(c.describe_group("g").state, "PreparingRebalance");
}

#[test]
fn unload_answers_parked_requests() {
    let mut h = Harness::new(config());
    let (_, r, _) = h.join_new("g", "c1");
    h.commit(&commit_request("other", -1, "", &[("t", 0, 1)]));
    let outs = h.c.unload(|g| g == "g");
    assert_eq!(
        join_of(&outs, r).unwrap().error_code,
        errors::NOT_COORDINATOR
    );
    let ids: Vec<&str> = h.c.groups().collect();
    assert_eq!(ids, vec!["other"]);
}
