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

/// The inode of the socket whose local address is `peer` and remote address `local`.
pub fn inode_of(table: &str, peer: SocketAddr, local: SocketAddr) -> Option<u64> {
    let (SocketAddr::V4(peer), SocketAddr::V4(local)) = (peer, local) else {
        return None;
    };
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (l, r, inode) = (fields.get(1)?, fields.get(2)?, fields.get(9)?);
        (parse_hex_addr(l)? == peer && parse_hex_addr(r)? == local)
            .then(|| inode.parse().ok())
            .flatten()
    })
}

/// The first of `pids` holding socket `inode` open.
pub fn pid_holding(inode: u64, pids: &[u32]) -> Option<u32> {
    let needle = format!("socket:[{inode}]");
    pids.iter().copied().find(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|dir| {
                dir.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .map(|target| target.as_os_str() == needle.as_str())
                        .unwrap_or(false)
                })
            })
            .unwrap_or(false)
    })
}

/// The pid (among `pids`) that owns the connection from `peer` to our `local` address.
pub fn owner(peer: SocketAddr, local: SocketAddr, pids: &[u32]) -> Option<u32> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    pid_holding(inode_of(&table, peer, local)?, pids)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 424242 1 0000000000000000 20 4 30 10 -1
   1: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 434343 1 0000000000000000 20 4 30 10 -1";

    #[test]
    fn finds_the_peer_side_of_a_connection() {
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let proxy: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(inode_of(TABLE, peer, proxy), Some(424242));
        assert_eq!(inode_of(TABLE, proxy, peer), Some(434343));
    }

    #[test]
    fn finds_a_socket_of_this_process() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(local).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert_eq!(
            owner(peer, local, &[std::process::id()]),
            Some(std::process::id())
        );
        assert_eq!(owner(peer, local, &[1]), None);
    }
}
