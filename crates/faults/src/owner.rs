//! Which process opened a connection the proxy accepted: the peer's socket is found in
//! `/proc/net/tcp` (local = the peer's address, remote = the proxy's), and its inode among the
//! file descriptors of the brokers' pids. This is how one listening proxy per node tells the
//! directed links into that node apart, although every process connects from 127.0.0.1 (the
//! cluster id is derived from the voter addresses, so every node must be given the same ones).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// Parses `0100007F:1F90` (little-endian IPv4 hex, port hex) from `/proc/net/tcp`.
fn parse_hex_addr(field: &str) -> Option<SocketAddrV4> {
    let (ip, port) = field.split_once(':')?;
    let ip = u32::from_str_radix(ip, 16).ok()?;
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(SocketAddrV4::new(Ipv4Addr::from(ip.to_le_bytes()), port))
}

/// One scan of `/proc/net/tcp` and of the brokers' file descriptors, shared by every
/// connection accepted before it began: a scan per connection does not keep up when clients
/// reconnect in bursts (hundreds of scans at once, each reading thousands of sockets, starved
/// the proxies and with them the cluster).
pub struct Snapshot {
    /// When the scan began: every connection accepted earlier is in it.
    pub taken: std::time::Instant,
    /// (local, remote) -> socket inode, from `/proc/net/tcp`.
    sockets: std::collections::HashMap<(SocketAddrV4, SocketAddrV4), u64>,
    /// socket inode -> pid, over the given pids' descriptors.
    holders: std::collections::HashMap<u64, u32>,
}

impl Snapshot {
    pub fn take(pids: &[u32]) -> Snapshot {
        let taken = std::time::Instant::now();
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        let mut holders = std::collections::HashMap::new();
        for pid in pids {
            let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                continue;
            };
            for fd in dir.flatten() {
                if let Ok(target) = std::fs::read_link(fd.path()) {
                    let t = target.to_string_lossy();
                    if let Some(inode) = t
                        .strip_prefix("socket:[")
                        .and_then(|r| r.strip_suffix(']'))
                        .and_then(|i| i.parse::<u64>().ok())
                    {
                        holders.insert(inode, *pid);
                    }
                }
            }
        }
        Snapshot::from_parts(taken, &table, holders)
    }

    pub fn from_parts(
        taken: std::time::Instant,
        table: &str,
        holders: std::collections::HashMap<u64, u32>,
    ) -> Snapshot {
        let sockets = table
            .lines()
            .skip(1)
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let l = parse_hex_addr(fields.get(1)?)?;
                let r = parse_hex_addr(fields.get(2)?)?;
                Some(((l, r), fields.get(9)?.parse().ok()?))
            })
            .collect();
        Snapshot {
            taken,
            sockets,
            holders,
        }
    }

    /// The pid that owns the connection from `peer` to our `local` address.
    pub fn owner(&self, peer: SocketAddr, local: SocketAddr) -> Option<u32> {
        let (SocketAddr::V4(peer), SocketAddr::V4(local)) = (peer, local) else {
            return None;
        };
        self.holders.get(self.sockets.get(&(peer, local))?).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 424242 1 0000000000000000 20 4 30 10 -1
   1: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 434343 1 0000000000000000 20 4 30 10 -1";

    #[test]
    fn a_snapshot_maps_a_connection_to_its_holder() {
        let holders = std::collections::HashMap::from([(424242, 77)]);
        let snap = Snapshot::from_parts(std::time::Instant::now(), TABLE, holders);
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(snap.owner(peer, local), Some(77));
        assert_eq!(snap.owner(local, peer), None, "that socket is nobody's");
    }

    #[test]
    fn finds_a_socket_of_this_process() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(local).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert_eq!(
            Snapshot::take(&[std::process::id()]).owner(peer, local),
            Some(std::process::id())
        );
        assert_eq!(Snapshot::take(&[1]).owner(peer, local), None);
    }
}
