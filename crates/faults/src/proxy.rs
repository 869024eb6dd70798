//! The fault network: one listening proxy per node and listener (Kafka, controller quorum),
//! and a state per directed link `src -> dst` and listener (src 0 = a workload client, the
//! harness itself). Nemeses cut both listeners; the self-test cuts only the Kafka listener
//! (replication) to shrink an ISR while the controller stays reachable.
//!
//! One-way semantics: link A -> B is the set of TCP connections A opens to B. Cutting it
//! drops (RST) those connections and refuses new ones, in both byte directions, because a
//! request whose response cannot come back is no request; connections B opens to A are not
//! affected. Kafka and Raft traffic is request/response over the initiator's connection, so
//! "A cannot reach B" is exactly a cut A -> B. Blackhole: connections are accepted and held,
//! bytes read and discarded, nothing forwarded (a peer that hangs, not one that refuses).
//! Latency: every chunk is delayed before it is forwarded. Reset: live connections get an RST,
//! new ones pass.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::owner;

/// What a directed link does to its connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Open,
    Cut,
    Blackhole,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkState {
    pub mode: Mode,
    pub latency_ms: u64,
    /// Bumped by a reset; connections opened under an older value are reset.
    pub resets: u64,
}

/// Which of a node's listeners a proxy stands in front of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Listener {
    /// Clients and follower fetches.
    Kafka,
    /// Raft and the controller RPCs (heartbeats, AlterPartition, forwarding).
    Controller,
}

pub const LISTENERS: [Listener; 2] = [Listener::Kafka, Listener::Controller];

type Link = (i32, i32, Listener);

/// The shared link table and the pid -> node map the proxies identify peers with.
#[derive(Default)]
pub struct Network {
    links: Mutex<HashMap<Link, LinkState>>,
    pids: Mutex<Vec<(u32, i32)>>,
    /// The latest owner scan, shared by the connections accepted before it began.
    snapshot: tokio::sync::Mutex<Option<Arc<owner::Snapshot>>>,
    changed: Mutex<Option<watch::Sender<u64>>>,
}

impl Network {
    pub fn new() -> Arc<Self> {
        let (tx, _) = watch::channel(0);
        let net = Self::default();
        *net.changed.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        Arc::new(net)
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        let guard = self.changed.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(tx) => tx.subscribe(),
            None => watch::channel(0).1,
        }
    }

    fn notify(&self) {
        if let Some(tx) = self
            .changed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            tx.send_modify(|v| *v += 1);
        }
    }

    pub fn state(&self, link: Link) -> LinkState {
        self.links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&link)
            .copied()
            .unwrap_or_default()
    }

    pub fn update(&self, link: Link, f: impl FnOnce(&mut LinkState)) {
        f(self
            .links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(link)
            .or_default());
        self.notify();
    }

    /// Cuts `a -> b` and `b -> a` on both listeners.
    pub fn cut_pair(&self, a: i32, b: i32) {
        for l in LISTENERS {
            self.update((a, b, l), |s| s.mode = Mode::Cut);
            self.update((b, a, l), |s| s.mode = Mode::Cut);
        }
    }

    /// Every link back to open, no latency (resets are kept: they only count).
    pub fn heal(&self) {
        for state in self
            .links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values_mut()
        {
            state.mode = Mode::Open;
            state.latency_ms = 0;
        }
        self.notify();
    }

    pub fn set_pid(&self, node: i32, pid: Option<u32>) {
        let mut pids = self.pids.lock().unwrap_or_else(|p| p.into_inner());
        pids.retain(|(_, n)| *n != node);
        if let Some(pid) = pid {
            pids.push((pid, node));
        }
    }

    /// The node that opened a connection accepted at `accepted` (0: not a broker). One scan
    /// at a time; a scan that began after the accept answers it.
    async fn source_of(&self, peer: SocketAddr, local: SocketAddr, accepted: Instant) -> i32 {
        let pids = self.pids.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let snapshot = {
            let mut latest = self.snapshot.lock().await;
            match &*latest {
                Some(s) if s.taken >= accepted => s.clone(),
                _ => {
                    let candidates: Vec<u32> = pids.iter().map(|(p, _)| *p).collect();
                    // The scan reads files: keep it off the reactor threads.
                    let taken =
                        tokio::task::spawn_blocking(move || owner::Snapshot::take(&candidates))
                            .await;
                    let Ok(s) = taken else {
                        return 0;
                    };
                    let s = Arc::new(s);
                    *latest = Some(s.clone());
                    s
                }
            }
        };
        snapshot
            .owner(peer, local)
            .and_then(|pid| pids.iter().find(|(p, _)| *p == pid).map(|(_, n)| *n))
            .unwrap_or(0)
    }
}

/// Listens on `listen` and forwards to `target` (node `dst`'s real port) under the link rules.
pub async fn serve(
    net: Arc<Network>,
    dst: i32,
    listener: Listener,
    listen: TcpListener,
    target: SocketAddr,
) {
    let local = match listen.local_addr() {
        Ok(a) => a,
        Err(_) => return,
    };
    loop {
        let Ok((inbound, peer)) = listen.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let accepted = Instant::now();
        let net = net.clone();
        tokio::spawn(async move {
            let src = net.source_of(peer, local, accepted).await;
            connection(net, (src, dst, listener), inbound, target).await;
        });
    }
}

/// SO_LINGER 0: closing the socket sends an RST (a zero linger never blocks the close).
fn reset(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let size = libc::socklen_t::try_from(std::mem::size_of::<libc::linger>()).unwrap_or(8);
    // SAFETY: setsockopt on a socket fd we own, with a correctly sized `linger`.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::addr_of!(linger).cast(),
            size,
        );
    }
}

async fn connection(net: Arc<Network>, link: Link, mut inbound: TcpStream, target: SocketAddr) {
    let _ = inbound.set_nodelay(true);
    let opened = net.state(link);
    match opened.mode {
        Mode::Cut => return reset(&inbound),
        Mode::Blackhole => return swallow(&net, link, inbound).await,
        Mode::Open => {}
    }
    let Ok(mut outbound) = TcpStream::connect(target).await else {
        return reset(&inbound);
    };
    let _ = outbound.set_nodelay(true);
    let mut changes = net.subscribe();
    let cut = {
        let (ri, wi) = inbound.split();
        let (ro, wo) = outbound.split();
        let forward = async {
            tokio::join!(pump(&net, link, ri, wo), pump(&net, link, ro, wi));
        };
        let watch = async {
            loop {
                if changes.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
                let now = net.state(link);
                if now.mode == Mode::Cut || now.resets != opened.resets {
                    return;
                }
            }
        };
        tokio::select! {
            () = forward => false,
            () = watch => true,
        }
    };
    if cut {
        reset(&inbound);
        reset(&outbound);
    }
}

/// Copies one direction; a blackholed link discards, a slow one delays each chunk.
async fn pump<R, W>(net: &Network, link: Link, mut from: R, mut to: W)
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let state = net.state(link);
        if state.mode == Mode::Blackhole {
            continue;
        }
        if state.latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(state.latency_ms)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// A blackholed connection: read and discard until the link is open again (then reset, so
/// the peer reconnects) or the peer gives up.
async fn swallow(net: &Network, link: Link, mut inbound: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut changes = net.subscribe();
    loop {
        tokio::select! {
            r = inbound.read(&mut buf) => if matches!(r, Ok(0) | Err(_)) { return },
            c = changes.changed() => {
                if c.is_err() || net.state(link).mode != Mode::Blackhole {
                    return reset(&inbound);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 1024];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn proxy(net: &Arc<Network>, target: SocketAddr) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(serve(net.clone(), 1, Listener::Kafka, l, target));
        addr
    }

    /// How long a forwarded echo may take: generous, because a loaded test machine (2 cores
    /// shared with other test binaries) can stall a task for seconds; success ends the wait at once.
    const ANSWER: Duration = Duration::from_secs(15);
    /// How long a link that must not answer is watched before the test calls it silent.
    const SILENCE: Duration = Duration::from_millis(500);

    async fn roundtrip(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
        roundtrip_within(s, ANSWER).await
    }

    async fn roundtrip_within(s: &mut TcpStream, wait: Duration) -> std::io::Result<Vec<u8>> {
        s.write_all(b"ping").await?;
        let mut b = [0u8; 4];
        tokio::time::timeout(wait, s.read_exact(&mut b))
            .await
            .map_err(|_| std::io::Error::other("timed out"))??;
        Ok(b.to_vec())
    }

    #[tokio::test]
    async fn an_open_link_forwards_and_a_cut_resets_live_and_new_connections() {
        let net = Network::new();
        let addr = proxy(&net, echo_server().await).await;
        let mut s = TcpStream::connect(addr).await.unwrap();
        assert_eq!(roundtrip(&mut s).await.unwrap(), b"ping");
        // This process is no broker, so its connections are the client link 0 -> 1.
        net.update((0, 1, Listener::Kafka), |l| l.mode = Mode::Cut);
        assert!(roundtrip_within(&mut s, SILENCE).await.is_err());
        let mut again = TcpStream::connect(addr).await.unwrap();
        assert!(roundtrip_within(&mut again, SILENCE).await.is_err());
        net.heal();
        let mut healed = TcpStream::connect(addr).await.unwrap();
        assert_eq!(roundtrip(&mut healed).await.unwrap(), b"ping");
    }

    #[tokio::test]
    async fn a_blackhole_accepts_and_never_answers_and_other_links_are_untouched() {
        let net = Network::new();
        let addr = proxy(&net, echo_server().await).await;
        net.update((2, 1, Listener::Kafka), |l| l.mode = Mode::Cut);
        let mut s = TcpStream::connect(addr).await.unwrap();
        assert_eq!(
            roundtrip(&mut s).await.unwrap(),
            b"ping",
            "link 2 -> 1 is not ours"
        );
        net.update((0, 1, Listener::Controller), |l| l.mode = Mode::Cut);
        let mut other = TcpStream::connect(addr).await.unwrap();
        assert_eq!(
            roundtrip(&mut other).await.unwrap(),
            b"ping",
            "another listener"
        );
        net.update((0, 1, Listener::Kafka), |l| l.mode = Mode::Blackhole);
        let mut held = TcpStream::connect(addr).await.unwrap();
        assert!(
            roundtrip_within(&mut held, SILENCE).await.is_err(),
            "accepted, never answered"
        );
    }
}
