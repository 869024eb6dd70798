//! The nemesis schedule and the topology rules, as pure code: which fault starts when, on
//! which nodes, and which directed links a partition cuts. The executor (`executor.rs`)
//! applies them to processes and proxies.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// The fault families `--nemesis` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    Partition,
    Kill,
    Pause,
    Disk,
    Term,
    Latency,
}

impl std::str::FromStr for Family {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.trim() {
            "partition" => Self::Partition,
            "kill" => Self::Kill,
            "pause" => Self::Pause,
            "disk" => Self::Disk,
            "term" | "restart" => Self::Term,
            "latency" => Self::Latency,
            other => {
                return Err(format!(
                    "unknown nemesis '{other}': use partition, kill, pause, disk, term, latency"
                ))
            }
        })
    }
}

/// How a partition splits the nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Split {
    /// These nodes (fewer than half) are cut from the others.
    Minority(Vec<i32>),
    /// Jepsen's majorities ring: every node sees a majority, no two see the same one.
    MajorityRing,
    /// The active metadata-quorum leader alone (resolved when the fault starts).
    ControllerAlone,
    /// `bridge` sees everyone; the two halves on either side of it do not see each other.
    Bridge { bridge: i32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    Partition(Split),
    /// `kill -9`, restarted when the fault ends.
    Kill(i32),
    /// SIGSTOP, SIGCONT when the fault ends.
    Pause(i32),
    /// The node's data filesystem filled to the last byte, freed when the fault ends.
    Disk(i32),
    /// SIGTERM (controlled shutdown) and an immediate restart.
    Term(i32),
    /// Every link into this node delayed.
    Latency {
        node: i32,
        ms: u64,
    },
}

impl Fault {
    pub fn name(&self) -> String {
        match self {
            Fault::Partition(Split::Minority(nodes)) => format!("partition minority {nodes:?}"),
            Fault::Partition(Split::MajorityRing) => "partition majorities-ring".into(),
            Fault::Partition(Split::ControllerAlone) => "partition controller-alone".into(),
            Fault::Partition(Split::Bridge { bridge }) => format!("partition bridge via {bridge}"),
            Fault::Kill(n) => format!("kill -9 node {n}"),
            Fault::Pause(n) => format!("pause node {n}"),
            Fault::Disk(n) => format!("disk full node {n}"),
            Fault::Term(n) => format!("SIGTERM restart node {n}"),
            Fault::Latency { node, ms } => format!("latency {ms} ms into node {node}"),
        }
    }
}

/// One scheduled fault: active from `start_ms` to `end_ms` (run time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub start_ms: u64,
    pub end_ms: u64,
    pub fault: Fault,
}

/// Faults one after another (a quiet gap between them), each drawn from `families` with the
/// seed, each lasting 4..12 s: longer than the session (3 s) and lag (3 s) timeouts the
/// harness configures. The last one ends by `duration_ms`.
pub fn schedule(seed: u64, families: &[Family], nodes: i32, duration_ms: u64) -> Vec<Step> {
    let mut rng = StdRng::seed_from_u64(seed);
    let ids: Vec<i32> = (1..=nodes).collect();
    let mut out = Vec::new();
    let mut t = 3_000 + rng.gen_range(0..2_000);
    while !families.is_empty() {
        let family = *families.choose(&mut rng).unwrap_or(&Family::Kill);
        let length = rng.gen_range(4_000..12_000);
        if t + length > duration_ms {
            break;
        }
        let node = *ids.choose(&mut rng).unwrap_or(&1);
        let fault = match family {
            Family::Partition => Fault::Partition(pick_split(&mut rng, nodes)),
            Family::Kill => Fault::Kill(node),
            Family::Pause => Fault::Pause(node),
            Family::Disk => Fault::Disk(node),
            Family::Term => Fault::Term(node),
            Family::Latency => Fault::Latency {
                node,
                ms: rng.gen_range(20..200),
            },
        };
        let length = if matches!(fault, Fault::Term(_)) {
            1_000
        } else {
            length
        };
        out.push(Step {
            start_ms: t,
            end_ms: t + length,
            fault,
        });
        t += length + rng.gen_range(2_000..6_000);
    }
    out
}

fn pick_split(rng: &mut StdRng, nodes: i32) -> Split {
    let mut ids: Vec<i32> = (1..=nodes).collect();
    match rng.gen_range(0..4) {
        0 => Split::ControllerAlone,
        1 => Split::Bridge {
            bridge: *ids.choose(rng).unwrap_or(&1),
        },
        2 if nodes >= 5 => Split::MajorityRing,
        _ => {
            ids.shuffle(rng);
            let size = rng.gen_range(1..=((nodes - 1) / 2).max(1));
            let mut minority: Vec<i32> = ids.into_iter().take(size as usize).collect();
            minority.sort_unstable();
            Split::Minority(minority)
        }
    }
}

/// The undirected node pairs a split cuts (both directions of each are cut). `controller` is
/// the node `ControllerAlone` isolates.
pub fn cut_pairs(split: &Split, nodes: i32, controller: i32) -> BTreeSet<(i32, i32)> {
    let ids: Vec<i32> = (1..=nodes).collect();
    let sees = |a: i32, b: i32| -> bool {
        match split {
            Split::Minority(m) => m.contains(&a) == m.contains(&b),
            Split::ControllerAlone => (a == controller) == (b == controller),
            Split::Bridge { bridge } => {
                if a == *bridge || b == *bridge {
                    return true;
                }
                // The others, in id order without the bridge, split into two halves.
                let others: Vec<i32> = ids.iter().copied().filter(|i| i != bridge).collect();
                let half = others.len() / 2;
                let side = |x: i32| others.iter().position(|o| *o == x).unwrap_or(0) < half;
                side(a) == side(b)
            }
            Split::MajorityRing => {
                // Node i sees its ring neighbours i-1 and i+1 (with itself, 3 of 5).
                let n = nodes;
                let d = (a - b).rem_euclid(n).min((b - a).rem_euclid(n));
                d <= 1
            }
        }
    };
    let mut out = BTreeSet::new();
    for &a in &ids {
        for &b in &ids {
            if a < b && !sees(a, b) {
                out.insert((a, b));
            }
        }
    }
    out
}

/// Whether some majority of the nodes is up (not killed, paused) and pairwise connected, with
/// a majority of the metadata quorum's voters (nodes `1..=voters`; the rest are broker-only)
/// among them.
pub fn majority_connected(
    nodes: i32,
    voters: i32,
    down: &BTreeSet<i32>,
    cut: &BTreeSet<(i32, i32)>,
) -> bool {
    let ids: Vec<i32> = (1..=nodes).filter(|i| !down.contains(i)).collect();
    let need = nodes / 2 + 1;
    let need_voters = voters / 2 + 1;
    let n = ids.len();
    if (n as i32) < need {
        return false;
    }
    (0u32..(1 << n)).any(|mask| {
        let group: Vec<i32> = (0..n)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| ids[i])
            .collect();
        group.len() as i32 >= need
            && group.iter().filter(|id| **id <= voters).count() as i32 >= need_voters
            && group.iter().all(|a| {
                group
                    .iter()
                    .all(|b| a >= b || !cut.contains(&(*a.min(b), *a.max(b))))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_schedule() {
        let f = [Family::Partition, Family::Kill, Family::Pause, Family::Disk];
        assert_eq!(schedule(7, &f, 3, 60_000), schedule(7, &f, 3, 60_000));
        assert_ne!(schedule(7, &f, 3, 60_000), schedule(8, &f, 3, 60_000));
    }

    #[test]
    fn faults_never_overlap_and_end_before_the_deadline() {
        let f = [Family::Partition, Family::Kill, Family::Term];
        for seed in 0..50 {
            let s = schedule(seed, &f, 5, 120_000);
            for w in s.windows(2) {
                assert!(w[0].end_ms < w[1].start_ms);
            }
            assert!(s.iter().all(|x| x.end_ms <= 120_000));
        }
    }

    #[test]
    fn a_minority_partition_keeps_a_connected_majority() {
        let cut = cut_pairs(&Split::Minority(vec![2]), 3, 0);
        assert_eq!(cut, BTreeSet::from([(1, 2), (2, 3)]));
        assert!(majority_connected(3, 3, &BTreeSet::new(), &cut));
        assert!(!majority_connected(3, 3, &BTreeSet::from([1]), &cut));
    }

    #[test]
    fn a_bridge_cuts_only_the_two_halves_apart() {
        let cut = cut_pairs(&Split::Bridge { bridge: 1 }, 3, 0);
        assert_eq!(cut, BTreeSet::from([(2, 3)]));
        let cut5 = cut_pairs(&Split::Bridge { bridge: 3 }, 5, 0);
        assert_eq!(cut5, BTreeSet::from([(1, 4), (1, 5), (2, 4), (2, 5)]));
    }

    #[test]
    fn the_majorities_ring_leaves_every_node_a_majority_but_no_common_one() {
        let cut = cut_pairs(&Split::MajorityRing, 5, 0);
        for a in 1..=5 {
            let seen = (1..=5)
                .filter(|b| *b == a || !cut.contains(&(a.min(*b), a.max(*b))))
                .count();
            assert_eq!(seen, 3, "node {a} sees a majority");
        }
        assert!(!majority_connected(5, 5, &BTreeSet::new(), &cut));
    }

    #[test]
    fn with_broker_only_nodes_the_majority_needs_a_majority_of_the_voters() {
        // 3 voters (1-3) and 2 broker-only nodes (4, 5): {1, 4, 5} is a majority of the
        // nodes but holds one voter, so no quorum; {1, 2, 4} holds two.
        let cut = cut_pairs(&Split::Minority(vec![2, 3]), 5, 0);
        assert!(majority_connected(5, 5, &BTreeSet::new(), &cut));
        assert!(!majority_connected(5, 3, &BTreeSet::new(), &cut));
        let cut = cut_pairs(&Split::Minority(vec![3, 5]), 5, 0);
        assert!(majority_connected(5, 3, &BTreeSet::new(), &cut));
        assert!(!majority_connected(5, 3, &BTreeSet::from([1]), &cut));
    }

    #[test]
    fn the_controller_is_cut_from_everyone() {
        let cut = cut_pairs(&Split::ControllerAlone, 5, 4);
        assert_eq!(cut.len(), 4);
        assert!(cut.iter().all(|(a, b)| *a == 4 || *b == 4));
    }
}
