//! Broker sessions (Kafka's `BrokerHeartbeatManager`): liveness, expiry, unfencing and the
//! duplicate-registration guard, as pure rules with the time as an argument.
//!
//! The shell stamps every heartbeat with the time it was *received*, before it waits behind
//! anything, and asks [`BrokerSessions::expired`] with the current time: a commit that takes a
//! minute can delay the answer to a heartbeat but never makes a healthy broker look dead.
//! Times are milliseconds on a monotonic clock chosen by the caller.
//!
//! A session is tied to one registration (broker epoch and incarnation). A fresh active
//! controller (after a failover) knows the registrations from the image but not when each
//! broker was last heard from: [`BrokerSessions::activate`] gives every unfenced broker a full
//! session from the controller's start (KRaft does the same), so a live broker is neither
//! fenced at once nor can its id be taken over by a second process while it heartbeats.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::errors::ApiError;
use crate::image::MetadataImage;

/// One broker's live session.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Session {
    incarnation: Uuid,
    epoch: i64,
    /// When the last valid heartbeat (or the registration) was received.
    last_heard_ms: i64,
    /// Offset of the broker's registration record, when this controller wrote it: a fenced
    /// broker is unfenced once its metadata offset reached it (-1: any offset will do).
    registered_at: i64,
}

/// What a valid heartbeat leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatOutcome {
    /// The broker is fenced in the image.
    pub fenced: bool,
    /// The broker is fenced and has caught up: the shell should commit its unfencing.
    pub unfence: bool,
}

/// The live sessions the active controller tracks.
#[derive(Debug, Clone)]
pub struct BrokerSessions {
    timeout_ms: i64,
    sessions: BTreeMap<i32, Session>,
}

impl BrokerSessions {
    /// No sessions (`broker.session.timeout.ms` = `timeout_ms`).
    pub fn new(timeout_ms: i64) -> Self {
        Self {
            timeout_ms: timeout_ms.max(1),
            sessions: BTreeMap::new(),
        }
    }

    /// A controller that just became active: every unfenced registered broker gets a full
    /// session from `now_ms`.
    pub fn activate(image: &MetadataImage, timeout_ms: i64, now_ms: i64) -> Self {
        let mut sessions = Self::new(timeout_ms);
        for b in image.brokers.values().filter(|b| !b.fenced) {
            sessions.sessions.insert(
                b.id,
                Session {
                    incarnation: b.incarnation_id,
                    epoch: b.epoch,
                    last_heard_ms: now_ms,
                    registered_at: -1,
                },
            );
        }
        sessions
    }

    fn alive(&self, s: &Session, now_ms: i64) -> bool {
        now_ms.saturating_sub(s.last_heard_ms) <= self.timeout_ms
    }

    /// Whether `broker_id` has a live session for its current registration in `image`.
    pub fn has_live_session(&self, image: &MetadataImage, broker_id: i32, now_ms: i64) -> bool {
        let Some(b) = image.brokers.get(&broker_id) else {
            return false;
        };
        self.sessions
            .get(&broker_id)
            .is_some_and(|s| s.epoch == b.epoch && self.alive(s, now_ms))
    }

    /// KRaft's duplicate guard: a registration of `broker_id` with another incarnation is
    /// refused with DUPLICATE_BROKER_REGISTRATION (101) while the registered one has a live
    /// session. The same incarnation (a retry) may always register again.
    pub fn check_registration(
        &self,
        image: &MetadataImage,
        broker_id: i32,
        incarnation: Uuid,
        now_ms: i64,
    ) -> Result<(), ApiError> {
        let Some(existing) = image.brokers.get(&broker_id) else {
            return Ok(());
        };
        if existing.incarnation_id != incarnation && self.has_live_session(image, broker_id, now_ms)
        {
            return Err(ApiError::duplicate_broker_registration(format!(
                "Another broker is registered with broker id {broker_id} and its session is alive."
            )));
        }
        Ok(())
    }

    /// A registration was committed: the new incarnation's session starts now.
    pub fn registered(
        &mut self,
        broker_id: i32,
        incarnation: Uuid,
        epoch: i64,
        registered_at: i64,
        now_ms: i64,
    ) {
        self.sessions.insert(
            broker_id,
            Session {
                incarnation,
                epoch,
                last_heard_ms: now_ms,
                registered_at,
            },
        );
    }

    /// A heartbeat received at `received_ms` from `broker_id` with `broker_epoch`, reporting
    /// that it applied metadata up to `metadata_offset`. Unknown broker: 102; an epoch other
    /// than the registered one (an older or newer process of that id): STALE_BROKER_EPOCH
    /// (77). A valid heartbeat renews the session, also of a fenced broker.
    pub fn heartbeat(
        &mut self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
        metadata_offset: i64,
        received_ms: i64,
    ) -> Result<HeartbeatOutcome, ApiError> {
        let Some(b) = image.brokers.get(&broker_id) else {
            return Err(ApiError::broker_id_not_registered(format!(
                "Broker {broker_id} is not registered."
            )));
        };
        if b.epoch != broker_epoch {
            return Err(ApiError::stale_broker_epoch(format!(
                "Expected broker epoch {} for broker {broker_id}, got {broker_epoch}.",
                b.epoch
            )));
        }
        let session = self.sessions.entry(broker_id).or_insert(Session {
            incarnation: b.incarnation_id,
            epoch: b.epoch,
            last_heard_ms: received_ms,
            registered_at: -1,
        });
        if session.epoch != b.epoch {
            // The image moved on (a re-registration committed by another controller term).
            *session = Session {
                incarnation: b.incarnation_id,
                epoch: b.epoch,
                last_heard_ms: received_ms,
                registered_at: -1,
            };
        }
        // Heartbeats may be handled out of order: the session only moves forward.
        session.last_heard_ms = session.last_heard_ms.max(received_ms);
        let unfence = b.fenced && metadata_offset >= session.registered_at;
        Ok(HeartbeatOutcome {
            fenced: b.fenced,
            unfence,
        })
    }

    /// Unfenced brokers whose session expired at `now_ms` (no valid heartbeat for longer than
    /// the timeout, or no session at all), by id.
    pub fn expired(&self, image: &MetadataImage, now_ms: i64) -> Vec<i32> {
        image
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .filter(|b| !self.has_live_session(image, b.id, now_ms))
            .map(|b| b.id)
            .collect()
    }

    /// The session ends (fenced, or the controlled shutdown completed).
    pub fn remove(&mut self, broker_id: i32) {
        self.sessions.remove(&broker_id);
    }
}

/// The BrokerHeartbeat operation; the answer is whether the broker is still fenced. It is
/// answered from the sessions at once ([`super::ControllerOp::answer_early`]) while the
/// controller is active; only the unfencing it leads to is queued (nobody waits for it: the
/// next heartbeat sees it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerHeartbeat {
    pub broker_id: i32,
    /// The epoch of the registration this process holds: another one is STALE_BROKER_EPOCH,
    /// so an old process never keeps a new one's session alive.
    pub broker_epoch: i64,
    pub metadata_offset: i64,
    /// KIP-858's offline log dirs (`BrokerHeartbeatRequest.OfflineLogDirs`), each with the
    /// replicas it held (`super::offline_dirs`); a broker sends them in every heartbeat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offline_dirs: Vec<super::offline_dirs::OfflineDir>,
}

impl BrokerHeartbeat {
    /// The records this valid heartbeat leads to: the unfencing of a caught-up broker and
    /// the first report of an offline dir.
    fn records(
        &self,
        controller: &mut super::Controller,
        image: &MetadataImage,
        outcome: HeartbeatOutcome,
    ) -> Vec<crate::records::MetadataRecord> {
        let mut records = if outcome.unfence {
            controller.unfence_registration(image, self.broker_id, self.broker_epoch)
        } else {
            Vec::new()
        };
        let offline = super::offline_dirs::dirs_offline(
            image,
            self.broker_id,
            self.broker_epoch,
            &self.offline_dirs,
        );
        if let Some(record) = offline {
            tracing::warn!(
                broker_id = self.broker_id,
                ?record,
                "log dirs marked offline"
            );
            records.push(record);
        }
        records
    }
}

impl super::ControllerOp for BrokerHeartbeat {
    const NAME: &'static str = "BrokerHeartbeat";
    type Response = bool;

    fn validate(&self) -> Result<(), ApiError> {
        super::op::check_broker_id("broker_id", self.broker_id)?;
        if self.broker_epoch < 0 {
            return Err(super::op::bad_field("broker_epoch", "negative"));
        }
        if self.metadata_offset < -1 {
            return Err(super::op::bad_field("metadata_offset", "below -1"));
        }
        super::offline_dirs::validate(&self.offline_dirs)
    }

    /// The session rule with the time the heartbeat was received, then the unfencing of a
    /// broker that caught up with the metadata log up to its registration (spec I.3) and the
    /// dirs it reports offline for the first time (KIP-858).
    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<bool>, ApiError> {
        let outcome = ctx.sessions.heartbeat(
            ctx.image,
            self.broker_id,
            self.broker_epoch,
            self.metadata_offset,
            ctx.received_ms,
        )?;
        let records = self.records(ctx.controller, ctx.image, outcome);
        if records.is_empty() {
            return Ok(super::ControllerResult::answer(outcome.fenced));
        }
        let fenced = outcome.fenced && !outcome.unfence;
        Ok(super::ControllerResult::new(records, fenced))
    }

    fn answer_early(
        &self,
        sessions: &mut BrokerSessions,
        image: &MetadataImage,
        received_ms: i64,
    ) -> Option<Result<super::EarlyAnswer<bool>, ApiError>> {
        Some(
            sessions
                .heartbeat(
                    image,
                    self.broker_id,
                    self.broker_epoch,
                    self.metadata_offset,
                    received_ms,
                )
                .map(|o| super::EarlyAnswer {
                    response: o.fenced,
                    then_queue: o.unfence
                        || super::offline_dirs::dirs_offline(
                            image,
                            self.broker_id,
                            self.broker_epoch,
                            &self.offline_dirs,
                        )
                        .is_some(),
                }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::MetadataRecord;

    const TIMEOUT: i64 = 9_000;

    fn image_with(brokers: &[(i32, i64, bool)]) -> MetadataImage {
        let records: Vec<(i64, MetadataRecord)> = brokers
            .iter()
            .enumerate()
            .map(|(i, &(id, epoch, fenced))| {
                (
                    i as i64,
                    MetadataRecord::RegisterBroker {
                        broker_id: id,
                        incarnation_id: Uuid::from_u128(id as u128 + 1),
                        broker_epoch: epoch,
                        host: "h".into(),
                        port: 9092,
                        rack: None,
                        fenced,
                        endpoints: Vec::new(),
                    },
                )
            })
            .collect();
        MetadataImage::empty("c".into()).apply(&records).unwrap()
    }

    /// Caught: heartbeats were stamped when the controller task got round to them, after any
    /// queued commit (up to 30 s + 30 s), so expiry could fence a broker whose heartbeats were
    /// waiting. Here the stamp is the receive time, whenever it is handled.
    #[test]
    fn a_heartbeat_counts_from_when_it_was_received_even_if_handled_late() {
        let image = image_with(&[(1, 10, false)]);
        let mut s = BrokerSessions::activate(&image, TIMEOUT, 0);
        // Received at 8 s, handled (after a stalled commit) at 60 s.
        s.heartbeat(&image, 1, 10, 0, 8_000).unwrap();
        assert!(s.expired(&image, 8_000 + TIMEOUT).is_empty());
        assert_eq!(s.expired(&image, 8_000 + TIMEOUT + 1), vec![1]);
        // An older stamp handled after a newer one does not move the session back.
        s.heartbeat(&image, 1, 10, 0, 20_000).unwrap();
        s.heartbeat(&image, 1, 10, 0, 15_000).unwrap();
        assert!(s.expired(&image, 20_000 + TIMEOUT).is_empty());
    }

    /// Caught: a fresh controller (failover) started with no sessions and fenced nobody, but
    /// also forgot who was alive, so a second process could take a live broker's id.
    #[test]
    fn a_fresh_controller_gives_live_brokers_a_full_session_and_keeps_the_duplicate_guard() {
        let image = image_with(&[(1, 10, false), (2, 11, true)]);
        let s = BrokerSessions::activate(&image, TIMEOUT, 1_000);
        assert!(s.expired(&image, 1_000 + TIMEOUT).is_empty());
        assert_eq!(s.expired(&image, 1_001 + TIMEOUT), vec![1]);
        let other = Uuid::from_u128(99);
        let e = s.check_registration(&image, 1, other, 2_000).unwrap_err();
        assert_eq!(e.code, crate::codes::DUPLICATE_BROKER_REGISTRATION);
        // The same incarnation may retry; a fenced broker's id is free; so is an expired one.
        s.check_registration(&image, 1, Uuid::from_u128(2), 2_000)
            .unwrap();
        s.check_registration(&image, 2, other, 2_000).unwrap();
        s.check_registration(&image, 1, other, 1_001 + TIMEOUT)
            .unwrap();
        s.check_registration(&image, 7, other, 0).unwrap();
    }

    /// Caught: heartbeats carried no broker epoch, so an old process of a broker id kept the
    /// new registration's session alive.
    #[test]
    fn a_heartbeat_with_another_epoch_is_stale_and_does_not_renew() {
        let image = image_with(&[(1, 10, false)]);
        let mut s = BrokerSessions::activate(&image, TIMEOUT, 0);
        let e = s.heartbeat(&image, 1, 9, 0, 5_000).unwrap_err();
        assert_eq!(e.code, crate::codes::STALE_BROKER_EPOCH);
        assert_eq!(s.expired(&image, TIMEOUT + 1), vec![1]);
        let e = s.heartbeat(&image, 3, 9, 0, 5_000).unwrap_err();
        assert_eq!(e.code, crate::codes::BROKER_ID_NOT_REGISTERED);
    }

    #[test]
    fn a_fenced_broker_is_unfenced_once_caught_up_with_its_registration() {
        let image = image_with(&[(1, 10, true)]);
        let mut s = BrokerSessions::new(TIMEOUT);
        s.registered(1, Uuid::from_u128(2), 10, 42, 0);
        let o = s.heartbeat(&image, 1, 10, 41, 100).unwrap();
        assert_eq!((o.fenced, o.unfence), (true, false));
        let o = s.heartbeat(&image, 1, 10, 42, 200).unwrap();
        assert_eq!((o.fenced, o.unfence), (true, true));
        // Fenced brokers never expire again.
        assert!(s.expired(&image, 1_000_000).is_empty());
        s.remove(1);
        assert!(!s.has_live_session(&image, 1, 200));
    }
}
