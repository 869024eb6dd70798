//! `runnel transactions`: kafka-transactions.sh's `list`, `describe --transactional-id` and
//! `describe-producers --topic --partition`, with Kafka's column names and table layout
//! (`ToolsUtils.prettyPrintTable`).

use anyhow::Result;
use clap::{Args, Subcommand};
use runnel_client::admin::{ProducerDescription, TransactionDescription, TransactionListing};
use runnel_client::Admin;

use super::metadata_quorum::format::pretty_table;

#[derive(Debug, Args)]
pub struct TransactionsArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    #[command(subcommand)]
    pub command: TransactionsCommand,
}

#[derive(Debug, Subcommand)]
pub enum TransactionsCommand {
    /// List the transactions of every broker.
    List,
    /// Describe one transactional id at its coordinator.
    Describe {
        #[arg(long, value_name = "ID")]
        transactional_id: String,
    },
    /// The producer state of one partition at its leader (DescribeProducers).
    DescribeProducers {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        partition: i32,
    },
    /// Abort a hanging transaction on one partition (an ABORT marker, WriteTxnMarkers): by
    /// the start offset of the open transaction, or by producer id, epoch and coordinator
    /// epoch.
    Abort {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        partition: i32,
        #[arg(long, conflicts_with_all = ["producer_id", "producer_epoch", "coordinator_epoch"])]
        start_offset: Option<i64>,
        #[arg(long, requires_all = ["producer_epoch", "coordinator_epoch"])]
        producer_id: Option<i64>,
        #[arg(long)]
        producer_epoch: Option<i16>,
        #[arg(long)]
        coordinator_epoch: Option<i32>,
    },
}

pub async fn run(args: TransactionsArgs) -> Result<()> {
    let admin = Admin::new(super::connect(&args.bootstrap_server).await?);
    let out = match args.command {
        TransactionsCommand::List => list_table(&admin.list_transactions(&[]).await?),
        TransactionsCommand::Describe { transactional_id } => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            describe_table(&admin.describe_transaction(&transactional_id).await?, now)
        }
        TransactionsCommand::DescribeProducers { topic, partition } => {
            producers_table(&admin.describe_producers(&topic, partition).await?)
        }
        TransactionsCommand::Abort {
            topic,
            partition,
            start_offset,
            producer_id,
            producer_epoch,
            coordinator_epoch,
        } => {
            let (pid, epoch, coordinator_epoch) = match (start_offset, producer_id) {
                (Some(offset), _) => {
                    // As kafka-transactions.sh: the producer whose open transaction starts there.
                    let producers = admin.describe_producers(&topic, partition).await?;
                    let p = producers
                        .iter()
                        .find(|p| p.current_txn_start_offset == offset)
                        .ok_or_else(|| {
                            anyhow::anyhow!(
                                "Could not find any open transactions starting at offset {offset} on partition {topic}-{partition}"
                            )
                        })?;
                    let epoch = i16::try_from(p.producer_epoch)
                        .map_err(|_| anyhow::anyhow!("producer epoch {} out of range", p.producer_epoch))?;
                    (p.producer_id, epoch, p.coordinator_epoch.max(0))
                }
                (None, Some(pid)) => (
                    pid,
                    producer_epoch.unwrap_or_default(),
                    coordinator_epoch.unwrap_or_default(),
                ),
                (None, None) => anyhow::bail!(
                    "either --start-offset or --producer-id, --producer-epoch and --coordinator-epoch is required"
                ),
            };
            admin
                .abort_transaction(&topic, partition, pid, epoch, coordinator_epoch)
                .await?;
            String::new()
        }
    };
    print!("{out}");
    Ok(())
}

fn list_table(rows: &[TransactionListing]) -> String {
    let headers = [
        "TransactionalId",
        "Coordinator",
        "ProducerId",
        "TransactionState",
    ]
    .map(str::to_owned);
    let rows: Vec<[String; 4]> = rows
        .iter()
        .map(|t| {
            [
                t.transactional_id.clone(),
                t.coordinator.to_string(),
                t.producer_id.to_string(),
                t.state.clone(),
            ]
        })
        .collect();
    pretty_table(&headers, &rows)
}

fn producers_table(rows: &[ProducerDescription]) -> String {
    let headers = [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    .map(str::to_owned);
    let rows: Vec<[String; 6]> = rows
        .iter()
        .map(|p| {
            // Kafka prints "None" when no transaction is open.
            let start = if p.current_txn_start_offset < 0 {
                "None".to_string()
            } else {
                p.current_txn_start_offset.to_string()
            };
            [
                p.producer_id.to_string(),
                p.producer_epoch.to_string(),
                p.coordinator_epoch.to_string(),
                p.last_sequence.to_string(),
                p.last_timestamp.to_string(),
                start,
            ]
        })
        .collect();
    pretty_table(&headers, &rows)
}

fn describe_table(t: &TransactionDescription, now_ms: i64) -> String {
    let headers = [
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    ]
    .map(str::to_owned);
    // Kafka prints "None" when no transaction is open.
    let (start, duration) = if t.start_ms < 0 {
        ("None".to_string(), "None".to_string())
    } else {
        (t.start_ms.to_string(), (now_ms - t.start_ms).to_string())
    };
    let partitions: Vec<String> = t
        .partitions
        .iter()
        .map(|p| format!("{}-{}", p.topic, p.partition))
        .collect();
    let row = [
        t.coordinator.to_string(),
        t.transactional_id.clone(),
        t.producer_id.to_string(),
        t.producer_epoch.to_string(),
        t.state.clone(),
        t.timeout_ms.to_string(),
        start,
        duration,
        partitions.join(","),
    ];
    pretty_table(&headers, &[row])
}

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_client::TopicPartition;

    #[test]
    fn describe_prints_kafkas_columns() {
        let t = TransactionDescription {
            coordinator: 1,
            transactional_id: "tx".into(),
            producer_id: 7,
            producer_epoch: 2,
            state: "Ongoing".into(),
            timeout_ms: 60000,
            start_ms: 1000,
            partitions: vec![TopicPartition {
                topic: "a".into(),
                partition: 0,
            }],
        };
        let out = describe_table(&t, 1500);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("CoordinatorId\tTransactionalId\tProducerId\t"));
        let cells: Vec<&str> = lines[1].split('\t').map(str::trim).collect();
        assert_eq!(
            &cells[..9],
            &["1", "tx", "7", "2", "Ongoing", "60000", "1000", "500", "a-0"]
        );
        let idle = TransactionDescription {
            start_ms: -1,
            partitions: vec![],
            ..t
        };
        assert!(describe_table(&idle, 0).contains("None"));
    }

    #[test]
    fn describe_producers_prints_kafkas_columns() {
        let p = ProducerDescription {
            producer_id: 9,
            producer_epoch: 1,
            last_sequence: 4,
            last_timestamp: 77,
            coordinator_epoch: -1,
            current_txn_start_offset: -1,
        };
        let open = ProducerDescription {
            current_txn_start_offset: 12,
            coordinator_epoch: 3,
            ..p.clone()
        };
        let out = producers_table(&[p, open]);
        let lines: Vec<&str> = out.lines().collect();
        let header: Vec<&str> = lines[0].split_whitespace().collect();
        assert_eq!(
            header,
            [
                "ProducerId",
                "ProducerEpoch",
                "LatestCoordinatorEpoch",
                "LastSequence",
                "LastTimestamp",
                "CurrentTransactionStartOffset"
            ]
        );
        let cells = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(cells(lines[1]), ["9", "1", "-1", "4", "77", "None"]);
        assert_eq!(cells(lines[2]), ["9", "1", "3", "4", "77", "12"]);
    }
}
