//! Types (KIP-569) and documentation of the broker properties DescribeConfigs lists for a
//! broker resource: Kafka's `ConfigDef.Type` of each property Runnel knows, and a description
//! in Runnel's words. A property that is a topic config's synonym (`log.retention.ms`, ...)
//! not listed here takes that key's type.

use super::keys::{topic_config_for_broker_property, ConfigType};

use ConfigType::{Boolean, Class, Int, List, Long, Short, String as Str};

/// (property, type, documentation), sorted by property.
static BROKER_KEYS: &[(&str, ConfigType, &str)] = &[
    ("advertised.listeners", Str, "The listeners clients are told to connect to (listener://host:port), when they differ from listeners."),
    ("allow.everyone.if.no.acl.found", Boolean, "With an authorizer: whether a request no ACL matches is allowed."),
    ("authorizer.class.name", Str, "The authorizer (Kafka's StandardAuthorizer class name enables ACLs; empty: no authorization)."),
    ("auto.create.topics.enable", Boolean, "Whether a Metadata or Produce request for an unknown topic creates it."),
    ("auto.leader.rebalance.enable", Boolean, "Whether leadership is moved back to preferred replicas periodically."),
    ("broker.heartbeat.interval.ms", Int, "How often a broker heartbeats to the active controller."),
    ("broker.id", Int, "This broker's id (the same as node.id)."),
    ("broker.rack", Str, "The rack of this broker, for rack-aware replica placement."),
    ("broker.session.timeout.ms", Int, "How long the controller waits for a broker's heartbeat before it fences the broker."),
    ("compression.type", Str, "The default final compression of topics (see the topic config compression.type)."),
    ("connection.failed.authentication.delay.ms", Int, "How long a connection whose authentication failed stays open after the failure response."),
    ("connections.max.idle.ms", Long, "Idle connections are closed after this long."),
    ("connections.max.reauth.ms", Long, "KIP-368: how long a SASL session lasts; a connection that has not re-authenticated by then is closed on its next request (0: never)."),
    ("controller.listener.names", List, "The listener (first name) whose security protocol and TLS/SASL settings the controller (quorum) listener uses."),
    ("controller.quorum.voters", List, "The controller quorum: id@host:port of every voter."),
    ("default.replication.factor", Int, "The replication factor of topics created without one."),
    ("delete.topic.enable", Boolean, "Whether topics may be deleted."),
    ("fetch.max.bytes", Int, "The most bytes a consumer Fetch response carries."),
    ("group.consumer.assignors", List, "The server-side assignors consumer groups (KIP-848 protocol) may use; the first is the default."),
    ("group.consumer.heartbeat.interval.ms", Int, "The heartbeat interval given to members of consumer groups (KIP-848 protocol)."),
    ("group.consumer.max.heartbeat.interval.ms", Int, "The largest heartbeat interval a consumer group may be configured with."),
    ("group.consumer.max.session.timeout.ms", Int, "The largest session timeout a consumer group may be configured with."),
    ("group.consumer.max.size", Int, "The most members a consumer group (KIP-848 protocol) may have."),
    ("group.consumer.migration.policy", Str, "Which online conversions of groups with members are allowed between the classic and the consumer (KIP-848) protocol: bidirectional, upgrade, downgrade or disabled."),
    ("group.consumer.min.heartbeat.interval.ms", Int, "The smallest heartbeat interval a consumer group may be configured with."),
    ("group.consumer.min.session.timeout.ms", Int, "The smallest session timeout a consumer group may be configured with."),
    ("group.consumer.session.timeout.ms", Int, "How long the coordinator waits for a consumer-group member's heartbeat (KIP-848 protocol)."),
    ("group.coordinator.rebalance.protocols", List, "The group protocols the coordinators serve: classic (always on) and consumer (KIP-848); share is accepted, though Runnel has no share groups."),
    ("group.initial.rebalance.delay.ms", Int, "How long a new classic group waits for more members before its first rebalance."),
    ("group.max.session.timeout.ms", Int, "The largest session timeout a classic group member may ask for."),
    ("group.max.size", Int, "The most members a classic group may have."),
    ("group.min.session.timeout.ms", Int, "The smallest session timeout a classic group member may ask for."),
    ("group.share.heartbeat.interval.ms", Int, "The heartbeat interval given to members of share groups."),
    ("group.share.max.heartbeat.interval.ms", Int, "The largest heartbeat interval a share group may be configured with."),
    ("group.share.max.record.lock.duration.ms", Int, "The longest record lock a share group may be configured with."),
    ("group.share.max.session.timeout.ms", Int, "The largest session timeout a share group may be configured with."),
    ("group.share.min.heartbeat.interval.ms", Int, "The smallest heartbeat interval a share group may be configured with."),
    ("group.share.min.record.lock.duration.ms", Int, "The shortest record lock a share group may be configured with."),
    ("group.share.min.session.timeout.ms", Int, "The smallest session timeout a share group may be configured with."),
    ("group.share.record.lock.duration.ms", Int, "How long a record acquired by a share-group member stays locked."),
    ("group.share.session.timeout.ms", Int, "How long the coordinator waits for a share-group member's heartbeat."),
    ("leader.imbalance.check.interval.seconds", Long, "How often the controller checks whether leaders should move back to preferred replicas."),
    ("leader.imbalance.per.broker.percentage", Int, "The share of non-preferred leaders per broker above which leadership is rebalanced."),
    ("listeners", Str, "The addresses the broker listens on (listener://host:port)."),
    ("log.cleaner.backoff.ms", Long, "How long the cleaner sleeps when no log needs cleaning."),
    ("log.cleaner.enable", Boolean, "Whether the log cleaner (compaction) runs."),
    ("log.cleanup.policy", List, "The default cleanup.policy of topics."),
    ("log.dir", Str, "The directory of the partition logs (used when log.dirs is not set)."),
    ("log.dirs", Str, "The directories of the partition logs."),
    ("log.flush.interval.messages", Long, "The default flush.messages of topics."),
    ("log.flush.offset.checkpoint.interval.ms", Int, "How often the recovery-point checkpoint is written."),
    ("log.index.interval.bytes", Int, "The default index.interval.bytes of topics."),
    ("log.index.size.max.bytes", Int, "The default segment.index.bytes of topics."),
    ("log.message.timestamp.type", Str, "The default message.timestamp.type of topics."),
    ("log.retention.bytes", Long, "The default retention.bytes of topics."),
    ("log.retention.check.interval.ms", Long, "How often segments are checked for deletion by retention."),
    ("log.retention.hours", Int, "The default retention of topics in hours (log.retention.ms and log.retention.minutes take precedence)."),
    ("log.roll.hours", Int, "The default segment.ms of topics in hours (log.roll.ms takes precedence)."),
    ("log.segment.bytes", Int, "The default segment.bytes of topics."),
    ("log.segment.delete.delay.ms", Long, "The default file.delete.delay.ms of topics."),
    ("max.connections", Int, "The most connections the broker accepts at once."),
    ("max.connections.per.ip", Int, "The most connections the broker accepts from one IP address."),
    ("max.connections.per.ip.overrides", Str, "Per-IP or per-host overrides of max.connections.per.ip (host:count,...)."),
    ("max.request.partition.size.limit", Int, "The most partitions a DescribeTopicPartitions response describes."),
    ("message.max.bytes", Int, "The default max.message.bytes of topics: the largest record batch accepted."),
    ("metadata.log.dir", Str, "Where the metadata log (and meta.properties) lives: else the first of log.dirs."),
    ("min.insync.replicas", Int, "The default min.insync.replicas of topics."),
    ("node.id", Int, "This node's id in the cluster."),
    ("num.partitions", Int, "The number of partitions of topics created without one."),
    ("offset.metadata.max.bytes", Int, "The largest metadata string an offset commit may carry."),
    ("offsets.retention.check.interval.ms", Long, "How often expired committed offsets are removed."),
    ("offsets.retention.minutes", Int, "How long the committed offsets of an empty group are kept."),
    ("offsets.topic.num.partitions", Int, "The number of partitions of __consumer_offsets."),
    ("offsets.topic.replication.factor", Short, "The replication factor of __consumer_offsets."),
    ("process.roles", List, "The roles of this node: broker, controller, or both."),
    ("producer.id.expiration.check.interval.ms", Int, "How often expired producer ids are removed."),
    ("producer.id.expiration.ms", Int, "How long a producer id's state is kept after its last write."),
    ("queued.max.request.bytes", Long, "The most bytes of requests held in memory before the broker stops reading sockets."),
    ("quota.window.num", Int, "The number of samples a client quota's rate is measured over (KIP-13)."),
    ("quota.window.size.seconds", Int, "The length of each sample of a client quota's rate, in seconds."),
    ("replica.alter.log.dirs.io.max.bytes.per.second", Long, "The most bytes per second a replica move between log dirs (AlterReplicaLogDirs) copies."),
    ("replica.fetch.response.max.bytes", Int, "The most bytes a follower's Fetch response carries."),
    ("replica.lag.time.max.ms", Long, "A follower that has not caught up for this long leaves the ISR."),
    ("replica.placement.policy", Str, "Runnel's replica placement: cluster-aware (even leaders and replicas across topics) or kafka (Kafka's random start)."),
    ("replica.selector.class", Class, "Who consumers with a client.rack read from (KIP-392): unset, the leader; Kafka's RackAwareReplicaSelector, a replica in their rack."),
    ("sasl.mechanism.controller.protocol", Str, "The SASL mechanism a node authenticates with on the controller listener (PLAIN)."),
    ("sasl.mechanism.inter.broker.protocol", Str, "The SASL mechanism a broker authenticates with on the inter-broker listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."),
    ("sasl.server.max.receive.size", Int, "The largest request a SASL listener reads before and during a connection's first authentication; a larger frame closes the connection."),
    ("socket.request.max.bytes", Int, "The largest request the broker reads."),
    ("super.users", Str, "Principals (User:name, separated by ;) allowed everything, whatever the ACLs say."),
    ("transaction.max.timeout.ms", Int, "The longest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above)."),
    ("transaction.state.log.min.isr", Int, "The min.insync.replicas of __transaction_state."),
    ("transaction.state.log.num.partitions", Int, "The number of partitions of __transaction_state."),
    ("transaction.state.log.replication.factor", Short, "The replication factor of __transaction_state."),
    ("transaction.state.log.segment.bytes", Int, "The segment.bytes of __transaction_state."),
    ("transactional.id.expiration.ms", Int, "How long a transactional id is kept after its last transaction."),
    ("unclean.leader.election.enable", Boolean, "The default unclean.leader.election.enable of topics."),
];

/// The type and documentation of a broker property, if known.
pub fn broker_config_info(property: &str) -> Option<(ConfigType, &'static str)> {
    if let Ok(i) = BROKER_KEYS.binary_search_by(|(k, _, _)| k.cmp(&property)) {
        let (_, ty, doc) = BROKER_KEYS[i];
        return Some((ty, doc));
    }
    // A topic key's synonym in another unit family (log.retention.ms, log.roll.jitter.hours...).
    topic_config_for_broker_property(property).map(|(def, synonym)| {
        let ty = if synonym.multiplier == 1 { def.ty } else { Int };
        (
            ty,
            "The broker-wide default of the topic config this property is a synonym of.",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConfigType::Double;

    #[test]
    fn table_is_sorted_and_unique() {
        assert!(BROKER_KEYS.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn synonyms_take_the_topic_keys_type() {
        assert_eq!(
            broker_config_info("log.retention.ms").map(|i| i.0),
            Some(Long)
        );
        assert_eq!(
            broker_config_info("log.retention.minutes").map(|i| i.0),
            Some(Int)
        );
        assert_eq!(
            broker_config_info("log.cleaner.min.cleanable.ratio").map(|i| i.0),
            Some(Double)
        );
        assert_eq!(
            broker_config_info("offsets.topic.replication.factor").map(|i| i.0),
            Some(Short)
        );
        assert_eq!(broker_config_info("no.such.property"), None);
    }
}
