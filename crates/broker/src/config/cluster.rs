//! Cluster mode: `process.roles`, `controller.quorum.voters` (or the voters `runnel storage
//! format` recorded) and the quorum listener.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::ClusterConfig;
use crate::{BrokerArgs, BrokerError};

/// Parses `id@host:port,...` (Kafka's `controller.quorum.voters`).
pub fn parse_voters(raw: &str) -> Result<BTreeMap<i32, String>, BrokerError> {
    let mut voters = BTreeMap::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, address) = entry.split_once('@').ok_or_else(|| {
            BrokerError::Config(format!(
                "--controller-quorum-voters entry '{entry}' is not id@host:port"
            ))
        })?;
        let id: i32 = id.parse().ok().filter(|i| *i >= 0).ok_or_else(|| {
            BrokerError::Config(format!(
                "--controller-quorum-voters entry '{entry}' has a bad node id"
            ))
        })?;
        if address
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .is_none()
        {
            return Err(BrokerError::Config(format!(
                "--controller-quorum-voters entry '{entry}' needs host:port"
            )));
        }
        if voters.insert(id, address.to_string()).is_some() {
            return Err(BrokerError::Config(format!(
                "--controller-quorum-voters lists node {id} twice"
            )));
        }
    }
    Ok(voters)
}

/// `--node-id`, else `node.id` (or its old name `broker.id`) of the configuration, else 1
/// (`runnel broker` and `runnel storage`).
pub fn node_id(flag: Option<i32>, props: &BTreeMap<String, String>) -> Result<i32, BrokerError> {
    if let Some(id) = flag {
        return Ok(id);
    }
    let Some((key, raw)) = ["node.id", "broker.id"]
        .into_iter()
        .find_map(|k| props.get(k).map(|v| (k, v)))
    else {
        return Ok(1);
    };
    raw.trim()
        .parse::<i32>()
        .map_err(|_| BrokerError::Config(format!("{key} must be an int, got '{raw}'")))
}

/// The directories of `log.dirs` (else `log.dir`), comma-separated, blanks dropped.
fn listed_log_dirs(props: &BTreeMap<String, String>) -> Option<(&'static str, Vec<PathBuf>)> {
    ["log.dirs", "log.dir"].into_iter().find_map(|key| {
        let raw = props.get(key)?;
        let dirs: Vec<PathBuf> = raw
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect();
        Some((key, dirs))
    })
}

/// The node's data directory, which holds `meta.properties`, the bootstrap file and the
/// metadata log: `--data-dir`, else `metadata.log.dir` (Kafka's property), else the first of
/// `log.dirs` / `log.dir`, else `./runnel-data` (`runnel broker` and `runnel storage`).
pub fn data_dir(
    flag: Option<&Path>,
    props: &BTreeMap<String, String>,
) -> Result<PathBuf, BrokerError> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = props
        .get("metadata.log.dir")
        .filter(|d| !d.trim().is_empty())
    {
        return Ok(PathBuf::from(dir.trim()));
    }
    match listed_log_dirs(props) {
        Some((_, dirs)) if !dirs.is_empty() => Ok(dirs[0].clone()),
        Some((key, _)) => Err(BrokerError::Config(format!("{key} names no directory"))),
        None => Ok(PathBuf::from("./runnel-data")),
    }
}

/// The partition log dirs (Kafka's JBOD): `log.dirs` when it names several directories (the
/// data directory then holds only the metadata), else the one data directory, as before
/// several were supported. A directory listed twice is refused, as Kafka does.
pub fn log_dirs(
    data_dir: &Path,
    props: &BTreeMap<String, String>,
) -> Result<Vec<PathBuf>, BrokerError> {
    let Some((key, dirs)) = listed_log_dirs(props).filter(|(_, d)| d.len() > 1) else {
        return Ok(vec![data_dir.to_path_buf()]);
    };
    for (i, d) in dirs.iter().enumerate() {
        if dirs[..i].contains(d) {
            return Err(BrokerError::Config(format!(
                "{key} lists {} twice",
                d.display()
            )));
        }
    }
    Ok(dirs)
}

/// The controller listener named in `listeners` (Kafka's KRaft layout:
/// `listeners=PLAINTEXT://...,CONTROLLER://...` with `controller.listener.names=CONTROLLER`):
/// the address the quorum listener binds.
fn controller_listener_address(
    props: &BTreeMap<String, String>,
) -> Result<Option<String>, BrokerError> {
    let (Some(names), Some(text)) = (
        props.get("controller.listener.names"),
        props.get("listeners"),
    ) else {
        return Ok(None);
    };
    let map = crate::server::listeners::effective_protocol_map(
        props
            .get("listener.security.protocol.map")
            .map(String::as_str),
        Some(names),
        Some(text),
    )
    .map_err(BrokerError::Config)?;
    let listeners = crate::server::listeners::parse_listeners("listeners", text, &map)
        .map_err(BrokerError::Config)?;
    let names = crate::server::listeners::controller_listener_names(names);
    let mut found = listeners.iter().filter(|l| names.contains(&l.name));
    let Some(endpoint) = found.next() else {
        return Ok(None);
    };
    if let Some(other) = found.next() {
        return Err(BrokerError::Config(format!(
            "listeners has two controller listeners ({} and {}); Runnel binds one quorum listener",
            endpoint.name, other.name
        )));
    }
    let addr = endpoint.bind_addr().map_err(BrokerError::Config)?;
    Ok(Some(addr.to_string()))
}

/// KIP-853's dynamic quorum: the voters are what `storage format --initial-controllers`
/// recorded. One bootstrap server (this node, formatted `--standalone` or not) is a
/// single-node quorum, which Runnel runs on its local metadata log; several need the
/// format, or the nodes would each start a cluster of their own.
fn check_bootstrap_servers(
    props: &BTreeMap<String, String>,
    data_dir: &Path,
) -> Result<(), BrokerError> {
    if let Some(servers) = props.get("controller.quorum.bootstrap.servers") {
        let count = servers.split(',').filter(|s| !s.trim().is_empty()).count();
        if count > 1 {
            return Err(BrokerError::Config(format!(
                "controller.quorum.bootstrap.servers lists {count} controllers but {} has no initial quorum: format it with `runnel storage format --initial-controllers ...` (as kafka-storage.sh) or set controller.quorum.voters",
                data_dir.display()
            )));
        }
    }
    Ok(())
}

pub(super) fn cluster_config(
    args: &BrokerArgs,
    node_id: i32,
    data_dir: &Path,
    props: &BTreeMap<String, String>,
) -> Result<Option<ClusterConfig>, BrokerError> {
    let (broker, controller) = process_roles(args, props)?;
    let voters_raw = args
        .controller_quorum_voters
        .clone()
        .or_else(|| props.get("controller.quorum.voters").cloned())
        // The voters `runnel storage format --initial-controllers` recorded.
        .or_else(|| {
            crate::meta_properties::read_bootstrap(data_dir)
                .ok()
                .flatten()
                .and_then(|b| b.voters())
        });
    let Some(voters_raw) = voters_raw else {
        check_bootstrap_servers(props, data_dir)?;
        if !(broker && controller) {
            return Err(BrokerError::Config(
                "--process-roles other than broker,controller needs --controller-quorum-voters"
                    .into(),
            ));
        }
        return Ok(None);
    };
    let voters = parse_voters(&voters_raw)?;
    if voters.is_empty() {
        return Err(BrokerError::Config(
            "--controller-quorum-voters is empty".into(),
        ));
    }
    let own = voters.get(&node_id);
    if controller && own.is_none() {
        return Err(BrokerError::Config(format!(
            "node {} has the controller role but is not in --controller-quorum-voters ({voters_raw})",
            node_id
        )));
    }
    if !controller && own.is_some() {
        return Err(BrokerError::Config(format!(
            "node {} is a voter in --controller-quorum-voters but has no controller role",
            node_id
        )));
    }
    let listen_raw = args
        .controller_listen
        .clone()
        .or(controller_listener_address(props)?)
        .or_else(|| own.cloned())
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let controller_listen: SocketAddr = listen_raw.parse().map_err(|_| {
        BrokerError::Config(format!(
            "--controller-listen expects IP:PORT, got '{listen_raw}'"
        ))
    })?;
    let controller_advertise = args.controller_advertise.clone();
    if let Some(adv) = &controller_advertise {
        check_controller_advertise(adv, controller, node_id)?;
    }
    Ok(Some(ClusterConfig {
        broker,
        controller,
        voters,
        controller_listen,
        controller_advertise,
    }))
}

/// `--process-roles` (or `process.roles`): (broker, controller); both by default.
fn process_roles(
    args: &BrokerArgs,
    props: &BTreeMap<String, String>,
) -> Result<(bool, bool), BrokerError> {
    let roles = args
        .process_roles
        .clone()
        .or_else(|| props.get("process.roles").cloned())
        .unwrap_or_else(|| "broker,controller".into());
    let mut broker = false;
    let mut controller = false;
    for role in roles.split(',').map(str::trim) {
        match role {
            "broker" => broker = true,
            "controller" => controller = true,
            other => {
                return Err(BrokerError::Config(format!(
                    "--process-roles takes broker, controller or both; got '{other}'"
                )))
            }
        }
    }
    Ok((broker, controller))
}

/// `--controller-advertise` is a broker-only node's HOST:PORT.
fn check_controller_advertise(
    adv: &str,
    controller: bool,
    node_id: i32,
) -> Result<(), BrokerError> {
    if controller {
        return Err(BrokerError::Config(format!(
            "--controller-advertise is for broker-only nodes; a voter is dialled at its \
             --controller-quorum-voters entry (node {node_id} got '{adv}')"
        )));
    }
    if adv
        .rsplit_once(':')
        .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
    {
        return Err(BrokerError::Config(format!(
            "--controller-advertise expects HOST:PORT, got '{adv}'"
        )));
    }
    Ok(())
}
