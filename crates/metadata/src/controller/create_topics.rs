//! CreateTopics (API 19): spec C.2's checks in order, placement, and the records
//! (Topic, one Partition per partition without leader, one Config per override).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use uuid::Uuid;

use super::{no_usable_brokers, usable_brokers, Controller, MAX_PARTITIONS_PER_REQUEST};
use crate::errors::ApiError;
use crate::image::MetadataImage;
use crate::placement::{
    assign_replicas, assign_replicas_cluster_aware, validate_manual_assignment, BrokerLoad,
    PlacementPolicy,
};
use crate::records::{ConfigResource, MetadataRecord};
use crate::topic_config::{validate_topic_config, ConfigEntry};
use crate::topic_name::{has_collision_chars, unify_collision_chars, validate_new_topic_name};

/// One topic of a CreateTopics request. -1 = broker default for `num_partitions` and
/// `replication_factor`; a non-empty `assignment` lists `(partition, replicas)`.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CreateTopicRequest {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub assignment: Vec<(i32, Vec<i32>)>,
    pub configs: Vec<(String, Option<String>)>,
}

/// The per-topic result.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreateTopicOutcome {
    pub name: String,
    pub result: Result<CreatedTopic, ApiError>,
}

/// What CreateTopics v5+ echoes for a created (or validated) topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreatedTopic {
    pub topic_id: Uuid,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<ConfigEntry>,
}

/// A topic that passed validation: its placement and overrides.
struct Plan {
    assignment: BTreeMap<i32, Vec<i32>>,
    replication_factor: i16,
    overrides: BTreeMap<String, String>,
}

/// Names and load of the topics accepted earlier in the same request, and the names in use
/// indexed by their '.'/'_'-unified form, so each topic is checked in O(1) rather than by a
/// scan of every topic in the image.
struct Batch {
    new_names: HashSet<String>,
    /// Unified form -> a topic name with collision characters (image and this request).
    unified: HashMap<String, String>,
    ids: HashSet<Uuid>,
    load: Option<BrokerLoad>,
}

impl Batch {
    fn new(image: &MetadataImage, load: Option<BrokerLoad>) -> Self {
        let unified = image
            .topics
            .keys()
            .filter(|n| has_collision_chars(n))
            .map(|n| (unify_collision_chars(n), n.clone()))
            .collect();
        Batch {
            new_names: HashSet::new(),
            unified,
            ids: HashSet::new(),
            load,
        }
    }

    fn accept(&mut self, name: &str) {
        self.new_names.insert(name.to_string());
        if has_collision_chars(name) {
            self.unified
                .insert(unify_collision_chars(name), name.to_string());
        }
    }

    /// The topic in use whose name may collide with `name` (at most one can).
    fn collision_candidate(&self, name: &str) -> Option<&str> {
        if !has_collision_chars(name) {
            return None;
        }
        self.unified
            .get(&unify_collision_chars(name))
            .map(String::as_str)
    }
}

/// How many partitions a CreateTopics entry asks for (-1 = `num.partitions`).
fn requested_partitions(req: &CreateTopicRequest, default: i32) -> u64 {
    if !req.assignment.is_empty() {
        return req.assignment.len() as u64;
    }
    let n = if req.num_partitions == -1 {
        default
    } else {
        req.num_partitions
    };
    u64::try_from(n).unwrap_or(0)
}

/// Kafka's `validateTotalNumberOfPartitions`: a request may create or add at most
/// [`MAX_PARTITIONS_PER_REQUEST`] partitions in total, else POLICY_VIOLATION for all of it.
pub(super) fn check_total_partitions(total: u64) -> Result<(), ApiError> {
    if total > MAX_PARTITIONS_PER_REQUEST as u64 {
        return Err(ApiError::policy_violation(
            "Excessively large number of partitions per request.",
        ));
    }
    Ok(())
}

impl Controller {
    /// CreateTopics. Per topic, in spec C.2's order: duplicate name in the request (42),
    /// already exists (36), manual assignment together with counts (42), counts and automatic
    /// placement (37 / 38), name (17, including the '.'/'_' collision), manual assignment
    /// (39), configs (40). `validate_only` runs every check and returns no records.
    pub fn create_topics(
        &mut self,
        image: &MetadataImage,
        requests: &[CreateTopicRequest],
        validate_only: bool,
    ) -> (Vec<CreateTopicOutcome>, Vec<MetadataRecord>) {
        let total = requests
            .iter()
            .map(|r| requested_partitions(r, self.config.num_partitions))
            .fold(0u64, u64::saturating_add);
        if let Err(e) = check_total_partitions(total) {
            let outcomes = requests
                .iter()
                .map(|r| CreateTopicOutcome {
                    name: r.name.clone(),
                    result: Err(e.clone()),
                })
                .collect();
            return (outcomes, Vec::new());
        }
        let mut name_counts: HashMap<&str, usize> = HashMap::new();
        for r in requests {
            *name_counts.entry(r.name.as_str()).or_default() += 1;
        }
        let load = (self.config.placement == PlacementPolicy::ClusterAware)
            .then(|| BrokerLoad::from_image(image));
        let mut batch = Batch::new(image, load);
        let mut outcomes = Vec::with_capacity(requests.len());
        let mut records = Vec::new();
        for req in requests {
            let planned = if name_counts[req.name.as_str()] > 1 {
                Err(ApiError::invalid_request("Duplicate topic name."))
            } else {
                self.plan(image, req, &batch)
            };
            let result = planned.map(|plan| {
                let topic_id = self.new_topic_id(image, &batch.ids);
                batch.ids.insert(topic_id);
                let created = CreatedTopic {
                    topic_id,
                    num_partitions: i32::try_from(plan.assignment.len()).unwrap_or(i32::MAX),
                    replication_factor: plan.replication_factor,
                    configs: self.describe(image, &plan.overrides),
                };
                if !validate_only {
                    if let Some(load) = batch.load.as_mut() {
                        plan.assignment.values().for_each(|r| load.add(r));
                    }
                    batch.accept(&req.name);
                    records.extend(topic_records(&req.name, topic_id, plan));
                }
                created
            });
            outcomes.push(CreateTopicOutcome {
                name: req.name.clone(),
                result,
            });
        }
        (outcomes, records)
    }

    fn plan(
        &mut self,
        image: &MetadataImage,
        req: &CreateTopicRequest,
        batch: &Batch,
    ) -> Result<Plan, ApiError> {
        // 4. Already exists.
        if image.topics.contains_key(&req.name) || batch.new_names.contains(&req.name) {
            return Err(ApiError::topic_already_exists(format!(
                "Topic '{}' already exists.",
                req.name
            )));
        }
        let manual = !req.assignment.is_empty();
        // 5. A manual assignment excludes explicit counts (KRaft's messages).
        if manual && req.replication_factor != -1 {
            return Err(ApiError::invalid_request(
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            ));
        }
        if manual && req.num_partitions != -1 {
            return Err(ApiError::invalid_request(
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            ));
        }
        // 6-7. Counts (-1 = broker default) and automatic placement.
        let automatic = if manual {
            None
        } else {
            Some(self.place_new_topic(image, req, batch)?)
        };
        // 8. Name, including the collision rule against existing and earlier new topics.
        validate_new_topic_name(&req.name, batch.collision_candidate(&req.name))?;
        // 9. Manual assignment.
        let assignment = match automatic {
            Some(a) => a,
            None => manual_assignment(image, &req.assignment)?,
        };
        // 10. Configs (last value wins for a repeated key, as Kafka's Properties do).
        let mut overrides = BTreeMap::new();
        for (key, value) in &req.configs {
            let Some(value) = value else {
                return Err(ApiError::invalid_config(format!(
                    "Null value not supported for topic configs: {key}"
                )));
            };
            validate_topic_config(key, value)?;
            overrides.insert(key.clone(), value.clone());
        }
        let rf = assignment.get(&0).map_or(0, Vec::len);
        Ok(Plan {
            assignment,
            replication_factor: i16::try_from(rf).unwrap_or(i16::MAX),
            overrides,
        })
    }

    fn place_new_topic(
        &mut self,
        image: &MetadataImage,
        req: &CreateTopicRequest,
        batch: &Batch,
    ) -> Result<BTreeMap<i32, Vec<i32>>, ApiError> {
        let partitions = if req.num_partitions == -1 {
            self.config.num_partitions
        } else {
            req.num_partitions
        };
        let rf = if req.replication_factor == -1 {
            self.config.default_replication_factor
        } else {
            req.replication_factor
        };
        if partitions <= 0 {
            return Err(ApiError::invalid_partitions(
                "Number of partitions was set to an invalid non-positive value.",
            ));
        }
        if rf <= 0 {
            return Err(ApiError::invalid_replication_factor(
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ));
        }
        if let Some(e) = no_usable_brokers(image, i32::from(rf)) {
            return Err(e);
        }
        let brokers = usable_brokers(image);
        match &batch.load {
            Some(load) => {
                assign_replicas_cluster_aware(&brokers, partitions, i32::from(rf), 0, load)
            }
            None => assign_replicas(&brokers, partitions, i32::from(rf), -1, 0, &mut self.rng),
        }
    }
}

/// C.2 step 9: the request's `(partition, replicas)` list as a map, KRaft's checks.
fn manual_assignment(
    image: &MetadataImage,
    list: &[(i32, Vec<i32>)],
) -> Result<BTreeMap<i32, Vec<i32>>, ApiError> {
    let mut map = BTreeMap::new();
    for (partition, replicas) in list {
        if map.insert(*partition, replicas.clone()).is_some() {
            return Err(ApiError::invalid_replica_assignment(format!(
                "Found multiple manual partition assignments for partition {partition}"
            )));
        }
    }
    let registered: BTreeSet<i32> = image.brokers.keys().copied().collect();
    validate_manual_assignment(&map, &registered)?;
    Ok(map)
}

/// Topic, then its partitions (leaderless; `on_commit` elects), then its overrides.
fn topic_records(name: &str, topic_id: Uuid, plan: Plan) -> Vec<MetadataRecord> {
    let mut records = Vec::with_capacity(1 + plan.assignment.len() + plan.overrides.len());
    records.push(MetadataRecord::Topic {
        name: name.to_string(),
        topic_id,
    });
    records.extend(
        plan.assignment
            .into_iter()
            .map(|(partition_id, replicas)| new_partition(topic_id, partition_id, replicas)),
    );
    records.extend(
        plan.overrides
            .into_iter()
            .map(|(key, value)| MetadataRecord::Config {
                resource: ConfigResource::Topic(name.to_string()),
                name: key,
                value: Some(value),
            }),
    );
    records
}

/// A new partition: no leader, empty ISR, epochs 0 (the state machine elects after commit).
pub(super) fn new_partition(
    topic_id: Uuid,
    partition_id: i32,
    replicas: Vec<i32>,
) -> MetadataRecord {
    MetadataRecord::Partition {
        topic_id,
        partition_id,
        replicas,
        isr: Vec::new(),
        leader: -1,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    }
}

/// The CreateTopics operation (also the auto-creation of topics and internal topics).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreateTopics {
    pub requests: Vec<CreateTopicRequest>,
    pub validate_only: bool,
}

impl super::ControllerOp for CreateTopics {
    const NAME: &'static str = "CreateTopics";
    type Response = Vec<CreateTopicOutcome>;

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<Self::Response>, ApiError> {
        let (outcomes, records) =
            ctx.controller
                .create_topics(ctx.image, &self.requests, self.validate_only);
        Ok(super::ControllerResult::new(records, outcomes))
    }

    fn absorb(response: Self::Response, error: ApiError) -> Result<Self::Response, ApiError> {
        Ok(super::absorb_each(response, &error, |o| &mut o.result))
    }
}
