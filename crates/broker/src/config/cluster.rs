//! Cluster mode: `process.roles`, `controller.quorum.voters` (or the voters `runnel storage
//! format` recorded) and the quorum listener.

use std::collections::BTreeMap;
use std::net::SocketAddr;

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

pub(super) fn cluster_config(
    args: &BrokerArgs,
    props: &BTreeMap<String, String>,
) -> Result<Option<ClusterConfig>, BrokerError> {
    let (broker, controller) = process_roles(args, props)?;
    let voters_raw = args
        .controller_quorum_voters
        .clone()
        .or_else(|| props.get("controller.quorum.voters").cloned())
        // The voters `runnel storage format --initial-controllers` recorded.
        .or_else(|| {
            crate::meta_properties::read_bootstrap(&args.data_dir)
                .ok()
                .flatten()
                .and_then(|b| b.voters())
        });
    let Some(voters_raw) = voters_raw else {
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
    let own = voters.get(&args.node_id);
    if controller && own.is_none() {
        return Err(BrokerError::Config(format!(
            "node {} has the controller role but is not in --controller-quorum-voters ({voters_raw})",
            args.node_id
        )));
    }
    if !controller && own.is_some() {
        return Err(BrokerError::Config(format!(
            "node {} is a voter in --controller-quorum-voters but has no controller role",
            args.node_id
        )));
    }
    let listen_raw = args
        .controller_listen
        .clone()
        .or_else(|| own.cloned())
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let controller_listen: SocketAddr = listen_raw.parse().map_err(|_| {
        BrokerError::Config(format!(
            "--controller-listen expects IP:PORT, got '{listen_raw}'"
        ))
    })?;
    let controller_advertise = args.controller_advertise.clone();
    if let Some(adv) = &controller_advertise {
        check_controller_advertise(adv, controller, args.node_id)?;
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
