//! runnel-broker: the network server, request handlers and controller shell.

use std::path::PathBuf;

pub mod authz;
pub mod clock;
pub mod config;
pub mod consumer_group_settings;
pub mod context;
pub mod controller;
pub mod coordinator_task;
pub mod disk_space;
pub mod dispatch;
pub mod errors;
pub mod group_manager;
pub mod group_purgatory;
pub mod handlers;
pub mod inter_broker;
pub mod listener_config;
pub mod log_dir_failure;
pub mod meta_properties;
pub mod metadata_import;
pub mod metadata_log;
pub mod node;
pub mod principal;
pub mod producer_expiry;
pub mod producer_state;
pub mod publisher;
pub mod quota;
pub mod replica;
pub mod scram_bootstrap;
pub mod server;
pub mod txn_manager;
pub mod txn_markers;
pub mod txn_verify;

/// Flags of `runnel broker`. Kafka property names go through `--override`.
#[derive(Debug, Clone, clap::Args)]
pub struct BrokerArgs {
    /// This node's id (default: `node.id` of --config, else 1).
    #[arg(long)]
    pub node_id: Option<i32>,
    /// Address to listen on for Kafka clients; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub listen: String,
    /// Address advertised to clients in Metadata (defaults to the bound listen address).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Directory holding the partition logs and the metadata log (default: `log.dirs` or
    /// `log.dir` of --config, else ./runnel-data).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Kafka property file: TOML with Kafka property names as keys, or Kafka's own
    /// `server.properties` (Java properties syntax).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Kafka property override, `key=value` (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Kafka's `process.roles`: broker, controller, or both (the default: a combined node).
    #[arg(long, value_name = "ROLES")]
    pub process_roles: Option<String>,
    /// Address of this node's controller (metadata quorum) listener.
    #[arg(long, value_name = "HOST:PORT")]
    pub controller_listen: Option<String>,
    /// The `HOST:PORT` the metadata leader dials to replicate to this broker-only node (an
    /// observer); defaults to the bound `--controller-listen` address. Kafka's observers fetch
    /// and need no such address; Runnel's are pushed to (docs/faults.md uses it for proxies).
    #[arg(long, value_name = "HOST:PORT")]
    pub controller_advertise: Option<String>,
    /// Kafka's `controller.quorum.voters`: `id@host:port,...`. Without it the node runs alone.
    #[arg(long, value_name = "VOTERS")]
    pub controller_quorum_voters: Option<String>,
    /// This broker's rack (Kafka's `broker.rack`), used by rack-aware placement.
    #[arg(long)]
    pub rack: Option<String>,
    /// A SCRAM user for a new cluster, as `kafka-storage.sh format --add-scram`:
    /// `SCRAM-SHA-512=[name=alice,password=...]` (repeatable; added only if missing).
    #[arg(long = "add-scram", value_name = "CREDENTIAL")]
    pub add_scram: Vec<String>,
}

/// Errors that stop the broker.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("storage error: {0}")]
    Log(#[from] runnel_log::LogError),
    #[error("{0}")]
    Startup(String),
    #[error("log directory failed, broker stopped: {0}")]
    LogDirFailed(String),
}

/// Runs a broker until Ctrl-C / SIGTERM.
pub async fn run(args: BrokerArgs) -> Result<(), BrokerError> {
    let config = config::BrokerConfig::from_args(&args)?;
    let bootstrap_users = args
        .add_scram
        .iter()
        .map(|raw| scram_bootstrap::parse(raw))
        .collect::<Result<Vec<_>, _>>()
        .map_err(BrokerError::Config)?;
    // `runnel storage format --add-scram` stored these (salted) in the data directory.
    let bootstrap = meta_properties::read_bootstrap(&config.data_dir)
        .map_err(|e| BrokerError::Startup(e.to_string()))?;
    // ... and the feature levels it chose (--release-version, --feature).
    let formatted_features = bootstrap
        .as_ref()
        .map(|b| b.features.clone())
        .unwrap_or_default();
    let formatted_users: Vec<runnel_metadata::ScramUpsertion> = bootstrap
        .map(|b| {
            b.scram
                .into_iter()
                .map(|c| runnel_metadata::ScramUpsertion {
                    name: c.name,
                    mechanism: c.mechanism,
                    iterations: c.iterations,
                    salt: c.salt,
                    stored_key: c.stored_key,
                    server_key: c.server_key,
                })
                .collect()
        })
        .unwrap_or_default();
    let node = node::start(config).await?;
    scram_bootstrap::spawn(node.broker.clone(), bootstrap_users);
    scram_bootstrap::spawn_salted(node.broker.clone(), formatted_users);
    scram_bootstrap::spawn_features(node.broker.clone(), formatted_features);
    // One line per listener first (tests and scripts read the ports), then the inter-broker one.
    for (name, addr) in &node.listeners {
        println!("Runnel broker {} listener {name} on {addr}", node.node_id);
    }
    println!(
        "Runnel broker {} listening on {}",
        node.node_id, node.listen_addr
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
    tokio::select! {
        () = node::wait_for_shutdown_signal() => {}
        failure = node.log_dir_failed() => {
            // Kafka halts a broker whose last log directory (or the metadata log's) failed:
            // no flush, no clean-shutdown marker (the next start recovers), no controlled
            // shutdown through a broken disk. One failed dir among several does not stop it.
            tracing::error!(%failure, "stopping the broker: all its log directories, or the one holding the metadata log, failed");
            return Err(BrokerError::LogDirFailed(failure.to_string()));
        }
    }
    tracing::info!("shutting down");
    node.shutdown().await
}
