//! ConsumerGroupDescribe (API 69) and ListGroups for KIP-848 groups: the state derived from
//! the epochs, the assignor the group uses, and every member with its current and target
//! assignment, topic names resolved from the caller's metadata view.

use super::api::{
    Assignment, ConsumerGroupDescription, ConsumerMemberDescription, DescribedTopicPartitions,
    TopicsView,
};
use super::assignor;
use super::codes::*;
use super::group::ConsumerGroupState;
use super::ConsumerGroups;

impl ConsumerGroups {
    /// One description per requested id, in request order; unknown ids get 69.
    pub fn describe(
        &self,
        group_ids: &[String],
        topics: &TopicsView,
    ) -> Vec<ConsumerGroupDescription> {
        group_ids
            .iter()
            .map(|id| match self.groups.get(id) {
                None => ConsumerGroupDescription {
                    group_id: id.clone(),
                    error_code: GROUP_ID_NOT_FOUND,
                    error_message: Some(format!("Group {id} not found.")),
                    state: ConsumerGroupState::Dead.name().to_string(),
                    group_epoch: 0,
                    assignment_epoch: 0,
                    assignor_name: String::new(),
                    members: Vec::new(),
                },
                Some(g) => ConsumerGroupDescription {
                    group_id: id.clone(),
                    error_code: NONE,
                    error_message: None,
                    state: g.state().name().to_string(),
                    group_epoch: g.group_epoch,
                    assignment_epoch: g.assignment_epoch,
                    assignor_name: assignor::preferred(g.members.values(), &self.assignors[0]),
                    members: g
                        .members
                        .values()
                        .map(|m| ConsumerMemberDescription {
                            member_id: m.id.clone(),
                            instance_id: m.instance_id.clone(),
                            rack_id: m.rack_id.clone(),
                            member_epoch: m.member_epoch,
                            client_id: m.client_id.clone(),
                            client_host: m.client_host.clone(),
                            subscribed_topic_names: m
                                .subscribed_topic_names
                                .iter()
                                .cloned()
                                .collect(),
                            subscribed_topic_regex: m.subscribed_topic_regex.clone(),
                            assignment: described(&m.assigned, topics),
                            target_assignment: described(
                                g.target.get(&m.id).unwrap_or(&Assignment::new()),
                                topics,
                            ),
                        })
                        .collect(),
                },
            })
            .collect()
    }

    /// `(group id, state name)` of every group, for ListGroups.
    pub fn list(&self) -> Vec<(String, String)> {
        self.groups
            .values()
            .map(|g| (g.id.clone(), g.state().name().to_string()))
            .collect()
    }
}

/// Topics that no longer exist in the view are left out, as Kafka does.
fn described(a: &Assignment, topics: &TopicsView) -> Vec<DescribedTopicPartitions> {
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .filter_map(|(t, ps)| {
            Some(DescribedTopicPartitions {
                topic_id: *t,
                topic_name: topics.name_of(t)?.to_string(),
                partitions: ps.iter().copied().collect(),
            })
        })
        .collect()
}
