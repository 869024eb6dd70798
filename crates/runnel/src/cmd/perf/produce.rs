//! `runnel perf produce`: sends N records of S bytes as fast as allowed and measures
//! throughput and per-record latency (send to acknowledgement).
//!
//! Built for speed: one random payload shared by every record (`Bytes` clones are reference
//! counts), latency collection on a separate task, big batches and several requests in flight
//! come from the producer settings.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use clap::Args;
use hdrhistogram::Histogram;
use rand::Rng;
use runnel_client::{DeliveryFuture, Producer, ProducerConfig, ProducerRecord};
use tokio::sync::mpsc;

use super::report::ProduceReport;
use crate::cmd::args::parse_kv;

/// Flags of kafka-producer-perf-test.sh that Runnel implements.
#[derive(Debug, Args)]
pub struct PerfProduceArgs {
    /// Topic to produce to.
    #[arg(long)]
    pub topic: String,
    /// Number of records.
    #[arg(long)]
    pub num_records: u64,
    /// Bytes per record value.
    #[arg(long)]
    pub record_size: usize,
    /// Records per second cap; -1 = unlimited.
    #[arg(long, allow_hyphen_values = true)]
    pub throughput: f64,
    /// Producer properties `k=v ...` (may include bootstrap.servers).
    #[arg(long, num_args = 1.., value_name = "KEY=VALUE")]
    pub producer_props: Vec<String>,
    /// Broker to bootstrap from (overrides bootstrap.servers in --producer-props).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: Option<String>,
    /// Print one JSON object to stdout instead of Kafka's text line.
    #[arg(long)]
    pub json: bool,
}

/// Sleeps as needed to keep `sent` records within `per_sec` (Kafka's ThroughputThrottler).
struct Throttle {
    per_sec: f64,
    start: Instant,
}

impl Throttle {
    async fn pace(&self, sent: u64) {
        if self.per_sec <= 0.0 {
            return;
        }
        let due = Duration::from_secs_f64(sent as f64 / self.per_sec);
        let elapsed = self.start.elapsed();
        if due > elapsed + Duration::from_millis(1) {
            tokio::time::sleep(due - elapsed).await;
        }
    }
}

pub async fn run(args: PerfProduceArgs) -> Result<()> {
    let mut config = ProducerConfig::default();
    let mut bootstrap = args.bootstrap_server.clone();
    let mut shown = serde_json::Map::new();
    for item in &args.producer_props {
        let (k, v) = parse_kv(item)?;
        if k == "bootstrap.servers" {
            bootstrap.get_or_insert(v.clone());
        } else if !config.set(&k, &v)? && k != "client.id" {
            eprintln!("WARN: producer property {k} is not supported and was ignored");
        }
        shown.insert(k, serde_json::Value::String(v));
    }
    let Some(bootstrap) = bootstrap else {
        bail!("no broker given: pass --bootstrap-server or --producer-props bootstrap.servers=H:P");
    };
    if args.record_size == 0 {
        bail!("--record-size must be positive");
    }
    let client = crate::cmd::connect(&bootstrap).await?;
    let producer = Producer::new(client, config).await?;

    let mut rng = rand::thread_rng();
    let payload: Bytes = (0..args.record_size)
        .map(|_| rng.gen_range(b'A'..=b'Z'))
        .collect::<Vec<u8>>()
        .into();
    let topic = args.topic.clone();

    let (tx, rx) = mpsc::channel::<(Instant, DeliveryFuture)>(1 << 16);
    let collector = tokio::spawn(collect(rx));
    let pb = super::progress_bar(args.num_records, "records");
    let throttle = Throttle {
        per_sec: args.throughput,
        start: Instant::now(),
    };
    let start = Instant::now();
    for i in 0..args.num_records {
        let record = ProducerRecord {
            topic: topic.clone(),
            value: Some(payload.clone()),
            ..ProducerRecord::default()
        };
        let sent_at = Instant::now();
        let delivery = producer.send(record).await?;
        if tx.send((sent_at, delivery)).await.is_err() {
            break;
        }
        if i % 4096 == 0 {
            pb.set_position(i);
            throttle.pace(i).await;
        } else if args.throughput > 0.0 {
            throttle.pace(i).await;
        }
    }
    drop(tx);
    producer.flush().await;
    let (latency_us, errors, first_error) = collector.await.context("latency collector failed")?;
    let elapsed = start.elapsed();
    pb.finish_and_clear();
    producer.close().await;

    let report = ProduceReport {
        records: args.num_records,
        errors,
        record_size: args.record_size,
        elapsed,
        latency_us,
    };
    if args.json {
        println!("{}", report.json(serde_json::Value::Object(shown)));
    } else {
        println!("{}", report.kafka_line());
    }
    match first_error {
        Some(e) => Err(anyhow::Error::from(e)
            .context(format!("{errors} of {} records failed", args.num_records))),
        None => Ok(()),
    }
}

/// Awaits deliveries in send order and records each latency in microseconds.
async fn collect(
    mut rx: mpsc::Receiver<(Instant, DeliveryFuture)>,
) -> (Histogram<u64>, u64, Option<runnel_client::ClientError>) {
    let mut hist = match Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3) {
        Ok(h) => h,
        Err(_) => Histogram::<u64>::new(3)
            .unwrap_or_else(|_| unreachable!("3 significant figures is valid")),
    };
    let mut errors = 0u64;
    let mut first_error = None;
    while let Some((sent_at, delivery)) = rx.recv().await {
        let result = match delivery.try_result() {
            Some(r) => r,
            None => delivery.wait().await,
        };
        match result {
            Ok(_) => {
                let us = sent_at.elapsed().as_micros().max(1) as u64;
                hist.saturating_record(us);
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
        }
    }
    (hist, errors, first_error)
}
