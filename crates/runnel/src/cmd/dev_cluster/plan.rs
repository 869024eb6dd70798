//! The pure part of `runnel dev-cluster`: which ports, data dirs and racks each node gets, and
//! the exact `runnel broker` command line that makes it a combined broker + controller of the
//! quorum. Kept free of processes so the layout is unit-tested.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Every node listens here; a dev cluster is local by definition.
pub const HOST: &str = "127.0.0.1";

/// Distance between a node's Kafka port and its controller port with `--base-port`.
pub const CONTROLLER_PORT_OFFSET: u16 = 100;

/// Name of the file in the data dir that remembers the ports of the last run.
pub const PORTS_FILE: &str = "dev-cluster.ports";

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// Node id, 1..=N.
    pub id: u16,
    /// Port for Kafka clients.
    pub kafka_port: u16,
    /// Port for the controller quorum (Raft).
    pub controller_port: u16,
    /// `broker.rack`, when `--racks` was given.
    pub rack: Option<String>,
    /// The node's own data dir, `<data-dir>/node-<id>`.
    pub data_dir: PathBuf,
}

/// The whole cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPlan {
    /// Nodes in id order.
    pub nodes: Vec<NodePlan>,
}

/// `(kafka, controller)` ports from `--base-port P`: node i gets P+i-1 and P+100+i-1, so the
/// addresses are predictable and easy to type.
pub fn fixed_ports(base: u16, brokers: u16) -> Result<Vec<(u16, u16)>> {
    if brokers > CONTROLLER_PORT_OFFSET {
        bail!("--base-port supports at most {CONTROLLER_PORT_OFFSET} brokers (controller ports start at base-port+{CONTROLLER_PORT_OFFSET})");
    }
    let last = u32::from(base) + u32::from(CONTROLLER_PORT_OFFSET) + u32::from(brokers) - 1;
    if base == 0 || last > u32::from(u16::MAX) {
        bail!("--base-port {base}: ports {base}..={last} must lie within 1..=65535");
    }
    Ok((0..brokers)
        .map(|i| (base + i, base + CONTROLLER_PORT_OFFSET + i))
        .collect())
}

/// `(kafka, controller)` ports that are free right now and likely to stay free while a node
/// is down, since `dev-cluster start` restarts it on the same ports: drawn at random *below*
/// the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), where outgoing connections
/// never take them, and checked by binding. All 2N listeners are held at once (so no port is
/// handed out twice) and released just before the nodes start. Where that range leaves no
/// room, the kernel chooses.
pub fn free_ports(brokers: u16) -> Result<Vec<(u16, u16)>> {
    let wanted = usize::from(brokers) * 2;
    let mut listeners = Vec::with_capacity(wanted);
    let (low, high) = (10_000u16, ephemeral_low());
    if high > low + 1000 {
        for _ in 0..wanted * 50 {
            if listeners.len() == wanted {
                break;
            }
            let port = rand::Rng::gen_range(&mut rand::thread_rng(), low..high);
            if let Ok(l) = std::net::TcpListener::bind((HOST, port)) {
                listeners.push(l);
            }
        }
    }
    while listeners.len() < wanted {
        listeners.push(
            std::net::TcpListener::bind((HOST, 0)).context("finding free ports on 127.0.0.1")?,
        );
    }
    let ports = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<Vec<_>>>()
        .context("reading a bound port")?;
    Ok(ports.chunks(2).map(|p| (p[0], p[1])).collect())
}

/// The first port of the kernel's ephemeral range (Linux), else the IANA default.
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(49152)
}

/// Checks `--racks`: names must be non-empty and free of whitespace and commas (they end up in
/// a command line and in `broker.rack`).
pub fn check_racks(racks: &[String]) -> Result<()> {
    for r in racks {
        if r.is_empty() || r.chars().any(|c| c.is_whitespace() || c == ',') {
            bail!("--racks: '{r}' is not a valid rack name");
        }
    }
    Ok(())
}

impl ClusterPlan {
    /// Lays out one node per port pair. With racks, node i gets rack `racks[(i-1) % len]`, so
    /// `--brokers 6 --racks a,b,c` puts two brokers in each rack.
    pub fn new(data_dir: &Path, ports: &[(u16, u16)], racks: &[String]) -> Self {
        let nodes = ports
            .iter()
            .zip(1u16..)
            .map(|(&(kafka_port, controller_port), id)| NodePlan {
                id,
                kafka_port,
                controller_port,
                rack: (!racks.is_empty()).then(|| racks[usize::from(id - 1) % racks.len()].clone()),
                data_dir: data_dir.join(format!("node-{id}")),
            })
            .collect();
        Self { nodes }
    }

    /// `--controller-quorum-voters`: `1@127.0.0.1:cp1,2@127.0.0.1:cp2,...`.
    pub fn voters(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("{}@{HOST}:{}", n.id, n.controller_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The clients' bootstrap list: `127.0.0.1:p1,127.0.0.1:p2,...`.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("{HOST}:{}", n.kafka_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The arguments after the program name for `node`: `broker --node-id i --listen ...`.
    pub fn broker_args(&self, node: &NodePlan, overrides: &[String]) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "broker".into(),
            "--node-id".into(),
            node.id.to_string().into(),
            "--listen".into(),
            format!("{HOST}:{}", node.kafka_port).into(),
            "--controller-listen".into(),
            format!("{HOST}:{}", node.controller_port).into(),
            "--controller-quorum-voters".into(),
            self.voters().into(),
            "--process-roles".into(),
            "broker,controller".into(),
            "--data-dir".into(),
            node.data_dir.clone().into(),
        ];
        if let Some(rack) = &node.rack {
            args.push("--rack".into());
            args.push(rack.into());
        }
        for o in overrides {
            args.push("--override".into());
            args.push(o.into());
        }
        args
    }

    /// The ports, one `id kafka_port controller_port` line per node, for [`PORTS_FILE`].
    pub fn ports_file_text(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("{} {} {}\n", n.id, n.kafka_port, n.controller_port))
            .collect()
    }
}

/// Reads [`ClusterPlan::ports_file_text`] back. `None` when the file is malformed or lists a
/// different number of nodes: the caller then picks new ports.
pub fn parse_ports_file(text: &str, brokers: u16) -> Option<Vec<(u16, u16)>> {
    let mut ports = Vec::new();
    for (line, expected_id) in text.lines().zip(1u16..) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [id, kafka, controller] = fields.as_slice() else {
            return None;
        };
        if id.parse::<u16>().ok()? != expected_id {
            return None;
        }
        ports.push((kafka.parse().ok()?, controller.parse().ok()?));
    }
    (ports.len() == usize::from(brokers)).then_some(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn base_port_layout() {
        assert_eq!(
            fixed_ports(19092, 3).unwrap(),
            vec![(19092, 19192), (19093, 19193), (19094, 19194)]
        );
        assert!(fixed_ports(65500, 3).is_err());
        assert!(fixed_ports(0, 1).is_err());
        assert!(fixed_ports(1000, 101).is_err());
        assert_eq!(fixed_ports(65435, 1).unwrap(), vec![(65435, 65535)]);
        assert!(fixed_ports(65436, 1).is_err());
    }

    #[test]
    fn free_ports_are_distinct() {
        let ports = free_ports(3).unwrap();
        let mut all: Vec<u16> = ports.iter().flat_map(|&(a, b)| [a, b]).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 6);
        assert!(all.iter().all(|p| *p != 0));
    }

    #[test]
    fn voters_bootstrap_and_node_args() {
        let racks = vec!["a".to_string(), "b".to_string()];
        let plan = ClusterPlan::new(Path::new("/d"), &fixed_ports(9092, 3).unwrap(), &racks);
        assert_eq!(
            plan.voters(),
            "1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194"
        );
        assert_eq!(
            plan.bootstrap(),
            "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
        );
        let racks: Vec<_> = plan.nodes.iter().map(|n| n.rack.clone()).collect();
        assert_eq!(
            racks,
            [Some("a".into()), Some("b".into()), Some("a".into())]
        );
        let node = &plan.nodes[1];
        assert_eq!(
            strings(&plan.broker_args(node, &["broker.session.timeout.ms=3000".into()])),
            [
                "broker",
                "--node-id",
                "2",
                "--listen",
                "127.0.0.1:9093",
                "--controller-listen",
                "127.0.0.1:9193",
                "--controller-quorum-voters",
                "1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194",
                "--process-roles",
                "broker,controller",
                "--data-dir",
                "/d/node-2",
                "--rack",
                "b",
                "--override",
                "broker.session.timeout.ms=3000",
            ]
        );
    }

    #[test]
    fn no_racks_no_rack_flag() {
        let plan = ClusterPlan::new(Path::new("d"), &[(1, 2)], &[]);
        let args = strings(&plan.broker_args(&plan.nodes[0], &[]));
        assert!(!args.contains(&"--rack".to_string()));
        assert_eq!(args.last().map(String::as_str), Some("d/node-1"));
        assert_eq!(plan.voters(), "1@127.0.0.1:2");
    }

    #[test]
    fn rack_names() {
        assert!(check_racks(&["us-east-1a".into(), "b".into()]).is_ok());
        assert!(check_racks(&["".into()]).is_err());
        assert!(check_racks(&["a b".into()]).is_err());
    }

    #[test]
    fn ports_file_round_trip() {
        let plan = ClusterPlan::new(Path::new("d"), &fixed_ports(9092, 2).unwrap(), &[]);
        let text = plan.ports_file_text();
        assert_eq!(text, "1 9092 9192\n2 9093 9193\n");
        assert_eq!(
            parse_ports_file(&text, 2),
            Some(vec![(9092, 9192), (9093, 9193)])
        );
        assert_eq!(parse_ports_file(&text, 3), None);
        assert_eq!(parse_ports_file("1 9092\n", 1), None);
        assert_eq!(parse_ports_file("2 9092 9192\n", 1), None);
        assert_eq!(parse_ports_file("1 x 9192\n", 1), None);
    }
}
