//! Brings a broker up in dependency order and takes it down cleanly.
//!
//! Order: data dir and `meta.properties` -> partition logs (recovery) -> metadata log replay ->
//! image -> replica manager -> controller task -> listener -> broker registration -> serving.
//! Shutdown stops accepting, then flushes every log, writes checkpoints and the clean-shutdown
//! marker.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use runnel_log::LogManager;
use runnel_metadata::{
    effective_topic_config, BrokerDefaults, Controller, ControllerConfig, MetadataImage,
    PlacementPolicy,
};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::BrokerConfig;
use crate::context::Broker;
use crate::controller_shell::ControllerShell;
use crate::metadata_log::{FileMetadataLog, MetadataLog};
use crate::partition::log_config;
use crate::publisher::Publisher;
use crate::replica_manager::ReplicaManager;
use crate::BrokerError;

/// A running broker.
pub struct RunningBroker {
    pub node_id: i32,
    pub listen_addr: SocketAddr,
    pub broker: Arc<Broker>,
    shutdown: watch::Sender<bool>,
    server: JoinHandle<()>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Reads `meta.properties` (Kafka's format) or writes a new one with a fresh cluster id.
fn cluster_id(data_dir: &Path, node_id: i32) -> Result<String, BrokerError> {
    let path = data_dir.join("meta.properties");
    if let Ok(text) = std::fs::read_to_string(&path) {
        let props: BTreeMap<&str, &str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once('='))
            .collect();
        if let Some(stored) = props
            .get("node.id")
            .and_then(|v| v.trim().parse::<i32>().ok())
        {
            if stored != node_id {
                return Err(BrokerError::Startup(format!(
                    "{} belongs to node {stored}, not node {node_id}: use --node-id {stored} or another --data-dir",
                    data_dir.display()
                )));
            }
        }
        if let Some(id) = props.get("cluster.id") {
            return Ok(id.trim().to_string());
        }
    }
    let id = base64_url(uuid::Uuid::new_v4().as_bytes());
    let text = format!("#\n#Runnel\nversion=1\ncluster.id={id}\nnode.id={node_id}\n");
    let tmp = data_dir.join("meta.properties.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    Ok(id)
}

/// Kafka prints ids (cluster, topic) as unpadded URL-safe base64 of the 16 bytes.
pub fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

pub async fn start(config: BrokerConfig) -> Result<RunningBroker, BrokerError> {
    let data_dir = config.data_dir.clone();
    std::fs::create_dir_all(&data_dir).map_err(|e| {
        BrokerError::Startup(format!(
            "cannot create data dir {}: {e}",
            data_dir.display()
        ))
    })?;
    let cluster_id = cluster_id(&data_dir, config.node_id)?;
    let defaults = BrokerDefaults::new(config.props.clone());
    let default_log_config = log_config(&effective_topic_config(&BTreeMap::new(), &defaults));
    let logs = LogManager::open(data_dir.clone(), default_log_config)?;

    let metadata_log = FileMetadataLog::open(&data_dir.join("metadata"))?;
    let records = metadata_log.replay()?;
    let image = MetadataImage::empty(cluster_id.clone())
        .apply(&records)
        .map_err(|e| BrokerError::Startup(format!("metadata log cannot be replayed: {e}")))?;
    let image = Arc::new(image);

    let replicas = Arc::new(ReplicaManager::new(config.node_id, logs, defaults.clone()));
    let (image_tx, image_rx) = watch::channel(image.clone());
    let publisher = Publisher::new(replicas.clone(), image_tx);
    publisher.publish(image.clone());

    let placement = match config.str("replica.placement.policy") {
        "kafka" => PlacementPolicy::Kafka,
        _ => PlacementPolicy::ClusterAware,
    };
    let controller_config = ControllerConfig {
        num_partitions: config.get_i64("num.partitions", 1) as i32,
        default_replication_factor: config.get_i64("default.replication.factor", 1) as i16,
        delete_topic_enable: config.get_bool("delete.topic.enable", true),
        placement,
        defaults: defaults.clone(),
        max_events: 10_000,
    };
    let controller = Controller::new(controller_config, 1, rand::random());
    let controller =
        ControllerShell::new(controller, Box::new(metadata_log), image, publisher).spawn();

    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| BrokerError::Startup(format!("cannot listen on {}: {e}", config.listen)))?;
    let listen_addr = listener.local_addr()?;
    let (host, port) = match &config.advertise {
        Some(adv) => {
            let (h, p) = adv.rsplit_once(':').ok_or_else(|| {
                BrokerError::Config(format!("--advertise expects HOST:PORT, got '{adv}'"))
            })?;
            let port = p
                .parse::<u16>()
                .map_err(|_| BrokerError::Config(format!("--advertise has a bad port: '{adv}'")))?;
            (h.to_string(), port)
        }
        None => (listen_addr.ip().to_string(), listen_addr.port()),
    };
    controller
        .register_broker(config.node_id, host, port, config.rack())
        .await
        .map_err(|e| BrokerError::Startup(format!("broker registration failed: {}", e.message)))?;

    let node_id = config.node_id;
    let cleaner_enabled = config.get_bool("log.cleaner.enable", true);
    let cleaner_every =
        Duration::from_millis(config.get_i64("log.cleaner.backoff.ms", 15_000).max(1) as u64);
    let retention_every = Duration::from_millis(
        config
            .get_i64("log.retention.check.interval.ms", 300_000)
            .max(1) as u64,
    );
    let checkpoint_every = Duration::from_millis(
        config
            .get_i64("log.flush.offset.checkpoint.interval.ms", 60_000)
            .max(1) as u64,
    );
    let group_config = runnel_group::GroupConfig {
        min_session_timeout_ms: config.get_i64("group.min.session.timeout.ms", 6000) as i32,
        max_session_timeout_ms: config.get_i64("group.max.session.timeout.ms", 1_800_000) as i32,
        initial_rebalance_delay_ms: config.get_i64("group.initial.rebalance.delay.ms", 3000) as i32,
        max_size: config.get_i64("group.max.size", i32::MAX as i64).max(1) as usize,
        offset_metadata_max_bytes: config.get_i64("offset.metadata.max.bytes", 4096).max(0)
            as usize,
        offsets_retention_ms: config
            .get_i64("offsets.retention.minutes", 10080)
            .saturating_mul(60_000),
        offsets_retention_check_interval_ms: config
            .get_i64("offsets.retention.check.interval.ms", 600_000),
    };
    let groups =
        crate::group_manager::spawn(node_id, group_config, replicas.clone(), image_rx.clone());
    let broker = Arc::new(Broker::new(
        config,
        cluster_id,
        image_rx,
        controller,
        replicas.clone(),
        groups,
        defaults,
    ));
    let (shutdown, shutdown_rx) = watch::channel(false);
    if cleaner_enabled {
        spawn_cleaner(replicas.clone(), cleaner_every, shutdown_rx.clone());
    }
    spawn_housekeeping(
        replicas,
        retention_every,
        checkpoint_every,
        shutdown_rx.clone(),
    );
    let server = tokio::spawn(crate::server::serve(listener, broker.clone(), shutdown_rx));
    Ok(RunningBroker {
        node_id,
        listen_addr,
        broker,
        shutdown,
        server,
    })
}

/// Retention and checkpoints on their own timers; blocking file work goes to the blocking pool.
fn spawn_housekeeping(
    replicas: Arc<ReplicaManager>,
    retention_every: Duration,
    checkpoint_every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let mut retention = tokio::time::interval(retention_every);
        let mut checkpoint = tokio::time::interval(checkpoint_every);
        loop {
            tokio::select! {
                _ = retention.tick() => {
                    let r = replicas.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        let deleted = r.enforce_retention(now_ms());
                        if deleted > 0 {
                            tracing::info!(deleted, "retention deleted segments");
                        }
                    }).await;
                }
                _ = checkpoint.tick() => {
                    let r = replicas.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        // Flushing before the checkpoint moves the recovery point, so an
                        // unclean restart only re-validates the last interval's data.
                        if let Err(e) = r.logs().flush_all().and_then(|()| r.logs().checkpoint()) {
                            tracing::error!(error = %e, "writing checkpoints failed");
                        }
                    }).await;
                }
                _ = shutdown.changed() => return,
            }
        }
    });
}

/// The log cleaner: its own task, so a long compaction never delays retention or checkpoints.
fn spawn_cleaner(
    replicas: Arc<ReplicaManager>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let r = replicas.clone();
                    let _ = tokio::task::spawn_blocking(move || r.compact_logs(now_ms())).await;
                }
                _ = shutdown.changed() => return,
            }
        }
    });
}

impl RunningBroker {
    /// Stops serving, flushes every log and writes the clean-shutdown marker.
    pub async fn shutdown(self) -> Result<(), BrokerError> {
        let _ = self.shutdown.send(true);
        let _ = self.server.await;
        let replicas = self.broker.replicas.clone();
        tokio::task::spawn_blocking(move || replicas.logs().shutdown())
            .await
            .map_err(|e| BrokerError::Startup(format!("shutdown task failed: {e}")))??;
        tracing::info!("clean shutdown complete");
        Ok(())
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn wait_for_shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_kafka_encoding() {
        // Kafka's Uuid.toString of all-zero is "AAAAAAAAAAAAAAAAAAAAAA".
        assert_eq!(base64_url(&[0u8; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(base64_url(&[0xff; 3]), "____");
        assert_eq!(base64_url(b"M"), "TQ");
    }
}
