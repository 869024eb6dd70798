//! The classic group requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): each goes to the
//! classic coordinator, or to the KIP-848 group that serves classic members (`consumer`).

use runnel_group::{HeartbeatRequest, JoinRequest, JoinResponse, SyncRequest, SyncResponse};
use tokio::sync::oneshot;

use super::*;

impl GroupManager {
    /// JoinGroup: parked in the classic coordinator until the rebalance completes it.
    pub(super) fn join(
        &mut self,
        now: i64,
        req: JoinRequest,
        reply: oneshot::Sender<JoinResponse>,
    ) {
        let p = match self.route(&req.group_id) {
            Ok(p) => p,
            Err(code) => {
                let _ = reply.send(join_error(code, req.member_id));
                return;
            }
        };
        if self.consumer_serves(p, &req.group_id, true) {
            return self.classic_join_to_consumer(p, now, req, reply);
        }
        if let Err(code) = self.classic_join_allowed(p, &req.group_id) {
            let _ = reply.send(join_error(code, req.member_id));
            return;
        }
        let id = self.request_id();
        self.pending.insert(id, Pending::Join(p, reply));
        let outputs = self.coordinator(p).join(now, id, req);
        self.apply_outputs(p, outputs);
    }

    /// SyncGroup: parked until the leader's assignment arrives.
    pub(super) fn sync(
        &mut self,
        now: i64,
        req: SyncRequest,
        reply: oneshot::Sender<SyncResponse>,
    ) {
        let p = match self.route(&req.group_id) {
            Ok(p) => p,
            Err(code) => {
                let _ = reply.send(sync_error(code));
                return;
            }
        };
        if self.consumer_serves(p, &req.group_id, false) {
            return self.classic_sync_to_consumer(p, now, req, reply);
        }
        let id = self.request_id();
        self.pending.insert(id, Pending::Sync(p, reply));
        let outputs = self.coordinator(p).sync(now, id, req);
        self.apply_outputs(p, outputs);
    }

    /// Heartbeat: answered at once.
    pub(super) fn heartbeat(&mut self, now: i64, req: &HeartbeatRequest) -> i16 {
        match self.route(&req.group_id) {
            Ok(p) if self.consumer_serves(p, &req.group_id, false) => {
                self.classic_heartbeat_to_consumer(p, now, req)
            }
            Ok(p) => self.coordinator(p).heartbeat(now, req),
            Err(code) => code,
        }
    }

    /// LeaveGroup: answered once what the departures wrote is replicated.
    pub(super) fn leave(
        &mut self,
        now: i64,
        group_id: String,
        members: Vec<(String, Option<String>)>,
        reply: oneshot::Sender<(i16, Vec<i16>)>,
    ) {
        let p = match self.route(&group_id) {
            Ok(p) => p,
            Err(code) => {
                let _ = reply.send((code, vec![code; members.len()]));
                return;
            }
        };
        if self.consumer_serves(p, &group_id, false) {
            return self.classic_leave_to_consumer(p, now, group_id, members, reply);
        }
        let (code, codes, outputs) = self.coordinator(p).leave(now, &group_id, &members);
        let written = self.apply_outputs(p, outputs);
        self.when_written(
            p,
            written,
            Box::new(move |_| {
                let _ = reply.send((code, codes));
            }),
        );
    }
}
