//! `runnel produce`: kafka-console-producer.sh — one record per stdin line.

use std::collections::VecDeque;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use clap::Args;
use runnel_client::producer::parse_acks;
use runnel_client::{DeliveryFuture, Producer, ProducerConfig, ProducerRecord};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::args::{parse_kvs, prop, prop_bool, unescape};

/// Flags of kafka-console-producer.sh that Runnel implements.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// Topic to produce to.
    #[arg(long)]
    pub topic: String,
    /// Reader property: parse.key=true, key.separator=<sep> (default tab).
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// Producer property (acks, linger.ms, batch.size, compression.type, ...).
    #[arg(long = "producer-property", value_name = "KEY=VALUE")]
    pub producer_properties: Vec<String>,
    /// Compression: none, gzip, snappy, lz4 or zstd (gzip when given without a value).
    #[arg(long, num_args = 0..=1, default_missing_value = "gzip", value_name = "CODEC")]
    pub compression_codec: Option<String>,
    /// acks: 0, 1 or -1/all.
    #[arg(long, default_value = "-1", value_name = "ACKS")]
    pub request_required_acks: String,
    /// Send each record synchronously (wait for its acknowledgement before the next line).
    #[arg(long)]
    pub sync: bool,
    /// linger.ms for the console producer (Kafka's --timeout).
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub timeout: u64,
    /// batch.size in bytes.
    #[arg(long, default_value_t = 16384)]
    pub batch_size: usize,
    /// Retries on retriable errors (Kafka's --message-send-max-retries).
    #[arg(long, default_value_t = 3)]
    pub message_send_max_retries: u32,
    /// request.timeout.ms.
    #[arg(long, default_value_t = 1500, value_name = "MS")]
    pub request_timeout_ms: u64,
}

/// How stdin lines become records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineReader {
    parse_key: bool,
    key_separator: String,
    ignore_error: bool,
}

impl LineReader {
    pub fn from_properties(props: &[(String, String)]) -> Result<Self> {
        Ok(Self {
            parse_key: prop_bool(props, "parse.key", false)?,
            key_separator: unescape(prop(props, "key.separator").unwrap_or("\t")),
            ignore_error: prop_bool(props, "ignore.error", false)?,
        })
    }

    /// `(key, value)` of line `number` (1-based), `Ok(None)` for a line to skip.
    pub fn parse(&self, line: &str, number: usize) -> Result<Option<(Option<Bytes>, Bytes)>> {
        if !self.parse_key {
            return Ok(Some((None, Bytes::copy_from_slice(line.as_bytes()))));
        }
        match line.split_once(self.key_separator.as_str()) {
            Some((k, v)) => Ok(Some((
                Some(Bytes::copy_from_slice(k.as_bytes())),
                Bytes::copy_from_slice(v.as_bytes()),
            ))),
            None if self.ignore_error => Ok(Some((None, Bytes::copy_from_slice(line.as_bytes())))),
            None => bail!("No key separator found on line number {number}: '{line}'"),
        }
    }
}

fn producer_config(args: &ProduceArgs) -> Result<ProducerConfig> {
    let mut config = ProducerConfig {
        acks: parse_acks(&args.request_required_acks)?,
        linger: Duration::from_millis(args.timeout),
        batch_size: args.batch_size,
        retries: args.message_send_max_retries,
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        ..ProducerConfig::default()
    };
    if let Some(codec) = &args.compression_codec {
        config.set("compression.type", codec)?;
    }
    for (k, v) in parse_kvs(&args.producer_properties)? {
        if !config.set(&k, &v)? && k != "bootstrap.servers" && k != "client.id" {
            eprintln!("WARN: producer property {k} is not supported and was ignored");
        }
    }
    Ok(config)
}

pub async fn run(args: ProduceArgs) -> Result<()> {
    let reader = LineReader::from_properties(&parse_kvs(&args.properties)?)?;
    let config = producer_config(&args)?;
    let client = super::connect(&args.bootstrap_server).await?;
    let producer = Producer::new(client, config).await?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::new();
    let mut first_error: Option<anyhow::Error> = None;
    let mut number = 0usize;
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        number += 1;
        let Some((key, value)) = reader.parse(&line, number)? else {
            continue;
        };
        let mut record = ProducerRecord::new(args.topic.clone(), value);
        record.key = key;
        let delivery = producer.send(record).await?;
        if args.sync {
            // Do not let linger.ms delay a synchronous send.
            producer.flush().await;
            if let Err(e) = delivery.wait().await {
                report(&mut first_error, e);
            }
        } else {
            pending.push_back(delivery);
            while let Some(Some(result)) = pending.front().map(DeliveryFuture::try_result) {
                pending.pop_front();
                if let Err(e) = result {
                    report(&mut first_error, e);
                }
            }
        }
    }
    producer.flush().await;
    for delivery in pending {
        if let Err(e) = delivery.wait().await {
            report(&mut first_error, e);
        }
    }
    producer.close().await;
    match first_error {
        Some(e) => Err(e.context("some records were not produced")),
        None => Ok(()),
    }
}

fn report(first: &mut Option<anyhow::Error>, e: runnel_client::ClientError) {
    eprintln!(
        "ERROR when sending message: {}",
        runnel_client::render_error(&e)
    );
    first.get_or_insert_with(|| e.into());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_with_separator() {
        let r = LineReader::from_properties(
            &parse_kvs(&["parse.key=true".into(), "key.separator=:".into()]).unwrap(),
        )
        .unwrap();
        let (k, v) = r.parse("user1:hello:world", 1).unwrap().unwrap();
        assert_eq!(k.as_deref(), Some(&b"user1"[..]));
        assert_eq!(&v[..], b"hello:world");
        assert!(r
            .parse("nokey", 7)
            .unwrap_err()
            .to_string()
            .contains("line number 7"));
    }

    #[test]
    fn plain_lines_have_no_key() {
        let r = LineReader::from_properties(&[]).unwrap();
        let (k, v) = r.parse("a\tb", 1).unwrap().unwrap();
        assert_eq!(k, None);
        assert_eq!(&v[..], b"a\tb");
    }
}
