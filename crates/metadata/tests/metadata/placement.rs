//! Placement: every case of tests/data/assignment_vectors.json, plus A.2/A.5/B.2 invariants.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use runnel_metadata::placement::*;
use runnel_metadata::MetadataImage;
use serde_json::Value;

const VECTORS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/data/assignment_vectors.json"
));

fn brokers_of(case: &Value) -> Vec<(i32, Option<String>)> {
    let racks = case.get("racks");
    case["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let id = b.as_i64().unwrap() as i32;
            let rack = racks
                .and_then(|r| r.get(id.to_string()))
                .and_then(|v| v.as_str())
                .map(String::from);
            (id, rack)
        })
        .collect()
}

fn map_of(v: &Value) -> BTreeMap<i32, Vec<i32>> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.parse().unwrap(),
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_i64().unwrap() as i32)
                    .collect(),
            )
        })
        .collect()
}

fn int(case: &Value, key: &str) -> i32 {
    case[key].as_i64().unwrap() as i32
}

#[test]
fn every_vector_case_matches() {
    let doc: Value = serde_json::from_str(VECTORS).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 63, "the vector file changed size");
    let mut rng = StdRng::seed_from_u64(7);
    let (mut plain, mut existing, mut shifted) = (0, 0, 0);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let brokers = brokers_of(case);
        let expected = map_of(&case["expected"]);
        let (p, rf, fsi, spid) = (
            int(case, "partitions"),
            int(case, "rf"),
            int(case, "fixed_start_index"),
            int(case, "start_partition_id"),
        );
        let got = if let Some(ex) = case.get("existing") {
            existing += 1;
            let ex = map_of(ex);
            // The recorded derived parameters (A.4) must be what we derive.
            let p0_leader = ex[&0][0];
            let start = brokers
                .iter()
                .position(|(id, _)| *id >= p0_leader)
                .unwrap_or(0) as i32;
            assert_eq!(start, fsi, "{name}: derived start index");
            assert_eq!(ex.len() as i32, spid, "{name}: derived start partition id");
            assert_eq!(ex[&0].len() as i32, rf, "{name}: derived RF");
            add_partitions_assignment(&ex, &brokers, ex.len() as i32 + p, &mut rng)
        } else if let Some(shift) = case.get("initial_shift") {
            shifted += 1;
            let ids: Vec<i32> = brokers.iter().map(|b| b.0).collect();
            assign_replicas_with_shift(&ids, p, rf, fsi, shift.as_i64().unwrap() as i32, spid)
        } else {
            plain += 1;
            assign_replicas(&brokers, p, rf, fsi, spid, &mut rng)
        };
        assert_eq!(got.as_ref(), Ok(&expected), "vector {name}");
    }
    assert!(
        plain > 0 && existing >= 4 && shifted >= 1,
        "{plain} {existing} {shifted}"
    );
}

#[test]
fn every_error_case_matches() {
    let doc: Value = serde_json::from_str(VECTORS).unwrap();
    let cases = doc["error_cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    let mut rng = StdRng::seed_from_u64(7);
    for case in cases {
        let expected = match case["error"].as_str().unwrap() {
            "INVALID_REPLICATION_FACTOR" => 38,
            "INVALID_PARTITIONS" => 37,
            e if e.starts_with("ADMIN_OPERATION") => -1,
            e => panic!("unknown error kind {e}"),
        };
        let got = assign_replicas(
            &brokers_of(case),
            int(case, "partitions"),
            int(case, "rf"),
            -1,
            -1,
            &mut rng,
        );
        let err = got.expect_err(case["name"].as_str().unwrap());
        assert_eq!(err.code, expected, "{}: {err}", case["name"]);
    }
}

#[test]
fn seed_example_and_kafka_unit_test() {
    let brokers: Vec<(i32, Option<String>)> = (0..5).map(|b| (b, None)).collect();
    let got = assign_replicas(&brokers, 10, 3, 0, -1, &mut StdRng::seed_from_u64(1)).unwrap();
    let exp: BTreeMap<i32, Vec<i32>> = [
        (0, vec![0, 1, 2]),
        (1, vec![1, 2, 3]),
        (2, vec![2, 3, 4]),
        (3, vec![3, 4, 0]),
        (4, vec![4, 0, 1]),
        (5, vec![0, 2, 3]),
        (6, vec![1, 3, 4]),
        (7, vec![2, 4, 0]),
        (8, vec![3, 0, 1]),
        (9, vec![4, 1, 2]),
    ]
    .into();
    assert_eq!(got, exp);
    // Kafka's rack-alternated list example (B.1).
    let racks: HashMap<i32, String> = [
        (0, "rack1"),
        (1, "rack3"),
        (2, "rack3"),
        (3, "rack2"),
        (4, "rack2"),
        (5, "rack1"),
    ]
    .map(|(b, r)| (b, r.to_string()))
    .into();
    assert_eq!(rack_alternated(&racks), vec![0, 3, 1, 5, 4, 2]);
}

#[test]
fn single_broker_never_divides_by_zero() {
    let got = assign_replicas(&[(7, None)], 3, 1, -1, -1, &mut StdRng::seed_from_u64(3)).unwrap();
    assert!(got.values().all(|r| r == &vec![7]));
}

#[test]
fn manual_assignment_rules() {
    let registered: BTreeSet<i32> = [1, 2, 3].into();
    let ok: BTreeMap<i32, Vec<i32>> = [(0, vec![1, 2]), (1, vec![2, 3])].into();
    assert_eq!(validate_manual_assignment(&ok, &registered), Ok(()));
    let cases: Vec<(BTreeMap<i32, Vec<i32>>, &str)> = vec![
        (
            [(0, vec![1, 2]), (1, vec![3])].into(),
            "not consistent with previous partitions, which have 2 replica(s)",
        ),
        (
            [(0, vec![1, 1])].into(),
            "includes the broker 1 more than once",
        ),
        ([(0, vec![1]), (2, vec![2])].into(), "consecutive 0-based"),
        ([(1, vec![1])].into(), "consecutive 0-based"),
        ([(0, vec![])].into(), "empty replica list"),
        (
            [(0, vec![1, 9])].into(),
            "includes broker 9, but no such broker is registered",
        ),
    ];
    for (a, msg) in cases {
        let e = validate_manual_assignment(&a, &registered).unwrap_err();
        assert_eq!(e.code, 39);
        assert!(e.message.contains(msg), "{a:?}: {}", e.message);
    }
}

#[test]
fn cluster_aware_starts_at_least_loaded_broker() {
    let brokers: Vec<(i32, Option<String>)> = (0..3).map(|b| (b, None)).collect();
    let mut load = BrokerLoad::default();
    for _ in 0..5 {
        load.add(&[0, 1]);
        load.add(&[1, 0]);
    }
    let got = assign_replicas_cluster_aware(&brokers, 1, 2, 0, &load).unwrap();
    assert_eq!(
        got[&0][0], 2,
        "the broker without leaders leads the new partition"
    );
    assert!(got[&0].contains(&2));
    // Many single-partition topics spread their leaders evenly (Kafka's random start may not).
    let mut load = BrokerLoad::from_image(&MetadataImage::empty("c".into()));
    let mut leaders = BTreeMap::new();
    for _ in 0..30 {
        let a = assign_replicas_cluster_aware(&brokers, 1, 2, 0, &load).unwrap();
        load.add(&a[&0]);
        *leaders.entry(a[&0][0]).or_insert(0) += 1;
    }
    assert_eq!(
        leaders.values().copied().collect::<Vec<_>>(),
        vec![10, 10, 10]
    );
    assert!(
        load.replicas.values().all(|&c| c == 20),
        "{:?}",
        load.replicas
    );
}

fn check_invariants(
    a: &BTreeMap<i32, Vec<i32>>,
    brokers: &[(i32, Option<String>)],
    p: i32,
    rf: i32,
    spid: i32,
) {
    let n = brokers.len() as i32;
    let ids: Vec<i32> = (spid.max(0)..spid.max(0) + p).collect();
    assert_eq!(a.keys().copied().collect::<Vec<_>>(), ids);
    let mut leaders: BTreeMap<i32, i32> = brokers.iter().map(|b| (b.0, 0)).collect();
    let mut replicas = leaders.clone();
    let rack: HashMap<i32, Option<String>> = brokers.iter().cloned().collect();
    let rack_count = brokers
        .iter()
        .filter_map(|b| b.1.clone())
        .collect::<BTreeSet<_>>()
        .len() as i32;
    for r in a.values() {
        assert_eq!(r.len() as i32, rf);
        assert_eq!(
            r.iter().collect::<BTreeSet<_>>().len(),
            r.len(),
            "duplicate broker in {r:?}"
        );
        *leaders.get_mut(&r[0]).unwrap() += 1;
        for b in r {
            *replicas.get_mut(b).unwrap() += 1;
        }
        if rack_count > 0 {
            let racks: BTreeSet<_> = r.iter().map(|b| rack[b].clone()).collect();
            assert_eq!(
                racks.len() as i32,
                rf.min(rack_count),
                "one replica per rack when possible: {r:?}"
            );
        }
    }
    let (min, max) = (
        leaders.values().min().unwrap(),
        leaders.values().max().unwrap(),
    );
    assert!(max - min <= 1, "leaders uneven: {leaders:?}");
    if p % n == 0 {
        assert!(leaders.values().all(|&c| c == p / n), "{leaders:?}");
        // Replicas are even per round of n partitions only when rounds align with the shift
        // bumps (absolute ids multiple of n), i.e. Kafka's own test setups.
        if rack_count == 0 && spid.max(0) % n == 0 {
            assert!(replicas.values().all(|&c| c == p * rf / n), "{replicas:?}");
        }
    }
}

fn brokers_strategy() -> impl Strategy<Value = Vec<(i32, Option<String>)>> {
    (1usize..10, 0usize..4, any::<u64>()).prop_map(|(n, racks, seed)| {
        (0..n)
            .map(|i| {
                let id = i as i32 * 3 + (seed % 3) as i32;
                let rack = (racks > 0).then(|| format!("r{}", (seed as usize + i * 7) % racks));
                (id, rack)
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn kafka_placement_invariants(brokers in brokers_strategy(), p in 1i32..40, rf_seed in 0i32..100, seed in any::<u64>(), spid in -1i32..30) {
        let rf = 1 + rf_seed % brokers.len() as i32;
        let a = assign_replicas(&brokers, p, rf, -1, spid, &mut StdRng::seed_from_u64(seed)).unwrap();
        check_invariants(&a, &brokers, p, rf, spid);
    }

    #[test]
    fn cluster_aware_invariants(brokers in brokers_strategy(), p in 1i32..40, rf_seed in 0i32..100, spid in -1i32..30, loads in proptest::collection::vec(0u64..5, 10)) {
        let rf = 1 + rf_seed % brokers.len() as i32;
        let mut load = BrokerLoad::default();
        for (b, l) in brokers.iter().zip(loads) {
            load.leaders.insert(b.0, l);
            load.replicas.insert(b.0, l * 2);
        }
        let a = assign_replicas_cluster_aware(&brokers, p, rf, spid, &load).unwrap();
        check_invariants(&a, &brokers, p, rf, spid);
    }

    #[test]
    fn add_partitions_continue_kafka_rotation(n in 2usize..8, p0 in 1i32..10, add in 1i32..20, seed in any::<u64>()) {
        let brokers: Vec<(i32, Option<String>)> = (0..n as i32).map(|b| (b, None)).collect();
        let rf = 1 + (seed % n as u64) as i32;
        let mut rng = StdRng::seed_from_u64(seed);
        let existing = assign_replicas(&brokers, p0, rf, -1, 0, &mut rng).unwrap();
        let added = add_partitions_assignment(&existing, &brokers, p0 + add, &mut rng).unwrap();
        prop_assert_eq!(added.keys().copied().collect::<Vec<_>>(), (p0..p0 + add).collect::<Vec<_>>());
        let start = existing[&0][0];
        for (pid, r) in &added {
            prop_assert_eq!(r.len() as i32, rf);
            prop_assert_eq!(r.iter().collect::<BTreeSet<_>>().len(), r.len());
            // Leaders continue round-robin from partition 0's preferred leader.
            prop_assert_eq!(r[0], (start + pid) % n as i32);
        }
    }
}
