//! `runnel`: the broker and command-line tools mirroring Kafka's (kafka-topics.sh,
//! kafka-console-producer/consumer.sh, kafka-configs.sh, kafka-consumer-groups.sh, kafka-*-perf-test.sh,
//! kafka-metadata-quorum.sh, kafka-leader-election.sh, kafka-reassign-partitions.sh), so that
//! Kafka's documented commands work with only the program name changed; plus Runnel's own
//! `metadata` view and `dev-cluster`.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Runnel: a Kafka-compatible broker and its tools.
#[derive(Debug, Parser)]
#[command(name = "runnel", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Kafka client properties for every tool's connections (security.protocol, sasl.*, ssl.*),
    /// as Kafka's tools' --command-config (also --producer.config / --consumer.config).
    #[arg(long = "command-config", global = true, value_name = "FILE",
          visible_aliases = ["producer.config", "consumer.config"])]
    command_config: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a broker.
    Broker(runnel_broker::BrokerArgs),
    /// Create, list, describe, alter and delete topics (kafka-topics.sh).
    Topics(cmd::topics::TopicsArgs),
    /// Produce lines from stdin (kafka-console-producer.sh).
    Produce(cmd::produce::ProduceArgs),
    /// Print records to stdout (kafka-console-consumer.sh).
    Consume(cmd::consume::ConsumeArgs),
    /// List, describe, reset and delete consumer groups (kafka-consumer-groups.sh).
    Groups(cmd::groups::GroupsArgs),
    /// Describe and alter topic / broker configs (kafka-configs.sh).
    Configs(cmd::configs::ConfigsArgs),
    /// Throughput and latency tests (kafka-producer-perf-test.sh, kafka-consumer-perf-test.sh).
    Perf(cmd::perf::PerfArgs),
    /// Preferred or unclean leader election (kafka-leader-election.sh).
    LeaderElection(cmd::leader_election::LeaderElectionArgs),
    /// Generate, execute, verify and list partition reassignments (kafka-reassign-partitions.sh).
    ReassignPartitions(cmd::reassign::ReassignArgs),
    /// Describe the metadata quorum (kafka-metadata-quorum.sh describe).
    MetadataQuorum(cmd::metadata_quorum::MetadataQuorumArgs),
    /// Show the metadata as ZooKeeper's tree, or the partition/replica state-change log.
    Metadata(cmd::metadata::MetadataArgs),
    /// List and describe transactions (kafka-transactions.sh list / describe).
    Transactions(cmd::transactions::TransactionsArgs),
    /// Run a local cluster of combined broker+controller nodes until Ctrl-C.
    DevCluster(cmd::dev_cluster::DevClusterArgs),
    /// Print partition offsets: latest, earliest, max timestamp or by time (kafka-get-offsets.sh).
    GetOffsets(cmd::get_offsets::GetOffsetsArgs),
    /// Delete records before offsets from an offset JSON file (kafka-delete-records.sh).
    DeleteRecords(cmd::delete_records::DeleteRecordsArgs),
    /// Describe the brokers' log directories as JSON (kafka-log-dirs.sh --describe).
    LogDirs(cmd::log_dirs::LogDirsArgs),
    /// Describe and change feature levels (kafka-features.sh).
    Features(cmd::features::FeaturesArgs),
    /// Add, remove and list ACLs (kafka-acls.sh).
    Acls(cmd::acls::AclsArgs),
    /// Format a data directory, show it, or print a random UUID (kafka-storage.sh).
    Storage(cmd::storage::StorageArgs),
    /// Print the batches, records and indexes of log segment files, offline (kafka-dump-log.sh).
    DumpLog(cmd::dump_log::DumpLogArgs),
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = cmd::set_command_config(cli.command_config.as_deref()) {
        eprintln!("Error: {}", cmd::error_line(&e));
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Broker(args) => {
            init_tracing();
            runnel_broker::run(args).await.map_err(anyhow::Error::from)
        }
        Command::Topics(args) => cmd::topics::run(args).await,
        Command::Produce(args) => cmd::produce::run(args).await,
        Command::Consume(args) => cmd::consume::run(args).await,
        Command::Configs(args) => cmd::configs::run(args).await,
        Command::Groups(args) => cmd::groups::run(args).await,
        Command::Perf(args) => cmd::perf::run(args).await,
        Command::LeaderElection(args) => cmd::leader_election::run(args).await,
        Command::ReassignPartitions(args) => cmd::reassign::run(args).await,
        Command::MetadataQuorum(args) => cmd::metadata_quorum::run(args).await,
        Command::Metadata(args) => cmd::metadata::run(args).await,
        Command::DevCluster(args) => cmd::dev_cluster::run(args).await,
        Command::GetOffsets(args) => cmd::get_offsets::run(args).await,
        Command::DeleteRecords(args) => cmd::delete_records::run(args).await,
        Command::LogDirs(args) => cmd::log_dirs::run(args).await,
        Command::Transactions(args) => cmd::transactions::run(args).await,
        Command::Features(args) => cmd::features::run(args).await,
        Command::Acls(args) => cmd::acls::run(args).await,
        Command::Storage(args) => cmd::storage::run(args),
        Command::DumpLog(args) => cmd::dump_log::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {}", cmd::error_line(&e));
            ExitCode::FAILURE
        }
    }
}
