//! `runnel transactions`: kafka-transactions.sh's `list`, `describe --transactional-id`,
//! `describe-producers --topic --partition`, `abort` and `find-hanging`, with Kafka's column
//! names and table layout (`ToolsUtils.prettyPrintTable`).

use std::collections::HashMap;

use anyhow::Result;
use clap::{Args, Subcommand};
use runnel_client::admin::{ProducerDescription, TransactionDescription, TransactionListing};
use runnel_client::{Admin, TopicPartition};

use super::metadata_quorum::format::pretty_table;
use runnel_codes::TRANSACTIONAL_ID_NOT_FOUND;

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
    /// Find hanging transactions: open on a partition for longer than the maximum
    /// transaction timeout while their coordinator does not expect to end them there.
    FindHanging {
        /// Broker id to search for hanging transactions (every partition it holds a replica
        /// of; the broker is asked itself).
        #[arg(long)]
        broker_id: Option<i32>,
        /// Maximum transaction timeout in minutes to limit the scope of the search.
        #[arg(long, default_value_t = 15)]
        max_transaction_timeout: i32,
        /// Topic name to limit search to.
        #[arg(long)]
        topic: Option<String>,
        /// Partition number.
        #[arg(long)]
        partition: Option<i32>,
    },
}

pub async fn run(args: TransactionsArgs) -> Result<()> {
    let admin = Admin::new(super::connect(&args.bootstrap_server).await?);
    let out = match args.command {
        TransactionsCommand::List => list_table(&admin.list_transactions(&[]).await?),
        TransactionsCommand::Describe { transactional_id } => describe_table(
            &admin.describe_transaction(&transactional_id).await?,
            now_ms(),
        ),
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
        TransactionsCommand::FindHanging {
            broker_id,
            max_transaction_timeout,
            topic,
            partition,
        } => {
            find_hanging(
                &admin,
                broker_id,
                max_transaction_timeout,
                topic.as_deref(),
                partition,
            )
            .await?
        }
    };
    print!("{out}");
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Kafka's `FindHangingTransactionsCommand.MAX_BATCH_SIZE`: partitions (and topics) per
/// request, so a broker with many partitions is not sent one giant request.
const MAX_BATCH_SIZE: usize = 500;

/// kafka-transactions.sh `find-hanging`: the partitions to search (those of `topic`, or of
/// every non-internal topic, with a replica on `broker_id` when given), their open
/// transactions older than the maximum timeout (DescribeProducers, at `broker_id` itself),
/// then the coordinators' view of those producers (ListTransactions filtered by producer id,
/// DescribeTransactions): [`hanging`] decides.
async fn find_hanging(
    admin: &Admin,
    broker_id: Option<i32>,
    max_timeout_minutes: i32,
    topic: Option<&str>,
    partition: Option<i32>,
) -> Result<String> {
    if topic.is_none() && broker_id.is_none() {
        anyhow::bail!(
            "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search"
        );
    }
    if partition.is_some() && topic.is_none() {
        anyhow::bail!("The --partition argument requires --topic to be provided");
    }
    let max_timeout_ms = i64::from(max_timeout_minutes) * 60_000;
    let partitions: Vec<TopicPartition> = match (topic, partition) {
        (Some(t), Some(p)) => vec![TopicPartition {
            topic: t.to_owned(),
            partition: p,
        }],
        _ => {
            let topics = match topic {
                Some(t) => vec![t.to_owned()],
                None => admin.list_topics(false).await?,
            };
            let mut out = Vec::new();
            for batch in topics.chunks(MAX_BATCH_SIZE) {
                for info in admin.describe_topics(Some(batch)).await? {
                    for p in &info.partitions {
                        if broker_id.is_none_or(|b| p.replicas.contains(&b)) {
                            out.push(TopicPartition {
                                topic: info.name.clone(),
                                partition: p.partition,
                            });
                        }
                    }
                }
            }
            out
        }
    };
    let mut producers = Vec::new();
    for batch in partitions.chunks(MAX_BATCH_SIZE) {
        producers.extend(admin.describe_producers_of(batch, broker_id).await?);
    }
    let open = candidates(producers, now_ms(), max_timeout_ms);
    if open.is_empty() {
        return Ok(hanging_table(&[], now_ms()));
    }
    let mut pids: Vec<i64> = open.iter().map(|o| o.producer.producer_id).collect();
    pids.sort_unstable();
    pids.dedup();
    let ids: HashMap<i64, String> = admin
        .list_transactions_of_producers(&pids)
        .await?
        .into_iter()
        .filter(|l| pids.contains(&l.producer_id))
        .map(|l| (l.producer_id, l.transactional_id))
        .collect();
    let mut descriptions = HashMap::new();
    for id in ids.values() {
        let described = match admin.describe_transaction(id).await {
            Ok(d) => Some(d.partitions),
            // TRANSACTIONAL_ID_NOT_FOUND: the coordinator has forgotten it meanwhile.
            Err(e) if e.code() == Some(TRANSACTIONAL_ID_NOT_FOUND) => None,
            Err(e) => return Err(e.into()),
        };
        descriptions.insert(id.clone(), described);
    }
    Ok(hanging_table(&hanging(open, &ids, &descriptions), now_ms()))
}

/// A transaction a partition reports open (DescribeProducers).
#[derive(Debug, Clone, PartialEq, Eq)]
struct OpenTransaction {
    partition: TopicPartition,
    producer: ProducerDescription,
}

/// The open transactions (a current start offset) whose producer last wrote more than
/// `max_timeout_ms` ago: no coordinator lets a transaction run that long, so each is either
/// about to be ended by its coordinator or hanging (Kafka's
/// `collectCandidateOpenTransactions`).
fn candidates(
    producers: Vec<(TopicPartition, Vec<ProducerDescription>)>,
    now_ms: i64,
    max_timeout_ms: i64,
) -> Vec<OpenTransaction> {
    producers
        .into_iter()
        .flat_map(|(partition, states)| {
            states
                .into_iter()
                .filter(move |s| {
                    s.current_txn_start_offset >= 0
                        && now_ms.saturating_sub(s.last_timestamp) > max_timeout_ms
                })
                .map(move |producer| OpenTransaction {
                    partition: partition.clone(),
                    producer,
                })
        })
        .collect()
}

/// Kafka's `filterHangingTransactions`: a candidate hangs when no coordinator lists its
/// producer id, when the coordinator no longer knows the transactional id (`None`), or when
/// the coordinator's transaction does not hold the partition: DescribeTransactions lists the
/// partitions of an ongoing transaction and those still waiting for their marker, so any
/// other partition will never get one.
fn hanging(
    candidates: Vec<OpenTransaction>,
    transactional_ids: &HashMap<i64, String>,
    descriptions: &HashMap<String, Option<Vec<TopicPartition>>>,
) -> Vec<OpenTransaction> {
    candidates
        .into_iter()
        .filter(|c| {
            let Some(id) = transactional_ids.get(&c.producer.producer_id) else {
                return true;
            };
            match descriptions.get(id) {
                Some(Some(partitions)) => !partitions.contains(&c.partition),
                _ => true,
            }
        })
        .collect()
}

/// kafka-transactions.sh's `find-hanging` table; the duration in whole minutes since the
/// producer's last write.
fn hanging_table(rows: &[OpenTransaction], now_ms: i64) -> String {
    let headers = [
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
        "LastTimestamp",
        "Duration(min)",
    ]
    .map(str::to_owned);
    // Ordered by partition, then producer id (Kafka's order follows a hash map).
    let mut sorted: Vec<&OpenTransaction> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        (&a.partition, a.producer.producer_id).cmp(&(&b.partition, b.producer.producer_id))
    });
    let rows: Vec<[String; 8]> = sorted
        .into_iter()
        .map(|o| {
            let p = &o.producer;
            [
                o.partition.topic.clone(),
                o.partition.partition.to_string(),
                p.producer_id.to_string(),
                p.producer_epoch.to_string(),
                p.coordinator_epoch.to_string(),
                p.current_txn_start_offset.to_string(),
                p.last_timestamp.to_string(),
                (now_ms.saturating_sub(p.last_timestamp) / 60_000).to_string(),
            ]
        })
        .collect();
    pretty_table(&headers, &rows)
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

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    fn producer(pid: i64, start: i64, last_timestamp: i64) -> ProducerDescription {
        ProducerDescription {
            producer_id: pid,
            producer_epoch: 3,
            last_sequence: 0,
            last_timestamp,
            coordinator_epoch: 5,
            current_txn_start_offset: start,
        }
    }

    #[test]
    fn candidates_are_open_transactions_older_than_the_max_timeout() {
        let max = 15 * 60_000;
        let now = 100 * 60_000;
        let found = candidates(
            vec![
                (
                    tp("a", 0),
                    vec![
                        producer(1, 10, now - max - 1), // open, too old: a candidate
                        producer(2, -1, 0),             // no open transaction
                        producer(3, 4, now - max),      // exactly the timeout: not yet
                    ],
                ),
                (tp("b", 1), vec![producer(1, 0, 0)]),
            ],
            now,
            max,
        );
        let got: Vec<(TopicPartition, i64)> = found
            .iter()
            .map(|o| (o.partition.clone(), o.producer.producer_id))
            .collect();
        assert_eq!(got, [(tp("a", 0), 1), (tp("b", 1), 1)]);
    }

    #[test]
    fn a_transaction_hangs_unless_its_coordinator_holds_the_partition() {
        let open = |pid, partition: TopicPartition| OpenTransaction {
            partition,
            producer: producer(pid, 0, 0),
        };
        let all = vec![
            open(1, tp("a", 0)), // no coordinator lists pid 1: hanging
            open(2, tp("a", 0)), // "gone": the coordinator no longer knows the id
            open(3, tp("a", 0)), // ongoing with a-0: the coordinator will end it
            open(3, tp("a", 1)), // the same transaction does not hold a-1: hanging
            open(4, tp("a", 0)), // id listed, its transaction complete (no partitions)
        ];
        let ids: HashMap<i64, String> = [(2, "gone"), (3, "live"), (4, "done")]
            .into_iter()
            .map(|(p, id)| (p, id.to_owned()))
            .collect();
        let descriptions: HashMap<String, Option<Vec<TopicPartition>>> = [
            ("gone".to_owned(), None),
            ("live".to_owned(), Some(vec![tp("a", 0), tp("b", 0)])),
            ("done".to_owned(), Some(vec![])),
        ]
        .into_iter()
        .collect();
        let got: Vec<(i64, TopicPartition)> = hanging(all, &ids, &descriptions)
            .into_iter()
            .map(|o| (o.producer.producer_id, o.partition))
            .collect();
        assert_eq!(
            got,
            [
                (1, tp("a", 0)),
                (2, tp("a", 0)),
                (3, tp("a", 1)),
                (4, tp("a", 0))
            ]
        );
    }

    #[test]
    fn find_hanging_prints_kafkas_columns() {
        let now = 10 * 60_000 + 59_999;
        let rows = [
            OpenTransaction {
                partition: tp("t", 2),
                producer: producer(8, 40, 0),
            },
            OpenTransaction {
                partition: tp("t", 1),
                producer: producer(9, 12, 60_000),
            },
        ];
        let out = hanging_table(&rows, now);
        let lines: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            lines[0],
            [
                "Topic",
                "Partition",
                "ProducerId",
                "ProducerEpoch",
                "CoordinatorEpoch",
                "StartOffset",
                "LastTimestamp",
                "Duration(min)"
            ]
        );
        assert_eq!(lines[1], ["t", "1", "9", "3", "5", "12", "60000", "9"]);
        assert_eq!(lines[2], ["t", "2", "8", "3", "5", "40", "0", "10"]);
        assert_eq!(hanging_table(&[], now).lines().count(), 1, "headers only");
    }
}
