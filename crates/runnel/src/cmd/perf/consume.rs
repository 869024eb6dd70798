//! `runnel perf consume`: reads N records from the start of every partition as fast as
//! possible and reports throughput.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use clap::Args;
use runnel_client::{Consumer, ConsumerConfig, StartPosition};

use super::report::ConsumeReport;

/// Flags of kafka-consumer-perf-test.sh that Runnel implements.
#[derive(Debug, Args)]
pub struct PerfConsumeArgs {
    /// Topic to read.
    #[arg(long)]
    pub topic: String,
    /// Number of records to read.
    #[arg(long)]
    pub messages: u64,
    /// Broker to bootstrap from.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// Give up when no record arrives for this many ms.
    #[arg(long, default_value_t = 10_000)]
    pub timeout: u64,
    /// max.partition.fetch.bytes.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub fetch_size: i32,
    /// Print one JSON object to stdout instead of Kafka's CSV lines.
    #[arg(long)]
    pub json: bool,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub async fn run(args: PerfConsumeArgs) -> Result<()> {
    let client = crate::cmd::connect(&args.bootstrap_server).await?;
    let config = ConsumerConfig {
        partition_max_bytes: args.fetch_size,
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(client, config);
    consumer
        .assign_topic(&args.topic, StartPosition::Earliest)
        .await?;
    let pb = super::progress_bar(args.messages, "records");
    let start_ms = now_ms();
    let start = Instant::now();
    let mut last = Instant::now();
    let (mut records, mut bytes) = (0u64, 0u64);
    while records < args.messages {
        let idle = Duration::from_millis(args.timeout).saturating_sub(last.elapsed());
        if idle.is_zero() {
            pb.finish_and_clear();
            bail!(
                "no record for {} ms after {records} of {} records; is the topic filled? (see runnel perf produce)",
                args.timeout,
                args.messages
            );
        }
        let batch = consumer.poll(idle.min(Duration::from_secs(1))).await?;
        if batch.is_empty() {
            continue;
        }
        last = Instant::now();
        let wanted = (args.messages - records) as usize;
        for r in batch.iter().take(wanted) {
            bytes += r.value.as_ref().map_or(0, |v| v.len() as u64)
                + r.key.as_ref().map_or(0, |k| k.len() as u64);
        }
        records += batch.len().min(wanted) as u64;
        pb.set_position(records);
    }
    let elapsed = start.elapsed();
    pb.finish_and_clear();
    let report = ConsumeReport {
        start_ms,
        end_ms: now_ms(),
        records,
        bytes,
        elapsed,
    };
    if args.json {
        println!("{}", report.json());
    } else {
        println!("{}", report.kafka_lines());
    }
    Ok(())
}
