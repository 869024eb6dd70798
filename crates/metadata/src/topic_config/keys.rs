//! The table of Kafka's topic-level configuration keys: type, Kafka default, the broker
//! properties a topic falls back to (in precedence order, with their unit), and the value
//! validator. One table drives validation, DescribeConfigs and the effective config, so the
//! three can never disagree about a key.

/// Value type of a config key (Kafka's `ConfigDef.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    Int,
    Short,
    Long,
    Double,
    String,
    List,
    Class,
    Password,
}

impl ConfigType {
    /// Kafka's DescribeConfigs `config_type` id (v3+): BOOLEAN 1, STRING 2, INT 3, SHORT 4,
    /// LONG 5, DOUBLE 6, LIST 7, CLASS 8, PASSWORD 9.
    pub fn describe_id(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Short => 4,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
            ConfigType::Class => 8,
            ConfigType::Password => 9,
        }
    }

    pub(crate) fn java_name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::Int => "INT",
            ConfigType::Short => "SHORT",
            ConfigType::Class => "CLASS",
            ConfigType::Password => "PASSWORD",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::String => "STRING",
            ConfigType::List => "LIST",
        }
    }
}

/// Value constraints beyond the type (Kafka's `ConfigDef.Validator`s used by `LogConfig`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Validator {
    None,
    /// Integer `>= min`.
    AtLeast(i64),
    /// Integer in `[min, max]`.
    Between(i64, i64),
    /// Floating point in `[min, max]`.
    BetweenF(f64, f64),
    /// One of the listed strings (case-sensitive, as Kafka's `ValidString.in`).
    OneOf(&'static [&'static str]),
    /// A comma-separated list of the listed strings (Kafka's `ValidList.in`); the empty list
    /// is valid, as in Kafka 4.0 (`cleanup.policy=` after a SUBTRACT: neither deleted nor
    /// compacted).
    ListOf(&'static [&'static str]),
    /// `""`, `"*"` or `partition:broker` pairs (Kafka's `ThrottledReplicaListValidator`).
    ThrottledReplicas,
    /// gzip level: 1..=9 or -1 (the JDK default).
    GzipLevel,
    /// A message format version such as `2.8` or `3.0-IV1`.
    MessageFormatVersion,
}

/// A broker property a topic config falls back to; `multiplier` converts its unit into the
/// topic config's unit (e.g. `log.retention.hours` -> ms is 3 600 000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synonym {
    pub name: &'static str,
    pub multiplier: i64,
}

/// One topic-level config key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopicConfigDef {
    pub name: &'static str,
    pub ty: ConfigType,
    /// Kafka's default when neither the topic nor the broker sets it.
    pub default: &'static str,
    pub synonyms: &'static [Synonym],
    pub validator: Validator,
}

const fn syn(name: &'static str) -> Synonym {
    Synonym {
        name,
        multiplier: 1,
    }
}

const MS_PER_MINUTE: i64 = 60_000;
const MS_PER_HOUR: i64 = 3_600_000;
const LONG_MAX: &str = "9223372036854775807";

/// Allowed `compression.type` values.
pub const COMPRESSION_TYPES: &[&str] =
    &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
/// Allowed `cleanup.policy` list elements.
pub const CLEANUP_POLICIES: &[&str] = &["compact", "delete"];
/// Allowed `message.timestamp.type` values.
pub const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];

macro_rules! def {
    ($name:expr, $ty:ident, $default:expr, [$($syn:expr),*], $validator:expr) => {
        TopicConfigDef { name: $name, ty: ConfigType::$ty, default: $default, synonyms: &[$($syn),*], validator: $validator }
    };
}

/// Every topic-level key Kafka (3.x) accepts, sorted by name.
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def!(
        "cleanup.policy",
        List,
        "delete",
        [syn("log.cleanup.policy")],
        Validator::ListOf(CLEANUP_POLICIES)
    ),
    def!(
        "compression.gzip.level",
        Int,
        "-1",
        [syn("compression.gzip.level")],
        Validator::GzipLevel
    ),
    def!(
        "compression.lz4.level",
        Int,
        "9",
        [syn("compression.lz4.level")],
        Validator::Between(1, 17)
    ),
    def!(
        "compression.type",
        String,
        "producer",
        [syn("compression.type")],
        Validator::OneOf(COMPRESSION_TYPES)
    ),
    def!(
        "compression.zstd.level",
        Int,
        "3",
        [syn("compression.zstd.level")],
        Validator::Between(-131_072, 22)
    ),
    def!(
        "delete.retention.ms",
        Long,
        "86400000",
        [syn("log.cleaner.delete.retention.ms")],
        Validator::AtLeast(0)
    ),
    def!(
        "file.delete.delay.ms",
        Long,
        "60000",
        [syn("log.segment.delete.delay.ms")],
        Validator::AtLeast(0)
    ),
    def!(
        "flush.messages",
        Long,
        LONG_MAX,
        [syn("log.flush.interval.messages")],
        Validator::AtLeast(1)
    ),
    def!(
        "flush.ms",
        Long,
        LONG_MAX,
        [syn("log.flush.interval.ms")],
        Validator::AtLeast(0)
    ),
    def!(
        "follower.replication.throttled.replicas",
        List,
        "",
        [],
        Validator::ThrottledReplicas
    ),
    def!(
        "index.interval.bytes",
        Int,
        "4096",
        [syn("log.index.interval.bytes")],
        Validator::AtLeast(0)
    ),
    def!(
        "leader.replication.throttled.replicas",
        List,
        "",
        [],
        Validator::ThrottledReplicas
    ),
    def!(
        "local.retention.bytes",
        Long,
        "-2",
        [syn("log.local.retention.bytes")],
        Validator::AtLeast(-2)
    ),
    def!(
        "local.retention.ms",
        Long,
        "-2",
        [syn("log.local.retention.ms")],
        Validator::AtLeast(-2)
    ),
    def!(
        "max.compaction.lag.ms",
        Long,
        LONG_MAX,
        [syn("log.cleaner.max.compaction.lag.ms")],
        Validator::AtLeast(1)
    ),
    def!(
        "max.message.bytes",
        Int,
        "1048588",
        [syn("message.max.bytes")],
        Validator::AtLeast(0)
    ),
    def!(
        "message.downconversion.enable",
        Boolean,
        "true",
        [syn("log.message.downconversion.enable")],
        Validator::None
    ),
    def!(
        "message.format.version",
        String,
        "3.0-IV1",
        [syn("log.message.format.version")],
        Validator::MessageFormatVersion
    ),
    def!(
        "message.timestamp.after.max.ms",
        Long,
        LONG_MAX,
        [syn("log.message.timestamp.after.max.ms")],
        Validator::AtLeast(0)
    ),
    def!(
        "message.timestamp.before.max.ms",
        Long,
        LONG_MAX,
        [syn("log.message.timestamp.before.max.ms")],
        Validator::AtLeast(0)
    ),
    def!(
        "message.timestamp.difference.max.ms",
        Long,
        LONG_MAX,
        [syn("log.message.timestamp.difference.max.ms")],
        Validator::AtLeast(0)
    ),
    def!(
        "message.timestamp.type",
        String,
        "CreateTime",
        [syn("log.message.timestamp.type")],
        Validator::OneOf(TIMESTAMP_TYPES)
    ),
    def!(
        "min.cleanable.dirty.ratio",
        Double,
        "0.5",
        [syn("log.cleaner.min.cleanable.ratio")],
        Validator::BetweenF(0.0, 1.0)
    ),
    def!(
        "min.compaction.lag.ms",
        Long,
        "0",
        [syn("log.cleaner.min.compaction.lag.ms")],
        Validator::AtLeast(0)
    ),
    def!(
        "min.insync.replicas",
        Int,
        "1",
        [syn("min.insync.replicas")],
        Validator::AtLeast(1)
    ),
    def!(
        "preallocate",
        Boolean,
        "false",
        [syn("log.preallocate")],
        Validator::None
    ),
    def!(
        "remote.log.copy.disable",
        Boolean,
        "false",
        [],
        Validator::None
    ),
    def!(
        "remote.log.delete.on.disable",
        Boolean,
        "false",
        [],
        Validator::None
    ),
    def!(
        "remote.storage.enable",
        Boolean,
        "false",
        [],
        Validator::None
    ),
    def!(
        "retention.bytes",
        Long,
        "-1",
        [syn("log.retention.bytes")],
        Validator::None
    ),
    def!(
        "retention.ms",
        Long,
        "604800000",
        [
            syn("log.retention.ms"),
            Synonym {
                name: "log.retention.minutes",
                multiplier: MS_PER_MINUTE
            },
            Synonym {
                name: "log.retention.hours",
                multiplier: MS_PER_HOUR
            }
        ],
        Validator::AtLeast(-1)
    ),
    def!(
        "segment.bytes",
        Int,
        "1073741824",
        [syn("log.segment.bytes")],
        Validator::AtLeast(14)
    ),
    def!(
        "segment.index.bytes",
        Int,
        "10485760",
        [syn("log.index.size.max.bytes")],
        Validator::AtLeast(4)
    ),
    def!(
        "segment.jitter.ms",
        Long,
        "0",
        [
            syn("log.roll.jitter.ms"),
            Synonym {
                name: "log.roll.jitter.hours",
                multiplier: MS_PER_HOUR
            }
        ],
        Validator::AtLeast(0)
    ),
    def!(
        "segment.ms",
        Long,
        "604800000",
        [
            syn("log.roll.ms"),
            Synonym {
                name: "log.roll.hours",
                multiplier: MS_PER_HOUR
            }
        ],
        Validator::AtLeast(1)
    ),
    def!(
        "unclean.leader.election.enable",
        Boolean,
        "false",
        [syn("unclean.leader.election.enable")],
        Validator::None
    ),
];

/// The definition of a topic config key, if Kafka knows it.
pub fn topic_config_def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .binary_search_by(|d| d.name.cmp(name))
        .ok()
        .map(|i| &TOPIC_CONFIGS[i])
}

/// The topic config key that a broker property is a synonym of (e.g. `log.retention.hours`
/// -> `retention.ms`), with the synonym's unit.
pub fn topic_config_for_broker_property(
    property: &str,
) -> Option<(&'static TopicConfigDef, Synonym)> {
    TOPIC_CONFIGS.iter().find_map(|d| {
        d.synonyms
            .iter()
            .find(|s| s.name == property)
            .map(|s| (d, *s))
    })
}
