//! runnel-broker: the network server, request handlers and controller shell.

use std::path::PathBuf;

/// Flags of `runnel broker`. Kafka property names go through `--override`.
#[derive(Debug, Clone, clap::Args)]
pub struct BrokerArgs {
    /// This node's id (Kafka's `node.id`).
    #[arg(long, default_value_t = 1)]
    pub node_id: i32,
    /// Address to listen on for Kafka clients; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub listen: String,
    /// Address advertised to clients in Metadata (defaults to the bound listen address).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Directory holding the partition logs and the metadata log.
    #[arg(long, default_value = "./runnel-data")]
    pub data_dir: PathBuf,
    /// TOML file with Kafka property names as keys.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Kafka property override, `key=value` (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// Errors that stop the broker.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs a broker until Ctrl-C / SIGTERM.
pub async fn run(_args: BrokerArgs) -> Result<(), BrokerError> {
    Err(BrokerError::Config("not implemented yet".into()))
}
