//! Kafka's request-time quota (KIP-124, `request_percentage`): the share of one request
//! handler thread's time a user / client id may use per quota window, as
//! `ClientRequestQuotaManager` measures and bounds it. The rate arithmetic is [`super::rate`]'s;
//! this module converts handler time into the recorded value, bounds the throttle, and says which
//! response versions the client throttles itself for (KIP-219).

use super::rate::{Rate, RateConfig};

/// The value recorded for `nanos` of handler time: percent of one thread for one second
/// (Kafka's `nanosToPercentage`, `100.0 / TimeUnit.SECONDS.toNanos(1)` per nanosecond), so that
/// the measured rate per second is the percentage of a thread in use.
pub fn nanos_to_percentage(nanos: u128) -> f64 {
    // u128 -> f64 loses precision only beyond 2^53 ns (104 days of one request).
    nanos as f64 * 100.0 / 1_000_000_000.0
}

/// Records `nanos` of handler time against a `request_percentage` of `bound` and returns the
/// throttle time in ms. Kafka bounds a request-quota throttle by one quota window
/// (`ClientRequestQuotaManager.maxThrottleTimeMs` = `quota.window.size.seconds`), so one slow
/// request does not mute a client for the whole sampled period.
pub fn record_and_throttle_ms(
    rate: &mut Rate,
    config: RateConfig,
    nanos: u128,
    bound: f64,
    now_ms: i64,
) -> i32 {
    let throttle = rate.record_and_throttle_ms(config, nanos_to_percentage(nanos), bound, now_ms);
    let cap = i32::try_from(config.window_ms).unwrap_or(i32::MAX);
    throttle.min(cap)
}

/// Whether a client reading the response of `api_key` at `version` throttles itself (KIP-219:
/// the broker sends the response at once and then mutes the connection), Kafka's
/// `AbstractResponse.shouldClientThrottle`; older versions get the response after the throttle
/// time. APIs newer than KIP-219 (Kafka 2.0) always throttle themselves.
pub fn client_throttles_itself(api_key: i16, version: i16) -> bool {
    let first = match api_key {
        0 => 6,  // Produce
        1 => 8,  // Fetch
        2 => 3,  // ListOffsets
        3 => 6,  // Metadata
        8 => 4,  // OffsetCommit
        9 => 4,  // OffsetFetch
        10 => 2, // FindCoordinator
        11 => 3, // JoinGroup
        12 => 2, // Heartbeat
        13 => 2, // LeaveGroup
        14 => 2, // SyncGroup
        15 => 2, // DescribeGroups
        16 => 2, // ListGroups
        18 => 2, // ApiVersions
        19 => 3, // CreateTopics
        20 => 2, // DeleteTopics
        23 => 2, // OffsetForLeaderEpoch
        32 => 2, // DescribeConfigs
        21 | 22 | 24..=31 | 33..=42 => 1,
        _ => 0,
    };
    version >= first
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: RateConfig = RateConfig {
        samples: 3,
        window_ms: 1000,
    };

    #[test]
    fn a_second_of_handler_time_is_one_hundred_percent() {
        assert!((nanos_to_percentage(1_000_000_000) - 100.0).abs() < 1e-9);
        assert!((nanos_to_percentage(10_000) - 0.001).abs() < 1e-12);
        assert_eq!(nanos_to_percentage(0), 0.0);
    }

    #[test]
    fn within_the_percentage_no_throttle_beyond_it_at_most_one_window() {
        let mut r = Rate::new();
        // 10 ms of handler time measured over the 2 s minimum window = 0.5 % of a thread.
        assert_eq!(record_and_throttle_ms(&mut r, CFG, 10_000_000, 1.0, 0), 0);
        // Another 90 ms: 5 % against 1 % -> (5 - 1) / 1 * 2000 ms, bounded by the 1 s window.
        assert_eq!(
            record_and_throttle_ms(&mut r, CFG, 90_000_000, 1.0, 0),
            1000
        );
        // With a wide window the unbounded arithmetic shows through.
        let wide = RateConfig {
            samples: 3,
            window_ms: 100_000,
        };
        let mut r = Rate::new();
        // 20 s of handler time over 200 s = 10 % against 5 %: (10 - 5) / 5 * 200 000 ms, capped
        // at one 100 s window.
        assert_eq!(
            record_and_throttle_ms(&mut r, wide, 20_000_000_000, 5.0, 0),
            100_000
        );
        let mut r = Rate::new();
        // 12 s over 200 s = 6 % against 5 %: (6 - 5) / 5 * 200 000 = 40 000 ms, under the cap.
        assert_eq!(
            record_and_throttle_ms(&mut r, wide, 12_000_000_000, 5.0, 0),
            40_000
        );
    }

    #[test]
    fn kip_219_versions() {
        assert!(!client_throttles_itself(0, 5));
        assert!(client_throttles_itself(0, 6));
        assert!(!client_throttles_itself(3, 5));
        assert!(client_throttles_itself(3, 12));
        assert!(!client_throttles_itself(32, 1));
        assert!(client_throttles_itself(32, 2));
        assert!(!client_throttles_itself(29, 0));
        assert!(client_throttles_itself(29, 1));
        // Newer APIs (DescribeCluster, ConsumerGroupHeartbeat) from their first version.
        assert!(client_throttles_itself(60, 0));
        assert!(client_throttles_itself(68, 0));
    }
}
