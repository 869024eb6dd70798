//! The bounded state-change log (Kafka's `state-change.log`), kept in memory so the broker
//! can expose it and tests can assert on it.

use std::collections::VecDeque;

use crate::state_machine::StateChangeEvent;

#[derive(Debug)]
pub(super) struct EventLog {
    events: VecDeque<StateChangeEvent>,
    max: usize,
    pub(super) epoch: i32,
    /// Events ever pushed: the sequence number of the next one (readers poll with it).
    pushed: u64,
}

pub(super) struct EventInput<'a> {
    pub(super) now_ms: i64,
    pub(super) topic: &'a str,
    pub(super) partition: i32,
    pub(super) replica: Option<i32>,
    pub(super) from: &'a str,
    pub(super) to: &'a str,
    pub(super) detail: String,
}

impl EventLog {
    pub(super) fn new(max: usize, epoch: i32) -> Self {
        Self {
            events: VecDeque::with_capacity(max.min(1024)),
            max,
            epoch,
            pushed: 0,
        }
    }

    pub(super) fn push(&mut self, e: EventInput<'_>) {
        tracing::debug!(
            controller_epoch = self.epoch,
            topic = e.topic,
            partition = e.partition,
            replica = ?e.replica,
            from = e.from,
            to = e.to,
            detail = %e.detail,
            "state change"
        );
        self.pushed += 1;
        if self.max == 0 {
            return;
        }
        while self.events.len() >= self.max {
            self.events.pop_front();
        }
        self.events.push_back(StateChangeEvent {
            time_ms: e.now_ms,
            controller_epoch: self.epoch,
            topic: e.topic.to_string(),
            partition: e.partition,
            replica: e.replica,
            from: e.from.to_string(),
            to: e.to.to_string(),
            detail: e.detail,
        });
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &StateChangeEvent> {
        self.events.iter()
    }

    /// Events with sequence number >= `since` still in the ring, and the next sequence number.
    pub(super) fn since(&self, since: u64) -> (Vec<(u64, StateChangeEvent)>, u64) {
        let first = self.pushed - self.events.len() as u64;
        let events = self
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| (first + i as u64, e))
            .filter(|(seq, _)| *seq >= since)
            .map(|(seq, e)| (seq, e.clone()))
            .collect();
        (events, self.pushed)
    }
}

/// The state-change events numbered from `since` on, with the next number (read only).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Events {
    pub since: u64,
}

impl super::ControllerOp for Events {
    const NAME: &'static str = "Events";
    type Response = (Vec<(u64, StateChangeEvent)>, u64);

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<Self::Response>, crate::ApiError> {
        Ok(super::ControllerResult::answer(
            ctx.controller.events_since(self.since),
        ))
    }
}
