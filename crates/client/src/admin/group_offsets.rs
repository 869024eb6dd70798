//! A group's committed offsets, administered from outside the group: listing them
//! (OffsetFetch), setting them (OffsetCommit as a "simple" commit with generation -1 and an
//! empty member id, which the coordinator only accepts while the group is Empty, so resets
//! never race live members) and deleting them (OffsetDelete).

use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, ItemResults};
use crate::error::{ClientError, Result};
use crate::group::commit::{
    offset_commit_error, offset_commit_request, offset_commit_results, offset_fetch_error,
    offset_fetch_request, offset_fetch_results, Committer, OffsetAndMetadata,
};
use crate::group::coordinator::{send_to_coordinator, with_group};
use crate::group::TopicPartition;

/// The response's OffsetFetch version: v8 answers per group.
fn fetch_version(resp: &OffsetFetchResponse) -> i16 {
    if resp.groups.is_empty() {
        7
    } else {
        8
    }
}

impl Admin {
    /// Committed offsets of `group`: for `partitions`, or every partition with a commit when
    /// `None`. Partitions without a commit map to `None`.
    pub async fn list_group_offsets(
        &self,
        group: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<(TopicPartition, Option<OffsetAndMetadata>)>> {
        let (version, resp) = send_to_coordinator(
            &self.client,
            group,
            |version| offset_fetch_request(version, group, partitions),
            |resp: &OffsetFetchResponse| offset_fetch_error(resp, fetch_version(resp)),
        )
        .await?;
        let version = if version >= 8 { 8 } else { version };
        let mut out = Vec::new();
        for (tp, r) in offset_fetch_results(resp, version).map_err(|e| with_group(e, group))? {
            out.push((tp, r.map_err(|e| with_group(e, group))?));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Sets committed offsets of an inactive group (kafka-consumer-groups --reset-offsets).
    pub async fn alter_group_offsets(
        &self,
        group: &str,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
    ) -> Result<ItemResults<TopicPartition>> {
        let who = Committer::simple();
        let (_, resp) = send_to_coordinator(
            &self.client,
            group,
            |version| Ok(offset_commit_request(version, group, &who, offsets)),
            |resp: &OffsetCommitResponse| offset_commit_error(resp),
        )
        .await?;
        Ok(offset_commit_results(&resp)
            .into_iter()
            .map(|(tp, code)| {
                let r = ClientError::check(code, None).map_err(|e| with_group(e, group));
                (tp, r)
            })
            .collect())
    }

    /// Deletes committed offsets of `partitions` (OffsetDelete): refused with
    /// GROUP_SUBSCRIBED_TO_TOPIC per partition while an active member subscribes to the
    /// topic. Returns the group-level result and per-partition results.
    pub async fn delete_group_offsets(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<(Result<()>, ItemResults<TopicPartition>)> {
        let (_, resp) = send_to_coordinator(
            &self.client,
            group,
            |_| {
                let mut req = OffsetDeleteRequest::default();
                req.group_id = GroupId(StrBytes::from_string(group.to_owned()));
                for tp in partitions {
                    let mut p = OffsetDeleteRequestPartition::default();
                    p.partition_index = tp.partition;
                    match req
                        .topics
                        .iter_mut()
                        .find(|t| t.name.0.as_str() == tp.topic)
                    {
                        Some(t) => t.partitions.push(p),
                        None => {
                            let mut t = OffsetDeleteRequestTopic::default();
                            t.name = TopicName(StrBytes::from_string(tp.topic.clone()));
                            t.partitions.push(p);
                            req.topics.push(t);
                        }
                    }
                }
                Ok(req)
            },
            |resp: &OffsetDeleteResponse| resp.error_code,
        )
        .await?;
        let top = ClientError::check(resp.error_code, None).map_err(|e| with_group(e, group));
        let parts = resp
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        TopicPartition::new(t.name.0.to_string(), p.partition_index),
                        ClientError::check(p.error_code, None),
                    )
                })
            })
            .collect();
        Ok((top, parts))
    }
}
