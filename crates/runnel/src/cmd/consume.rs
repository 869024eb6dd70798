//! `runnel consume`: kafka-console-consumer.sh, either on assigned partitions or, with
//! `--group`, as a member of a consumer group that commits what it printed.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use runnel_client::{
    Consumer, ConsumerConfig, ConsumerRecord, GroupConfig, GroupConsumer, StartPosition,
    TopicPartition,
};

use super::args::{parse_kvs, prop, prop_bool, unescape};

/// Flags of kafka-console-consumer.sh that Runnel implements.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// Topic to read.
    #[arg(long)]
    pub topic: String,
    /// Start at the earliest offset instead of the end.
    #[arg(long)]
    pub from_beginning: bool,
    /// Consumer group to join (offsets are committed; see `runnel groups`).
    #[arg(long)]
    pub group: Option<String>,
    /// Read only this partition.
    #[arg(long)]
    pub partition: Option<i32>,
    /// Start offset for --partition: a number, earliest or latest.
    #[arg(long)]
    pub offset: Option<String>,
    /// Exit after this many records.
    #[arg(long)]
    pub max_messages: Option<u64>,
    /// Exit when no record arrives for this long.
    #[arg(long)]
    pub timeout_ms: Option<u64>,
    /// Formatter property: print.key, print.offset, print.partition, print.timestamp,
    /// print.headers, print.value, key.separator, line.separator.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// Consumer property (auto.offset.reset, fetch.max.wait.ms, fetch.min.bytes,
    /// fetch.max.bytes, max.partition.fetch.bytes; with a group also group.id,
    /// group.instance.id, session.timeout.ms, heartbeat.interval.ms, max.poll.interval.ms,
    /// partition.assignment.strategy, enable.auto.commit, auto.commit.interval.ms).
    #[arg(long = "consumer-property", value_name = "KEY=VALUE")]
    pub consumer_properties: Vec<String>,
}

/// Kafka's `DefaultMessageFormatter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formatter {
    print_timestamp: bool,
    print_partition: bool,
    print_offset: bool,
    print_headers: bool,
    print_key: bool,
    print_value: bool,
    key_separator: String,
    line_separator: String,
}

impl Formatter {
    pub fn from_properties(props: &[(String, String)]) -> Result<Self> {
        Ok(Self {
            print_timestamp: prop_bool(props, "print.timestamp", false)?,
            print_partition: prop_bool(props, "print.partition", false)?,
            print_offset: prop_bool(props, "print.offset", false)?,
            print_headers: prop_bool(props, "print.headers", false)?,
            print_key: prop_bool(props, "print.key", false)?,
            print_value: prop_bool(props, "print.value", true)?,
            key_separator: unescape(prop(props, "key.separator").unwrap_or("\t")),
            line_separator: unescape(prop(props, "line.separator").unwrap_or("\n")),
        })
    }

    /// Appends one record's text, fields separated by the key separator, in Kafka's order:
    /// timestamp, partition, offset, headers, key, value.
    pub fn write(&self, r: &ConsumerRecord, out: &mut Vec<u8>) {
        let mut fields: Vec<Vec<u8>> = Vec::new();
        if self.print_timestamp {
            fields.push(format!("{}:{}", r.timestamp_type.as_str(), r.timestamp).into_bytes());
        }
        if self.print_partition {
            fields.push(format!("Partition:{}", r.partition).into_bytes());
        }
        if self.print_offset {
            fields.push(format!("Offset:{}", r.offset).into_bytes());
        }
        if self.print_headers {
            if r.headers.is_empty() {
                fields.push(b"NO_HEADERS".to_vec());
            } else {
                let mut h = Vec::new();
                for (i, (k, v)) in r.headers.iter().enumerate() {
                    if i > 0 {
                        h.push(b',');
                    }
                    h.extend_from_slice(k.as_bytes());
                    h.push(b':');
                    h.extend_from_slice(v.as_deref().unwrap_or(b"null"));
                }
                fields.push(h);
            }
        }
        if self.print_key {
            fields.push(r.key.as_deref().unwrap_or(b"null").to_vec());
        }
        if self.print_value {
            fields.push(r.value.as_deref().unwrap_or(b"null").to_vec());
        }
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(self.key_separator.as_bytes());
            }
            out.extend_from_slice(f);
        }
        out.extend_from_slice(self.line_separator.as_bytes());
    }
}

fn start_position(args: &ConsumeArgs) -> Result<StartPosition> {
    match (&args.offset, args.from_beginning) {
        (Some(_), true) => {
            bail!("Options --from-beginning and --offset cannot be specified together")
        }
        (Some(_), false) if args.partition.is_none() => {
            bail!("The partition is required when offset is specified.")
        }
        (Some(o), false) => match o.as_str() {
            "earliest" => Ok(StartPosition::Earliest),
            "latest" => Ok(StartPosition::Latest),
            n => {
                let offset: i64 = n
                    .parse()
                    .with_context(|| format!("--offset {n}: use a number, earliest or latest"))?;
                if offset < 0 {
                    bail!("--offset {offset}: offsets are non-negative");
                }
                Ok(StartPosition::Offset(offset))
            }
        },
        (None, true) => Ok(StartPosition::Earliest),
        (None, false) => Ok(StartPosition::Latest),
    }
}

fn consumer_config(props: &[(String, String)]) -> Result<ConsumerConfig> {
    let mut config = ConsumerConfig::default();
    let num = |k: &str, v: &str| -> Result<i64> {
        v.parse::<i64>()
            .with_context(|| format!("{k}={v}: not a number"))
    };
    for (k, v) in props {
        match k.as_str() {
            "auto.offset.reset" => {
                config.auto_offset_reset = v.parse().map_err(anyhow::Error::msg)?
            }
            "fetch.max.wait.ms" => {
                config.max_wait = Duration::from_millis(num(k, v)?.max(0) as u64)
            }
            "fetch.min.bytes" => config.min_bytes = num(k, v)? as i32,
            "fetch.max.bytes" => config.max_bytes = num(k, v)? as i32,
            "max.partition.fetch.bytes" => config.partition_max_bytes = num(k, v)? as i32,
            "bootstrap.servers" | "client.id" | "group.id" => {}
            other => eprintln!("WARN: consumer property {other} is not supported and was ignored"),
        }
    }
    Ok(config)
}

pub async fn run(args: ConsumeArgs) -> Result<()> {
    let formatter = Formatter::from_properties(&parse_kvs(&args.properties)?)?;
    let props = parse_kvs(&args.consumer_properties)?;
    let group = args
        .group
        .clone()
        .or_else(|| prop(&props, "group.id").map(str::to_owned));
    if let Some(group) = group {
        return run_group(&args, &formatter, &props, group).await;
    }
    let start = start_position(&args)?;
    let config = consumer_config(&props)?;
    let client = super::connect(&args.bootstrap_server).await?;
    let mut consumer = Consumer::new(client, config);
    match args.partition {
        Some(p) => {
            let topic = consumer_topic_check(&consumer, &args.topic).await?;
            if topic <= p as usize || p < 0 {
                bail!(
                    "partition {p} does not exist in topic '{}' ({topic} partitions)",
                    args.topic
                );
            }
            consumer.assign(vec![(args.topic.clone(), p, start)]);
        }
        None => {
            consumer.assign_topic(&args.topic, start).await?;
        }
    }
    let mut count: u64 = 0;
    let result = tokio::select! {
        r = consume_loop(&mut consumer, &args, &formatter, &mut count) => r.map(|_| ()),
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    eprintln!("Processed a total of {count} messages");
    result
}

/// The group settings: Kafka's defaults, `--from-beginning` as `auto.offset.reset=earliest`
/// (what kafka-console-consumer does), then `--consumer-property` values.
fn group_config(
    args: &ConsumeArgs,
    props: &[(String, String)],
    group: String,
) -> Result<GroupConfig> {
    if args.partition.is_some() || args.offset.is_some() {
        bail!("Options --group and --partition/--offset cannot be specified together.");
    }
    let mut config = GroupConfig::new(group.clone());
    if args.from_beginning {
        config.set("auto.offset.reset", "earliest")?;
    }
    for (k, v) in props {
        if k == "group.id" || k == "bootstrap.servers" || k == "client.id" {
            continue;
        }
        if !config.set(k, v)? {
            eprintln!("WARN: consumer property {k} is not supported and was ignored");
        }
    }
    config.group_id = group;
    Ok(config)
}

async fn run_group(
    args: &ConsumeArgs,
    formatter: &Formatter,
    props: &[(String, String)],
    group: String,
) -> Result<()> {
    let config = group_config(args, props, group)?;
    let client = super::connect(&args.bootstrap_server).await?;
    let mut consumer = GroupConsumer::new(client, config)?;
    consumer.subscribe(&[args.topic.as_str()]);
    let mut count: u64 = 0;
    let result = tokio::select! {
        r = consume_loop(&mut consumer, args, formatter, &mut count) => r,
        _ = tokio::signal::ctrl_c() => Ok(Vec::new()),
    };
    // Records fetched but not printed (--max-messages) must not be committed: move those
    // partitions back to the first unprinted offset before the closing commit.
    if let Ok(unprinted) = &result {
        for r in unprinted {
            let tp = TopicPartition::new(r.topic.clone(), r.partition);
            if consumer.position(&tp).is_some_and(|p| p > r.offset) {
                consumer.seek(&tp, r.offset);
            }
        }
    }
    let closed = consumer.close().await;
    eprintln!("Processed a total of {count} messages");
    result?;
    closed?;
    Ok(())
}

/// What `consume_loop` reads from: an assign-only or a group consumer.
trait RecordSource {
    async fn next_records(&mut self, wait: Duration) -> Result<Vec<ConsumerRecord>>;
}

impl RecordSource for Consumer {
    async fn next_records(&mut self, wait: Duration) -> Result<Vec<ConsumerRecord>> {
        Ok(self.poll(wait).await?)
    }
}

impl RecordSource for GroupConsumer {
    async fn next_records(&mut self, wait: Duration) -> Result<Vec<ConsumerRecord>> {
        Ok(self.poll(wait).await?)
    }
}

async fn consumer_topic_check(consumer: &Consumer, topic: &str) -> Result<usize> {
    Ok(consumer.client().topic(topic).await?.partition_count())
}

/// Prints records until `--max-messages` or `--timeout-ms`; returns the fetched records
/// that were not printed (the first unprinted one per partition matters for commits).
async fn consume_loop<S: RecordSource>(
    consumer: &mut S,
    args: &ConsumeArgs,
    formatter: &Formatter,
    count: &mut u64,
) -> Result<Vec<ConsumerRecord>> {
    let idle_limit = args.timeout_ms.map(Duration::from_millis);
    let mut last_record = Instant::now();
    let mut out = Vec::with_capacity(64 * 1024);
    let stdout = std::io::stdout();
    loop {
        if args.max_messages.is_some_and(|max| *count >= max) {
            return Ok(Vec::new());
        }
        let wait = match idle_limit {
            Some(limit) => {
                let left = limit.saturating_sub(last_record.elapsed());
                if left.is_zero() {
                    return Ok(Vec::new());
                }
                left.min(Duration::from_secs(1))
            }
            None => Duration::from_secs(1),
        };
        let records = consumer.next_records(wait).await?;
        if records.is_empty() {
            continue;
        }
        last_record = Instant::now();
        out.clear();
        let mut unprinted = Vec::new();
        for r in records {
            if args.max_messages.is_some_and(|max| *count >= max) {
                if !unprinted
                    .iter()
                    .any(|u: &ConsumerRecord| u.topic == r.topic && u.partition == r.partition)
                {
                    unprinted.push(r);
                }
                continue;
            }
            formatter.write(&r, &mut out);
            *count += 1;
        }
        let mut lock = stdout.lock();
        lock.write_all(&out).context("writing to stdout")?;
        lock.flush().context("writing to stdout")?;
        if !unprinted.is_empty() {
            return Ok(unprinted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use runnel_client::records::TimestampKind;

    fn record() -> ConsumerRecord {
        ConsumerRecord {
            topic: "t".into(),
            partition: 2,
            offset: 41,
            timestamp: 1700000000000,
            timestamp_type: TimestampKind::CreateTime,
            key: Some(Bytes::from_static(b"k1")),
            value: Some(Bytes::from_static(b"hello")),
            headers: vec![],
        }
    }

    fn render(props: &[&str]) -> String {
        let props: Vec<String> = props.iter().map(|s| s.to_string()).collect();
        let f = Formatter::from_properties(&parse_kvs(&props).unwrap()).unwrap();
        let mut out = Vec::new();
        f.write(&record(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn value_only_by_default() {
        assert_eq!(render(&[]), "hello\n");
    }

    #[test]
    fn kafka_field_order() {
        assert_eq!(
            render(&[
                "print.key=true",
                "print.offset=true",
                "print.partition=true",
                "print.timestamp=true"
            ]),
            "CreateTime:1700000000000\tPartition:2\tOffset:41\tk1\thello\n"
        );
        assert_eq!(render(&["print.key=true", "key.separator=:"]), "k1:hello\n");
        assert_eq!(render(&["print.headers=true"]), "NO_HEADERS\thello\n");
    }

    #[test]
    fn offset_flags() {
        let args =
            |offset: Option<&str>, partition: Option<i32>, from_beginning: bool| ConsumeArgs {
                bootstrap_server: "x:1".into(),
                topic: "t".into(),
                from_beginning,
                group: None,
                partition,
                offset: offset.map(str::to_owned),
                max_messages: None,
                timeout_ms: None,
                properties: vec![],
                consumer_properties: vec![],
            };
        assert_eq!(
            start_position(&args(None, None, true)).unwrap(),
            StartPosition::Earliest
        );
        assert_eq!(
            start_position(&args(None, None, false)).unwrap(),
            StartPosition::Latest
        );
        assert_eq!(
            start_position(&args(Some("5"), Some(0), false)).unwrap(),
            StartPosition::Offset(5)
        );
        assert!(start_position(&args(Some("5"), None, false)).is_err());
        assert!(start_position(&args(Some("5"), Some(0), true)).is_err());
        assert!(start_position(&args(Some("x"), Some(0), false)).is_err());
    }
}
