//! The simulated network: every message between the controller (node 0), the brokers (nodes
//! 1..=3, node id = broker id) and the client (node 4) goes through here. Each directed link is
//! FIFO (a TCP connection) with a random delay; messages can be dropped, and links can be cut
//! (network partitions) both when a message is sent and when it would arrive.

use std::collections::BTreeMap;
use std::sync::Arc;

use runnel_metadata::replication::{AlterPartitionDecision, AlterPartitionRequest};
use runnel_metadata::MetadataImage;
use runnel_replication::EpochEndOffset;

use super::rng::Rng;

pub const CONTROLLER: usize = 0;
pub const CLIENT: usize = 4;
pub const NODES: usize = 5;

/// One record of the partition: the leader epoch that wrote it and its unique payload (the
/// producer's sequence number). Its offset is its index in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rec {
    pub epoch: i32,
    pub payload: u64,
}

#[derive(Debug, Clone)]
pub enum FetchBody {
    Records { base: i64, recs: Vec<Rec>, hw: i64 },
    Diverging(EpochEndOffset),
    Error(i16),
}

#[derive(Debug, Clone)]
pub enum Msg {
    /// Follower -> leader (Fetch v12+ with the replica id; `last_epoch` -1 = not sent).
    Fetch {
        id: u64,
        replica: i32,
        epoch: i32,
        offset: i64,
        last_epoch: i32,
    },
    FetchResp {
        id: u64,
        body: FetchBody,
    },
    /// Follower -> leader: OffsetForLeaderEpoch for `requested`.
    Ofle {
        id: u64,
        epoch: i32,
        requested: i32,
    },
    OfleResp {
        id: u64,
        body: Result<EpochEndOffset, i16>,
    },
    /// Leader -> controller.
    Alter {
        req: AlterPartitionRequest,
        attempt: u64,
    },
    AlterResp {
        req: AlterPartitionRequest,
        attempt: u64,
        result: Result<AlterPartitionDecision, i16>,
    },
    Register {
        broker: i32,
        incarnation: u64,
    },
    /// The broker epoch and the offset of the registration, or the error code (101
    /// DUPLICATE_BROKER_REGISTRATION while the previous process's session is alive).
    RegisterResp {
        incarnation: u64,
        result: Result<(i64, i64), i16>,
    },
    /// Broker -> controller: controlled shutdown (move my leaderships, then may I stop?).
    Shutdown {
        broker: i32,
        incarnation: u64,
    },
    ShutdownResp {
        incarnation: u64,
        may_stop: bool,
    },
    /// Broker -> controller, as it stops after a controlled shutdown: end my session now
    /// (heartbeats stopped first, as the broker's `end_session`).
    ShutdownComplete {
        broker: i32,
    },
    /// Carries the broker epoch of the registration it keeps alive (a stale one is refused).
    Heartbeat {
        broker: i32,
        broker_epoch: i64,
        metadata_offset: i64,
    },
    /// Controller -> broker: the image (brokers replay the metadata log; a later image
    /// supersedes an earlier one).
    Metadata(Arc<MetadataImage>),
    /// Client -> broker: an acks=all produce.
    Produce {
        id: u64,
        payloads: Vec<u64>,
    },
    ProduceResp {
        id: u64,
        result: Result<i64, i16>,
    },
}

pub struct Envelope {
    pub from: usize,
    pub to: usize,
    pub msg: Msg,
}

/// An active partition: these links are down until `heal_at`.
#[derive(Debug, Clone)]
pub struct Cut {
    pub heal_at: u64,
    pub links: Vec<(usize, usize)>,
}

pub struct Net {
    queue: BTreeMap<(u64, u64), Envelope>,
    seq: u64,
    /// FIFO per directed link and channel (0: requests, 1: the metadata log).
    last_due: [[[u64; 2]; NODES]; NODES],
    pub cuts: Vec<Cut>,
    pub drop_per_10k: u64,
    pub max_delay: u64,
    /// Up to this many extra ticks for images: brokers replay the metadata log on their own
    /// schedule, independently of the controller's RPC answers.
    pub metadata_delay: u64,
    pub sent: u64,
    pub dropped: u64,
}

impl Net {
    pub fn new(drop_per_10k: u64, max_delay: u64, metadata_delay: u64) -> Self {
        Net {
            queue: BTreeMap::new(),
            seq: 0,
            last_due: [[[0; 2]; NODES]; NODES],
            cuts: Vec::new(),
            drop_per_10k,
            max_delay,
            metadata_delay,
            sent: 0,
            dropped: 0,
        }
    }

    pub fn is_cut(&self, a: usize, b: usize) -> bool {
        self.cuts.iter().any(|c| {
            c.links
                .iter()
                .any(|&(x, y)| (x == a && y == b) || (x == b && y == a))
        })
    }

    pub fn send(&mut self, rng: &mut Rng, now: u64, from: usize, to: usize, msg: Msg) {
        self.sent += 1;
        if self.is_cut(from, to) || rng.chance(self.drop_per_10k) {
            self.dropped += 1;
            return;
        }
        let mut delay = rng.range(1, self.max_delay);
        if rng.chance(100) {
            delay += rng.range(5, 40); // an occasional stall
        }
        let channel = usize::from(matches!(msg, Msg::Metadata(_)));
        if channel == 1 {
            delay += rng.range(0, self.metadata_delay);
        }
        let last = &mut self.last_due[from][to][channel];
        let due = (now + delay).max(*last);
        *last = due;
        self.queue
            .insert((due, self.seq), Envelope { from, to, msg });
        self.seq += 1;
    }

    /// The next message due at or before `now`, in (due, send order); `None` if none.
    pub fn pop_due(&mut self, now: u64) -> Option<Envelope> {
        let (&key, _) = self.queue.iter().next()?;
        if key.0 > now {
            return None;
        }
        self.queue.remove(&key)
    }

    /// A node crashed: its connections are gone, and with them what was on the way to it.
    pub fn drop_to(&mut self, node: usize) {
        self.queue.retain(|_, e| e.to != node);
    }

    /// A node crashed: the controller drops the requests of its closed connection that it had
    /// not read yet, so no request of a dead process (a registration, a heartbeat) is handled
    /// after the process is gone.
    pub fn drop_requests_to_controller(&mut self, node: usize) {
        self.queue
            .retain(|_, e| !(e.from == node && e.to == CONTROLLER));
    }
}
