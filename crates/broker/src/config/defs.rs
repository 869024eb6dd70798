//! The table of the broker properties Runnel understands: Kafka's names, Kafka's defaults and
//! the ranges checked at start-up (the part of Kafka's `ConfigDef` the KIP-569 type table in
//! `runnel_metadata::topic_config` does not hold).

/// One broker property: Kafka's name and default, and the range start-up holds an integer
/// value to (beyond its KIP-569 type, checked for every typed property).
#[derive(Debug, Clone, Copy)]
pub(super) struct Def {
    pub name: &'static str,
    pub default: &'static str,
    pub min: Option<i64>,
    pub max: Option<i64>,
}

const fn def(name: &'static str, default: &'static str) -> Def {
    Def {
        name,
        default,
        min: None,
        max: None,
    }
}

impl Def {
    const fn at_least(self, min: i64) -> Def {
        Def {
            min: Some(min),
            ..self
        }
    }

    const fn between(self, min: i64, max: i64) -> Def {
        Def {
            min: Some(min),
            max: Some(max),
            ..self
        }
    }
}

/// `i32::MAX` and `i16::MAX` as range bounds (a Fetch response size is an INT32, a
/// replication factor an INT16).
const INT_MAX: i64 = i32::MAX as i64;
const SHORT_MAX: i64 = i16::MAX as i64;

/// Kafka broker properties this broker understands, with Kafka's defaults.
pub(super) const DEFAULTS: &[Def] = &[
    def("auto.create.topics.enable", "true"),
    def("authorizer.class.name", ""),
    def("super.users", ""),
    def("allow.everyone.if.no.acl.found", "false"),
    def("num.partitions", "1").at_least(1),
    def("default.replication.factor", "1").at_least(1),
    def("delete.topic.enable", "true"),
    def("message.max.bytes", "1048588").at_least(1),
    def("socket.request.max.bytes", "104857600").at_least(1),
    // The listener's limits (docs/network-limits.md): Kafka's names and defaults; what the
    // unbounded defaults mean here is decided in `server::limits`.
    def("max.connections", "2147483647"),
    def("max.connections.per.ip", "2147483647"),
    def("max.connections.per.ip.overrides", ""),
    def("connections.max.idle.ms", "600000"),
    def("connection.failed.authentication.delay.ms", "100"),
    // The largest frame read before a SASL listener's first authentication (Kafka's
    // `SaslServerAuthenticator`); listener-prefixable.
    def("sasl.server.max.receive.size", "524288"),
    def("queued.max.request.bytes", "-1"),
    // Response caps (KIP-74): 0 still lets the first batch through.
    def("fetch.max.bytes", "57671680").between(0, INT_MAX),
    def("max.request.partition.size.limit", "2000"),
    def("replica.fetch.response.max.bytes", "10485760").between(0, INT_MAX),
    // Client quotas (`crate::quota`): the samples a byte rate is measured over.
    def("quota.window.num", "11"),
    def("quota.window.size.seconds", "1"),
    def("log.segment.bytes", "1073741824"),
    def("log.roll.hours", "168"),
    def("log.retention.hours", "168"),
    def("log.retention.bytes", "-1"),
    def("log.retention.check.interval.ms", "300000"),
    def("log.index.interval.bytes", "4096"),
    def("log.index.size.max.bytes", "10485760"),
    def("log.segment.delete.delay.ms", "60000"),
    def("log.flush.interval.messages", "9223372036854775807"),
    def("log.flush.offset.checkpoint.interval.ms", "60000"),
    def("log.cleanup.policy", "delete"),
    def("log.cleaner.enable", "true"),
    def("log.cleaner.backoff.ms", "15000"),
    def("min.insync.replicas", "1"),
    def("replica.lag.time.max.ms", "30000"),
    def("auto.leader.rebalance.enable", "true"),
    def("leader.imbalance.check.interval.seconds", "300"),
    def("leader.imbalance.per.broker.percentage", "10"),
    def("unclean.leader.election.enable", "false"),
    def("compression.type", "producer"),
    def("log.message.timestamp.type", "CreateTime"),
    def("replica.placement.policy", "cluster-aware"),
    def("replica.selector.class", ""),
    def("group.initial.rebalance.delay.ms", "3000"),
    def("group.min.session.timeout.ms", "6000"),
    def("group.max.session.timeout.ms", "1800000"),
    def("group.max.size", "2147483647"),
    // KIP-848 groups (`consumer_group_settings`); a group's own configs override the first two.
    def("group.consumer.session.timeout.ms", "45000"),
    def("group.consumer.heartbeat.interval.ms", "5000"),
    def("group.consumer.min.session.timeout.ms", "45000"),
    def("group.consumer.max.session.timeout.ms", "60000"),
    def("group.consumer.min.heartbeat.interval.ms", "5000"),
    def("group.consumer.max.heartbeat.interval.ms", "15000"),
    def(
        "group.consumer.assignors",
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor,org.apache.kafka.coordinator.group.assignor.RangeAssignor",
    ),
    def("group.consumer.max.size", "2147483647"),
    def("group.consumer.migration.policy", "bidirectional"),
    // Which group protocols the coordinator serves (`BrokerSettings::consumer_protocol_enabled`).
    def("group.coordinator.rebalance.protocols", "classic,consumer"),
    def("offset.metadata.max.bytes", "4096"),
    def("offsets.retention.minutes", "10080"),
    def("offsets.retention.check.interval.ms", "600000"),
    def("offsets.topic.num.partitions", "50"),
    def("offsets.topic.replication.factor", "3").between(1, SHORT_MAX),
    def("transaction.state.log.replication.factor", "3"),
    def("transaction.state.log.num.partitions", "50"),
    def("transaction.state.log.min.isr", "2"),
    def("transaction.state.log.segment.bytes", "104857600"),
    def("transaction.max.timeout.ms", "900000"),
    def("transactional.id.expiration.ms", "604800000"),
    def("producer.id.expiration.ms", "86400000").at_least(1),
    def("producer.id.expiration.check.interval.ms", "600000").at_least(1),
    def("broker.rack", ""),
    def("broker.heartbeat.interval.ms", "2000"),
    def("broker.session.timeout.ms", "9000"),
    // AlterReplicaLogDirs' copy rate (bytes/s); Kafka's default: unbounded.
    def(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "9223372036854775807",
    )
    .at_least(1),
];

/// Properties whose names we accept although they come from Kafka's time-unit families.
pub(super) const ALSO_KNOWN: &[&str] = &[
    "log.retention.ms",
    "log.retention.minutes",
    "log.roll.ms",
    "log.flush.interval.ms",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.message.timestamp.difference.max.ms",
    "log.preallocate",
    "node.id",
    "broker.id",
    "log.dirs",
    "log.dir",
    "metadata.log.dir",
    "listeners",
    "advertised.listeners",
    "process.roles",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.mechanism.inter.broker.protocol",
    "controller.listener.names",
    "sasl.mechanism.controller.protocol",
    "connections.max.reauth.ms",
];

/// Families of per-listener security properties (`listener.name.<name>.ssl.keystore.location`,
/// `ssl.client.auth`, ...): read by `listener_config`, so not warned about.
pub(super) const KNOWN_PREFIXES: &[&str] = &["listener.name.", "ssl."];

pub(super) fn def_of(key: &str) -> Option<&'static Def> {
    DEFAULTS.iter().find(|d| d.name == key)
}

pub(super) fn default_of(key: &str) -> Option<&'static str> {
    def_of(key).map(|d| d.default)
}

/// Whether start-up knows `key` (unknown ones are kept but warned about).
pub(super) fn is_known(key: &str) -> bool {
    def_of(key).is_some()
        || ALSO_KNOWN.contains(&key)
        || KNOWN_PREFIXES.iter().any(|p| key.starts_with(p))
}
