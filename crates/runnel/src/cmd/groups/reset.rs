//! `--reset-offsets`: compute new committed offsets for an inactive group (earliest, latest,
//! current, an offset, a time, or a shift), print Kafka's NEW-OFFSET table, and with
//! `--execute` store them as a simple commit. Kafka refuses groups with active members, and
//! so do we: their positions would overwrite the reset on the next commit.

use runnel_codes::GROUP_ID_NOT_FOUND;
use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use runnel_client::admin::OffsetSpec;
use runnel_client::{Admin, ClientError, OffsetAndMetadata, TopicPartition};

use super::datetime::parse_datetime;
use super::GroupsArgs;

/// Where to move the offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Earliest,
    Latest,
    Current,
    Offset(i64),
    Datetime(i64),
    Shift(i64),
}

fn scenario(args: &GroupsArgs) -> Result<Scenario> {
    let mut chosen = Vec::new();
    if args.to_earliest {
        chosen.push(Scenario::Earliest);
    }
    if args.to_latest {
        chosen.push(Scenario::Latest);
    }
    if args.to_current {
        chosen.push(Scenario::Current);
    }
    if let Some(o) = args.to_offset {
        chosen.push(Scenario::Offset(o));
    }
    if let Some(d) = &args.to_datetime {
        chosen.push(Scenario::Datetime(parse_datetime(d)?));
    }
    if let Some(n) = args.shift_by {
        chosen.push(Scenario::Shift(n));
    }
    match chosen.as_slice() {
        [one] => Ok(*one),
        _ => bail!(
            "Option [reset-offsets] takes exactly one of these options: --to-datetime, --to-earliest, --to-latest, --to-current, --to-offset, --shift-by"
        ),
    }
}

/// `T` (every partition) or `T:p1,p2`.
pub fn parse_topic_spec(spec: &str) -> Result<(String, Option<Vec<i32>>)> {
    match spec.split_once(':') {
        None => Ok((spec.to_owned(), None)),
        Some((topic, parts)) => {
            let ps = parts
                .split(',')
                .map(|p| {
                    p.trim()
                        .parse::<i32>()
                        .with_context(|| format!("--topic {spec}: '{p}' is not a partition"))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((topic.to_owned(), Some(ps)))
        }
    }
}

pub async fn run(admin: &Admin, args: &GroupsArgs, groups: &[String]) -> Result<()> {
    let scenario = scenario(args)?;
    if args.execute && args.dry_run {
        bail!("Option [reset-offsets] takes at most one of --execute and --dry-run");
    }
    if args.all_topics != args.topic.is_empty() {
        bail!("One of the reset scopes should be defined: --all-topics, --topic.");
    }
    if !args.execute && !args.dry_run {
        eprintln!("WARN: No action will be performed as the --execute option is missing. Add --dry-run explicitly to keep this behaviour without the warning.");
    }
    let mut results = Vec::new();
    for group in groups {
        let state = match admin
            .describe_groups(std::slice::from_ref(group))
            .await?
            .pop()
        {
            Some((_, Ok(d))) => d.state,
            Some((
                _,
                Err(ClientError::Kafka {
                    code: GROUP_ID_NOT_FOUND,
                    ..
                }),
            ))
            | None => "Dead".into(),
            Some((_, Err(e))) => return Err(e.into()),
        };
        if state != "Empty" && state != "Dead" {
            bail!("Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.");
        }
        let partitions = partitions_to_reset(admin, args, group).await?;
        let offsets = new_offsets(admin, group, &partitions, scenario).await?;
        if args.execute {
            let commit: Vec<_> = offsets
                .iter()
                .map(|(tp, o)| (tp.clone(), OffsetAndMetadata::new(*o)))
                .collect();
            for (tp, r) in admin.alter_group_offsets(group, &commit).await? {
                r.with_context(|| format!("resetting {tp} of group '{group}'"))?;
            }
        }
        results.push((group.clone(), offsets));
    }
    if results.iter().any(|(_, o)| !o.is_empty()) {
        println!(
            "\n{:<30} {:<30} {:<10} {:<15}",
            "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"
        );
    }
    for (group, offsets) in results {
        for (tp, offset) in offsets {
            println!(
                "{:<30} {:<30} {:<10} {:<15}",
                group, tp.topic, tp.partition, offset
            );
        }
    }
    Ok(())
}

async fn partitions_to_reset(
    admin: &Admin,
    args: &GroupsArgs,
    group: &str,
) -> Result<Vec<TopicPartition>> {
    if args.all_topics {
        return Ok(admin
            .list_group_offsets(group, None)
            .await?
            .into_iter()
            .map(|(tp, _)| tp)
            .collect());
    }
    let mut out = Vec::new();
    for spec in &args.topic {
        let (topic, parts) = parse_topic_spec(spec)?;
        let info = admin.client().topic(&topic).await?;
        match parts {
            Some(ps) => {
                for p in ps {
                    if info.partition(p).is_none() {
                        bail!("partition {p} does not exist in topic '{topic}'");
                    }
                    out.push(TopicPartition::new(topic.clone(), p));
                }
            }
            None => out.extend(
                info.partitions
                    .iter()
                    .map(|p| TopicPartition::new(topic.clone(), p.partition)),
            ),
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

async fn list(
    admin: &Admin,
    partitions: &[TopicPartition],
    spec: OffsetSpec,
) -> Result<BTreeMap<TopicPartition, i64>> {
    let queries: Vec<_> = partitions
        .iter()
        .map(|tp| (tp.topic.clone(), tp.partition, spec))
        .collect();
    let mut out = BTreeMap::new();
    for ((topic, partition), r) in admin.list_offsets(&queries).await? {
        out.insert(TopicPartition::new(topic, partition), r?.offset);
    }
    Ok(out)
}

async fn new_offsets(
    admin: &Admin,
    group: &str,
    partitions: &[TopicPartition],
    scenario: Scenario,
) -> Result<BTreeMap<TopicPartition, i64>> {
    if partitions.is_empty() {
        return Ok(BTreeMap::new());
    }
    let earliest = list(admin, partitions, OffsetSpec::Earliest).await?;
    let latest = list(admin, partitions, OffsetSpec::Latest).await?;
    let committed: BTreeMap<TopicPartition, i64> =
        if matches!(scenario, Scenario::Current | Scenario::Shift(_)) {
            admin
                .list_group_offsets(group, Some(partitions))
                .await?
                .into_iter()
                .filter_map(|(tp, o)| o.map(|o| (tp, o.offset)))
                .collect()
        } else {
            BTreeMap::new()
        };
    let by_time = match scenario {
        Scenario::Datetime(ts) => list(admin, partitions, OffsetSpec::Timestamp(ts)).await?,
        _ => BTreeMap::new(),
    };
    let mut out = BTreeMap::new();
    for tp in partitions {
        let (lo, hi) = (
            earliest.get(tp).copied().unwrap_or(0),
            latest.get(tp).copied().unwrap_or(0),
        );
        let offset = match scenario {
            Scenario::Earliest => lo,
            Scenario::Latest => hi,
            Scenario::Current => committed.get(tp).copied().unwrap_or(hi),
            Scenario::Offset(o) => o,
            Scenario::Datetime(_) => by_time.get(tp).copied().filter(|o| *o >= 0).unwrap_or(hi),
            Scenario::Shift(n) => match committed.get(tp) {
                Some(c) => c.saturating_add(n),
                None => bail!(
                    "Cannot shift offset for partition {tp} since there is no current committed offset"
                ),
            },
        };
        out.insert(tp.clone(), offset.clamp(lo, hi.max(lo)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_specs() {
        assert_eq!(parse_topic_spec("t").unwrap(), ("t".into(), None));
        assert_eq!(
            parse_topic_spec("t:0,2").unwrap(),
            ("t".into(), Some(vec![0, 2]))
        );
        assert!(parse_topic_spec("t:x").is_err());
    }
}
