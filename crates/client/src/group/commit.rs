//! OffsetCommit and OffsetFetch (spec H.2 steps 5-6) as pure request builders and response
//! readers, shared by [`super::GroupConsumer`] (member commits) and the admin client (simple
//! commits with generation -1, offset listing). Each builder sets only the fields the version
//! carries, since kafka-protocol refuses to encode a field the version lacks.

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::TopicPartition;
use crate::error::{ClientError, Result};

/// A committed position: the next offset to read, with its leader epoch and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// Next offset to consume.
    pub offset: i64,
    /// Leader epoch of the last consumed record, -1 when unknown.
    pub leader_epoch: i32,
    /// Free-form metadata stored with the offset.
    pub metadata: String,
}

impl OffsetAndMetadata {
    /// An offset without epoch or metadata.
    pub fn new(offset: i64) -> Self {
        Self {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
        }
    }
}

/// Who commits: a member of a generation, or an admin "simple" commit (generation -1, empty
/// member id) that the coordinator accepts only while the group is Empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committer {
    /// Generation id, -1 for a simple commit.
    pub generation: i32,
    /// Member id, empty for a simple commit.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
}

impl Committer {
    /// The admin's simple commit.
    pub fn simple() -> Self {
        Self {
            generation: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_owned()))
}

/// Groups by topic, first-seen order.
fn by_topic<T: Clone>(items: &[(TopicPartition, T)]) -> Vec<(String, Vec<(i32, T)>)> {
    let mut out: Vec<(String, Vec<(i32, T)>)> = Vec::new();
    for (tp, v) in items {
        match out.iter_mut().find(|(t, _)| *t == tp.topic) {
            Some((_, ps)) => ps.push((tp.partition, v.clone())),
            None => out.push((tp.topic.clone(), vec![(tp.partition, v.clone())])),
        }
    }
    out
}

/// OffsetCommit (v2-v8) for `offsets`.
pub fn offset_commit_request(
    version: i16,
    group: &str,
    who: &Committer,
    offsets: &[(TopicPartition, OffsetAndMetadata)],
) -> OffsetCommitRequest {
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    req.generation_id_or_member_epoch = who.generation;
    req.member_id = StrBytes::from_string(who.member_id.clone());
    if version >= 7 {
        req.group_instance_id = who.group_instance_id.clone().map(StrBytes::from_string);
    }
    req.topics = by_topic(offsets)
        .into_iter()
        .map(|(topic, parts)| {
            let mut t = OffsetCommitRequestTopic::default();
            t.name = topic_name(&topic);
            t.partitions = parts
                .into_iter()
                .map(|(p, om)| {
                    let mut rp = OffsetCommitRequestPartition::default();
                    rp.partition_index = p;
                    rp.committed_offset = om.offset;
                    if version >= 6 {
                        rp.committed_leader_epoch = om.leader_epoch;
                    }
                    rp.committed_metadata = Some(StrBytes::from_string(om.metadata));
                    rp
                })
                .collect();
            t
        })
        .collect();
    req
}

/// Per-partition error codes of an OffsetCommit response.
pub fn offset_commit_results(resp: &OffsetCommitResponse) -> Vec<(TopicPartition, i16)> {
    resp.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    TopicPartition::new(t.name.0.to_string(), p.partition_index),
                    p.error_code,
                )
            })
        })
        .collect()
}

/// The first non-zero error of an OffsetCommit response (the coordinator answers every
/// partition with the same group-level error).
pub fn offset_commit_error(resp: &OffsetCommitResponse) -> i16 {
    offset_commit_results(resp)
        .into_iter()
        .map(|(_, code)| code)
        .find(|&c| c != 0)
        .unwrap_or(0)
}

/// OffsetFetch (v1-v8) for `partitions`, or every committed partition when `None` (v2+).
pub fn offset_fetch_request(
    version: i16,
    group: &str,
    partitions: Option<&[TopicPartition]>,
) -> Result<OffsetFetchRequest> {
    if partitions.is_none() && version < 2 {
        return Err(ClientError::kafka(
            35,
            Some("fetching all committed offsets of a group needs OffsetFetch v2".into()),
        ));
    }
    let pairs: Option<Vec<(TopicPartition, ())>> =
        partitions.map(|ps| ps.iter().map(|tp| (tp.clone(), ())).collect());
    let grouped = pairs.map(|p| by_topic(&p));
    let mut req = OffsetFetchRequest::default();
    if version >= 8 {
        let mut g = OffsetFetchRequestGroup::default();
        g.group_id = GroupId(StrBytes::from_string(group.to_owned()));
        g.topics = grouped.map(|topics| {
            topics
                .into_iter()
                .map(|(t, ps)| {
                    let mut rt = OffsetFetchRequestTopics::default();
                    rt.name = topic_name(&t);
                    rt.partition_indexes = ps.into_iter().map(|(p, ())| p).collect();
                    rt
                })
                .collect()
        });
        req.groups = vec![g];
    } else {
        req.group_id = GroupId(StrBytes::from_string(group.to_owned()));
        req.topics = grouped.map(|topics| {
            topics
                .into_iter()
                .map(|(t, ps)| {
                    let mut rt = OffsetFetchRequestTopic::default();
                    rt.name = topic_name(&t);
                    rt.partition_indexes = ps.into_iter().map(|(p, ())| p).collect();
                    rt
                })
                .collect()
        });
    }
    Ok(req)
}

/// Committed offsets per partition: `Ok(None)` when nothing is committed (offset -1).
pub type FetchedOffsets = Vec<(TopicPartition, Result<Option<OffsetAndMetadata>>)>;

fn committed(offset: i64, epoch: i32, metadata: Option<&StrBytes>) -> Option<OffsetAndMetadata> {
    (offset >= 0).then(|| OffsetAndMetadata {
        offset,
        leader_epoch: epoch,
        metadata: metadata.map(|m| m.to_string()).unwrap_or_default(),
    })
}

/// The group-level error code of an OffsetFetch response (v2+; v8 per group).
pub fn offset_fetch_error(resp: &OffsetFetchResponse, version: i16) -> i16 {
    if version >= 8 {
        resp.groups.first().map_or(0, |g| g.error_code)
    } else {
        resp.error_code
    }
}

/// Reads an OffsetFetch response; a group-level error fails the whole call.
pub fn offset_fetch_results(resp: OffsetFetchResponse, version: i16) -> Result<FetchedOffsets> {
    ClientError::check(offset_fetch_error(&resp, version), None)?;
    let mut out = Vec::new();
    if version >= 8 {
        for g in resp.groups {
            for t in g.topics {
                for p in t.partitions {
                    let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                    let r = ClientError::check(p.error_code, None).map(|()| {
                        committed(
                            p.committed_offset,
                            p.committed_leader_epoch,
                            p.metadata.as_ref(),
                        )
                    });
                    out.push((tp, r));
                }
            }
        }
    } else {
        for t in resp.topics {
            for p in t.partitions {
                let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                let r = ClientError::check(p.error_code, None).map(|()| {
                    committed(
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.metadata.as_ref(),
                    )
                });
                out.push((tp, r));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::protocol::Encodable;

    fn offsets() -> Vec<(TopicPartition, OffsetAndMetadata)> {
        vec![
            (TopicPartition::new("a", 0), OffsetAndMetadata::new(5)),
            (TopicPartition::new("b", 1), OffsetAndMetadata::new(7)),
            (TopicPartition::new("a", 1), OffsetAndMetadata::new(9)),
        ]
    }

    #[test]
    fn commit_encodes_at_every_version() {
        let who = Committer {
            generation: 3,
            member_id: "m".into(),
            group_instance_id: Some("i".into()),
        };
        for version in 2..=8 {
            let req = offset_commit_request(version, "g", &who, &offsets());
            assert_eq!(req.topics.len(), 2);
            assert_eq!(req.topics[0].partitions.len(), 2);
            let mut buf = BytesMut::new();
            req.encode(&mut buf, version).unwrap();
        }
    }

    #[test]
    fn fetch_encodes_at_every_version() {
        let parts: Vec<TopicPartition> = offsets().into_iter().map(|(tp, _)| tp).collect();
        for version in 1..=8 {
            let req = offset_fetch_request(version, "g", Some(&parts)).unwrap();
            req.encode(&mut BytesMut::new(), version).unwrap();
            if version >= 2 {
                let all = offset_fetch_request(version, "g", None).unwrap();
                all.encode(&mut BytesMut::new(), version).unwrap();
            }
        }
        assert_eq!(
            offset_fetch_request(1, "g", None).unwrap_err().code(),
            Some(35)
        );
    }

    #[test]
    fn fetch_results_map_minus_one_to_none() {
        use kafka_protocol::messages::offset_fetch_response::{
            OffsetFetchResponsePartition, OffsetFetchResponseTopic,
        };
        let mut resp = OffsetFetchResponse::default();
        let mut t = OffsetFetchResponseTopic::default();
        t.name = topic_name("a");
        let mut p0 = OffsetFetchResponsePartition::default();
        p0.partition_index = 0;
        p0.committed_offset = 12;
        let mut p1 = OffsetFetchResponsePartition::default();
        p1.partition_index = 1;
        p1.committed_offset = -1;
        t.partitions = vec![p0, p1];
        resp.topics = vec![t];
        let got = offset_fetch_results(resp, 5).unwrap();
        assert_eq!(got[0].1.as_ref().unwrap().as_ref().unwrap().offset, 12);
        assert!(got[1].1.as_ref().unwrap().is_none());
    }
}
