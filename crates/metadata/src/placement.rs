//! Replica placement: Kafka 2.8's `AdminUtils.assignReplicasToBrokers` (spec A, B), the
//! CreatePartitions variant (A.4), manual-assignment validation (C.2 step 9, C.4), and a
//! cluster-aware choice of Kafka's two free parameters.
//!
//! Kafka's algorithm has exactly two random inputs, the leader start index and the initial
//! follower shift. Everything else is a closed formula, which is why the placement is
//! reproducible from `tests/data/assignment_vectors.json`. [`PlacementPolicy::ClusterAware`]
//! keeps the formula (and so its per-topic properties: round-robin leaders, no broker twice,
//! one replica per rack when possible) and only picks those two inputs to even out the
//! leader and replica counts of the whole cluster instead of drawing them at random.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rand::Rng;

use crate::errors::ApiError;
use crate::image::MetadataImage;

/// How the controller chooses the start index and initial shift of a new placement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PlacementPolicy {
    /// Kafka: random start index and initial shift (independent draws).
    #[default]
    Kafka,
    /// Same formula, parameters chosen to balance leaders, then replicas, across the cluster.
    ClusterAware,
}

/// KRaft's message when the replication factor exceeds the usable brokers.
pub fn replication_factor_too_large(rf: i32, brokers: usize) -> ApiError {
    ApiError::invalid_replication_factor(format!(
        "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {brokers} broker(s) are registered."
    ))
}

/// Spec A.1 checks, in Kafka's order: partitions, then replication factor, then brokers.
fn check_inputs(n: usize, partitions: i32, rf: i32) -> Result<(), ApiError> {
    if partitions <= 0 {
        return Err(ApiError::invalid_partitions(
            "Number of partitions must be larger than 0.",
        ));
    }
    if rf <= 0 {
        return Err(ApiError::invalid_replication_factor(
            "Replication factor must be larger than 0.",
        ));
    }
    if rf as usize > n {
        return Err(replication_factor_too_large(rf, n));
    }
    Ok(())
}

/// The broker order placement walks, and the rack of every broker when all have one.
struct Layout {
    order: Vec<i32>,
    racks: Option<HashMap<i32, String>>,
    rack_count: usize,
}

/// Rack-unaware when no broker has a rack, rack-aware when all have one, and Kafka's
/// "Not all brokers have rack information" (-1, an `AdminOperationException`) otherwise.
fn layout(brokers: &[(i32, Option<String>)]) -> Result<Layout, ApiError> {
    debug_assert!(
        brokers.windows(2).all(|w| w[0].0 < w[1].0),
        "brokers must be sorted by id and unique"
    );
    let with_rack = brokers.iter().filter(|(_, r)| r.is_some()).count();
    if with_rack == 0 {
        return Ok(Layout {
            order: brokers.iter().map(|(id, _)| *id).collect(),
            racks: None,
            rack_count: 0,
        });
    }
    if with_rack != brokers.len() {
        return Err(ApiError::unknown_server_error(
            "Not all brokers have rack information for replica rack aware assignment.",
        ));
    }
    let racks: HashMap<i32, String> = brokers
        .iter()
        .filter_map(|(id, r)| r.as_ref().map(|r| (*id, r.clone())))
        .collect();
    let order = rack_alternated(&racks);
    let rack_count = racks.values().collect::<BTreeSet<_>>().len();
    Ok(Layout {
        order,
        racks: Some(racks),
        rack_count,
    })
}

/// Spec B.1: racks sorted by name, brokers in a rack sorted by id, one broker from each rack
/// in turn, skipping exhausted racks.
pub fn rack_alternated(racks: &HashMap<i32, String>) -> Vec<i32> {
    let mut by_rack: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (broker, rack) in racks {
        by_rack.entry(rack.as_str()).or_default().push(*broker);
    }
    let mut queues: Vec<std::collections::VecDeque<i32>> = by_rack
        .into_values()
        .map(|mut v| {
            v.sort_unstable();
            v.into()
        })
        .collect();
    let mut out = Vec::with_capacity(racks.len());
    while out.len() < racks.len() {
        for q in queues.iter_mut() {
            if let Some(b) = q.pop_front() {
                out.push(b);
            }
        }
    }
    out
}

/// The core formula (A.2 / B.2) with explicit start index and initial shift.
fn place(
    layout: &Layout,
    partitions: i32,
    rf: i32,
    start: i64,
    initial_shift: i64,
    start_partition_id: i32,
) -> BTreeMap<i32, Vec<i32>> {
    let order = &layout.order;
    let n = order.len() as i64;
    debug_assert!(n > 0 && rf >= 1 && rf as i64 <= n);
    let mut shift = initial_shift;
    let mut out = BTreeMap::new();
    let first_pid = i64::from(start_partition_id.max(0));
    for pid in first_pid..first_pid + i64::from(partitions) {
        // The shift grows each time the *absolute* partition id reaches a multiple of n.
        if pid > 0 && pid % n == 0 {
            shift += 1;
        }
        let lead = (pid + start).rem_euclid(n);
        let replicas = match &layout.racks {
            None => {
                let mut r = Vec::with_capacity(rf as usize);
                r.push(order[lead as usize]);
                for j in 0..i64::from(rf) - 1 {
                    r.push(order[follower_position(lead, shift, j, n)]);
                }
                r
            }
            Some(racks) => rack_aware_replicas(order, racks, layout.rack_count, lead, shift, rf),
        };
        debug_assert_eq!(
            replicas.iter().collect::<BTreeSet<_>>().len(),
            replicas.len()
        );
        // Partition ids beyond i32::MAX cannot be requested (counts are i32 and start >= 0
        // comes from an existing count), so the conversion only guards against misuse.
        let Ok(pid32) = i32::try_from(pid) else { break };
        out.insert(pid32, replicas);
    }
    out
}

/// Index of follower `j` (0-based): the gap `1 + (shift + j) mod (n-1)` is in `1..n`, so a
/// follower never lands on the leader and the followers of one partition are distinct.
fn follower_position(lead: i64, shift: i64, j: i64, n: i64) -> usize {
    debug_assert!(n > 1);
    let gap = 1 + (shift + j).rem_euclid(n - 1);
    ((lead + gap) % n) as usize
}

/// B.2: walk the candidates after the leader; skip a broker whose rack already has a replica
/// while some rack has none, or that already holds a replica while some broker holds none.
fn rack_aware_replicas(
    order: &[i32],
    racks: &HashMap<i32, String>,
    rack_count: usize,
    lead: i64,
    shift: i64,
    rf: i32,
) -> Vec<i32> {
    let n = order.len() as i64;
    let leader = order[lead as usize];
    let mut chosen = vec![leader];
    let mut used_racks: BTreeSet<&str> = BTreeSet::from([racks[&leader].as_str()]);
    let mut used: BTreeSet<i32> = BTreeSet::from([leader]);
    let mut k: i64 = 0;
    for _ in 1..rf {
        // n-1 consecutive k values visit every other broker once, so 2n tries always find one.
        let mut found = None;
        for _ in 0..2 * n {
            let cand =
                order[follower_position(lead, shift.saturating_mul(rack_count as i64), k, n)];
            k += 1;
            let rack = racks[&cand].as_str();
            let rack_ok = !used_racks.contains(rack) || used_racks.len() == rack_count;
            let broker_ok = !used.contains(&cand) || used.len() == order.len();
            if rack_ok && broker_ok {
                found = Some(cand);
                break;
            }
        }
        let cand = found.or_else(|| order.iter().copied().find(|b| !used.contains(b)));
        debug_assert!(cand.is_some(), "rack-aware search found no follower");
        let Some(cand) = cand else { break };
        used_racks.insert(racks[&cand].as_str());
        used.insert(cand);
        chosen.push(cand);
    }
    chosen
}

fn draw(rng: &mut impl Rng, fixed: i32, n: usize) -> i64 {
    if fixed >= 0 {
        i64::from(fixed)
    } else {
        rng.gen_range(0..n as i64)
    }
}

/// Kafka's `assignReplicasToBrokers`. `brokers` must be sorted by id. `fixed_start_index >= 0`
/// pins both the leader start and the initial shift (as Kafka does); otherwise both are drawn
/// from `rng`, independently. `start_partition_id < 0` means 0.
pub fn assign_replicas(
    brokers: &[(i32, Option<String>)],
    partitions: i32,
    replication_factor: i32,
    fixed_start_index: i32,
    start_partition_id: i32,
    rng: &mut impl Rng,
) -> Result<BTreeMap<i32, Vec<i32>>, ApiError> {
    check_inputs(brokers.len(), partitions, replication_factor)?;
    let layout = layout(brokers)?;
    let start = draw(rng, fixed_start_index, brokers.len());
    let shift = draw(rng, fixed_start_index, brokers.len());
    Ok(place(
        &layout,
        partitions,
        replication_factor,
        start,
        shift,
        start_partition_id,
    ))
}

/// The rack-unaware formula with an explicit initial shift (Kafka draws start index and shift
/// independently; this pins a reachable state, e.g. the Portuguese seed's start 0 / shift 3).
pub fn assign_replicas_with_shift(
    brokers: &[i32],
    partitions: i32,
    replication_factor: i32,
    start_index: i32,
    initial_shift: i32,
    start_partition_id: i32,
) -> Result<BTreeMap<i32, Vec<i32>>, ApiError> {
    check_inputs(brokers.len(), partitions, replication_factor)?;
    let layout = Layout {
        order: brokers.to_vec(),
        racks: None,
        rack_count: 0,
    };
    Ok(place(
        &layout,
        partitions,
        replication_factor,
        i64::from(start_index),
        i64::from(initial_shift),
        start_partition_id,
    ))
}

/// A.4 parameters for growing a topic: (replication factor, fixed start index, start
/// partition id, partitions to add).
fn add_partitions_params(
    existing: &BTreeMap<i32, Vec<i32>>,
    brokers: &[(i32, Option<String>)],
    new_total: i32,
) -> Result<(i32, i32, i32, i32), ApiError> {
    let Some(p0) = existing.get(&0).filter(|p| !p.is_empty()) else {
        return Err(ApiError::unknown_server_error(
            "Invalid state: the topic appears to have no partition 0.",
        ));
    };
    let current = i32::try_from(existing.len()).unwrap_or(i32::MAX);
    if new_total <= current {
        return Err(ApiError::invalid_partitions(format!(
            "Topic currently has {current} partition(s), which is not lower than the requested {new_total}."
        )));
    }
    let rf = i32::try_from(p0.len()).unwrap_or(i32::MAX);
    let start = brokers.iter().position(|(id, _)| *id >= p0[0]).unwrap_or(0);
    Ok((rf, start as i32, current, new_total - current))
}

/// CreatePartitions placement (A.4): RF of partition 0, start at the first broker whose id is
/// `>=` partition 0's preferred leader, partition ids continuing from the current count.
/// Returns only the new partitions.
pub fn add_partitions_assignment(
    existing: &BTreeMap<i32, Vec<i32>>,
    brokers: &[(i32, Option<String>)],
    new_total: i32,
    rng: &mut impl Rng,
) -> Result<BTreeMap<i32, Vec<i32>>, ApiError> {
    let (rf, start, first_new, to_add) = add_partitions_params(existing, brokers, new_total)?;
    assign_replicas(brokers, to_add, rf, start, first_new, rng)
}

/// Leader (preferred replica) and replica counts per broker: the load the cluster-aware
/// policy balances.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerLoad {
    pub leaders: BTreeMap<i32, u64>,
    pub replicas: BTreeMap<i32, u64>,
}

impl BrokerLoad {
    /// Counts every partition of the image: its preferred leader (first replica, where
    /// leadership converges after preferred elections) and all its replicas.
    pub fn from_image(image: &MetadataImage) -> Self {
        let mut load = Self::default();
        for topic in image.topics.values() {
            for p in topic.partitions.values() {
                load.add(&p.replicas);
            }
        }
        load
    }

    /// Adds one partition's replica list.
    pub fn add(&mut self, replicas: &[i32]) {
        if let Some(first) = replicas.first() {
            *self.leaders.entry(*first).or_default() += 1;
        }
        for r in replicas {
            *self.replicas.entry(*r).or_default() += 1;
        }
    }
}

/// Sum of squared per-broker counts over `brokers`: lower means more even.
fn imbalance(base: &BTreeMap<i32, u64>, added: &HashMap<i32, u64>, brokers: &[i32]) -> u128 {
    brokers
        .iter()
        .map(|b| {
            let c =
                u128::from(base.get(b).copied().unwrap_or(0) + added.get(b).copied().unwrap_or(0));
            c * c
        })
        .sum()
}

/// Kafka's formula with the start index chosen to even out leaders across the cluster, then
/// the initial shift chosen to even out replicas; ties go to the smallest index, so the
/// result is deterministic. `start_partition_id < 0` means 0.
pub fn assign_replicas_cluster_aware(
    brokers: &[(i32, Option<String>)],
    partitions: i32,
    replication_factor: i32,
    start_partition_id: i32,
    load: &BrokerLoad,
) -> Result<BTreeMap<i32, Vec<i32>>, ApiError> {
    check_inputs(brokers.len(), partitions, replication_factor)?;
    let layout = layout(brokers)?;
    let n = layout.order.len() as i64;
    let ids: Vec<i32> = layout.order.clone();
    let first_pid = i64::from(start_partition_id.max(0));

    // Leaders do not depend on the shift: lead(p) = order[(p + start) mod n].
    // Every start index that balances leaders best is a candidate; the replica balance then
    // picks among them (and the shift), so ties in leaders never cost replica balance.
    let mut best_starts: (u128, Vec<i64>) = (u128::MAX, Vec::new());
    for start in 0..n {
        let mut added: HashMap<i32, u64> = HashMap::new();
        // Leaders repeat with period n: full rounds add the same count to every broker (which
        // does not change the ranking), so only the remaining partitions matter.
        for pid in first_pid..first_pid + i64::from(partitions) % n {
            *added
                .entry(layout.order[(pid + start).rem_euclid(n) as usize])
                .or_default() += 1;
        }
        let score = imbalance(&load.leaders, &added, &ids);
        if score < best_starts.0 {
            best_starts = (score, vec![start]);
        } else if score == best_starts.0 {
            best_starts.1.push(start);
        }
    }
    let start = best_starts.1.first().copied().unwrap_or(0);

    let mut best = None;
    let candidates = best_starts
        .1
        .iter()
        .flat_map(|&start| (0..n.max(1)).map(move |shift| (start, shift)));
    for (start, shift) in candidates {
        let placed = place(
            &layout,
            partitions,
            replication_factor,
            start,
            shift,
            start_partition_id,
        );
        let mut added: HashMap<i32, u64> = HashMap::new();
        for replicas in placed.values() {
            for r in replicas {
                *added.entry(*r).or_default() += 1;
            }
        }
        let score = imbalance(&load.replicas, &added, &ids);
        if best.as_ref().is_none_or(|(s, _)| score < *s) {
            best = Some((score, placed));
        }
    }
    let Some((_, placed)) = best else {
        return Ok(place(
            &layout,
            partitions,
            replication_factor,
            start,
            start,
            start_partition_id,
        ));
    };
    Ok(placed)
}

/// CreatePartitions under the cluster-aware policy: A.4's replication factor and partition
/// ids, start index and shift chosen as in [`assign_replicas_cluster_aware`].
pub fn add_partitions_cluster_aware(
    existing: &BTreeMap<i32, Vec<i32>>,
    brokers: &[(i32, Option<String>)],
    new_total: i32,
    load: &BrokerLoad,
) -> Result<BTreeMap<i32, Vec<i32>>, ApiError> {
    let (rf, _start, first_new, to_add) = add_partitions_params(existing, brokers, new_total)?;
    assign_replicas_cluster_aware(brokers, to_add, rf, first_new, load)
}

/// KRaft's `validateManualPartitionAssignment` for one partition: non-empty, every broker
/// registered, no broker twice (checked over the sorted ids, as KRaft does), and the same
/// size as the previous partitions.
pub fn validate_manual_partition(
    replicas: &[i32],
    registered_brokers: &BTreeSet<i32>,
    expected_rf: Option<usize>,
) -> Result<(), ApiError> {
    if replicas.is_empty() {
        return Err(ApiError::invalid_replica_assignment(
            "The manual partition assignment includes an empty replica list.",
        ));
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    let mut previous = None;
    for b in sorted {
        if !registered_brokers.contains(&b) {
            return Err(ApiError::invalid_replica_assignment(format!(
                "The manual partition assignment includes broker {b}, but no such broker is registered."
            )));
        }
        if previous == Some(b) {
            return Err(ApiError::invalid_replica_assignment(format!(
                "The manual partition assignment includes the broker {b} more than once."
            )));
        }
        previous = Some(b);
    }
    if let Some(rf) = expected_rf {
        if replicas.len() != rf {
            return Err(ApiError::invalid_replica_assignment(format!(
                "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
                replicas.len()
            )));
        }
    }
    Ok(())
}

/// C.2 step 9 for a whole CreateTopics assignment (KRaft messages): every partition as in
/// [`validate_manual_partition`], all of one size, ids exactly `0..count`.
pub fn validate_manual_assignment(
    assignment: &BTreeMap<i32, Vec<i32>>,
    registered_brokers: &BTreeSet<i32>,
) -> Result<(), ApiError> {
    let mut rf = None;
    for replicas in assignment.values() {
        validate_manual_partition(replicas, registered_brokers, rf)?;
        rf = Some(replicas.len());
    }
    let consecutive = assignment
        .keys()
        .enumerate()
        .all(|(i, p)| i64::from(*p) == i as i64);
    if !consecutive {
        return Err(ApiError::invalid_replica_assignment(
            "partitions should be a consecutive 0-based integer sequence",
        ));
    }
    Ok(())
}
