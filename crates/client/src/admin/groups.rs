//! Consumer group administration (what kafka-consumer-groups.sh uses): ListGroups from every
//! broker (each knows only the groups it coordinates), DescribeGroups and DeleteGroups at
//! each group's coordinator. Member assignments of "consumer" groups are decoded into
//! topic-partitions. Groups of the KIP-848 consumer protocol are described with
//! ConsumerGroupDescribe first (as Kafka's admin client does), falling back to DescribeGroups
//! for classic groups and brokers without the API.

use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, DeleteGroupsRequest,
    DescribeGroupsRequest, GroupId, ListGroupsRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, ItemResults};
use crate::error::{ClientError, Result};
use crate::group::coordinator::{find, send_to_coordinator, with_group, CoordinatorInfo};
use crate::group::protocol::{decode_assignment, decode_subscription, PROTOCOL_TYPE};
use crate::group::TopicPartition;

// GROUP_ID_NOT_FOUND is ConsumerGroupDescribe's answer for a classic group.
use runnel_codes::GROUP_ID_NOT_FOUND;

/// Kafka's `ConsumerGroupState` names as its tools print them (the wire carries lower case,
/// e.g. "stable", "reconciling").
fn consumer_group_state(wire: &str) -> String {
    match wire.to_ascii_lowercase().as_str() {
        "empty" => "Empty".into(),
        "assigning" => "Assigning".into(),
        "reconciling" => "Reconciling".into(),
        "stable" => "Stable".into(),
        "dead" => "Dead".into(),
        _ => wire.to_string(),
    }
}

/// One group in a ListGroups answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// Group id.
    pub group_id: String,
    /// "consumer", or "" for a group that only ever had simple commits.
    pub protocol_type: String,
    /// The state, when the broker reports it (ListGroups v4+).
    pub state: Option<String>,
}

/// One member in a DescribeGroups answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMemberDescription {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// The member's client id.
    pub client_id: String,
    /// The member's host as the coordinator saw it.
    pub client_host: String,
    /// Subscribed topics (consumer groups).
    pub subscription: Vec<String>,
    /// Assigned partitions (consumer groups; empty while rebalancing).
    pub assignment: Vec<TopicPartition>,
}

/// A DescribeGroups answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// Group id.
    pub group_id: String,
    /// Empty, PreparingRebalance, CompletingRebalance, Stable or Dead.
    pub state: String,
    /// "consumer" for consumer groups.
    pub protocol_type: String,
    /// The chosen assignor.
    pub protocol: String,
    /// Current members.
    pub members: Vec<GroupMemberDescription>,
    /// The group's coordinator.
    pub coordinator: CoordinatorInfo,
}

impl Admin {
    /// Lists the groups of every broker, optionally only those in `states` (case-insensitive;
    /// sent as ListGroups v4 `states_filter`, filtered client-side on older brokers via the
    /// states DescribeGroups reports).
    pub async fn list_groups(&self, states: &[String]) -> Result<Vec<GroupListing>> {
        let meta = self.client.refresh_metadata(Some(&[])).await?;
        let mut out: Vec<GroupListing> = Vec::new();
        for broker in meta.brokers.keys() {
            let listed = self
                .client
                .retry(&format!("ListGroups from broker {broker}"), || async {
                    let conn = self.client.broker_connection(*broker).await?;
                    let version = conn.negotiated::<ListGroupsRequest>()?;
                    let mut req = ListGroupsRequest::default();
                    if version >= 4 {
                        req.states_filter = states
                            .iter()
                            .map(|s| StrBytes::from_string(s.clone()))
                            .collect();
                    }
                    let resp = conn
                        .send_at(
                            &req,
                            version,
                            self.client.config().connection.request_timeout,
                        )
                        .await?;
                    ClientError::check(resp.error_code, None)?;
                    Ok(resp
                        .groups
                        .into_iter()
                        .map(|g| GroupListing {
                            group_id: g.group_id.0.to_string(),
                            protocol_type: g.protocol_type.to_string(),
                            state: (version >= 4).then(|| g.group_state.to_string()),
                        })
                        .collect::<Vec<_>>())
                })
                .await?;
            for g in listed {
                if !out.iter().any(|o| o.group_id == g.group_id) {
                    out.push(g);
                }
            }
        }
        if !states.is_empty() && out.iter().any(|g| g.state.is_none()) {
            let ids: Vec<String> = out.iter().map(|g| g.group_id.clone()).collect();
            let described = self.describe_groups(&ids).await?;
            for (g, (_, d)) in out.iter_mut().zip(described) {
                g.state = d.ok().map(|d| d.state);
            }
            out.retain(|g| {
                g.state
                    .as_ref()
                    .is_some_and(|s| states.iter().any(|w| w.eq_ignore_ascii_case(s)))
            });
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    /// Describes groups, one result per requested id. A group that does not exist is reported
    /// by Kafka as state `Dead` (older brokers) or GROUP_ID_NOT_FOUND.
    pub async fn describe_groups(
        &self,
        groups: &[String],
    ) -> Result<ItemResults<String, GroupDescription>> {
        let mut out = Vec::new();
        for group in groups {
            out.push((group.clone(), self.describe_group(group).await));
        }
        Ok(out)
    }

    async fn describe_group(&self, group: &str) -> Result<GroupDescription> {
        if let Some(described) = self.describe_consumer_protocol_group(group).await? {
            return Ok(described);
        }
        self.describe_classic_group(group).await
    }

    /// ConsumerGroupDescribe; `None` when the group is not a consumer-protocol group
    /// (GROUP_ID_NOT_FOUND) or the coordinator does not speak the API (UNSUPPORTED_VERSION).
    async fn describe_consumer_protocol_group(
        &self,
        group: &str,
    ) -> Result<Option<GroupDescription>> {
        let sent = send_to_coordinator(
            &self.client,
            group,
            |_| {
                Ok(ConsumerGroupDescribeRequest::default()
                    .with_group_ids(vec![GroupId(StrBytes::from_string(group.to_owned()))]))
            },
            |resp: &ConsumerGroupDescribeResponse| resp.groups.first().map_or(0, |g| g.error_code),
        )
        .await;
        let resp = match sent {
            Ok((_, resp)) => resp,
            Err(ClientError::Kafka {
                code: runnel_codes::UNSUPPORTED_VERSION,
                ..
            }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(g) = resp.groups.into_iter().next() else {
            return Ok(None);
        };
        if g.error_code == GROUP_ID_NOT_FOUND {
            return Ok(None);
        }
        ClientError::check(g.error_code, g.error_message.as_deref())
            .map_err(|e| with_group(e, group))?;
        let members = g
            .members
            .into_iter()
            .map(|m| {
                let mut assignment: Vec<TopicPartition> = m
                    .assignment
                    .topic_partitions
                    .iter()
                    .flat_map(|t| {
                        t.partitions
                            .iter()
                            .map(move |p| TopicPartition::new(t.topic_name.0.to_string(), *p))
                    })
                    .collect();
                assignment.sort();
                GroupMemberDescription {
                    member_id: m.member_id.to_string(),
                    group_instance_id: m.instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    subscription: m
                        .subscribed_topic_names
                        .iter()
                        .map(|t| t.0.to_string())
                        .collect(),
                    assignment,
                }
            })
            .collect();
        Ok(Some(GroupDescription {
            group_id: g.group_id.0.to_string(),
            state: consumer_group_state(&g.group_state),
            protocol_type: PROTOCOL_TYPE.to_string(),
            protocol: g.assignor_name.to_string(),
            members,
            coordinator: find(&self.client, group).await?,
        }))
    }

    async fn describe_classic_group(&self, group: &str) -> Result<GroupDescription> {
        let (_, resp) = send_to_coordinator(
            &self.client,
            group,
            |_| {
                let mut req = DescribeGroupsRequest::default();
                req.groups = vec![GroupId(StrBytes::from_string(group.to_owned()))];
                Ok(req)
            },
            |resp: &kafka_protocol::messages::DescribeGroupsResponse| {
                resp.groups.first().map_or(0, |g| g.error_code)
            },
        )
        .await?;
        let g = resp.groups.into_iter().next().ok_or_else(|| {
            ClientError::Protocol(format!("DescribeGroups answered nothing for '{group}'"))
        })?;
        ClientError::check(g.error_code, g.error_message.as_deref())
            .map_err(|e| with_group(e, group))?;
        let consumer = g.protocol_type.as_str() == PROTOCOL_TYPE;
        let members = g
            .members
            .into_iter()
            .map(|m| {
                let (subscription, assignment) = if consumer {
                    (
                        decode_subscription(&m.member_metadata)
                            .map(|(_, s)| s.topics)
                            .unwrap_or_default(),
                        decode_assignment(&m.member_assignment)
                            .map(|a| a.partitions)
                            .unwrap_or_default(),
                    )
                } else {
                    (Vec::new(), Vec::new())
                };
                let mut assignment = assignment;
                assignment.sort();
                GroupMemberDescription {
                    member_id: m.member_id.to_string(),
                    group_instance_id: m.group_instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    subscription,
                    assignment,
                }
            })
            .collect();
        Ok(GroupDescription {
            group_id: g.group_id.0.to_string(),
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            protocol: g.protocol_data.to_string(),
            members,
            coordinator: find(&self.client, group).await?,
        })
    }

    /// Deletes groups (only Empty groups can be deleted: NON_EMPTY_GROUP otherwise).
    pub async fn delete_groups(&self, groups: &[String]) -> Result<ItemResults<String>> {
        let mut out = Vec::new();
        for group in groups {
            let result = send_to_coordinator(
                &self.client,
                group,
                |_| {
                    let mut req = DeleteGroupsRequest::default();
                    req.groups_names = vec![GroupId(StrBytes::from_string(group.clone()))];
                    Ok(req)
                },
                |resp: &kafka_protocol::messages::DeleteGroupsResponse| {
                    resp.results.first().map_or(0, |r| r.error_code)
                },
            )
            .await
            .and_then(|(_, resp)| {
                let code = resp.results.first().map_or(0, |r| r.error_code);
                ClientError::check(code, None).map_err(|e| with_group(e, group))
            });
            out.push((group.clone(), result));
        }
        Ok(out)
    }
}
