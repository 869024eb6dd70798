//! Test harness: an image with registered brokers and a controller whose records are
//! committed and whose `on_commit` loop is run to a fixed point, like the broker's shell.

use runnel_metadata::*;
use uuid::Uuid;

pub struct Harness {
    pub image: MetadataImage,
    pub controller: Controller,
    pub now_ms: i64,
}

impl Harness {
    pub fn new(config: ControllerConfig) -> Self {
        Self {
            image: MetadataImage::empty("cluster".into()),
            controller: Controller::new(config, 1, 42),
            now_ms: 1000,
        }
    }

    /// A harness with brokers `ids` registered and unfenced (no racks).
    pub fn with_brokers(ids: &[i32]) -> Self {
        let mut h = Self::new(ControllerConfig::default());
        for &id in ids {
            h.add_broker(id, None, true);
        }
        h
    }

    pub fn add_broker(&mut self, id: i32, rack: Option<&str>, unfence: bool) {
        let recs = self
            .controller
            .register_broker(
                &self.image,
                runnel_metadata::controller::RegisterBroker {
                    broker_id: id,
                    incarnation_id: Uuid::from_u128(id as u128 + 1),
                    host: format!("h{id}"),
                    port: 9092,
                    rack: rack.map(String::from),
                    endpoints: Vec::new(),
                },
            )
            .expect("register");
        self.commit(recs);
        if unfence {
            let recs = self.controller.unfence_broker(&self.image, id);
            self.commit(recs);
        }
    }

    /// Appends records at the next offsets, then runs `on_commit` until it has nothing left.
    pub fn commit(&mut self, records: Vec<MetadataRecord>) {
        let mut batch = records;
        for _ in 0..10 {
            if !batch.is_empty() {
                let start = self.image.offset + 1;
                let with_offsets: Vec<(i64, MetadataRecord)> = batch
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| (start + i as i64, r))
                    .collect();
                self.image = self
                    .image
                    .apply(&with_offsets)
                    .expect("controller records must apply");
            }
            self.now_ms += 1;
            batch = self.controller.on_commit(&self.image, self.now_ms);
            if batch.is_empty() {
                return;
            }
        }
        panic!("on_commit did not reach a fixed point");
    }

    pub fn create(
        &mut self,
        name: &str,
        partitions: i32,
        rf: i16,
    ) -> Result<CreatedTopic, ApiError> {
        let (mut out, recs) =
            self.controller
                .create_topics(&self.image, &[req(name, partitions, rf)], false);
        self.commit(recs);
        out.remove(0).result
    }
}

pub fn req(name: &str, partitions: i32, rf: i16) -> CreateTopicRequest {
    CreateTopicRequest {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: rf,
        ..Default::default()
    }
}

pub fn code<T>(r: &Result<T, ApiError>) -> i16 {
    match r {
        Ok(_) => 0,
        Err(e) => e.code,
    }
}
