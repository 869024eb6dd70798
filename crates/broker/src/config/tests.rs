use std::time::Duration;

use super::*;
use crate::server::limits::DEFAULT_REQUEST_MEMORY;

fn args(overrides: &[&str]) -> BrokerArgs {
    BrokerArgs {
        node_id: Some(1),
        listen: "127.0.0.1:0".into(),
        advertise: None,
        data_dir: Some("./x".into()),
        config: None,
        overrides: overrides.iter().map(|s| s.to_string()).collect(),
        process_roles: None,
        controller_listen: None,
        controller_advertise: None,
        controller_quorum_voters: None,
        rack: None,
        add_scram: Vec::new(),
    }
}

#[test]
fn cluster_settings_are_validated() {
    let mut a = args(&[]);
    a.controller_quorum_voters = Some("1@127.0.0.1:19093,2@127.0.0.1:19094".into());
    let c = BrokerConfig::from_args(&a).unwrap();
    let cluster = c.cluster.as_ref().unwrap();
    assert!(cluster.broker && cluster.controller);
    assert_eq!(cluster.voters.len(), 2);
    assert_eq!(cluster.controller_listen.to_string(), "127.0.0.1:19093");
    a.node_id = Some(3);
    let e = BrokerConfig::from_args(&a).unwrap_err().to_string();
    assert!(e.contains("not in --controller-quorum-voters"), "{e}");
    a.process_roles = Some("broker".into());
    assert!(
        BrokerConfig::from_args(&a).is_ok(),
        "a broker-only node need not be a voter"
    );
    a.controller_advertise = Some("127.0.0.1:29093".into());
    let c = BrokerConfig::from_args(&a).unwrap();
    assert_eq!(
        c.cluster.as_ref().unwrap().controller_advertise.as_deref(),
        Some("127.0.0.1:29093")
    );
    a.controller_advertise = Some("no-port".into());
    assert!(BrokerConfig::from_args(&a)
        .unwrap_err()
        .to_string()
        .contains("HOST:PORT"));
    a.controller_advertise = Some("127.0.0.1:29093".into());
    a.node_id = Some(1);
    a.process_roles = None;
    assert!(BrokerConfig::from_args(&a)
        .unwrap_err()
        .to_string()
        .contains("for broker-only nodes"));
    a.controller_advertise = None;
    a.controller_quorum_voters = Some("1@127.0.0.1:1,1@127.0.0.1:2".into());
    assert!(BrokerConfig::from_args(&a)
        .unwrap_err()
        .to_string()
        .contains("twice"));
    a.controller_quorum_voters = Some("x@127.0.0.1:1".into());
    assert!(BrokerConfig::from_args(&a).is_err());
    a.controller_quorum_voters = None;
    a.process_roles = Some("broker".into());
    assert!(
        BrokerConfig::from_args(&a).is_err(),
        "broker-only needs voters"
    );
    a.process_roles = Some("nonsense".into());
    assert!(BrokerConfig::from_args(&a).is_err());
}

/// Kafka's KRaft combined-mode server.properties: `node.id`, `log.dirs` and the CONTROLLER
/// entry of `listeners` (the quorum listener) come from the file when no flag is given.
#[test]
fn kafka_server_properties_name_the_node_and_its_controller_listener() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    std::fs::write(
        &file,
        "process.roles=broker,controller\nnode.id=2\n\
         controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:19094\n\
         listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19094\n\
         advertised.listeners=PLAINTEXT://localhost:19092,CONTROLLER://localhost:19094\n\
         controller.listener.names=CONTROLLER\nlog.dirs=/tmp/kraft-combined-logs\n",
    )
    .unwrap();
    let mut a = args(&[]);
    a.node_id = None;
    a.data_dir = None;
    a.config = Some(file.clone());
    let c = BrokerConfig::from_args(&a).unwrap();
    assert_eq!(c.node_id, 2);
    assert_eq!(c.data_dir, PathBuf::from("/tmp/kraft-combined-logs"));
    let cluster = c.cluster.as_ref().unwrap();
    assert_eq!(cluster.controller_listen.to_string(), "127.0.0.1:19094");
    // The CONTROLLER entry is not a Kafka listener, nor advertised as one.
    let plan = c.listener_plan().unwrap();
    let names: Vec<&str> = plan.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["PLAINTEXT"]);
    assert!(!plan.advertised.contains_key("CONTROLLER"));
    // Flags win over the file.
    a.node_id = Some(1);
    a.data_dir = Some("./x".into());
    let c = BrokerConfig::from_args(&a).unwrap();
    assert_eq!((c.node_id, c.data_dir), (1, PathBuf::from("./x")));
    assert_eq!(c.log_dirs, vec![PathBuf::from("./x")]);
    // Several log.dirs (JBOD): every one holds partitions, the first the metadata too,
    // unless metadata.log.dir (or --data-dir) names another.
    a.overrides = vec!["log.dirs=/a, /b".into()];
    a.data_dir = None;
    let c = BrokerConfig::from_args(&a).unwrap();
    assert_eq!(c.data_dir, PathBuf::from("/a"));
    assert_eq!(c.log_dirs, vec![PathBuf::from("/a"), PathBuf::from("/b")]);
    a.overrides.push("metadata.log.dir=/m".into());
    let c = BrokerConfig::from_args(&a).unwrap();
    assert_eq!(c.data_dir, PathBuf::from("/m"));
    assert_eq!(c.log_dirs.len(), 2);
    a.overrides = vec!["log.dirs=/a,/b,/a".into()];
    let e = BrokerConfig::from_args(&a).unwrap_err().to_string();
    assert!(e.contains("twice"), "{e}");
}

#[test]
fn bootstrap_servers_of_several_controllers_need_a_formatted_quorum() {
    let mut a = args(&["controller.quorum.bootstrap.servers=127.0.0.1:1,127.0.0.1:2"]);
    a.data_dir = Some(tempfile::tempdir().unwrap().path().to_path_buf());
    let e = BrokerConfig::from_args(&a).unwrap_err().to_string();
    assert!(e.contains("--initial-controllers"), "{e}");
    // One bootstrap server: this node alone (single-node mode).
    let a = args(&["controller.quorum.bootstrap.servers=127.0.0.1:1"]);
    assert!(BrokerConfig::from_args(&a).unwrap().cluster.is_none());
}

#[test]
fn defaults_are_kafkas() {
    let c = BrokerConfig::from_args(&args(&[])).unwrap();
    assert_eq!(c.str("auto.create.topics.enable"), "true");
    assert_eq!(c.get_i64("num.partitions", 0), 1);
    assert_eq!(c.get_i64("message.max.bytes", 0), 1048588);
    assert_eq!(c.get_i64("fetch.max.bytes", 0), 57671680);
    assert_eq!(c.get_i64("replica.fetch.response.max.bytes", 0), 10485760);
}

/// Caught: typed properties were read as i64 and narrowed with `as`, so
/// `num.partitions=4294967297` started a broker creating 1-partition topics and
/// `group.max.session.timeout.ms=4294967296` one whose groups refused every member.
/// Now every property of a known type is checked at start-up, as Kafka's ConfigDef does.
#[test]
fn typed_properties_must_fit_their_type() {
    for bad in [
        "num.partitions=4294967297",
        "group.max.session.timeout.ms=4294967296",
        "group.initial.rebalance.delay.ms=x",
        "broker.session.timeout.ms=2147483648",
        "auto.leader.rebalance.enable=yes",
    ] {
        let e = BrokerConfig::from_args(&args(&[bad])).unwrap_err();
        let key = bad.split('=').next().unwrap();
        assert!(e.to_string().contains(key), "{bad}: {e}");
    }
    let c = BrokerConfig::from_args(&args(&["group.max.session.timeout.ms=2147483647"])).unwrap();
    assert_eq!(c.get_i32("group.max.session.timeout.ms", 0), i32::MAX);
}

#[test]
fn fetch_caps_are_validated() {
    for bad in [
        "fetch.max.bytes=-1",
        "fetch.max.bytes=2147483648",
        "replica.fetch.response.max.bytes=-5",
        "replica.fetch.response.max.bytes=x",
    ] {
        assert!(BrokerConfig::from_args(&args(&[bad])).is_err(), "{bad}");
    }
    assert!(BrokerConfig::from_args(&args(&["fetch.max.bytes=0"])).is_ok());
}

#[test]
fn replica_selector_class_is_kafkas_or_refused() {
    use runnel_replication::ReplicaSelector;
    let c = BrokerConfig::from_args(&args(&[])).unwrap();
    assert_eq!(c.replica_selector().unwrap(), ReplicaSelector::LeaderOnly);
    let rack_aware =
        "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector";
    let c = BrokerConfig::from_args(&args(&[rack_aware])).unwrap();
    assert_eq!(c.replica_selector().unwrap(), ReplicaSelector::RackAware);
    let e = BrokerConfig::from_args(&args(&["replica.selector.class=com.example.Mine"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("replica.selector.class"), "{e}");
}

#[test]
fn overrides_win_and_are_validated() {
    let c = BrokerConfig::from_args(&args(&["num.partitions=3"])).unwrap();
    assert_eq!(c.get_i64("num.partitions", 0), 3);
    assert!(BrokerConfig::from_args(&args(&["num.partitions=x"])).is_err());
    assert!(BrokerConfig::from_args(&args(&["num.partitions"])).is_err());
    assert!(BrokerConfig::from_args(&args(&["auto.create.topics.enable=maybe"])).is_err());
}

#[test]
fn listener_limits_are_validated() {
    let c = BrokerConfig::from_args(&args(&[])).unwrap();
    let l = c.server_limits().unwrap();
    assert_eq!(
        l.max_connections, None,
        "Kafka's default: derived from the FD limit"
    );
    assert_eq!(l.per_ip.default, i32::MAX as u64);
    assert_eq!(l.idle_timeout, Some(Duration::from_millis(600_000)));
    assert_eq!(l.request_memory, DEFAULT_REQUEST_MEMORY);
    let c = BrokerConfig::from_args(&args(&[
        "max.connections=10",
        "max.connections.per.ip=0",
        "max.connections.per.ip.overrides=127.0.0.1:3, [::1]:4 ,localhost:5",
        "connections.max.idle.ms=-1",
        "socket.request.max.bytes=1000",
        "queued.max.request.bytes=5000",
    ]))
    .unwrap();
    let l = c.server_limits().unwrap();
    assert_eq!(l.max_connections, Some(10));
    assert_eq!(
        l.per_ip.limit_for("127.0.0.1".parse().unwrap()),
        5,
        "localhost came last"
    );
    assert_eq!(l.per_ip.limit_for("10.1.1.1".parse().unwrap()), 0);
    assert_eq!(l.idle_timeout, None);
    assert_eq!(l.request_memory, 5000);
    for bad in [
        "max.connections=-1",
        "max.connections.per.ip=0",
        "max.connections.per.ip=x",
        "max.connections.per.ip.overrides=127.0.0.1",
        "max.connections.per.ip.overrides=127.0.0.1:-3",
        "connections.max.idle.ms=0",
        "queued.max.request.bytes=1000",
    ] {
        assert!(BrokerConfig::from_args(&args(&[bad])).is_err(), "{bad}");
    }
}

#[test]
fn toml_file_is_flattened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.toml");
    std::fs::write(
        &path,
        "\"num.partitions\" = 4\n[log.retention]\nms = 1000\n",
    )
    .unwrap();
    let mut a = args(&[]);
    a.config = Some(path);
    let c = BrokerConfig::from_args(&a).unwrap();
    assert_eq!(c.str("num.partitions"), "4");
    assert_eq!(c.str("log.retention.ms"), "1000");
}

/// `group.consumer.migration.policy`: Kafka's default and values (case-insensitive); anything
/// else refuses to start.
#[test]
fn migration_policy_is_validated() {
    use runnel_group::MigrationPolicy;
    let policy = |overrides: &[&str]| {
        BrokerConfig::from_args(&args(overrides)).map(|c| {
            crate::consumer_group_settings::consumer_group_config(&c)
                .unwrap()
                .migration_policy
        })
    };
    assert_eq!(policy(&[]).unwrap(), MigrationPolicy::Bidirectional);
    assert_eq!(
        policy(&["group.consumer.migration.policy=Disabled"]).unwrap(),
        MigrationPolicy::Disabled
    );
    let e = policy(&["group.consumer.migration.policy=sideways"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("group.consumer.migration.policy"), "{e}");
}
