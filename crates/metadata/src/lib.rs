//! # runnel-metadata
//!
//! The pure metadata model of Runnel, built on KRaft's split between deciding, recording and
//! applying:
//!
//! * the [`controller::Controller`] *decides*: it validates admin requests (spec C), places
//!   replicas (spec A, B) and drives the partition and replica state machines (spec D),
//!   returning [`records::MetadataRecord`]s;
//! * the broker's metadata log *records* them, in order;
//! * every node *applies* them to an immutable [`image::MetadataImage`].
//!
//! Nothing here performs I/O, spawns tasks or reads the clock (callers pass `now_ms`), and
//! all randomness comes from seeded RNGs, so every decision is reproducible and testable in
//! isolation. Client-controlled input never panics: bad requests become Kafka error codes
//! ([`errors::ApiError`]); inconsistent records become [`image::ImageError`]s.

pub mod acl;
pub mod controller;
pub mod delta;
pub mod dynamic_broker_config;
pub mod errors;
pub mod features;
pub mod group_config;
pub mod image;
pub mod offline_dirs;
pub mod placement;
pub mod quota;
pub mod reassignment;
pub mod record_format;
pub mod records;
pub mod replication;
pub mod state_machine;
pub mod topic_config;
pub mod topic_name;

pub use controller::{
    alter_user_scram_credentials, ScramAlterResult, ScramDeletion, ScramUpsertion,
};
pub use controller::{
    AlterConfigOp, BrokerSessions, Controller, ControllerConfig, CreatePartitionsRequest,
    CreateTopicOutcome, CreateTopicRequest, CreatedTopic, ElectionResult, ElectionType,
    ReassignmentRequest, ReassignmentResult, TopicRef, MAX_PARTITIONS_PER_REQUEST,
    PRODUCER_ID_BLOCK_SIZE,
};
pub use delta::{Applied, Change, MetadataDelta};
pub use errors::{codes, ApiError};
pub use group_config::{
    describe_group_configs, effective_group_config, group_config_def, group_config_doc,
    validate_group_configs, EffectiveGroupConfig, GROUP_CONFIGS,
};
pub use image::{
    BrokerRegistration, ImageError, MetadataImage, PartitionImage, StoredScramCredential,
    TopicImage,
};
pub use placement::{
    add_partitions_assignment, assign_replicas, assign_replicas_with_shift,
    validate_manual_assignment, PlacementPolicy,
};
pub use records::{BrokerEndpoint, ConfigResource, MetadataRecord, SecretBytes};
pub use state_machine::{IllegalTransition, PartitionState, ReplicaState, StateChangeEvent};
pub use topic_config::{
    describe_topic_configs, effective_topic_config, validate_topic_config, BrokerDefaults,
    ConfigEntry, ConfigSource, EffectiveTopicConfig,
};
pub use topic_name::{is_internal, validate_topic_name};
