//! `--delete` and `--delete-offsets`, with kafka-consumer-groups.sh's messages.

use anyhow::{bail, Result};
use runnel_client::{render_error, Admin, ClientError, TopicPartition};
use runnel_codes::{
    GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC, INVALID_GROUP_ID,
    NON_EMPTY_GROUP, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION,
};

/// Deletes groups; any failure makes the command fail with one line naming each group.
pub async fn delete_groups(admin: &Admin, groups: &[String]) -> Result<()> {
    let results = admin.delete_groups(groups).await?;
    let (ok, failed): (Vec<_>, Vec<_>) = results.into_iter().partition(|(_, r)| r.is_ok());
    let names = |v: &[(String, Result<(), ClientError>)]| {
        v.iter()
            .map(|(g, _)| format!("'{g}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if failed.is_empty() {
        println!(
            "Deletion of requested consumer groups ({}) was successful.",
            names(&ok)
        );
        return Ok(());
    }
    if !ok.is_empty() {
        println!(
            "These consumer groups were deleted successfully: {}",
            names(&ok)
        );
    }
    let reasons: Vec<String> = failed
        .iter()
        .map(|(g, r)| {
            let why = r.as_ref().err().map(render_error).unwrap_or_default();
            format!("Group '{g}' could not be deleted due to: {why}")
        })
        .collect();
    bail!(
        "Deletion of some consumer groups failed: {}",
        reasons.join("; ")
    )
}

/// Deletes a group's offsets for whole topics (`T`) or listed partitions (`T:0,1`).
pub async fn delete_offsets(admin: &Admin, group: &str, topics: &[String]) -> Result<()> {
    if topics.is_empty() {
        bail!("Option [delete-offsets] needs at least one --topic");
    }
    let mut partitions = Vec::new();
    for spec in topics {
        match super::reset::parse_topic_spec(spec)? {
            (topic, Some(ps)) => partitions.extend(
                ps.into_iter()
                    .map(|p| TopicPartition::new(topic.clone(), p)),
            ),
            (topic, None) => {
                let info = admin.client().topic(&topic).await?;
                partitions.extend(
                    info.partitions
                        .iter()
                        .map(|p| TopicPartition::new(topic.clone(), p.partition)),
                );
            }
        }
    }
    let (top, mut parts) = admin.delete_group_offsets(group, &partitions).await?;
    let names: Vec<&str> = topics
        .iter()
        .map(|t| t.split(':').next().unwrap_or(t))
        .collect();
    let failure = match &top {
        Ok(()) => None,
        Err(e) => Some(match e.code() {
            Some(INVALID_GROUP_ID) => format!("'{group}' is not valid."),
            Some(GROUP_ID_NOT_FOUND) => format!("'{group}' does not exist."),
            Some(GROUP_AUTHORIZATION_FAILED) => format!("Access to '{group}' is not authorized."),
            Some(NON_EMPTY_GROUP) => format!(
                "Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty."
            ),
            Some(
                GROUP_SUBSCRIBED_TO_TOPIC | TOPIC_AUTHORIZATION_FAILED | UNKNOWN_TOPIC_OR_PARTITION,
            ) => {
                "Encounter some partition level error, see the follow-up details:".to_string()
            }
            _ => format!("Encounter some unknown error: {}", render_error(e)),
        }),
    };
    if failure.is_none() {
        println!(
            "Request succeed for deleting offsets with topic {} group {group}",
            names.join(", ")
        );
    }
    parts.sort_by(|a, b| a.0.cmp(&b.0));
    println!("\n{:<30} {:<15} {:<15}", "TOPIC", "PARTITION", "STATUS");
    let mut any_failed = false;
    for (tp, r) in &parts {
        let status = match r {
            Ok(()) => "Successful".to_string(),
            Err(e) => {
                any_failed = true;
                format!("Error: {}", render_error(e))
            }
        };
        println!("{:<30} {:<15} {:<15}", tp.topic, tp.partition, status);
    }
    match failure {
        Some(msg) => bail!(msg),
        None if any_failed => bail!("Some offsets of group '{group}' could not be deleted"),
        None => Ok(()),
    }
}
