//! ElectLeaders (API 43): preferred and unclean elections on request (spec D.3, F).
//!
//! Preferred: only the first assigned replica may become leader, and only if it is live and in
//! the ISR; the ISR is unchanged. Unclean: only for partitions without a leader; the first live
//! assigned replica leads with ISR = [itself] (data may be lost, which the state-change log
//! says).

use serde::{Deserialize, Serialize};

use super::Controller;
use crate::errors::codes;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;
use crate::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    Preferred,
    Unclean,
}

/// One partition's result; `Ok(())` means a new leader was committed by the returned records.
pub type ElectionResult = (String, i32, Result<(), ApiError>);

fn error(code: i16, message: String) -> ApiError {
    ApiError { code, message }
}

impl Controller {
    /// Elects leaders for `partitions` (None = every partition, where results for partitions
    /// that need no election are left out, as Kafka does).
    pub fn elect_leaders(
        &mut self,
        image: &MetadataImage,
        election: ElectionType,
        partitions: Option<&[(String, i32)]>,
        now_ms: i64,
    ) -> (Vec<ElectionResult>, Vec<MetadataRecord>) {
        let all: Vec<(String, i32)>;
        let (targets, report_not_needed) = match partitions {
            Some(p) => (p, true),
            None => {
                all = image
                    .topics
                    .values()
                    .flat_map(|t| t.partitions.keys().map(move |p| (t.name.clone(), *p)))
                    .collect();
                (&all[..], false)
            }
        };
        let live = |id: i32| {
            image
                .brokers
                .get(&id)
                .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
        };
        let mut results = Vec::new();
        let mut records = Vec::new();
        for (topic, partition) in targets {
            let (Some(t), Some(p)) = (image.topic(topic), image.partition(topic, *partition))
            else {
                results.push((
                    topic.clone(),
                    *partition,
                    Err(error(
                        codes::UNKNOWN_TOPIC_OR_PARTITION,
                        format!("{topic}-{partition} does not exist"),
                    )),
                ));
                continue;
            };
            let outcome = match election {
                ElectionType::Preferred => {
                    let preferred = p.replicas.first().copied().unwrap_or(-1);
                    if p.leader == preferred {
                        Err(error(
                            codes::ELECTION_NOT_NEEDED,
                            "The preferred replica is already the leader".into(),
                        ))
                    } else if live(preferred) && p.isr.contains(&preferred) {
                        Ok((preferred, None))
                    } else {
                        Err(error(
                            80,
                            format!("Failed to elect leader for partition {topic}-{partition} under strategy PreferredReplicaPartitionLeaderElectionStrategy"),
                        ))
                    }
                }
                ElectionType::Unclean => {
                    let live_set: std::collections::BTreeSet<i32> =
                        p.replicas.iter().copied().filter(|r| live(*r)).collect();
                    if p.leader >= 0 && live(p.leader) {
                        Err(error(
                            codes::ELECTION_NOT_NEEDED,
                            "The partition already has a leader".into(),
                        ))
                    } else if let Some(e) = crate::replication::election::offline_election(
                        &p.replicas,
                        &p.isr,
                        &live_set,
                        true,
                    ) {
                        // A live in-sync replica is still preferred; only without one is it unclean.
                        Ok((e.leader, Some(e.isr)))
                    } else {
                        Err(error(
                            83,
                            format!("Failed to elect leader for partition {topic}-{partition} under strategy UncleanLeaderElectionStrategy"),
                        ))
                    }
                }
            };
            match outcome {
                Ok((leader, isr)) => {
                    let detail = if isr.is_some() && !p.isr.contains(&leader) {
                        format!("unclean election of {leader}: committed data may have been lost")
                    } else if isr.is_some() {
                        format!("leader {leader} elected from the in-sync replicas")
                    } else {
                        format!("preferred replica {leader} elected")
                    };
                    self.events.push(super::events::EventInput {
                        now_ms,
                        topic,
                        partition: *partition,
                        replica: None,
                        from: "OnlinePartition",
                        to: "OnlinePartition",
                        detail,
                    });
                    records.push(MetadataRecord::PartitionChange {
                        topic_id: t.id,
                        partition_id: *partition,
                        leader: Some(leader),
                        isr,
                        replicas: None,
                        adding_replicas: None,
                        removing_replicas: None,
                    });
                    results.push((topic.clone(), *partition, Ok(())));
                }
                Err(e) if e.code == codes::ELECTION_NOT_NEEDED && !report_not_needed => {}
                Err(e) => results.push((topic.clone(), *partition, Err(e))),
            }
        }
        (results, records)
    }
}

/// The ElectLeaders operation; `partitions: None` = every partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElectLeaders {
    pub election: ElectionType,
    pub partitions: Option<Vec<(String, i32)>>,
}

impl super::ControllerOp for ElectLeaders {
    const NAME: &'static str = "ElectLeaders";
    type Response = Vec<ElectionResult>;

    fn validate(&self) -> Result<(), ApiError> {
        if let Some(list) = &self.partitions {
            if list.iter().any(|(_, p)| *p < 0) {
                return Err(super::op::bad_field(
                    "partitions",
                    "negative partition index",
                ));
            }
        }
        Ok(())
    }

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<Self::Response>, ApiError> {
        let (results, records) = ctx.controller.elect_leaders(
            ctx.image,
            self.election,
            self.partitions.as_deref(),
            ctx.now_ms,
        );
        Ok(super::ControllerResult::new(records, results))
    }

    fn absorb(response: Self::Response, error: ApiError) -> Result<Self::Response, ApiError> {
        Ok(super::absorb_each(response, &error, |r| &mut r.2))
    }
}
