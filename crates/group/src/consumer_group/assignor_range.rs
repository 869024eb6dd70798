//! The `range` server-side assignor: per topic, the subscribed members sorted by member id get
//! contiguous ranges, the first `partitions % members` one partition more, like the classic
//! RangeAssignor. Predictable (co-partitioned topics land on the same member) rather than
//! balanced across topics or sticky.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::api::Assignment;
use super::assignor::MemberSpec;

pub(crate) fn assign(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.id.to_string(), Assignment::new()))
        .collect();
    for (topic, count) in partitions {
        let mut subscribers: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .map(|m| m.id)
            .collect();
        subscribers.sort_unstable();
        if subscribers.is_empty() {
            continue;
        }
        let count = (*count).max(0) as usize;
        let per = count / subscribers.len();
        let extra = count % subscribers.len();
        for (i, id) in subscribers.iter().enumerate() {
            let start = i * per + i.min(extra);
            let len = per + usize::from(i < extra);
            if len == 0 {
                continue;
            }
            let set = (start..start + len).map(|p| p as i32).collect();
            if let Some(a) = out.get_mut(*id) {
                a.insert(*topic, set);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn t(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    /// Range vectors: (partitions per topic, members with their topics, expected ranges).
    #[test]
    fn range_vectors() {
        type Case = (
            Vec<(u128, i32)>,
            Vec<(&'static str, Vec<u128>)>,
            Vec<(&'static str, u128, Vec<i32>)>,
        );
        let cases: Vec<Case> = vec![
            // 7 over 3: 3, 2, 2.
            (
                vec![(1, 7)],
                vec![("c", vec![1]), ("a", vec![1]), ("b", vec![1])],
                vec![
                    ("a", 1, vec![0, 1, 2]),
                    ("b", 1, vec![3, 4]),
                    ("c", 1, vec![5, 6]),
                ],
            ),
            // Per topic: t1 over a,b,c; t2 over a,b only.
            (
                vec![(1, 3), (2, 2)],
                vec![("a", vec![1, 2]), ("b", vec![1, 2]), ("c", vec![1])],
                vec![
                    ("a", 1, vec![0]),
                    ("b", 1, vec![1]),
                    ("c", 1, vec![2]),
                    ("a", 2, vec![0]),
                    ("b", 2, vec![1]),
                ],
            ),
            // More members than partitions: the last stay idle.
            (
                vec![(1, 2)],
                vec![("a", vec![1]), ("b", vec![1]), ("c", vec![1])],
                vec![("a", 1, vec![0]), ("b", 1, vec![1])],
            ),
            // Co-partitioning: same ranges on both topics.
            (
                vec![(1, 4), (2, 4)],
                vec![("x", vec![1, 2]), ("y", vec![1, 2])],
                vec![
                    ("x", 1, vec![0, 1]),
                    ("y", 1, vec![2, 3]),
                    ("x", 2, vec![0, 1]),
                    ("y", 2, vec![2, 3]),
                ],
            ),
        ];
        for (parts, members, expected) in cases {
            let empty = Assignment::new();
            let specs: Vec<MemberSpec<'_>> = members
                .iter()
                .map(|(id, ts)| MemberSpec {
                    id,
                    topics: ts.iter().map(|n| t(*n)).collect(),
                    current: &empty,
                })
                .collect();
            let parts: BTreeMap<Uuid, i32> = parts.iter().map(|(n, c)| (t(*n), *c)).collect();
            let out = assign(&specs, &parts);
            let mut want: BTreeMap<String, Assignment> = members
                .iter()
                .map(|(id, _)| (id.to_string(), Assignment::new()))
                .collect();
            for (id, topic, ps) in expected {
                want.get_mut(id)
                    .unwrap()
                    .insert(t(topic), ps.into_iter().collect::<BTreeSet<i32>>());
            }
            assert_eq!(out, want);
        }
    }
}
