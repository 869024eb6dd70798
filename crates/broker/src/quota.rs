//! Client quota enforcement (KIP-13, KIP-219): the byte-rate sensors of this broker and the
//! throttle a request earns. Which quota applies and the rate arithmetic are pure
//! (`runnel_metadata::quota`); this module keeps the sensors and reads the clock.
//!
//! A throttled response carries `throttle_time_ms`; the server then mutes the connection (reads
//! nothing from it) for that time. Clients that throttle themselves (Produce v6+, Fetch v8+,
//! KIP-219) get the response at once; older ones get it after the throttle time, as Kafka does.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kafka_protocol::messages::FetchResponse;
use kafka_protocol::protocol::Encodable;
use runnel_metadata::quota::rate::{Rate, RateConfig};
use runnel_metadata::quota::{self, SensorKey};
use runnel_metadata::MetadataImage;

use crate::context::{Broker, RequestContext};

/// The byte-rate quotas a broker enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaType {
    Produce,
    Fetch,
}

impl QuotaType {
    fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => quota::PRODUCER_BYTE_RATE,
            QuotaType::Fetch => quota::CONSUMER_BYTE_RATE,
        }
    }
}

/// How long the server mutes a connection after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    pub time: Duration,
    /// KIP-219: the client throttles itself, so the response goes out first; `false`: the
    /// response is held for the throttle time.
    pub response_first: bool,
}

/// Sensors left alone this long measure zero and are dropped (at most once a second).
struct Sensor {
    rate: Rate,
    last_ms: i64,
}

pub struct QuotaManager {
    config: RateConfig,
    epoch: Instant,
    sensors: Mutex<Sensors>,
}

#[derive(Default)]
struct Sensors {
    by_key: HashMap<(QuotaType, SensorKey), Sensor>,
    last_sweep_ms: i64,
}

impl QuotaManager {
    /// `quota.window.num` and `quota.window.size.seconds`.
    pub fn new(window_num: i64, window_size_seconds: i64) -> Self {
        QuotaManager {
            config: RateConfig::new(window_num, window_size_seconds),
            epoch: Instant::now(),
            sensors: Mutex::new(Sensors::default()),
        }
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// Records `bytes` for the connection of `user` with `client_id`: the throttle time in ms
    /// (0 when no quota applies or the rate is within it).
    pub fn record(
        &self,
        image: &MetadataImage,
        kind: QuotaType,
        user: &str,
        client_id: &str,
        bytes: usize,
    ) -> i32 {
        let Some((bound, sensor)) =
            quota::applicable_quota(&image.client_quotas, user, client_id, kind.key())
        else {
            return 0;
        };
        let now = self.now_ms();
        let config = self.config;
        let mut sensors = self.sensors.lock().unwrap_or_else(|e| e.into_inner());
        sensors.sweep(config, now);
        let entry = sensors
            .by_key
            .entry((kind, sensor))
            .or_insert_with(|| Sensor {
                rate: Rate::new(),
                last_ms: now,
            });
        entry.last_ms = now;
        entry
            .rate
            .record_and_throttle_ms(config, bytes as f64, bound, now)
    }

    /// Takes back bytes recorded for a response that was not sent (a throttled Fetch answers
    /// empty, as Kafka's `unrecordQuotaSensor`).
    pub fn unrecord(
        &self,
        image: &MetadataImage,
        kind: QuotaType,
        user: &str,
        client_id: &str,
        bytes: usize,
    ) {
        let Some((_, sensor)) =
            quota::applicable_quota(&image.client_quotas, user, client_id, kind.key())
        else {
            return;
        };
        let now = self.now_ms();
        let mut sensors = self.sensors.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = sensors.by_key.get_mut(&(kind, sensor)) {
            s.rate.record(self.config, -(bytes as f64), now);
        }
    }
}

impl Sensors {
    fn sweep(&mut self, config: RateConfig, now: i64) {
        if now.saturating_sub(self.last_sweep_ms) < 1000 {
            return;
        }
        self.last_sweep_ms = now;
        let idle = config
            .window_ms
            .saturating_mul(i64::try_from(config.samples).unwrap_or(i64::MAX));
        self.by_key
            .retain(|_, s| now.saturating_sub(s.last_ms) < idle);
    }
}

/// The throttle of a Produce request of `request_bytes` (Kafka records the request's size).
pub fn produce_throttle(broker: &Broker, ctx: &RequestContext, request_bytes: usize) -> i32 {
    broker.quotas.record(
        &broker.image(),
        QuotaType::Produce,
        &ctx.principal.name,
        &ctx.client_id,
        request_bytes,
    )
}

/// Records a consumer Fetch response's size; when that exceeds the quota, takes it back and
/// empties the response (Kafka's `getThrottledResponse`: same session, no partitions) and sets
/// its `throttle_time_ms`. Returns the throttle time.
pub fn fetch_throttle(
    broker: &Broker,
    ctx: &RequestContext,
    response: &mut FetchResponse,
    version: i16,
) -> i32 {
    let image = broker.image();
    if quota::applicable_quota(
        &image.client_quotas,
        &ctx.principal.name,
        &ctx.client_id,
        quota::CONSUMER_BYTE_RATE,
    )
    .is_none()
    {
        return 0;
    }
    let bytes = response.compute_size(version).unwrap_or(0);
    let (user, client) = (&ctx.principal.name, &ctx.client_id);
    let throttle_ms = broker
        .quotas
        .record(&image, QuotaType::Fetch, user, client, bytes);
    if throttle_ms > 0 {
        broker
            .quotas
            .unrecord(&image, QuotaType::Fetch, user, client, bytes);
        response.responses.clear();
        response.throttle_time_ms = response.throttle_time_ms.max(throttle_ms);
    }
    throttle_ms
}

/// The throttle to apply for a response of `api` at `version` (Produce v6+ and Fetch v8+ are
/// the versions whose clients throttle themselves, KIP-219).
pub fn throttle_for(throttle_ms: i32, response_first: bool) -> Option<Throttle> {
    let ms = u64::try_from(throttle_ms).ok().filter(|ms| *ms > 0)?;
    Some(Throttle {
        time: Duration::from_millis(ms),
        response_first,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_metadata::quota::{replay, EntityName, QuotaEntity};

    #[test]
    fn only_connections_under_a_quota_get_sensors_and_throttles() {
        let mut image = MetadataImage::empty("c".into());
        replay(
            &mut image.client_quotas,
            &QuotaEntity::client(EntityName::Named("slow".into())),
            quota::PRODUCER_BYTE_RATE,
            Some(1000.0),
        );
        let q = QuotaManager::new(11, 1);
        assert_eq!(
            q.record(&image, QuotaType::Produce, "ANONYMOUS", "fast", 1 << 30),
            0
        );
        assert_eq!(
            q.record(&image, QuotaType::Fetch, "ANONYMOUS", "slow", 1 << 30),
            0
        );
        assert!(q.record(&image, QuotaType::Produce, "ANONYMOUS", "slow", 100_000) > 0);
        assert_eq!(q.sensors.lock().unwrap().by_key.len(), 1);
        assert_eq!(throttle_for(0, true), None);
        assert_eq!(
            throttle_for(5, false),
            Some(Throttle {
                time: Duration::from_millis(5),
                response_first: false
            })
        );
    }
}
