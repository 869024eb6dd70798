//! `runnel get-offsets`: kafka-get-offsets.sh (Kafka's `GetOffsetShell`). Prints
//! `topic:partition:offset` per matching partition, sorted; partitions without an offset for
//! the asked time (a timestamp after the last record) are left out, as Kafka does.

use anyhow::{bail, Context, Result};
use clap::Args;
use runnel_client::admin::OffsetSpec;
use runnel_client::Admin;
use runnel_group::TopicRegex;

/// Flags of kafka-get-offsets.sh that Runnel implements.
#[derive(Debug, Args)]
pub struct GetOffsetsArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// Comma-separated topic-partition patterns `TOPIC_REGEX:PARTITIONS`, the partitions a
    /// number, `N-M` (upper exclusive), `N-`, `-M`, or omitted for all
    /// (e.g. `topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3`).
    #[arg(long, value_name = "PATTERNS", conflicts_with_all = ["topic", "partitions"])]
    pub topic_partitions: Option<String>,
    /// Topic name or regular expression (whole-name match); every topic when omitted.
    #[arg(long)]
    pub topic: Option<String>,
    /// Comma-separated partition ids; every partition when omitted.
    #[arg(long, value_name = "IDS")]
    pub partitions: Option<String>,
    /// -1 or latest, -2 or earliest, -3 or max-timestamp, or a timestamp in ms.
    #[arg(long, default_value = "latest", allow_hyphen_values = true)]
    pub time: String,
    /// Leave out internal topics such as __consumer_offsets.
    #[arg(long)]
    pub exclude_internal_topics: bool,
}

pub async fn run(args: GetOffsetsArgs) -> Result<()> {
    let spec = parse_time(&args.time)?;
    let pattern = match &args.topic {
        Some(t) => Some(TopicRegex::new(t).map_err(|e| anyhow::anyhow!("--topic {t}: {e}"))?),
        None => None,
    };
    let partitions = args
        .partitions
        .as_deref()
        .map(parse_partitions)
        .transpose()?;
    let rules = args
        .topic_partitions
        .as_deref()
        .map(parse_topic_partitions)
        .transpose()?;
    let admin = Admin::new(super::connect(&args.bootstrap_server).await?);
    let topics = admin.describe_topics(None).await?;
    let mut queries: Vec<(String, i32, OffsetSpec)> = topics
        .iter()
        .filter(|t| !(args.exclude_internal_topics && t.internal))
        .filter(|t| pattern.as_ref().is_none_or(|p| p.is_full_match(&t.name)))
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.clone(), p.partition))
        })
        .filter(|(_, p)| partitions.as_ref().is_none_or(|wanted| wanted.contains(p)))
        .filter(|(t, p)| {
            rules
                .as_ref()
                .is_none_or(|rules| rules.iter().any(|r| r.matches(t, *p)))
        })
        .map(|(t, p)| (t, p, spec))
        .collect();
    if queries.is_empty() {
        bail!("Could not match any topic-partitions with the specified filters");
    }
    queries.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    for ((topic, partition), result) in admin.list_offsets(&queries).await? {
        match result {
            Ok(listed) if listed.offset >= 0 => println!("{topic}:{partition}:{}", listed.offset),
            Ok(_) => {}
            Err(e) => eprintln!(
                "Skip getting offsets for topic-partition {topic}:{partition}: {}",
                runnel_client::render_error(&e)
            ),
        }
    }
    Ok(())
}

/// Kafka's `--time` values.
pub fn parse_time(s: &str) -> Result<OffsetSpec> {
    Ok(match s {
        "-1" | "latest" => OffsetSpec::Latest,
        "-2" | "earliest" => OffsetSpec::Earliest,
        "-3" | "max-timestamp" => OffsetSpec::MaxTimestamp,
        "-4" | "earliest-local" | "-5" | "latest-tiered" => {
            bail!("--time {s}: Runnel has no tiered storage")
        }
        other => {
            let ts: i64 = other
                .parse()
                .with_context(|| format!("--time {other}: not a timestamp or a known name"))?;
            if ts < 0 {
                bail!("--time {ts}: unknown negative value");
            }
            OffsetSpec::Timestamp(ts)
        }
    })
}

/// `0,3,5` into partition ids.
pub fn parse_partitions(s: &str) -> Result<Vec<i32>> {
    s.split(',')
        .map(|p| {
            let p = p.trim();
            p.parse::<i32>()
                .ok()
                .filter(|id| *id >= 0)
                .with_context(|| format!("--partitions: '{p}' is not a partition id"))
        })
        .collect()
}

/// One `--topic-partitions` rule (Kafka's `TopicPartitionFilter` of a `parseRuleSpec`).
pub struct TopicPartitionRule {
    topic: Option<TopicRegex>,
    /// Partitions `lower..upper` (upper exclusive).
    lower: i32,
    upper: i32,
}

impl TopicPartitionRule {
    pub fn matches(&self, topic: &str, partition: i32) -> bool {
        self.topic.as_ref().is_none_or(|t| t.is_full_match(topic))
            && (self.lower..self.upper).contains(&partition)
    }
}

/// Kafka's `TOPIC_PARTITION_PATTERN` list: `TopicPattern(:PartitionPattern)? | :PartitionPattern`,
/// the partition pattern `NUMBER | NUMBER-(NUMBER)? | -NUMBER`.
pub fn parse_topic_partitions(s: &str) -> Result<Vec<TopicPartitionRule>> {
    let number = |n: &str, spec: &str| -> Result<i32> {
        n.parse::<i32>()
            .ok()
            .filter(|v| *v >= 0)
            .with_context(|| format!("Invalid rule specification: {spec}"))
    };
    s.split(',')
        .map(|spec| {
            let (topic, part) = match spec.split_once(':') {
                Some((t, p)) => (t, Some(p)),
                None => (spec, None),
            };
            let topic = if topic.is_empty() {
                None
            } else {
                Some(
                    TopicRegex::new(topic)
                        .map_err(|e| anyhow::anyhow!("Invalid rule specification: {spec}: {e}"))?,
                )
            };
            let (lower, upper) = match part {
                None => (0, i32::MAX),
                Some(p) => match p.split_once('-') {
                    None => {
                        let n = number(p, spec)?;
                        (n, n.saturating_add(1))
                    }
                    Some(("", "")) => bail!("Invalid rule specification: {spec}"),
                    Some((lo, hi)) => (
                        if lo.is_empty() { 0 } else { number(lo, spec)? },
                        if hi.is_empty() {
                            i32::MAX
                        } else {
                            number(hi, spec)?
                        },
                    ),
                },
            };
            if topic.is_none() && part.is_none() {
                bail!("Invalid rule specification: {spec}");
            }
            Ok(TopicPartitionRule {
                topic,
                lower,
                upper,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_partition_patterns_as_kafkas() {
        let rules = parse_topic_partitions("topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3,:7")
            .expect("valid");
        let m = |t: &str, p: i32| rules.iter().any(|r| r.matches(t, p));
        assert!(m("topic1", 1) && !m("topic1", 0) && !m("topic1", 2));
        assert!(m("topic2", 0) && m("topic2", 2) && !m("topic2", 3));
        assert!(m("topic3", 0) && m("topic3", 999));
        assert!(!m("topic4", 4) && m("topic4", 5) && m("topic4", 50));
        assert!(m("topic5", 2) && !m("topic5", 3));
        assert!(m("other", 7) && !m("other", 6));
        let rules = parse_topic_partitions("t.*:0").expect("regex");
        assert!(rules[0].matches("tx", 0) && !rules[0].matches("ut", 0));
        for bad in ["t:x", "t:1-x", "t:-", ":", "", "t:-1-2"] {
            assert!(parse_topic_partitions(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn times_by_number_and_name() {
        for (s, want) in [
            ("-1", OffsetSpec::Latest),
            ("latest", OffsetSpec::Latest),
            ("-2", OffsetSpec::Earliest),
            ("earliest", OffsetSpec::Earliest),
            ("-3", OffsetSpec::MaxTimestamp),
            ("max-timestamp", OffsetSpec::MaxTimestamp),
            ("1700000000000", OffsetSpec::Timestamp(1_700_000_000_000)),
        ] {
            assert_eq!(parse_time(s).expect(s), want, "{s}");
        }
        for bad in ["-4", "-9", "yesterday", ""] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn partition_lists() {
        assert_eq!(parse_partitions("0, 2,5").expect("valid"), vec![0, 2, 5]);
        assert!(parse_partitions("0,-1").is_err());
        assert!(parse_partitions("x").is_err());
    }
}
