//! The classic consumer-group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
//! LeaveGroup (13), SyncGroup (14), OffsetCommit (8), OffsetFetch (9), ListGroups (16),
//! DescribeGroups (15), DeleteGroups (42), OffsetDelete (47). Translation only: decisions are
//! in `runnel-group`, sequencing and persistence in `group_manager`.

use std::sync::Arc;

use bytes::Bytes;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use runnel_group::{CommitOffset, HeartbeatRequest as GroupHeartbeat, JoinRequest, SyncRequest};
use runnel_metadata::CreateTopicRequest;

use super::{str_bytes, topic_name};
use crate::context::{Broker, RequestContext};
use crate::errors::code;
use crate::group_manager::{FetchMember, ListFilter, COORDINATOR_NOT_AVAILABLE, OFFSETS_TOPIC};
use crate::txn_manager::TXN_TOPIC;

const INVALID_REQUEST: i16 = 42;

fn opt(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

/// An internal topic a coordinator keeps its state in.
struct InternalTopic {
    name: &'static str,
    partitions_key: &'static str,
    replication_key: &'static str,
    configs: Vec<(String, Option<String>)>,
}

fn offsets_topic() -> InternalTopic {
    InternalTopic {
        name: OFFSETS_TOPIC,
        partitions_key: "offsets.topic.num.partitions",
        replication_key: "offsets.topic.replication.factor",
        configs: vec![
            ("cleanup.policy".into(), Some("compact".into())),
            ("segment.bytes".into(), Some("104857600".into())),
            ("compression.type".into(), Some("producer".into())),
        ],
    }
}

/// `__transaction_state` as Kafka creates it: compacted, with
/// `transaction.state.log.min.isr` (at most its replication factor, so a small cluster's
/// smaller RF can still take acks=all writes) and `transaction.state.log.segment.bytes`.
fn transaction_topic(broker: &Broker) -> InternalTopic {
    let rf = broker
        .config
        .internal_topic_replication_factor("transaction.state.log.replication.factor");
    let min_isr = broker
        .config
        .get_i64("transaction.state.log.min.isr", 2)
        .clamp(1, i64::from(rf));
    let segment = broker
        .config
        .get_i64("transaction.state.log.segment.bytes", 104_857_600);
    InternalTopic {
        name: TXN_TOPIC,
        partitions_key: "transaction.state.log.num.partitions",
        replication_key: "transaction.state.log.replication.factor",
        configs: vec![
            ("cleanup.policy".into(), Some("compact".into())),
            ("segment.bytes".into(), Some(segment.to_string())),
            ("min.insync.replicas".into(), Some(min_isr.to_string())),
            ("compression.type".into(), Some("uncompressed".into())),
            (
                "unclean.leader.election.enable".into(),
                Some("false".into()),
            ),
        ],
    }
}

/// Creates a coordinator's internal topic on first use, with its replication-factor
/// property's replicas. Like Kafka, not before that many brokers are registered and unfenced:
/// a topic created while the cluster is still starting would keep a smaller RF for good.
/// Meanwhile FindCoordinator answers COORDINATOR_NOT_AVAILABLE and clients retry.
async fn ensure_internal_topic(broker: &Arc<Broker>, topic: InternalTopic) {
    let image = broker.image();
    if image.topic(topic.name).is_some() {
        return;
    }
    let rf = broker
        .config
        .internal_topic_replication_factor(topic.replication_key);
    let live = image.live_brokers().count();
    if live < usize::try_from(rf).unwrap_or(usize::MAX) {
        tracing::info!(
            live,
            required = rf,
            topic = topic.name,
            "not creating the internal topic yet: fewer live brokers than its replication factor"
        );
        return;
    }
    let partitions =
        i32::try_from(broker.config.get_i64(topic.partitions_key, 50).max(1)).unwrap_or(i32::MAX);
    let request = CreateTopicRequest {
        name: topic.name.to_string(),
        num_partitions: partitions,
        replication_factor: rf,
        assignment: Vec::new(),
        configs: topic.configs,
    };
    match broker
        .controller
        .run(runnel_metadata::controller::CreateTopics {
            requests: vec![request],
            validate_only: false,
        })
        .await
    {
        Ok(outcomes) => {
            for o in outcomes {
                if let Err(e) = o.result {
                    if e.code != 36 {
                        tracing::warn!(error = %e.message, topic = topic.name, "cannot create internal topic");
                    }
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e.message, topic = topic.name, "cannot create internal topic")
        }
    }
}

/// (error, node id, host, port on the client's `listener`) of the coordinator for `key`: the
/// leader of its partition of `__consumer_offsets` (key type 0, a group) or
/// `__transaction_state` (1, a transactional id).
async fn locate(
    broker: &Arc<Broker>,
    key: &str,
    key_type: i8,
    listener: &str,
) -> (i16, i32, String, i32) {
    let topic = match key_type {
        0 => offsets_topic(),
        1 => transaction_topic(broker),
        _ => return (INVALID_REQUEST, -1, String::new(), -1),
    };
    let name = topic.name;
    ensure_internal_topic(broker, topic).await;
    let image = broker.image();
    let Some(topic) = image.topic(name) else {
        return (COORDINATOR_NOT_AVAILABLE, -1, String::new(), -1);
    };
    let p = runnel_group::partition_for_group(key, topic.partitions.len() as i32);
    let leader = topic.partitions.get(&p).map(|p| p.leader).unwrap_or(-1);
    // A coordinator without an endpoint on the client's listener is not available to it,
    // as Kafka's `getAliveBrokerNode(id, listenerName)`.
    let found = image
        .brokers
        .get(&leader)
        .filter(|b| !b.fenced)
        .and_then(|b| Some((b.id, broker.endpoint_of(b, listener)?)));
    match found {
        Some((id, (host, port))) => (0, id, host, i32::from(port)),
        None => (COORDINATOR_NOT_AVAILABLE, -1, String::new(), -1),
    }
}

pub async fn find_coordinator(
    broker: &Arc<Broker>,
    request: FindCoordinatorRequest,
    version: i16,
    ctx: &RequestContext,
) -> FindCoordinatorResponse {
    if version >= 4 {
        let mut coordinators = Vec::with_capacity(request.coordinator_keys.len());
        for key in &request.coordinator_keys {
            let (code, node, host, port) =
                locate(broker, key.as_str(), request.key_type, &ctx.listener).await;
            coordinators.push(
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(node))
                    .with_host(str_bytes(&host))
                    .with_port(port)
                    .with_error_code(code)
                    .with_error_message(None),
            );
        }
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (code, node, host, port) = locate(
        broker,
        request.key.as_str(),
        request.key_type,
        &ctx.listener,
    )
    .await;
    let response = FindCoordinatorResponse::default()
        .with_error_code(code)
        .with_node_id(BrokerId(node))
        .with_host(str_bytes(&host))
        .with_port(port);
    if version >= 1 {
        response.with_error_message(None)
    } else {
        response
    }
}

pub async fn join_group(
    broker: &Arc<Broker>,
    request: JoinGroupRequest,
    version: i16,
    ctx: &RequestContext,
) -> JoinGroupResponse {
    let req = JoinRequest {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: opt(&request.group_instance_id),
        client_id: ctx.client_id.clone(),
        client_host: ctx.client_host(),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), Bytes::copy_from_slice(&p.metadata)))
            .collect(),
        api_version: version,
    };
    let r = broker.groups.join(req).await;
    let members = r
        .members
        .into_iter()
        .map(|m| {
            join_group_response::JoinGroupResponseMember::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_group_instance_id(if version >= 5 {
                    m.group_instance_id.as_deref().map(str_bytes)
                } else {
                    None
                })
                .with_metadata(m.metadata)
        })
        .collect();
    let response = JoinGroupResponse::default()
        .with_error_code(r.error_code)
        .with_generation_id(r.generation_id)
        .with_leader(str_bytes(&r.leader))
        .with_member_id(str_bytes(&r.member_id))
        .with_members(members);
    if version >= 7 {
        response
            .with_protocol_type(r.protocol_type.as_deref().map(str_bytes))
            .with_protocol_name(r.protocol_name.as_deref().map(str_bytes))
    } else {
        // Before v7 the protocol name is a non-null string.
        response.with_protocol_name(Some(str_bytes(r.protocol_name.as_deref().unwrap_or(""))))
    }
}

pub async fn sync_group(
    broker: &Arc<Broker>,
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let req = SyncRequest {
        group_id: request.group_id.0.to_string(),
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: opt(&request.group_instance_id),
        protocol_type: opt(&request.protocol_type),
        protocol_name: opt(&request.protocol_name),
        assignments: request
            .assignments
            .iter()
            .map(|a| {
                (
                    a.member_id.to_string(),
                    Bytes::copy_from_slice(&a.assignment),
                )
            })
            .collect(),
    };
    let r = broker.groups.sync(req).await;
    let response = SyncGroupResponse::default()
        .with_error_code(r.error_code)
        .with_assignment(r.assignment);
    if version >= 5 {
        response
            .with_protocol_type(r.protocol_type.as_deref().map(str_bytes))
            .with_protocol_name(r.protocol_name.as_deref().map(str_bytes))
    } else {
        response
    }
}

pub async fn heartbeat(
    broker: &Arc<Broker>,
    request: HeartbeatRequest,
    _version: i16,
) -> HeartbeatResponse {
    let code = broker
        .groups
        .heartbeat(GroupHeartbeat {
            group_id: request.group_id.0.to_string(),
            generation_id: request.generation_id,
            member_id: request.member_id.to_string(),
            group_instance_id: opt(&request.group_instance_id),
        })
        .await;
    HeartbeatResponse::default().with_error_code(code)
}

pub async fn leave_group(
    broker: &Arc<Broker>,
    request: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| (m.member_id.to_string(), opt(&m.group_instance_id)))
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    let (code, codes) = broker
        .groups
        .leave(request.group_id.0.to_string(), members.clone())
        .await;
    if version < 3 {
        // One member: its own code is the answer.
        let code = if code != 0 {
            code
        } else {
            codes.first().copied().unwrap_or(0)
        };
        return LeaveGroupResponse::default().with_error_code(code);
    }
    let members = members
        .into_iter()
        .zip(codes)
        .map(|((member_id, instance), code)| {
            leave_group_response::MemberResponse::default()
                .with_member_id(str_bytes(&member_id))
                .with_group_instance_id(instance.as_deref().map(str_bytes))
                .with_error_code(code)
        })
        .collect();
    LeaveGroupResponse::default()
        .with_error_code(code)
        .with_members(members)
}

/// OffsetCommit. As in Kafka's `KafkaApis.handleOffsetCommitRequest`, a partition the
/// metadata image does not have (unknown topic, or a partition index past its count) gets
/// UNKNOWN_TOPIC_OR_PARTITION before the group coordinator is asked, and only the others are
/// committed; if none is left the coordinator is not consulted at all.
pub async fn offset_commit(
    broker: &Arc<Broker>,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let image = broker.image();
    let exists = |topic: &str, partition: i32| image.partition(topic, partition).is_some();
    let offsets: Vec<CommitOffset> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| exists(t.name.0.as_str(), p.partition_index))
                .map(move |p| CommitOffset {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: opt(&p.committed_metadata),
                })
        })
        .collect();
    let (top, codes) = if offsets.is_empty() {
        (code::NONE, Vec::new())
    } else {
        let req = runnel_group::OffsetCommitRequest {
            group_id: request.group_id.0.to_string(),
            generation_id: request.generation_id_or_member_epoch,
            member_id: request.member_id.to_string(),
            group_instance_id: opt(&request.group_instance_id),
            offsets,
        };
        broker.groups.commit(req).await
    };
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let error_code = if !exists(t.name.0.as_str(), p.partition_index) {
                        code::UNKNOWN_TOPIC_OR_PARTITION
                    } else if top != code::NONE {
                        top
                    } else {
                        codes
                            .iter()
                            .find(|(topic, partition, _)| {
                                topic == t.name.0.as_str() && *partition == p.partition_index
                            })
                            .map_or(top, |c| c.2)
                    };
                    offset_commit_response::OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error_code)
                })
                .collect();
            offset_commit_response::OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

type Requested = Option<Vec<(String, Vec<i32>)>>;
/// (partition, committed offset, leader epoch, metadata, error code)
type FetchedPartition = (i32, i64, i32, String, i16);
type FetchedTopics = Vec<(String, Vec<FetchedPartition>)>;

/// One group's committed offsets: (top-level code, per topic: [(partition, offset, epoch, metadata, code)]).
async fn fetch_group(
    broker: &Arc<Broker>,
    group: String,
    requested: Requested,
    require_stable: bool,
    member: Option<FetchMember>,
) -> (i16, FetchedTopics) {
    let (code, found) = broker
        .groups
        .fetch(group, requested.clone(), require_stable, member)
        .await;
    if code != 0 {
        return (code, Vec::new());
    }
    let mut topics: FetchedTopics = Vec::new();
    for (topic, partition, committed, pcode) in found {
        let entry = match committed {
            Some(c) => (partition, c.offset, c.leader_epoch, c.metadata, pcode),
            None => (partition, -1, -1, String::new(), pcode),
        };
        match topics.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, list)) => list.push(entry),
            None => topics.push((topic, vec![entry])),
        }
    }
    (0, topics)
}

pub async fn offset_fetch(
    broker: &Arc<Broker>,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version >= 8 {
        let mut groups = Vec::with_capacity(request.groups.len());
        for g in &request.groups {
            let requested: Requested = g.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            // v9: KIP-848 members fetch with their member id and epoch.
            let member = (version >= 9).then(|| (opt(&g.member_id), g.member_epoch));
            let (code, topics) = fetch_group(
                broker,
                g.group_id.0.to_string(),
                requested,
                request.require_stable,
                member,
            )
            .await;
            let topics = topics
                .into_iter()
                .map(|(name, partitions)| {
                    offset_fetch_response::OffsetFetchResponseTopics::default()
                        .with_name(topic_name(&name))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(p, offset, epoch, metadata, code)| {
                                    offset_fetch_response::OffsetFetchResponsePartitions::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(epoch)
                                        .with_metadata(Some(str_bytes(&metadata)))
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            groups.push(
                offset_fetch_response::OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_error_code(code)
                    .with_topics(topics),
            );
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let requested: Requested = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    // require_stable exists from v7 (it decodes as false before).
    let (code, topics) = fetch_group(
        broker,
        request.group_id.0.to_string(),
        requested,
        request.require_stable,
        None,
    )
    .await;
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            offset_fetch_response::OffsetFetchResponseTopic::default()
                .with_name(topic_name(&name))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(p, offset, epoch, metadata, pcode)| {
                            offset_fetch_response::OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset)
                                .with_committed_leader_epoch(if version >= 5 { epoch } else { -1 })
                                .with_metadata(Some(str_bytes(&metadata)))
                                .with_error_code(pcode)
                        })
                        .collect(),
                )
        })
        .collect();
    let mut response = OffsetFetchResponse::default().with_topics(topics);
    if version >= 2 {
        response = response.with_error_code(code);
    } else if code != 0 {
        // v0-1 have no top-level code: report it on every requested partition.
        let topics = request
            .topics
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                offset_fetch_response::OffsetFetchResponseTopic::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partition_indexes
                            .into_iter()
                            .map(|p| {
                                offset_fetch_response::OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(-1)
                                    .with_metadata(Some(str_bytes("")))
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect();
        response = response.with_topics(topics);
    }
    response
}

pub async fn list_groups(
    broker: &Arc<Broker>,
    request: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let strings = |v: &[StrBytes]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut filter = ListFilter::default();
    if version >= 4 {
        filter.states = strings(&request.states_filter);
    }
    if version >= 5 {
        filter.types = strings(&request.types_filter);
    }
    let groups = broker
        .groups
        .list(filter)
        .await
        .into_iter()
        .map(|g| {
            let mut listed = list_groups_response::ListedGroup::default()
                .with_group_id(GroupId(str_bytes(&g.group_id)))
                .with_protocol_type(str_bytes(&g.protocol_type));
            if version >= 4 {
                listed = listed.with_group_state(str_bytes(&g.state));
            }
            if version >= 5 {
                listed = listed.with_group_type(str_bytes(&g.group_type));
            }
            listed
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

pub async fn describe_groups(
    broker: &Arc<Broker>,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let ids = request.groups.iter().map(|g| g.0.to_string()).collect();
    let groups = broker
        .groups
        .describe(ids)
        .await
        .into_iter()
        .map(|d| {
            let members = d
                .members
                .into_iter()
                .map(|m| {
                    describe_groups_response::DescribedGroupMember::default()
                        .with_member_id(str_bytes(&m.member_id))
                        .with_group_instance_id(if version >= 4 {
                            m.group_instance_id.as_deref().map(str_bytes)
                        } else {
                            None
                        })
                        .with_client_id(str_bytes(&m.client_id))
                        .with_client_host(str_bytes(&m.client_host))
                        .with_member_metadata(m.metadata)
                        .with_member_assignment(m.assignment)
                })
                .collect();
            describe_groups_response::DescribedGroup::default()
                .with_error_code(d.error_code)
                .with_group_id(GroupId(str_bytes(&d.group_id)))
                .with_group_state(str_bytes(&d.state))
                .with_protocol_type(str_bytes(&d.protocol_type))
                .with_protocol_data(str_bytes(&d.protocol))
                .with_members(members)
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

pub async fn delete_groups(
    broker: &Arc<Broker>,
    request: DeleteGroupsRequest,
    _version: i16,
) -> DeleteGroupsResponse {
    let ids = request
        .groups_names
        .iter()
        .map(|g| g.0.to_string())
        .collect();
    let results = broker
        .groups
        .delete(ids)
        .await
        .into_iter()
        .map(|(id, code)| {
            delete_groups_response::DeletableGroupResult::default()
                .with_group_id(GroupId(str_bytes(&id)))
                .with_error_code(code)
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}

pub async fn offset_delete(
    broker: &Arc<Broker>,
    request: OffsetDeleteRequest,
    _version: i16,
) -> OffsetDeleteResponse {
    let partitions: Vec<(String, Vec<i32>)> = request
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    if partitions.is_empty() {
        return OffsetDeleteResponse::default().with_error_code(INVALID_REQUEST);
    }
    let (code, codes) = broker
        .groups
        .delete_offsets(request.group_id.0.to_string(), partitions)
        .await;
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let pcode = codes
                        .iter()
                        .find(|(topic, partition, _)| {
                            topic == t.name.0.as_str() && *partition == p.partition_index
                        })
                        .map(|c| c.2)
                        .unwrap_or(0);
                    offset_delete_response::OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(pcode)
                })
                .collect();
            offset_delete_response::OffsetDeleteResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default()
        .with_error_code(code)
        .with_topics(topics)
}
