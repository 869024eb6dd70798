//! Client quota enforcement (KIP-13, KIP-124, KIP-219): the byte-rate and request-time sensors
//! of this broker and the throttle a request earns. Which quota applies and the rate arithmetic are pure
//! (`runnel_metadata::quota`); this module keeps the sensors and reads the clock.
//!
//! A throttled response carries `throttle_time_ms`; the server then mutes the connection (reads
//! nothing from it) for that time. Clients that throttle themselves (Produce v6+, Fetch v8+,
//! KIP-219) get the response at once; older ones get it after the throttle time, as Kafka does.
//!
//! The request-time quota (`request_percentage`) is measured as handler time: [`timed`] adds up
//! the time a handler's future spends being polled, so waiting (a long-poll Fetch, acks=all)
//! costs nothing, as Kafka counts request-thread time and not time in purgatory.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kafka_protocol::messages::FetchResponse;
use kafka_protocol::protocol::Encodable;
use runnel_metadata::quota::rate::{Rate, RateConfig};
use runnel_metadata::quota::{self, SensorKey};
use runnel_metadata::MetadataImage;

use crate::context::{Broker, RequestContext};

/// The quotas a broker enforces: byte rates and request time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaType {
    Produce,
    Fetch,
    /// `request_percentage`: handler time, recorded in percent of a thread (KIP-124).
    Request,
}

impl QuotaType {
    fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => quota::PRODUCER_BYTE_RATE,
            QuotaType::Fetch => quota::CONSUMER_BYTE_RATE,
            QuotaType::Request => quota::REQUEST_PERCENTAGE,
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
        self.with_sensor(image, kind, user, client_id, |rate, config, bound, now| {
            rate.record_and_throttle_ms(config, bytes as f64, bound, now)
        })
    }

    /// Records `busy` handler time against the `request_percentage` quota of `user` with
    /// `client_id`: the throttle time in ms, at most one quota window (Kafka's bound).
    pub fn record_request_time(
        &self,
        image: &MetadataImage,
        user: &str,
        client_id: &str,
        busy: Duration,
    ) -> i32 {
        let nanos = busy.as_nanos();
        self.with_sensor(
            image,
            QuotaType::Request,
            user,
            client_id,
            |rate, config, bound, now| {
                quota::request::record_and_throttle_ms(rate, config, nanos, bound, now)
            },
        )
    }

    /// Runs `f` on the sensor of the quota of `kind` that applies (creating it), or returns 0
    /// when none applies: connections without a quota keep no sensors.
    fn with_sensor(
        &self,
        image: &MetadataImage,
        kind: QuotaType,
        user: &str,
        client_id: &str,
        f: impl FnOnce(&mut Rate, RateConfig, f64, i64) -> i32,
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
        f(&mut entry.rate, config, bound, now)
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

/// Records a consumer Fetch response's size; when that exceeds the quota, or the request-time
/// quota already throttles this request (`request_throttle_ms`), takes the bytes back and
/// empties the response (Kafka's `getThrottledResponse`: same session, no partitions) and sets
/// its `throttle_time_ms` to the larger throttle. Returns that throttle time.
pub fn fetch_throttle(
    broker: &Broker,
    ctx: &RequestContext,
    response: &mut FetchResponse,
    version: i16,
    request_throttle_ms: i32,
) -> i32 {
    let image = broker.image();
    let (user, client) = (&ctx.principal.name, &ctx.client_id);
    let byte_quota = quota::applicable_quota(
        &image.client_quotas,
        user,
        client,
        quota::CONSUMER_BYTE_RATE,
    )
    .is_some();
    let mut recorded = None;
    let mut throttle_ms = request_throttle_ms.max(0);
    if byte_quota {
        let bytes = response.compute_size(version).unwrap_or(0);
        let bandwidth_ms = broker
            .quotas
            .record(&image, QuotaType::Fetch, user, client, bytes);
        recorded = Some(bytes);
        throttle_ms = throttle_ms.max(bandwidth_ms);
    }
    if throttle_ms > 0 {
        if let Some(bytes) = recorded {
            broker
                .quotas
                .unrecord(&image, QuotaType::Fetch, user, client, bytes);
        }
        response.responses.clear();
        response.throttle_time_ms = response.throttle_time_ms.max(throttle_ms);
    }
    throttle_ms
}

/// Runs `fut` and measures the time spent inside its `poll` (the handler's own time, not the
/// time it waits for a timer, the log or a replica): what the request-time quota records.
pub async fn timed<F: Future>(fut: F) -> (F::Output, Duration) {
    let mut fut = std::pin::pin!(fut);
    let mut busy = Duration::ZERO;
    let output = std::future::poll_fn(|cx| {
        let start = Instant::now();
        let polled = fut.as_mut().poll(cx);
        busy = busy.saturating_add(start.elapsed());
        polled
    })
    .await;
    (output, busy)
}

/// The request-time (`request_percentage`) throttle of a request whose handler was busy for
/// `busy`; 0 without such a quota (no sensor is kept then).
pub fn request_throttle(broker: &Broker, ctx: &RequestContext, busy: Duration) -> i32 {
    let image = broker.image();
    if image.client_quotas.is_empty() {
        return 0;
    }
    broker
        .quotas
        .record_request_time(&image, &ctx.principal.name, &ctx.client_id, busy)
}

/// The throttle to apply for a response; `response_first` when the client throttles itself
/// (KIP-219, `runnel_metadata::quota::request::client_throttles_itself`).
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
        // No request_percentage for "slow": handler time is not measured.
        assert_eq!(
            q.record_request_time(&image, "ANONYMOUS", "slow", Duration::from_secs(5)),
            0
        );
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

    #[test]
    fn request_time_is_throttled_by_percentage_and_bounded_by_one_window() {
        let mut image = MetadataImage::empty("c".into());
        replay(
            &mut image.client_quotas,
            &QuotaEntity::user(EntityName::Named("alice".into())),
            quota::REQUEST_PERCENTAGE,
            Some(1.0),
        );
        let q = QuotaManager::new(3, 1);
        // 1 ms over the 2 s minimum window = 0.05 % of a thread: within 1 %.
        assert_eq!(
            q.record_request_time(&image, "alice", "any", Duration::from_millis(1)),
            0
        );
        // Half a second more: 25 % against 1 %, throttled for at most one 1 s window.
        assert_eq!(
            q.record_request_time(&image, "alice", "other", Duration::from_millis(500)),
            1000
        );
        // The byte-rate and request sensors are distinct; bob has no quota.
        assert_eq!(
            q.record_request_time(&image, "bob", "any", Duration::from_secs(5)),
            0
        );
    }

    #[tokio::test]
    async fn timed_counts_polling_not_waiting() {
        let (out, busy) = timed(async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            7
        })
        .await;
        assert_eq!(out, 7);
        assert!(busy < Duration::from_millis(100), "{busy:?}");
        let (_, busy) = timed(async {
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(30) {
                std::hint::spin_loop();
            }
        })
        .await;
        assert!(busy >= Duration::from_millis(30), "{busy:?}");
    }
}
