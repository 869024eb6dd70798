//! Topic administration against a real broker: CreateTopics validation with Kafka's error codes,
//! validate_only, DeleteTopics, CreatePartitions and topic configs.

mod support;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::*;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn metadata_topic(
    wire: &mut Wire,
    topic: &str,
) -> Option<metadata_response::MetadataResponseTopic> {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(name(topic)))]))
        .with_allow_auto_topic_creation(false);
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 9, &req);
    resp.topics.into_iter().find(|t| t.error_code == 0)
}

#[test]
fn create_topics_validation_codes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("meuTopico", 10, 1, &[]).0, 0);
    let t = metadata_topic(&mut wire, "meuTopico").expect("created");
    assert_eq!(t.partitions.len(), 10);
    assert!(t
        .partitions
        .iter()
        .all(|p| p.leader_id.0 == 1 && p.isr_nodes.len() == 1));
    assert_eq!(
        wire.create_topic("meuTopico", 1, 1, &[]).0,
        36,
        "TOPIC_ALREADY_EXISTS"
    );
    assert_eq!(
        wire.create_topic("bad name!", 1, 1, &[]).0,
        17,
        "INVALID_TOPIC_EXCEPTION"
    );
    assert_eq!(
        wire.create_topic(&"x".repeat(250), 1, 1, &[]).0,
        17,
        "name too long"
    );
    assert_eq!(
        wire.create_topic("zero", 0, 1, &[]).0,
        37,
        "INVALID_PARTITIONS"
    );
    assert_eq!(
        wire.create_topic("rf3", 1, 3, &[]).0,
        38,
        "INVALID_REPLICATION_FACTOR"
    );
    assert_eq!(
        wire.create_topic("cfg", 1, 1, &[("retention.ms", "soon")])
            .0,
        40,
        "INVALID_CONFIG"
    );
    assert_eq!(
        wire.create_topic("cfg", 1, 1, &[("no.such.config", "1")]).0,
        40,
        "unknown config"
    );
    assert_eq!(wire.create_topic("a.b", 1, 1, &[]).0, 0);
    assert_eq!(
        wire.create_topic("a_b", 1, 1, &[]).0,
        17,
        "collides with a.b"
    );
    // Defaults (-1) use num.partitions / default.replication.factor.
    assert_eq!(wire.create_topic("defaults", -1, -1, &[]).0, 0);
    assert_eq!(
        metadata_topic(&mut wire, "defaults")
            .unwrap()
            .partitions
            .len(),
        1
    );
}

#[test]
fn duplicates_manual_assignment_and_validate_only() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    let dup = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(name("twice"))
                .with_num_partitions(1)
                .with_replication_factor(1),
            create_topics_request::CreatableTopic::default()
                .with_name(name("twice"))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ]);
    let resp: CreateTopicsResponse = wire.call(ApiKey::CreateTopics, 5, &dup);
    assert!(
        resp.topics.iter().all(|t| t.error_code == 42),
        "INVALID_REQUEST for duplicates: {:?}",
        resp.topics
    );

    let manual = |assignments: Vec<(i32, Vec<i32>)>| {
        CreateTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![create_topics_request::CreatableTopic::default()
                .with_name(name("manual"))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(
                    assignments
                        .into_iter()
                        .map(|(p, b)| {
                            create_topics_request::CreatableReplicaAssignment::default()
                                .with_partition_index(p)
                                .with_broker_ids(b.into_iter().map(BrokerId).collect())
                        })
                        .collect(),
                )])
    };
    let resp: CreateTopicsResponse =
        wire.call(ApiKey::CreateTopics, 5, &manual(vec![(0, vec![7])]));
    assert_eq!(
        resp.topics[0].error_code, 39,
        "unknown broker in manual assignment"
    );
    let resp: CreateTopicsResponse = wire.call(
        ApiKey::CreateTopics,
        5,
        &manual(vec![(0, vec![1]), (2, vec![1])]),
    );
    assert_eq!(
        resp.topics[0].error_code, 39,
        "non-consecutive partition ids"
    );
    let resp: CreateTopicsResponse = wire.call(
        ApiKey::CreateTopics,
        5,
        &manual(vec![(0, vec![1]), (1, vec![1])]),
    );
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(
        metadata_topic(&mut wire, "manual")
            .unwrap()
            .partitions
            .len(),
        2
    );

    let validate = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_validate_only(true)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(name("dry"))
            .with_num_partitions(4)
            .with_replication_factor(1)]);
    let resp: CreateTopicsResponse = wire.call(ApiKey::CreateTopics, 5, &validate);
    assert_eq!(
        (resp.topics[0].error_code, resp.topics[0].num_partitions),
        (0, 4)
    );
    assert!(
        metadata_topic(&mut wire, "dry").is_none(),
        "validate_only creates nothing"
    );
}

#[test]
fn delete_topics_and_create_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("grow", 2, 1, &[]).0, 0);
    let grow = |count: i32| {
        CreatePartitionsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(name("grow"))
                    .with_count(count)
                    .with_assignments(None),
            ])
    };
    let resp: CreatePartitionsResponse = wire.call(ApiKey::CreatePartitions, 3, &grow(5));
    assert_eq!(resp.results[0].error_code, 0);
    assert_eq!(
        metadata_topic(&mut wire, "grow").unwrap().partitions.len(),
        5
    );
    let resp: CreatePartitionsResponse = wire.call(ApiKey::CreatePartitions, 3, &grow(5));
    assert_eq!(resp.results[0].error_code, 37, "same count");
    let resp: CreatePartitionsResponse = wire.call(ApiKey::CreatePartitions, 3, &grow(3));
    assert_eq!(resp.results[0].error_code, 37, "shrinking");
    assert_eq!(
        wire.produce(
            "grow",
            4,
            batch(&[(None, "p4")], kafka_protocol::records::Compression::None),
            1
        )
        .0,
        0
    );

    let delete = |topic: &str| {
        DeleteTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topic_names(vec![name(topic)])
    };
    let resp: DeleteTopicsResponse = wire.call(ApiKey::DeleteTopics, 4, &delete("grow"));
    assert_eq!(resp.responses[0].error_code, 0);
    assert!(metadata_topic(&mut wire, "grow").is_none());
    wait_until("partition dirs removed", || {
        !dir.path().join("grow-0").exists() && !dir.path().join("grow-4").exists()
    });
    let resp: DeleteTopicsResponse = wire.call(ApiKey::DeleteTopics, 4, &delete("grow"));
    assert_eq!(
        resp.responses[0].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    // Re-creating the name starts from scratch.
    assert_eq!(wire.create_topic("grow", 1, 1, &[]).0, 0);
    assert!(wire.fetch_all("grow", 0, 0).is_empty());
}

#[test]
fn topic_configs_describe_and_alter() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic("conf", 1, 1, &[("retention.ms", "1000")])
            .0,
        0
    );
    let describe = |wire: &mut Wire| -> Vec<(String, Option<String>, i8)> {
        let req = DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("conf")),
        ]);
        let resp: DescribeConfigsResponse = wire.call(ApiKey::DescribeConfigs, 4, &req);
        assert_eq!(resp.results[0].error_code, 0);
        resp.results[0]
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value.as_ref().map(|v| v.to_string()),
                    c.config_source,
                )
            })
            .collect()
    };
    let configs = describe(&mut wire);
    assert!(
        configs.contains(&("retention.ms".into(), Some("1000".into()), 1)),
        "topic override, source 1: {configs:?}"
    );
    assert!(configs
        .iter()
        .any(|(n, v, s)| n == "segment.bytes" && v.as_deref() == Some("1073741824") && *s == 5));

    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("conf"))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("cleanup.policy"))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_static_str("compact"))),
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_config_operation(1),
            ]),
    ]);
    let resp: IncrementalAlterConfigsResponse =
        wire.call(ApiKey::IncrementalAlterConfigs, 1, &alter);
    assert_eq!(resp.responses[0].error_code, 0);
    let configs = describe(&mut wire);
    assert!(configs.contains(&("cleanup.policy".into(), Some("compact".into()), 1)));
    assert!(
        configs
            .iter()
            .any(|(n, _, s)| n == "retention.ms" && *s != 1),
        "override removed"
    );

    let bad = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("conf"))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(StrBytes::from_static_str("segment.bytes"))
                .with_value(Some(StrBytes::from_static_str("-4")))]),
    ]);
    let resp: AlterConfigsResponse = wire.call(ApiKey::AlterConfigs, 1, &bad);
    assert_eq!(resp.responses[0].error_code, 40, "INVALID_CONFIG");
}

#[test]
fn auto_creation_follows_the_broker_setting() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["num.partitions=3"]);
    let mut wire = broker.connect();
    let req = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(name("auto")))]))
        .with_allow_auto_topic_creation(true);
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 9, &req);
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(resp.topics[0].partitions.len(), 3);
    drop(broker);

    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["auto.create.topics.enable=false"]);
    let mut wire = broker.connect();
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 9, &req);
    assert_eq!(resp.topics[0].error_code, 3);
}

/// Metadata v0 (deprecated, still served by Kafka 4.x, KIP-896): its topics array cannot be
/// null, and empty means every topic (v1+: none); named topics are answered as in v1+.
#[test]
fn metadata_v0_empty_list_means_all_topics() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("v0-a", 2, 1, &[]).0, 0);
    assert_eq!(wire.create_topic("v0-b", 1, 1, &[]).0, 0);
    let all = MetadataRequest::default().with_topics(Some(vec![]));
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 0, &all);
    let mut names: Vec<String> = resp
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .filter(|n| !n.starts_with("__"))
        .collect();
    names.sort();
    assert_eq!(names, ["v0-a", "v0-b"]);
    assert_eq!(resp.brokers.len(), 1);
    // The same empty list at v1 asks for no topic.
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 1, &all);
    assert!(resp.topics.is_empty());
    let one = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(name("v0-a"))),
    ]));
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 0, &one);
    assert_eq!(resp.topics.len(), 1);
    assert_eq!(resp.topics[0].partitions.len(), 2);
}

#[test]
fn elect_leaders_reports_per_partition_results() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("elect", 2, 1, &[]).0, 0);
    let req = |election_type: i8, partitions: Vec<i32>, topic: &str| {
        ElectLeadersRequest::default()
            .with_election_type(election_type)
            .with_timeout_ms(5000)
            .with_topic_partitions(Some(vec![elect_leaders_request::TopicPartitions::default(
            )
            .with_topic(name(topic))
            .with_partitions(partitions)]))
    };
    let resp: ElectLeadersResponse =
        wire.call(ApiKey::ElectLeaders, 1, &req(0, vec![0, 1], "elect"));
    let codes: Vec<i16> = resp.replica_election_results[0]
        .partition_result
        .iter()
        .map(|r| r.error_code)
        .collect();
    assert_eq!(
        codes,
        vec![84, 84],
        "ELECTION_NOT_NEEDED: the preferred replica leads"
    );
    let resp: ElectLeadersResponse = wire.call(ApiKey::ElectLeaders, 1, &req(1, vec![0], "elect"));
    assert_eq!(
        resp.replica_election_results[0].partition_result[0].error_code, 84,
        "unclean: a leader exists"
    );
    let resp: ElectLeadersResponse = wire.call(ApiKey::ElectLeaders, 1, &req(0, vec![5], "elect"));
    assert_eq!(
        resp.replica_election_results[0].partition_result[0].error_code,
        3
    );
    let all = ElectLeadersRequest::default()
        .with_timeout_ms(5000)
        .with_topic_partitions(None);
    let resp: ElectLeadersResponse = wire.call(ApiKey::ElectLeaders, 1, &all);
    assert!(
        resp.replica_election_results.is_empty(),
        "nothing to elect, nothing reported"
    );
}
