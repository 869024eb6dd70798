//! Table-driven checks of every error code each API can return.

use bytes::Bytes;
use runnel_group::errors::*;
use runnel_group::*;

use crate::common::*;

/// A Stable group "g" with members c1 (leader) and c2, generation `gen`.
fn stable() -> (Harness, i32, String, String) {
    let mut h = Harness::new(config());
    let (gen, leader, ids) = h.stable_group("g", &["c1", "c2"]);
    let other = ids.into_iter().find(|i| *i != leader).unwrap();
    (h, gen, leader, other)
}

#[test]
fn join_error_codes() {
    type Case = (&'static str, fn(&str, &str) -> JoinRequest, i16);
    let cases: Vec<Case> = vec![
        (
            "empty group id",
            |_, _| join_request("", "", "c"),
            INVALID_GROUP_ID,
        ),
        (
            "session too short",
            |_, _| JoinRequest {
                session_timeout_ms: 5999,
                ..join_request("g", "", "c")
            },
            INVALID_SESSION_TIMEOUT,
        ),
        (
            "session too long",
            |_, _| JoinRequest {
                session_timeout_ms: 1_800_001,
                ..join_request("g", "", "c")
            },
            INVALID_SESSION_TIMEOUT,
        ),
        (
            "unknown member id, unknown group",
            |_, _| join_request("nope", "m-1", "c"),
            UNKNOWN_MEMBER_ID,
        ),
        (
            "unknown member id",
            |_, _| join_request("g", "m-1", "c"),
            UNKNOWN_MEMBER_ID,
        ),
        (
            "other protocol type",
            |_, _| JoinRequest {
                protocol_type: "connect".into(),
                ..join_request("g", "", "c")
            },
            INCONSISTENT_GROUP_PROTOCOL,
        ),
        (
            "no common assignor",
            |_, _| JoinRequest {
                protocols: vec![("sticky".into(), Bytes::new())],
                ..join_request("g", "", "c")
            },
            INCONSISTENT_GROUP_PROTOCOL,
        ),
        (
            "no protocols, new group",
            |_, _| JoinRequest {
                protocols: vec![],
                ..join_request("new", "", "c")
            },
            INCONSISTENT_GROUP_PROTOCOL,
        ),
        (
            "empty protocol type, new group",
            |_, _| JoinRequest {
                protocol_type: String::new(),
                ..join_request("new", "", "c")
            },
            INCONSISTENT_GROUP_PROTOCOL,
        ),
        (
            "first dynamic join v4+",
            |_, _| join_request("g", "", "c"),
            MEMBER_ID_REQUIRED,
        ),
        (
            "static instance unknown with member id",
            |leader, _| JoinRequest {
                group_instance_id: Some("i9".into()),
                ..join_request("g", leader, "c")
            },
            UNKNOWN_MEMBER_ID,
        ),
        (
            "oversized client id",
            |_, _| join_request("g", "", &"x".repeat(40_000)),
            INVALID_REQUEST,
        ),
        (
            "known follower, unchanged",
            |_, other| join_request("g", other, "c"),
            NONE,
        ),
    ];
    for (name, make, expected) in cases {
        let (mut h, _gen, leader, other) = stable();
        let (r, outs) = h.join(make(&leader, &other));
        let resp = join_of(&outs, r).unwrap_or_else(|| panic!("{name}: not answered"));
        assert_eq!(resp.error_code, expected, "{name}");
        if expected != NONE {
            assert_eq!(resp.generation_id, -1, "{name}");
            assert!(resp.members.is_empty() && resp.leader.is_empty(), "{name}");
        }
    }
}

#[test]
fn join_v3_gets_member_id_without_79() {
    let mut h = Harness::new(config());
    let (r, outs) = h.join(JoinRequest {
        api_version: 3,
        ..join_request("g", "", "c")
    });
    assert!(outs.is_empty());
    let outs = h.advance(0);
    let resp = join_of(&outs, r).unwrap();
    assert_eq!(resp.error_code, 0);
    assert!(resp.member_id.starts_with("c-"));
}

#[test]
fn join_group_max_size() {
    let mut h = Harness::new(GroupConfig {
        max_size: 1,
        ..config()
    });
    h.stable_group("g", &["c1"]);
    // The cap is checked before a member id is handed out (Kafka's acceptJoiningMember).
    let (r, outs) = h.join(join_request("g", "", "c2"));
    let resp = join_of(&outs, r).unwrap();
    assert_eq!(
        (resp.error_code, resp.member_id.as_str()),
        (GROUP_MAX_SIZE_REACHED, "")
    );
    assert_eq!(h.c.describe_group("g").members.len(), 1);
    // During a rebalance the cap counts members that re-joined: a second pending member id
    // obtained while preparing cannot get in once the slot is taken.
    let mut h = Harness::new(GroupConfig {
        max_size: 1,
        ..config()
    });
    let (r, outs) = h.join(join_request("q", "", "a"));
    let a = join_of(&outs, r).unwrap().member_id;
    h.join(join_request("q", &a, "a"));
    let (r, outs) = h.join(join_request("q", "", "b"));
    assert_eq!(
        join_of(&outs, r).unwrap().error_code,
        GROUP_MAX_SIZE_REACHED
    );
    // Pending ids are capped too.
    let mut h = Harness::new(GroupConfig {
        max_size: 1,
        ..config()
    });
    let (r, outs) = h.join(join_request("p", "", "a"));
    assert_eq!(join_of(&outs, r).unwrap().error_code, MEMBER_ID_REQUIRED);
    let (r, outs) = h.join(join_request("p", "", "b"));
    assert_eq!(
        join_of(&outs, r).unwrap().error_code,
        GROUP_MAX_SIZE_REACHED
    );
}

#[test]
fn join_fenced_static_member() {
    let mut h = Harness::new(config());
    let (r, _) = h.join(JoinRequest {
        group_instance_id: Some("i1".into()),
        ..join_request("g", "", "c")
    });
    let id = join_of(&h.advance(0), r).unwrap().member_id;
    let (r, outs) = h.join(JoinRequest {
        group_instance_id: Some("i1".into()),
        ..join_request("g", "i1-other", "c")
    });
    assert_eq!(join_of(&outs, r).unwrap().error_code, FENCED_INSTANCE_ID);
    let (r, outs) = h.join(JoinRequest {
        group_instance_id: Some("i1".into()),
        ..join_request("g", &id, "c")
    });
    assert_eq!(join_of(&outs, r).unwrap().error_code, NONE);
}

#[test]
fn refused_join_leaves_no_group_behind() {
    let mut h = Harness::new(config());
    h.join(JoinRequest {
        protocols: vec![],
        ..join_request("new", "", "c")
    });
    assert_eq!(h.c.groups().count(), 0);
}

#[test]
fn sync_error_codes() {
    type Case = (&'static str, fn(i32, &str, &str) -> SyncRequest, i16);
    let cases: Vec<Case> = vec![
        (
            "empty group id",
            |g, l, _| sync_request("", g, l),
            INVALID_GROUP_ID,
        ),
        (
            "unknown group",
            |g, l, _| sync_request("nope", g, l),
            UNKNOWN_MEMBER_ID,
        ),
        (
            "unknown member",
            |g, _, _| sync_request("g", g, "ghost"),
            UNKNOWN_MEMBER_ID,
        ),
        (
            "wrong generation",
            |g, l, _| sync_request("g", g + 1, l),
            ILLEGAL_GENERATION,
        ),
        (
            "wrong protocol type",
            |g, l, _| SyncRequest {
                protocol_type: Some("connect".into()),
                ..sync_request("g", g, l)
            },
            INCONSISTENT_GROUP_PROTOCOL,
        ),
        (
            "wrong protocol name",
            |g, l, _| SyncRequest {
                protocol_name: Some("sticky".into()),
                ..sync_request("g", g, l)
            },
            INCONSISTENT_GROUP_PROTOCOL,
        ),
        (
            "no protocol fields (v0-v4)",
            |g, _, o| SyncRequest {
                protocol_type: None,
                protocol_name: None,
                ..sync_request("g", g, o)
            },
            NONE,
        ),
        (
            "instance id unknown to the group",
            |g, l, _| SyncRequest {
                group_instance_id: Some("i1".into()),
                ..sync_request("g", g, l)
            },
            NONE,
        ),
    ];
    for (name, make, expected) in cases {
        let (mut h, gen, leader, other) = stable();
        let (r, outs) = h.sync(make(gen, &leader, &other));
        let resp = sync_of(&outs, r).unwrap_or_else(|| panic!("{name}: not answered"));
        assert_eq!(resp.error_code, expected, "{name}");
    }
    // 27 while preparing.
    let (mut h, gen, leader, _) = stable();
    h.join_new("g", "c3");
    let (r, outs) = h.sync(sync_request("g", gen, &leader));
    assert_eq!(sync_of(&outs, r).unwrap().error_code, REBALANCE_IN_PROGRESS);
    // 25 in an Empty group (member gone).
    let (mut h, gen, leader, other) = stable();
    h.leave("g", &leader);
    h.leave("g", &other);
    let (r, outs) = h.sync(sync_request("g", gen, &leader));
    assert_eq!(sync_of(&outs, r).unwrap().error_code, UNKNOWN_MEMBER_ID);
}

#[test]
fn sync_fenced_static_member() {
    let mut h = Harness::new(config());
    let (r, _) = h.join(JoinRequest {
        group_instance_id: Some("i1".into()),
        ..join_request("g", "", "c")
    });
    let resp = join_of(&h.advance(0), r).unwrap();
    let (r, outs) = h.sync(SyncRequest {
        group_instance_id: Some("i1".into()),
        ..sync_request("g", resp.generation_id, "i1-x")
    });
    assert_eq!(sync_of(&outs, r).unwrap().error_code, FENCED_INSTANCE_ID);
}

#[test]
fn heartbeat_error_codes() {
    let (mut h, gen, leader, other) = stable();
    let cases: Vec<(&str, HeartbeatRequest, i16)> = vec![
        ("ok", heartbeat_request("g", gen, &leader), NONE),
        (
            "empty group id",
            heartbeat_request("", gen, &leader),
            INVALID_GROUP_ID,
        ),
        (
            "unknown group",
            heartbeat_request("nope", gen, &leader),
            UNKNOWN_MEMBER_ID,
        ),
        (
            "unknown member",
            heartbeat_request("g", gen, "ghost"),
            UNKNOWN_MEMBER_ID,
        ),
        (
            "wrong generation",
            heartbeat_request("g", gen - 1, &other),
            ILLEGAL_GENERATION,
        ),
    ];
    for (name, req, expected) in cases {
        assert_eq!(h.c.heartbeat(h.now, &req), expected, "{name}");
    }
    // PreparingRebalance: 27. CompletingRebalance: 0.
    let (_, r, _) = h.join_new("g", "c3");
    assert_eq!(h.heartbeat("g", gen, &other), REBALANCE_IN_PROGRESS);
    h.join(join_request("g", &leader, "c1"));
    let (_, outs) = h.join(join_request("g", &other, "c2"));
    assert!(join_of(&outs, r).is_some());
    assert_eq!(h.c.describe_group("g").state, "CompletingRebalance");
    assert_eq!(h.heartbeat("g", gen + 1, &other), NONE);
    assert_eq!(h.heartbeat("g", gen, &other), ILLEGAL_GENERATION);
    // Static fencing.
    let mut h = Harness::new(config());
    let (r, _) = h.join(JoinRequest {
        group_instance_id: Some("i1".into()),
        ..join_request("g", "", "c")
    });
    let resp = join_of(&h.advance(0), r).unwrap();
    let mut hb = heartbeat_request("g", resp.generation_id, "i1-old");
    hb.group_instance_id = Some("i1".into());
    assert_eq!(h.c.heartbeat(h.now, &hb), FENCED_INSTANCE_ID);
}

#[test]
fn leave_error_codes() {
    let (mut h, _gen, leader, _other) = stable();
    assert_eq!(
        h.c.leave(h.now, "", &[(leader.clone(), None)]),
        (INVALID_GROUP_ID, vec![], vec![])
    );
    let (top, codes, _) =
        h.c.leave(h.now, "nope", &[(leader.clone(), None), ("x".into(), None)]);
    assert_eq!(
        (top, codes),
        (NONE, vec![UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID])
    );
    let (top, codes, _) = h.c.leave(
        h.now,
        "g",
        &[
            ("ghost".into(), None),
            (leader.clone(), None),
            (leader.clone(), None),
        ],
    );
    assert_eq!(
        (top, codes),
        (NONE, vec![UNKNOWN_MEMBER_ID, NONE, UNKNOWN_MEMBER_ID])
    );
    // Static: fenced with a wrong member id; removable by instance id alone.
    let mut h = Harness::new(config());
    let (r, _) = h.join(JoinRequest {
        group_instance_id: Some("i1".into()),
        ..join_request("g", "", "c")
    });
    join_of(&h.advance(0), r).unwrap();
    let (_, codes, _) =
        h.c.leave(h.now, "g", &[("i1-old".into(), Some("i1".into()))]);
    assert_eq!(codes, vec![FENCED_INSTANCE_ID]);
    let (_, codes, outs) = h.c.leave(h.now, "g", &[(String::new(), Some("i1".into()))]);
    assert_eq!(codes, vec![NONE]);
    assert_eq!(persisted(&outs).len(), 1, "group became Empty");
    // A pending member (after 79) can leave.
    let mut h = Harness::new(config());
    let (r, outs) = h.join(join_request("p", "", "c"));
    let id = join_of(&outs, r).unwrap().member_id;
    assert_eq!(h.c.leave(h.now, "p", &[(id, None)]).1, vec![NONE]);
}

#[test]
fn commit_error_codes() {
    let (mut h, gen, leader, _) = stable();
    let big = "x".repeat(4097);
    let mut req = commit_request("g", gen, &leader, &[("t", 0, 1), ("t", 1, 2)]);
    req.offsets[1].metadata = Some(big);
    let (top, codes) = h.commit(&req);
    assert_eq!(top, NONE);
    assert_eq!(
        codes,
        vec![
            ("t".into(), 0, NONE),
            ("t".into(), 1, OFFSET_METADATA_TOO_LARGE)
        ]
    );
    // Metadata length counts UTF-16 units: 4096 'é' are 8192 bytes but allowed.
    req.offsets[1].metadata = Some("é".repeat(4096));
    assert_eq!(h.commit(&req).1[1].2, NONE);
    let cases: Vec<(&str, OffsetCommitRequest, i16)> = vec![
        (
            "unknown group, generation >= 0",
            commit_request("nope", 1, "m", &[("t", 0, 1)]),
            ILLEGAL_GENERATION,
        ),
        (
            "unknown member",
            commit_request("g", gen, "ghost", &[("t", 0, 1)]),
            UNKNOWN_MEMBER_ID,
        ),
        (
            "wrong generation",
            commit_request("g", gen + 5, &leader, &[("t", 0, 1)]),
            ILLEGAL_GENERATION,
        ),
        (
            "simple commit to active group",
            commit_request("g", -1, "", &[("t", 0, 1)]),
            UNKNOWN_MEMBER_ID,
        ),
        (
            "instance id unknown to the group",
            OffsetCommitRequest {
                group_instance_id: Some("i".into()),
                ..commit_request("g", gen, &leader, &[])
            },
            NONE,
        ),
        (
            "empty group id simple commit",
            commit_request("", -1, "", &[("t", 0, 1)]),
            NONE,
        ),
    ];
    for (name, req, expected) in cases {
        let (top, codes) = h.commit(&req);
        assert_eq!(top, expected, "{name}");
        assert!(codes.iter().all(|c| c.2 == expected), "{name}");
    }
    // Fencing of a static member.
    let mut h = Harness::new(config());
    let (r, _) = h.join(JoinRequest {
        group_instance_id: Some("i1".into()),
        ..join_request("s", "", "c")
    });
    let resp = join_of(&h.advance(0), r).unwrap();
    let req = OffsetCommitRequest {
        group_instance_id: Some("i1".into()),
        ..commit_request("s", resp.generation_id, "i1-old", &[("t", 0, 1)])
    };
    assert_eq!(h.commit(&req).0, FENCED_INSTANCE_ID);
}

#[test]
fn delete_offsets_error_codes() {
    let mut h = Harness::new(config());
    // A non-consumer group with members: 68.
    let mut req = join_request("conn", "", "w");
    req.protocol_type = "connect".into();
    req.api_version = 3;
    h.join(req);
    assert_eq!(
        h.c.delete_offsets("conn", &[("t".into(), vec![0])]).0,
        NON_EMPTY_GROUP
    );
    assert_eq!(
        h.c.delete_offsets("nope", &[("t".into(), vec![0])]).0,
        GROUP_ID_NOT_FOUND
    );
    assert_eq!(h.c.delete_offsets("", &[]).0, INVALID_GROUP_ID);
    // Empty group: everything deletable; the last offset takes the group with it.
    h.commit(&commit_request("s", -1, "", &[("t", 0, 1)]));
    let (top, codes, records) = h.c.delete_offsets("s", &[("t".into(), vec![0])]);
    assert_eq!((top, codes), (NONE, vec![("t".into(), 0, NONE)]));
    assert_eq!(records.len(), 1);
    assert_eq!(h.c.describe_group("s").state, "Dead");
}

/// Caught: a commit whose records exceed the offsets partition's `max.message.bytes` was
/// stored in memory and then failed to append, answered with a retriable code (15) forever;
/// now its valid partitions get 28 INVALID_COMMIT_OFFSET_SIZE, nothing is stored and no record
/// is produced, while a partition with oversized metadata keeps its own 12.
#[test]
fn a_commit_too_large_for_one_batch_gets_invalid_commit_offset_size() {
    let mut h = Harness::new(config());
    let mut req = commit_request("big", -1, "", &[("t", 0, 1), ("t", 1, 2), ("t", 2, 3)]);
    req.offsets[1].metadata = Some("m".repeat(4097));
    req.offsets[2].metadata = Some("m".repeat(3000));
    let (top, codes, records) = h.c.commit_offsets(h.now, &req, 2000);
    assert_eq!(top, NONE);
    let codes: Vec<i16> = codes.iter().map(|c| c.2).collect();
    assert_eq!(
        codes,
        vec![
            INVALID_COMMIT_OFFSET_SIZE,
            OFFSET_METADATA_TOO_LARGE,
            INVALID_COMMIT_OFFSET_SIZE
        ]
    );
    assert!(records.is_empty());
    let (_, fetched) = h.c.fetch_offsets("big", None);
    assert!(fetched.is_empty(), "nothing stored: {fetched:?}");
    // The same commit fits a batch of the default 1 MiB: stored, one record per valid partition.
    let (_, codes, records) = h.c.commit_offsets(h.now, &req, 1_048_588);
    assert_eq!(
        codes.iter().map(|c| c.2).collect::<Vec<_>>(),
        vec![NONE, OFFSET_METADATA_TOO_LARGE, NONE]
    );
    assert_eq!(records.len(), 2);
    assert!(record_batch_size_of(&records) <= 1_048_588);
}

fn record_batch_size_of(records: &[OffsetsRecord]) -> usize {
    runnel_group::batch_size::record_batch_size(records)
}
