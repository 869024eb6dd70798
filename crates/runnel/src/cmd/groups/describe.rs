//! `--describe`: the offsets / lag table (default), `--members [--verbose]` and `--state`,
//! with kafka-consumer-groups.sh's exact column layout (left-justified columns at least 15
//! wide, widened to the longest value; `-` for missing values).

use runnel_codes::GROUP_ID_NOT_FOUND;
use std::collections::BTreeMap;

use anyhow::{bail, Result};
use runnel_client::admin::{GroupDescription, OffsetSpec};
use runnel_client::{Admin, ClientError, TopicPartition};

use super::GroupsArgs;

const MISSING: &str = "-";

/// Describes each group in the requested view.
pub async fn run(admin: &Admin, args: &GroupsArgs, groups: &[String]) -> Result<()> {
    for (group, described) in admin.describe_groups(groups).await? {
        let description = match described {
            Ok(d) if d.state != "Dead" => d,
            Ok(_) => bail!("Consumer group '{group}' does not exist."),
            Err(ClientError::Kafka {
                code: GROUP_ID_NOT_FOUND,
                ..
            }) => {
                bail!("Consumer group '{group}' does not exist.")
            }
            Err(e) => return Err(e.into()),
        };
        if args.state.is_some() {
            print_state(&description);
        } else if args.members {
            warn_state(&description);
            print_members(&description, args.verbose);
        } else {
            print_offsets(admin, &description).await?;
        }
    }
    Ok(())
}

/// Kafka's notes on stderr for groups that are empty or rebalancing.
fn warn_state(d: &GroupDescription) {
    match d.state.as_str() {
        "Empty" => eprintln!("\nConsumer group '{}' has no active members.", d.group_id),
        "PreparingRebalance" | "CompletingRebalance" | "AwaitingSync" => {
            eprintln!("\nWarning: Consumer group '{}' is rebalancing.", d.group_id)
        }
        _ => {}
    }
}

fn print_state(d: &GroupDescription) {
    let c = &d.coordinator;
    let coordinator = format!("{}:{} ({})", c.host, c.port, c.node_id);
    let w = coordinator.len().max(25);
    print!(
        "\n{:<w$} {:<25} {:<20} {:<15} #MEMBERS",
        "GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"
    );
    println!(
        "\n{:<w$} {:<25} {:<20} {:<15} {}",
        d.group_id,
        coordinator,
        d.protocol,
        d.state,
        d.members.len()
    );
}

/// `topic(p,p), topic(p)` as Kafka's verbose member view prints assignments.
fn assignment_text(parts: &[TopicPartition]) -> String {
    if parts.is_empty() {
        return MISSING.into();
    }
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in parts {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    by_topic
        .into_iter()
        .map(|(t, mut ps)| {
            ps.sort_unstable();
            let list: Vec<String> = ps.iter().map(i32::to_string).collect();
            format!("{t}({})", list.join(","))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_members(d: &GroupDescription, verbose: bool) {
    if d.members.is_empty() {
        return;
    }
    let g = d.group_id.len().max(15);
    let c = d
        .members
        .iter()
        .map(|m| m.member_id.len())
        .max()
        .unwrap_or(0)
        .max(15);
    let with_instance = d.members.iter().any(|m| m.group_instance_id.is_some());
    let i = d
        .members
        .iter()
        .filter_map(|m| m.group_instance_id.as_ref().map(String::len))
        .max()
        .unwrap_or(0)
        .max(17);
    let h = d
        .members
        .iter()
        .map(|m| m.client_host.len())
        .max()
        .unwrap_or(0)
        .max(15);
    let cl = d
        .members
        .iter()
        .map(|m| m.client_id.len())
        .max()
        .unwrap_or(0)
        .max(15);
    let mut header = format!("\n{:<g$} {:<c$} ", "GROUP", "CONSUMER-ID");
    if with_instance {
        header.push_str(&format!("{:<i$} ", "GROUP-INSTANCE-ID"));
    }
    header.push_str(&format!(
        "{:<h$} {:<cl$} {:<15} ",
        "HOST", "CLIENT-ID", "#PARTITIONS"
    ));
    if verbose {
        header.push_str("ASSIGNMENT");
    }
    println!("{header}");
    for m in &d.members {
        let mut line = format!("{:<g$} {:<c$} ", d.group_id, m.member_id);
        if with_instance {
            line.push_str(&format!(
                "{:<i$} ",
                m.group_instance_id.as_deref().unwrap_or("")
            ));
        }
        line.push_str(&format!(
            "{:<h$} {:<cl$} {:<15} ",
            m.client_host,
            m.client_id,
            m.assignment.len()
        ));
        if verbose {
            line.push_str(&assignment_text(&m.assignment));
        }
        println!("{line}");
    }
}

/// One row of the offsets table.
struct Row {
    tp: TopicPartition,
    offset: Option<i64>,
    end: Option<i64>,
    consumer: Option<(String, String, String)>,
}

async fn print_offsets(admin: &Admin, d: &GroupDescription) -> Result<()> {
    let committed: BTreeMap<TopicPartition, i64> = admin
        .list_group_offsets(&d.group_id, None)
        .await?
        .into_iter()
        .filter_map(|(tp, om)| om.map(|o| (tp, o.offset)))
        .collect();
    let mut rows = Vec::new();
    // Members with partitions, the busiest first (as Kafka), then committed partitions
    // nobody owns.
    let mut members: Vec<_> = d
        .members
        .iter()
        .filter(|m| !m.assignment.is_empty())
        .collect();
    members.sort_by_key(|m| std::cmp::Reverse(m.assignment.len()));
    for m in members {
        for tp in &m.assignment {
            rows.push(Row {
                tp: tp.clone(),
                offset: committed.get(tp).copied(),
                end: None,
                consumer: Some((
                    m.member_id.clone(),
                    m.client_host.clone(),
                    m.client_id.clone(),
                )),
            });
        }
    }
    for (tp, offset) in &committed {
        if !rows.iter().any(|r| &r.tp == tp) {
            rows.push(Row {
                tp: tp.clone(),
                offset: Some(*offset),
                end: None,
                consumer: None,
            });
        }
    }
    warn_state(d);
    if rows.is_empty() {
        return Ok(());
    }
    let queries: Vec<(String, i32, OffsetSpec)> = rows
        .iter()
        .map(|r| (r.tp.topic.clone(), r.tp.partition, OffsetSpec::Latest))
        .collect();
    for ((topic, partition), listed) in admin.list_offsets(&queries).await? {
        if let Ok(l) = listed {
            for r in rows.iter_mut() {
                if r.tp.topic == topic && r.tp.partition == partition {
                    r.end = Some(l.offset);
                }
            }
        }
    }
    let g = d.group_id.len().max(15);
    let t = rows
        .iter()
        .map(|r| r.tp.topic.len())
        .max()
        .unwrap_or(0)
        .max(15);
    let col = |f: fn(&(String, String, String)) -> &String| {
        rows.iter()
            .map(|r| r.consumer.as_ref().map_or(1, |c| f(c).len()))
            .max()
            .unwrap_or(0)
            .max(15)
    };
    let c = col(|c| &c.0);
    let h = col(|c| &c.1);
    println!(
        "\n{:<g$} {:<t$} {:<10} {:<15} {:<15} {:<15} {:<c$} {:<h$} CLIENT-ID",
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
    );
    let opt = |v: Option<i64>| v.map_or_else(|| MISSING.to_string(), |v| v.to_string());
    for r in &rows {
        let lag = match (r.offset, r.end) {
            (Some(o), Some(e)) => Some((e - o).max(0)),
            _ => None,
        };
        let (cid, host, client) = match &r.consumer {
            Some((a, b, c)) => (a.as_str(), b.as_str(), c.as_str()),
            None => (MISSING, MISSING, MISSING),
        };
        println!(
            "{:<g$} {:<t$} {:<10} {:<15} {:<15} {:<15} {:<c$} {:<h$} {}",
            d.group_id,
            r.tp.topic,
            r.tp.partition,
            opt(r.offset),
            opt(r.end),
            opt(lag),
            cid,
            host,
            client
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbose_assignment_text() {
        let parts = vec![
            TopicPartition::new("b", 1),
            TopicPartition::new("a", 2),
            TopicPartition::new("a", 0),
        ];
        assert_eq!(assignment_text(&parts), "a(0,2), b(1)");
        assert_eq!(assignment_text(&[]), "-");
    }
}
