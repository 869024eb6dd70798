//! Settings of the KIP-848 coordinator (Kafka's `group.consumer.*` broker properties). Kept
//! apart from the classic [`GroupConfig`](crate::GroupConfig) because Kafka configures the two
//! protocols independently (different session timeouts, sizes and assignors).

/// The assignors Runnel implements; `group.consumer.assignors` may only name these.
pub const KNOWN_ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// `group.consumer.migration.policy` (Kafka's `ConsumerGroupMigrationPolicy`): which online
/// conversions of a group *with members* are allowed: a classic group to a consumer group when
/// a member joins with ConsumerGroupHeartbeat (upgrade), a consumer group back to a classic
/// group when its last consumer-protocol member leaves (downgrade). Empty groups convert
/// either way whatever the policy; classic members inside a consumer group are served either
/// way too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    #[default]
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    /// Kafka's values, case-insensitive (`None` for anything else: a startup error).
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "disabled" => Some(MigrationPolicy::Disabled),
            _ => None,
        }
    }

    pub fn upgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade
        )
    }

    pub fn downgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade
        )
    }
}

/// `group.consumer.*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.session.timeout.ms`: a member silent this long is fenced and removed.
    /// The member does not choose it in KIP-848; the group does.
    pub session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`: returned in every response so the coordinator,
    /// not the client, paces heartbeats.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`: the server-side assignors members may pick; the first is the
    /// default. Unknown names are ignored (see [`KNOWN_ASSIGNORS`]).
    pub assignors: Vec<String>,
    /// `group.consumer.max.size`: members per group.
    pub max_size: usize,
    /// `group.consumer.migration.policy`.
    pub migration_policy: MigrationPolicy,
    /// `group.max.size` (the classic groups' cap): a downgrade that would exceed it is not
    /// done (Kafka's `validateOnlineDowngrade`).
    pub classic_max_size: usize,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        ConsumerGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignors: vec!["uniform".to_string(), "range".to_string()],
            max_size: i32::MAX as usize,
            migration_policy: MigrationPolicy::Bidirectional,
            classic_max_size: i32::MAX as usize,
        }
    }
}

impl ConsumerGroupConfig {
    /// The configured assignors Runnel knows, in preference order, never empty: with none
    /// usable the group still needs a default, and `uniform` is Kafka's.
    pub(crate) fn enabled_assignors(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in &self.assignors {
            if KNOWN_ASSIGNORS.contains(&a.as_str()) && !out.contains(a) {
                out.push(a.clone());
            }
        }
        if out.is_empty() {
            out.push(KNOWN_ASSIGNORS[0].to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_kafka() {
        let c = ConsumerGroupConfig::default();
        assert_eq!(c.session_timeout_ms, 45_000);
        assert_eq!(c.heartbeat_interval_ms, 5_000);
        assert_eq!(c.enabled_assignors(), vec!["uniform", "range"]);
    }

    #[test]
    fn migration_policies_parse_as_kafka_does() {
        assert_eq!(
            ConsumerGroupConfig::default().migration_policy,
            MigrationPolicy::Bidirectional
        );
        let table = [
            ("bidirectional", true, true),
            ("UPGRADE", true, false),
            ("Downgrade", false, true),
            ("disabled", false, false),
        ];
        for (raw, up, down) in table {
            let p = MigrationPolicy::parse(raw).unwrap();
            assert_eq!(
                (p.upgrade_enabled(), p.downgrade_enabled()),
                (up, down),
                "{raw}"
            );
        }
        assert_eq!(MigrationPolicy::parse("both"), None);
    }

    #[test]
    fn unknown_assignors_are_dropped_and_default_kept() {
        let c = ConsumerGroupConfig {
            assignors: vec!["sticky".into(), "range".into(), "range".into()],
            ..Default::default()
        };
        assert_eq!(c.enabled_assignors(), vec!["range"]);
        let c = ConsumerGroupConfig {
            assignors: vec![],
            ..Default::default()
        };
        assert_eq!(c.enabled_assignors(), vec!["uniform"]);
    }
}
