//! One module per subcommand, plus the helpers they share (connecting, error rendering).

pub mod acls;
pub mod args;
pub mod client_quotas;
pub mod configs;
pub mod consume;
pub mod delete_records;
pub mod dev_cluster;
pub mod dump_log;
pub mod dump_metadata;
pub mod feature_mapping;
pub mod features;
pub mod features_update;
pub mod get_offsets;
pub mod groups;
pub mod java_exception;
pub mod leader_election;
pub mod log_dirs;
pub mod metadata;
pub mod metadata_quorum;
pub mod perf;
pub mod produce;
pub mod progress;
pub mod reassign;
pub mod storage;
pub mod topic_filter;
pub mod topic_id;
pub mod topics;
pub mod transactions;
pub mod user_scram;

use std::sync::{Arc, OnceLock};

use anyhow::Context;
use runnel_client::{render_error, Client, ClientConfig, ClientError, Security};

/// The security settings of `--command-config` (PLAINTEXT when it is not given).
static SECURITY: OnceLock<Security> = OnceLock::new();

/// Reads `--command-config FILE` (Kafka client properties) once, before any tool connects.
pub fn set_command_config(path: Option<&std::path::Path>) -> anyhow::Result<()> {
    let security = match path {
        None => Security::default(),
        Some(path) => {
            let props = runnel_client::security::read_properties_file(path)
                .map_err(anyhow::Error::msg)
                .context("--command-config")?;
            Security::from_properties(&props)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("--command-config {}", path.display()))?
        }
    };
    let _ = SECURITY.set(security);
    Ok(())
}

/// Connects to the cluster named by `--bootstrap-server`, secured as `--command-config` says.
pub async fn connect(bootstrap: &str) -> anyhow::Result<Arc<Client>> {
    let mut config = ClientConfig::new(bootstrap);
    config.connection.client_id = "runnel-cli".into();
    config.connection.security = SECURITY.get().cloned().unwrap_or_default();
    Ok(Client::connect(config).await?)
}

/// The single line printed for a failed command: Kafka's error name, the message and a hint
/// when the cause is a broker error, otherwise the error chain.
pub fn error_line(e: &anyhow::Error) -> String {
    if let Some(client) = e.downcast_ref::<ClientError>() {
        let line = render_error(client);
        // Context added with `.context(...)` goes in front.
        let outer = e.to_string();
        if outer != client.to_string() {
            return format!("{outer}: {line}");
        }
        return line;
    }
    for cause in e.chain() {
        if let Some(client) = cause.downcast_ref::<ClientError>() {
            return format!("{e}: {}", render_error(client));
        }
    }
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        line.push_str(": ");
        line.push_str(&cause.to_string());
    }
    line.replace('\n', " ")
}
