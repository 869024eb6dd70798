//! `--generate`: propose moving whole topics onto a broker list, computed client-side with
//! Kafka's `AdminUtils.assignReplicasToBrokers` (random start index and shift; rack-aware
//! when every listed broker has a rack, unless `--disable-rack-aware`), keeping each topic's
//! partition count and replication factor.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context, Result};
use rand::Rng;
use runnel_client::{Admin, BrokerInfo, TopicPartition};
use runnel_metadata::placement::assign_replicas;

use super::current::current_assignment;
use super::json::{duplicates, format_reassignment_json, parse_topics_to_move};

/// `--broker-list 1,2,3`, rejecting duplicates with Kafka's message.
pub fn parse_broker_list(s: &str) -> Result<Vec<i32>> {
    let ids: Vec<i32> = s
        .split(',')
        .map(|b| {
            b.trim()
                .parse::<i32>()
                .with_context(|| format!("--broker-list: '{b}' is not a broker id"))
        })
        .collect::<Result<_>>()?;
    let dups = duplicates(&ids);
    if !dups.is_empty() {
        let list: Vec<String> = dups.iter().map(i32::to_string).collect();
        bail!(
            "Broker list contains duplicate entries: [{}]",
            list.join(", ")
        );
    }
    Ok(ids)
}

/// The brokers of `list` that are in the cluster (others are silently left out, as Kafka
/// does), sorted by id, with their racks unless rack awareness is disabled.
pub fn target_brokers(
    cluster: &[BrokerInfo],
    list: &[i32],
    rack_aware: bool,
) -> Result<Vec<(i32, Option<String>)>> {
    let wanted: BTreeSet<i32> = list.iter().copied().collect();
    let mut out: Vec<(i32, Option<String>)> = cluster
        .iter()
        .filter(|b| wanted.contains(&b.id))
        .map(|b| (b.id, b.rack.clone().filter(|_| rack_aware)))
        .collect();
    out.sort_by_key(|(id, _)| *id);
    out.dedup_by_key(|(id, _)| *id);
    let rackless = out.iter().filter(|(_, r)| r.is_none()).count();
    if rack_aware && rackless != 0 && rackless != out.len() {
        bail!("Not all brokers have rack information. Add --disable-rack-aware in command line to make replica assignment without rack information.");
    }
    Ok(out)
}

/// The proposed assignment: per topic, Kafka's placement over `brokers` with the topic's
/// partition count and the replication factor of its first partition.
pub fn propose(
    current: &BTreeMap<TopicPartition, Vec<i32>>,
    brokers: &[(i32, Option<String>)],
    rng: &mut impl Rng,
) -> Result<BTreeMap<TopicPartition, Vec<i32>>> {
    let mut by_topic: BTreeMap<&str, Vec<&Vec<i32>>> = BTreeMap::new();
    for (tp, replicas) in current {
        by_topic
            .entry(tp.topic.as_str())
            .or_default()
            .push(replicas);
    }
    let mut out = BTreeMap::new();
    for (topic, partitions) in by_topic {
        let partition_count = i32::try_from(partitions.len()).unwrap_or(i32::MAX);
        let rf = partitions
            .first()
            .map_or(0, |r| i32::try_from(r.len()).unwrap_or(i32::MAX));
        if rf <= 0 {
            bail!("Replication factor must be larger than 0.");
        }
        if rf as usize > brokers.len() {
            bail!(
                "Replication factor: {rf} larger than available brokers: {}.",
                brokers.len()
            );
        }
        let placed = assign_replicas(brokers, partition_count, rf, -1, 0, rng)
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        for (partition, replicas) in placed {
            out.insert(TopicPartition::new(topic, partition), replicas);
        }
    }
    Ok(out)
}

/// The tool's output: the current assignment (to keep for rollback) and the proposal.
pub fn format_generate(
    current: &BTreeMap<TopicPartition, Vec<i32>>,
    proposed: &BTreeMap<TopicPartition, Vec<i32>>,
) -> String {
    format!(
        "Current partition replica assignment\n{}\n\nProposed partition reassignment configuration\n{}\n",
        format_reassignment_json(current),
        format_reassignment_json(proposed)
    )
}

/// Runs `--generate`.
pub async fn generate(
    admin: &Admin,
    topics_json: &str,
    broker_list: &str,
    rack_aware: bool,
) -> Result<()> {
    let brokers = parse_broker_list(broker_list)?;
    let topics = parse_topics_to_move(topics_json)?;
    let dups = duplicates(&topics);
    if !dups.is_empty() {
        bail!(
            "List of topics to reassign contains duplicate entries: [{}]",
            dups.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    let current = current_assignment(admin, &topics).await?;
    if let Some(t) = current.missing.first() {
        bail!("Topic {t} not found.");
    }
    let cluster = admin.describe_cluster().await?;
    let targets = target_brokers(&cluster.brokers, &brokers, rack_aware)?;
    let proposed = propose(&current.replicas, &targets, &mut rand::thread_rng())?;
    print!("{}", format_generate(&current.replicas, &proposed));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn broker(id: i32, rack: Option<&str>) -> BrokerInfo {
        BrokerInfo {
            id,
            host: "h".into(),
            port: 9092,
            rack: rack.map(str::to_owned),
        }
    }

    fn current(topic: &str, partitions: i32, rf: usize) -> BTreeMap<TopicPartition, Vec<i32>> {
        (0..partitions)
            .map(|p| (TopicPartition::new(topic, p), (1..=rf as i32).collect()))
            .collect()
    }

    #[test]
    fn broker_list() {
        assert_eq!(
            parse_broker_list("1, 2,3").unwrap_or_default(),
            vec![1, 2, 3]
        );
        assert_eq!(
            parse_broker_list("1,2,1")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default(),
            "Broker list contains duplicate entries: [1]"
        );
        assert!(parse_broker_list("1,x").is_err());
    }

    #[test]
    fn target_brokers_skip_unknown_and_check_racks() {
        let cluster = [broker(3, Some("a")), broker(1, Some("b")), broker(2, None)];
        let t = target_brokers(&cluster, &[1, 3, 9], true).unwrap_or_default();
        assert_eq!(t, vec![(1, Some("b".into())), (3, Some("a".into()))]);
        assert!(target_brokers(&cluster, &[1, 2], true).is_err());
        let t = target_brokers(&cluster, &[1, 2], false).unwrap_or_default();
        assert_eq!(t, vec![(1, None), (2, None)]);
    }

    #[test]
    fn proposal_moves_a_topic_onto_the_new_brokers() {
        let brokers: Vec<(i32, Option<String>)> = (4..=6).map(|b| (b, None)).collect();
        let mut cur = current("t", 6, 2);
        cur.extend(current("u", 1, 3));
        for seed in 0..20 {
            let mut rng = StdRng::seed_from_u64(seed);
            let proposed = propose(&cur, &brokers, &mut rng).unwrap_or_default();
            assert_eq!(
                proposed.keys().collect::<Vec<_>>(),
                cur.keys().collect::<Vec<_>>()
            );
            for (tp, replicas) in &proposed {
                let expected_rf = if tp.topic == "t" { 2 } else { 3 };
                assert_eq!(replicas.len(), expected_rf);
                assert!(replicas.iter().all(|b| (4..=6).contains(b)));
                assert_eq!(duplicates(replicas).len(), 0);
            }
            // Kafka's placement: leaders go round-robin over the brokers.
            let leaders: Vec<i32> = (0..6)
                .filter_map(|p| proposed.get(&TopicPartition::new("t", p)).map(|r| r[0]))
                .collect();
            for w in leaders.windows(2) {
                assert_eq!((w[0] - 4 + 1) % 3, w[1] - 4);
            }
        }
    }

    #[test]
    fn proposal_rejects_too_few_brokers() {
        let brokers = vec![(1, None), (2, None)];
        let err = propose(&current("t", 2, 3), &brokers, &mut StdRng::seed_from_u64(1))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            err,
            "Replication factor: 3 larger than available brokers: 2."
        );
    }

    #[test]
    fn output_layout() {
        let cur = current("t", 1, 1);
        let mut proposed = BTreeMap::new();
        proposed.insert(TopicPartition::new("t", 0), vec![2]);
        assert_eq!(
            format_generate(&cur, &proposed),
            "Current partition replica assignment\n\
             {\"version\":1,\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"replicas\":[1],\"log_dirs\":[\"any\"]}]}\n\
             \n\
             Proposed partition reassignment configuration\n\
             {\"version\":1,\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"replicas\":[2],\"log_dirs\":[\"any\"]}]}\n"
        );
    }
}
