//! Every vector of tests/data/murmur2_vectors.json (spec G.1): murmur2, toPositive, and the
//! Java partition for n = 3, 6, 10, hashing the raw bytes of `key_hex`.

use runnel_client::murmur2::{java_partition, murmur2, to_positive};
use runnel_client::{Partitioner, PartitionerKind};

fn vectors() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/murmur2_vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("read murmur2_vectors.json");
    serde_json::from_str(&text).expect("parse murmur2_vectors.json")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn every_vector_matches_java() {
    let v = vectors();
    let cases = v["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 21);
    let partitioner = Partitioner::new(PartitionerKind::Default);
    for case in cases {
        let label = case["label"].as_str().unwrap_or("?");
        let key = hex(case["key_hex"].as_str().expect("key_hex"));
        let expected = case["murmur2_i32"].as_i64().expect("murmur2_i32") as i32;
        assert_eq!(murmur2(&key), expected, "murmur2 of {label}");
        assert_eq!(
            i64::from(to_positive(murmur2(&key))),
            case["to_positive"].as_i64().expect("to_positive"),
            "toPositive of {label}"
        );
        for (n, want) in case["java_partition"].as_object().expect("java_partition") {
            let n: u32 = n.parse().expect("n");
            let want = want.as_u64().expect("partition") as u32;
            assert_eq!(
                java_partition(&key, n),
                want,
                "partition of {label} for n={n}"
            );
            assert_eq!(
                partitioner.partition(Some(&key), n),
                want,
                "partitioner of {label} for n={n}"
            );
        }
    }
}

proptest::proptest! {
    /// Any key maps into range, the same way every time, and `toPositive` never goes negative.
    #[test]
    fn partition_in_range_and_stable(key in proptest::collection::vec(proptest::num::u8::ANY, 0..64), n in 1u32..1000) {
        let p = java_partition(&key, n);
        proptest::prop_assert!(p < n);
        proptest::prop_assert_eq!(p, java_partition(&key, n));
        proptest::prop_assert!(to_positive(murmur2(&key)) >= 0);
    }
}
