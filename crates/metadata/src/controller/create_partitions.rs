//! CreatePartitions (API 37), spec C.4 with KRaft's messages: the count only grows; new
//! partitions are placed by A.4 (or the cluster-aware policy) or taken from the request.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::create_topics::{check_total_partitions, new_partition};
use super::{no_usable_brokers, usable_brokers, Controller};
use crate::errors::ApiError;
use crate::image::{MetadataImage, TopicImage};
use crate::placement::{
    add_partitions_assignment, add_partitions_cluster_aware, validate_manual_partition, BrokerLoad,
    PlacementPolicy,
};
use crate::records::MetadataRecord;
use crate::topic_name::is_internal;

/// One topic of a CreatePartitions request: the new total `count`, and optionally one
/// replica list per added partition.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CreatePartitionsRequest {
    pub name: String,
    pub count: i32,
    pub assignment: Option<Vec<Vec<i32>>>,
}

/// Per topic: the name as sent and the outcome.
pub type CreatePartitionsResult = (String, Result<(), ApiError>);

impl Controller {
    /// CreatePartitions. More than [`super::MAX_PARTITIONS_PER_REQUEST`] added partitions in
    /// the whole request: 44 for every topic. Per topic: duplicate in the request (42),
    /// unknown topic (3), an internal topic (42), count not an increase (37), assignment count
    /// mismatch / bad replicas (39), automatic placement (38 when the RF exceeds the usable
    /// brokers).
    pub fn create_partitions(
        &mut self,
        image: &MetadataImage,
        requests: &[CreatePartitionsRequest],
        validate_only: bool,
    ) -> (Vec<CreatePartitionsResult>, Vec<MetadataRecord>) {
        let total = requests
            .iter()
            .map(|r| {
                let current = image
                    .topic(&r.name)
                    .map_or(0, |t| t.partitions.len() as u64);
                u64::try_from(r.count).unwrap_or(0).saturating_sub(current)
            })
            .fold(0u64, u64::saturating_add);
        if let Err(e) = check_total_partitions(total) {
            let results = requests
                .iter()
                .map(|r| (r.name.clone(), Err(e.clone())))
                .collect();
            return (results, Vec::new());
        }
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for r in requests {
            *counts.entry(r.name.as_str()).or_default() += 1;
        }
        let mut load = (self.config.placement == PlacementPolicy::ClusterAware)
            .then(|| BrokerLoad::from_image(image));
        let mut results = Vec::with_capacity(requests.len());
        let mut records = Vec::new();
        for req in requests {
            let result = if counts[req.name.as_str()] > 1 {
                Err(ApiError::invalid_request("Duplicate topic name."))
            } else {
                self.plan_partitions(image, req, load.as_ref())
            };
            let result = result.map(|(topic, added)| {
                if !validate_only {
                    if let Some(load) = load.as_mut() {
                        added.values().for_each(|r| load.add(r));
                    }
                    records.extend(
                        added
                            .into_iter()
                            .map(|(p, replicas)| new_partition(topic.id, p, replicas)),
                    );
                }
            });
            results.push((req.name.clone(), result));
        }
        (results, records)
    }

    fn plan_partitions<'a>(
        &mut self,
        image: &'a MetadataImage,
        req: &CreatePartitionsRequest,
        load: Option<&BrokerLoad>,
    ) -> Result<(&'a TopicImage, BTreeMap<i32, Vec<i32>>), ApiError> {
        let topic = image.topic(&req.name).ok_or_else(|| {
            ApiError::unknown_topic_or_partition("This server does not host this topic-partition.")
        })?;
        // `__consumer_offsets` maps groups to partitions by hash: more partitions would move
        // every group to another coordinator with its offsets left behind. Kafka only warns
        // (KAFKA-14418 proposed this refusal); Runnel refuses it for every internal topic.
        if is_internal(&req.name) {
            return Err(ApiError::invalid_request(format!(
                "Cannot change the number of partitions of the internal topic {}.",
                req.name
            )));
        }
        let current = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        if req.count == current {
            return Err(ApiError::invalid_partitions(format!(
                "Topic already has {current} partition(s)."
            )));
        }
        if req.count < current {
            return Err(ApiError::invalid_partitions(format!(
                "The topic {} currently has {current} partition(s); {} would not be an increase.",
                req.name, req.count
            )));
        }
        let additional = req.count - current;
        if let Some(lists) = &req.assignment {
            if lists.len() != additional as usize {
                return Err(ApiError::invalid_replica_assignment(format!(
                    "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
                    lists.len()
                )));
            }
        }
        let existing: BTreeMap<i32, Vec<i32>> = topic
            .partitions
            .iter()
            .map(|(p, part)| (*p, part.replicas.clone()))
            .collect();
        let rf = existing.get(&0).map(Vec::len).ok_or_else(|| {
            ApiError::unknown_server_error(format!(
                "Invalid state: topic {} appears to have no partitions.",
                req.name
            ))
        })?;
        let added = match &req.assignment {
            Some(lists) => {
                let registered: BTreeSet<i32> = image.brokers.keys().copied().collect();
                let mut added = BTreeMap::new();
                for (i, replicas) in lists.iter().enumerate() {
                    validate_manual_partition(replicas, &registered, Some(rf))?;
                    added.insert(current + i as i32, replicas.clone());
                }
                added
            }
            None => {
                let rf32 = i32::try_from(rf).unwrap_or(i32::MAX);
                if let Some(e) = no_usable_brokers(image, rf32) {
                    return Err(e);
                }
                let brokers = usable_brokers(image);
                match load {
                    Some(load) => {
                        add_partitions_cluster_aware(&existing, &brokers, req.count, load)?
                    }
                    None => {
                        add_partitions_assignment(&existing, &brokers, req.count, &mut self.rng)?
                    }
                }
            }
        };
        Ok((topic, added))
    }
}

/// The CreatePartitions operation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreatePartitions {
    pub requests: Vec<CreatePartitionsRequest>,
    pub validate_only: bool,
}

impl super::ControllerOp for CreatePartitions {
    const NAME: &'static str = "CreatePartitions";
    type Response = Vec<CreatePartitionsResult>;

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<Self::Response>, ApiError> {
        let (results, records) =
            ctx.controller
                .create_partitions(ctx.image, &self.requests, self.validate_only);
        Ok(super::ControllerResult::new(records, results))
    }

    fn absorb(response: Self::Response, error: ApiError) -> Result<Self::Response, ApiError> {
        Ok(super::absorb_each(response, &error, |r| &mut r.1))
    }
}
