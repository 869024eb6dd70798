//! Broker lifecycle (spec I.3) and producer-id blocks: registration (fenced), unfencing,
//! fencing, and `ProducerIds` allocation.

use uuid::Uuid;

use super::Controller;
use crate::errors::ApiError;
use crate::image::MetadataImage;
use crate::records::{BrokerEndpoint, MetadataRecord};

/// Producer ids per block (Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

impl Controller {
    /// BrokerRegistration: a `RegisterBroker` record, fenced, with a broker epoch above every
    /// epoch handed out before (KRaft derives it from the log offset; we use the next offset,
    /// or one more than the last epoch if that is higher).
    ///
    /// Whether the id is free (no other incarnation with a live session) is a session rule:
    /// the shell asks [`super::BrokerSessions::check_registration`] first.
    pub fn register_broker(
        &mut self,
        image: &MetadataImage,
        request: RegisterBroker,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        let RegisterBroker {
            broker_id,
            incarnation_id,
            host,
            port,
            rack,
            endpoints,
        } = request;
        if broker_id < 0 {
            return Err(ApiError::invalid_request(format!(
                "Invalid broker id {broker_id}: must be non-negative."
            )));
        }
        let floor = image.brokers.get(&broker_id).map_or(-1, |b| b.epoch);
        let epoch = (image.offset + 1)
            .max(self.last_broker_epoch + 1)
            .max(floor + 1);
        self.last_broker_epoch = epoch;
        Ok(vec![MetadataRecord::RegisterBroker {
            broker_id,
            incarnation_id,
            broker_epoch: epoch,
            host,
            port,
            rack,
            fenced: true,
            endpoints,
        }])
    }

    /// Unfences a registered, fenced broker (it has caught up with the log); no records if it
    /// is unknown or already unfenced.
    pub fn unfence_broker(&mut self, image: &MetadataImage, broker_id: i32) -> Vec<MetadataRecord> {
        self.set_fenced(image, broker_id, false)
    }

    /// The unfencing a heartbeat of registration `broker_epoch` led to: only if that is still
    /// the broker's current registration and it is still fenced (a heartbeat of an earlier
    /// registration, handled late, never unfences a newer one).
    pub fn unfence_registration(
        &mut self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Vec<MetadataRecord> {
        let current = image
            .brokers
            .get(&broker_id)
            .is_some_and(|b| b.epoch == broker_epoch);
        if !current {
            return Vec::new();
        }
        self.set_fenced(image, broker_id, false)
    }

    /// A broker that completed its controlled shutdown is fenced at once, so its next process
    /// registers without waiting out the session. Only a broker in controlled shutdown may
    /// end its session this way (a live broker is never fenced by its own request).
    pub fn shutdown_complete(
        &mut self,
        image: &MetadataImage,
        broker_id: i32,
    ) -> Vec<MetadataRecord> {
        let in_shutdown = image
            .brokers
            .get(&broker_id)
            .is_some_and(|b| b.in_controlled_shutdown && !b.fenced);
        if !in_shutdown {
            return Vec::new();
        }
        self.set_fenced(image, broker_id, true)
    }

    /// Fences a registered, unfenced broker (its session expired). The leader and ISR changes
    /// follow from [`Controller::on_commit`] once the fencing is committed.
    pub fn fence_broker(&mut self, image: &MetadataImage, broker_id: i32) -> Vec<MetadataRecord> {
        self.set_fenced(image, broker_id, true)
    }

    fn set_fenced(
        &mut self,
        image: &MetadataImage,
        broker_id: i32,
        fenced: bool,
    ) -> Vec<MetadataRecord> {
        match image.brokers.get(&broker_id) {
            Some(b) if b.fenced != fenced => vec![MetadataRecord::BrokerRegistrationChange {
                broker_id,
                broker_epoch: b.epoch,
                fenced: Some(fenced),
                in_controlled_shutdown: None,
            }],
            _ => Vec::new(),
        }
    }

    /// Hands out one block of [`PRODUCER_ID_BLOCK_SIZE`] producer ids starting at the
    /// returned id, with the `ProducerIds` record that moves the next block past them. The
    /// size is fixed as in Kafka's `ProducerIdControlManager` (the request has no count): a
    /// caller cannot make the controller skip the id space. Ids handed out but not yet
    /// committed are remembered, so two calls never overlap. Returns `(-1, [])` once the id
    /// space is exhausted (Kafka reports that as an unknown server error).
    pub fn allocate_producer_ids(
        &mut self,
        image: &MetadataImage,
        broker_id: i32,
    ) -> (i64, Vec<MetadataRecord>) {
        let first = image.next_producer_id.max(self.next_producer_id);
        let Some(next) = first.checked_add(PRODUCER_ID_BLOCK_SIZE) else {
            return (-1, Vec::new());
        };
        self.next_producer_id = next;
        let broker_epoch = image.brokers.get(&broker_id).map_or(-1, |b| b.epoch);
        (
            first,
            vec![MetadataRecord::ProducerIds {
                broker_id,
                broker_epoch,
                next_producer_id: next,
            }],
        )
    }
}

/// The BrokerRegistration operation; the answer is the registration's broker epoch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegisterBroker {
    pub broker_id: i32,
    pub incarnation_id: Uuid,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
    /// Every advertised listener (the request of a broker from before this field has none).
    #[serde(default)]
    pub endpoints: Vec<BrokerEndpoint>,
}

/// Most listeners one registration may carry (the request is bounded before it is stored).
pub const MAX_BROKER_ENDPOINTS: usize = 64;

impl super::ControllerOp for RegisterBroker {
    const NAME: &'static str = "RegisterBroker";
    type Response = i64;

    fn validate(&self) -> Result<(), ApiError> {
        super::op::check_broker_id("broker_id", self.broker_id)?;
        super::op::check_name("host", &self.host)?;
        if self.port == 0 {
            return Err(super::op::bad_field("port", "must be in 1..=65535"));
        }
        if let Some(rack) = &self.rack {
            super::op::check_name("rack", rack)?;
        }
        if self.endpoints.len() > MAX_BROKER_ENDPOINTS {
            return Err(super::op::bad_field(
                "endpoints",
                format!(
                    "{} listeners, at most {MAX_BROKER_ENDPOINTS}",
                    self.endpoints.len()
                ),
            ));
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            super::op::check_name("endpoints.name", &e.name)?;
            super::op::check_name("endpoints.host", &e.host)?;
            if e.port == 0 {
                return Err(super::op::bad_field(
                    "endpoints.port",
                    "must be in 1..=65535",
                ));
            }
            if !(0..=3).contains(&e.security_protocol) {
                return Err(super::op::bad_field(
                    "endpoints.security_protocol",
                    format!("unknown security protocol id {}", e.security_protocol),
                ));
            }
            if self.endpoints[..i].iter().any(|o| o.name == e.name) {
                return Err(super::op::bad_field(
                    "endpoints.name",
                    format!("listener {} is listed twice", e.name),
                ));
            }
        }
        Ok(())
    }

    /// The duplicate guard first (a session rule), then the fenced registration.
    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<i64>, ApiError> {
        ctx.sessions.check_registration(
            ctx.image,
            self.broker_id,
            self.incarnation_id,
            ctx.session_ms,
        )?;
        let records = ctx.controller.register_broker(ctx.image, self.clone())?;
        let broker_epoch = match records.first() {
            Some(MetadataRecord::RegisterBroker { broker_epoch, .. }) => *broker_epoch,
            _ => -1,
        };
        Ok(super::ControllerResult::new(records, broker_epoch))
    }

    /// The new registration's session starts once it is appended (its offset is the one the
    /// broker must catch up to); a single node is caught up
    /// by construction (it is its own metadata log), so it is unfenced at once.
    fn committed(&self, ctx: &mut super::OpContext<'_>, broker_epoch: &i64) -> Vec<MetadataRecord> {
        ctx.sessions.registered(
            self.broker_id,
            self.incarnation_id,
            *broker_epoch,
            ctx.image.offset,
            ctx.session_ms,
        );
        if ctx.single_node {
            ctx.controller.unfence_broker(ctx.image, self.broker_id)
        } else {
            Vec::new()
        }
    }
}

/// One block of [`PRODUCER_ID_BLOCK_SIZE`] producer ids; `count` must be that size (Kafka's
/// request has no count at all). The answer is the block's first id (-1: the id space is
/// exhausted).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AllocateProducerIds {
    pub broker_id: i32,
    pub count: i64,
}

impl super::ControllerOp for AllocateProducerIds {
    const NAME: &'static str = "AllocateProducerIds";
    type Response = i64;

    fn validate(&self) -> Result<(), ApiError> {
        super::op::check_broker_id("broker_id", self.broker_id)?;
        if self.count != PRODUCER_ID_BLOCK_SIZE {
            return Err(super::op::bad_field(
                "count",
                format!(
                    "{}: producer ids come in blocks of {PRODUCER_ID_BLOCK_SIZE}",
                    self.count
                ),
            ));
        }
        Ok(())
    }

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<i64>, ApiError> {
        let (first, records) = ctx
            .controller
            .allocate_producer_ids(ctx.image, self.broker_id);
        Ok(super::ControllerResult::new(records, first))
    }
}

/// The broker finished its controlled shutdown and stopped heartbeating: it is fenced and its
/// session ends now, so its next process registers without waiting for the session timeout
/// (KRaft fences a broker whose controlled shutdown completed).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShutdownComplete {
    pub broker_id: i32,
}

impl super::ControllerOp for ShutdownComplete {
    const NAME: &'static str = "ShutdownComplete";
    type Response = ();

    fn validate(&self) -> Result<(), ApiError> {
        super::op::check_broker_id("broker_id", self.broker_id)
    }

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<()>, ApiError> {
        let records = ctx.controller.shutdown_complete(ctx.image, self.broker_id);
        Ok(super::ControllerResult::new(records, ()))
    }

    fn committed(&self, ctx: &mut super::OpContext<'_>, _: &()) -> Vec<MetadataRecord> {
        ctx.sessions.remove(self.broker_id);
        tracing::info!(
            broker_id = self.broker_id,
            "controlled shutdown complete: broker fenced"
        );
        Vec::new()
    }
}
