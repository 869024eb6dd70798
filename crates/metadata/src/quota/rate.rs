//! The rate a quota is checked against, as Kafka's `Rate` over a `SampledStat` computes it
//! (`quota.window.num` samples of `quota.window.size.seconds` each), and the throttle time of
//! a violation (Kafka's `QuotaUtils.throttleTime`).
//!
//! A sample covers one window from its first record; recording after the window ends starts
//! the next sample (reusing the oldest slot once all exist). Samples older than
//! `samples * window` are reset before measuring. The rate divides the sum of the samples by
//! the time since the oldest sample started, counted as at least `samples - 1` whole windows
//! so that a fresh sensor does not read a burst as a huge rate. Time is passed in (ms of a
//! monotonic clock); nothing here reads it.

/// `quota.window.num` and `quota.window.size.seconds` (in ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateConfig {
    pub samples: usize,
    pub window_ms: i64,
}

impl RateConfig {
    /// Kafka's defaults: 11 samples of 1 s.
    pub const DEFAULT: RateConfig = RateConfig {
        samples: 11,
        window_ms: 1000,
    };

    /// From the two properties; values below 1 (Kafka's `atLeast(1)`) fall back to 1.
    pub fn new(samples: i64, window_seconds: i64) -> Self {
        RateConfig {
            samples: usize::try_from(samples.max(1)).unwrap_or(1).min(1024),
            window_ms: window_seconds.clamp(1, 86_400) * 1000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    start_ms: i64,
    value: f64,
}

/// One sensor's samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rate {
    samples: Vec<Sample>,
    current: usize,
}

impl Rate {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `value` at `now_ms` (negative to take back a recorded value, as Kafka's
    /// `unrecordQuotaSensor`).
    pub fn record(&mut self, config: RateConfig, value: f64, now_ms: i64) {
        if self.samples.is_empty() {
            self.samples.push(Sample {
                start_ms: now_ms,
                value: 0.0,
            });
            self.current = 0;
        }
        let complete = self
            .samples
            .get(self.current)
            .is_none_or(|s| now_ms.saturating_sub(s.start_ms) >= config.window_ms);
        if complete {
            self.current = (self.current + 1) % config.samples.max(1);
            let fresh = Sample {
                start_ms: now_ms,
                value: 0.0,
            };
            match self.samples.get_mut(self.current) {
                Some(slot) => *slot = fresh,
                None => {
                    self.samples.push(fresh);
                    self.current = self.samples.len() - 1;
                }
            }
        }
        if let Some(s) = self.samples.get_mut(self.current) {
            s.value += value;
        }
    }

    fn purge_obsolete(&mut self, config: RateConfig, now_ms: i64) {
        let expire_age = config.window_ms.saturating_mul(config.samples as i64);
        for s in &mut self.samples {
            if now_ms.saturating_sub(s.start_ms) >= expire_age {
                *s = Sample {
                    start_ms: now_ms,
                    value: 0.0,
                };
            }
        }
    }

    /// The time the rate is measured over, in ms (Kafka's `Rate.windowSize`; at least 1).
    pub fn window_size_ms(&mut self, config: RateConfig, now_ms: i64) -> i64 {
        self.purge_obsolete(config, now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms.saturating_sub(oldest).max(0);
        let full_windows = elapsed / config.window_ms;
        let min_full = i64::try_from(config.samples).unwrap_or(i64::MAX) - 1;
        if full_windows < min_full {
            elapsed = elapsed.saturating_add((min_full - full_windows) * config.window_ms);
        }
        elapsed.max(1)
    }

    /// The rate per second at `now_ms`.
    pub fn measure(&mut self, config: RateConfig, now_ms: i64) -> f64 {
        let window = self.window_size_ms(config, now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (window as f64 / 1000.0)
    }

    /// Records `value`, then checks the rate against `bound` (per second): the throttle time
    /// in ms, 0 when within the quota. Kafka's arithmetic: the excess over the bound, as a
    /// fraction of the bound, of the measured window; capped at `i32::MAX` for the wire.
    pub fn record_and_throttle_ms(
        &mut self,
        config: RateConfig,
        value: f64,
        bound: f64,
        now_ms: i64,
    ) -> i32 {
        self.record(config, value, now_ms);
        let rate = self.measure(config, now_ms);
        if bound.is_nan() || bound <= 0.0 || rate <= bound {
            return 0;
        }
        let window = self.window_size_ms(config, now_ms) as f64;
        let throttle = ((rate - bound) / bound * window).round();
        if throttle >= f64::from(i32::MAX) {
            i32::MAX
        } else if throttle > 0.0 {
            // In (0, i32::MAX) and integral after the round above.
            throttle as i32
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: RateConfig = RateConfig::DEFAULT;

    #[test]
    fn a_fresh_sensor_measures_over_the_minimum_window() {
        let mut r = Rate::new();
        r.record(CFG, 10_000.0, 0);
        // Elapsed 0 ms counts as 10 whole windows: 10 000 bytes / 10 s.
        assert_eq!(r.window_size_ms(CFG, 0), 10_000);
        assert!((r.measure(CFG, 0) - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn throttle_time_is_the_excess_over_the_bound_times_the_window() {
        let mut r = Rate::new();
        // 20 000 bytes at t=0 over a 10 s window = 2000 B/s against a 1000 B/s quota:
        // (2000 - 1000) / 1000 * 10 000 ms.
        assert_eq!(r.record_and_throttle_ms(CFG, 20_000.0, 1000.0, 0), 10_000);
        // Within the quota: no throttle.
        let mut r = Rate::new();
        assert_eq!(r.record_and_throttle_ms(CFG, 5_000.0, 1000.0, 0), 0);
    }

    #[test]
    fn old_samples_expire_and_the_ring_reuses_slots() {
        let mut r = Rate::new();
        for t in 0..30 {
            r.record(CFG, 1000.0, t * 1000);
        }
        // 11 slots, never more.
        assert_eq!(r.samples.len(), 11);
        // At t = 29 s the samples from 19..=29 s remain: 11 000 bytes over 10 s + the 0 ms of
        // the current window.
        let rate = r.measure(CFG, 29_000);
        assert!((rate - 1100.0).abs() < 1e-9, "{rate}");
        // Long after, everything has expired.
        assert_eq!(r.measure(CFG, 1_000_000), 0.0);
    }

    #[test]
    fn a_steady_sender_obeying_its_throttle_converges_on_the_quota() {
        // A client that sends 100 KB, then waits the throttle time it was given, then sends
        // again, averages about the quota (1 MB/s) over a minute.
        let bound = 1_048_576.0;
        let mut r = Rate::new();
        let mut now = 0i64;
        let mut sent = 0.0;
        while now < 60_000 {
            let throttle = r.record_and_throttle_ms(CFG, 102_400.0, bound, now);
            sent += 102_400.0;
            now += 10 + i64::from(throttle);
        }
        let average = sent / (now as f64 / 1000.0);
        assert!(
            average > 0.8 * bound && average < 1.25 * bound,
            "average {average}"
        );
    }

    #[test]
    fn time_going_backwards_or_a_zero_bound_does_not_panic() {
        let mut r = Rate::new();
        r.record(CFG, 1.0, 5_000);
        r.record(CFG, 1.0, 0);
        assert!(r.measure(CFG, -10).is_finite());
        assert_eq!(r.record_and_throttle_ms(CFG, f64::MAX, 0.0, 0), 0);
        assert_eq!(r.record_and_throttle_ms(CFG, f64::MAX, 1.0, 0), i32::MAX);
    }

    #[test]
    fn config_bounds() {
        assert_eq!(RateConfig::new(11, 1), CFG);
        assert_eq!(
            RateConfig::new(0, -5),
            RateConfig {
                samples: 1,
                window_ms: 1000
            }
        );
    }
}
