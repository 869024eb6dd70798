//! The administrative group APIs (what `kafka-consumer-groups.sh` uses besides the offsets):
//! ListGroups (16), DescribeGroups (15), DeleteGroups (42) and OffsetDelete (47).

use std::sync::Arc;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::INVALID_REQUEST;
use crate::context::Broker;
use crate::group_manager::ListFilter;
use crate::handlers::str_bytes;

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
