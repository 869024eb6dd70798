//! Results of a perf run, printed in the Kafka tools' formats or as one JSON object.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::json;

const MB: f64 = 1024.0 * 1024.0;

/// Producer perf-test results.
#[derive(Debug, Clone)]
pub struct ProduceReport {
    pub records: u64,
    pub errors: u64,
    pub record_size: usize,
    pub elapsed: Duration,
    /// Latencies in microseconds.
    pub latency_us: Histogram<u64>,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl ProduceReport {
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn mb_per_sec(&self) -> f64 {
        self.records_per_sec() * self.record_size as f64 / MB
    }

    /// kafka-producer-perf-test's final line.
    pub fn kafka_line(&self) -> String {
        let h = &self.latency_us;
        format!(
            "{} records sent, {:.1} records/sec ({:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, {} ms 50th, {} ms 95th, {} ms 99th, {} ms 99.9th.",
            self.records,
            self.records_per_sec(),
            self.mb_per_sec(),
            h.mean() / 1000.0,
            ms(h.max()),
            h.value_at_quantile(0.50) / 1000,
            h.value_at_quantile(0.95) / 1000,
            h.value_at_quantile(0.99) / 1000,
            h.value_at_quantile(0.999) / 1000,
        )
    }

    pub fn json(&self, extra: serde_json::Value) -> serde_json::Value {
        let h = &self.latency_us;
        json!({
            "records": self.records,
            "errors": self.errors,
            "record_size": self.record_size,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "records_per_sec": self.records_per_sec(),
            "mb_per_sec": self.mb_per_sec(),
            "latency_ms": {
                "avg": h.mean() / 1000.0,
                "p50": ms(h.value_at_quantile(0.50)),
                "p95": ms(h.value_at_quantile(0.95)),
                "p99": ms(h.value_at_quantile(0.99)),
                "p999": ms(h.value_at_quantile(0.999)),
                "max": ms(h.max()),
            },
            "config": extra,
        })
    }
}

/// Consumer perf-test results.
#[derive(Debug, Clone)]
pub struct ConsumeReport {
    pub start_ms: i64,
    pub end_ms: i64,
    pub records: u64,
    pub bytes: u64,
    pub elapsed: Duration,
}

impl ConsumeReport {
    pub fn mb(&self) -> f64 {
        self.bytes as f64 / MB
    }

    pub fn mb_per_sec(&self) -> f64 {
        self.mb() / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// kafka-consumer-perf-test's header and data line (no groups, so rebalance time is 0
    /// and fetch time is the whole run).
    pub fn kafka_lines(&self) -> String {
        format!(
            "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n{}, {}, {:.4}, {:.4}, {}, {:.4}, 0, {}, {:.4}, {:.4}",
            format_time(self.start_ms),
            format_time(self.end_ms),
            self.mb(),
            self.mb_per_sec(),
            self.records,
            self.records_per_sec(),
            self.elapsed.as_millis(),
            self.mb_per_sec(),
            self.records_per_sec(),
        )
    }

    pub fn json(&self) -> serde_json::Value {
        json!({
            "records": self.records,
            "bytes": self.bytes,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "records_per_sec": self.records_per_sec(),
            "mb_per_sec": self.mb_per_sec(),
        })
    }
}

/// `yyyy-MM-dd HH:mm:ss:SSS` in UTC, the consumer perf test's date format.
pub fn format_time(epoch_ms: i64) -> String {
    let days = epoch_ms.div_euclid(86_400_000);
    let ms_of_day = epoch_ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}:{:03}",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_format() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00:000");
        assert_eq!(format_time(1_700_000_000_123), "2023-11-14 22:13:20:123");
    }

    #[test]
    fn produce_line_and_json() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [1000u64, 2000, 3000, 4000] {
            h.record(v).unwrap();
        }
        let r = ProduceReport {
            records: 1024,
            errors: 0,
            record_size: 1024,
            elapsed: Duration::from_secs(1),
            latency_us: h,
        };
        let line = r.kafka_line();
        assert!(line.starts_with("1024 records sent, 1024.0 records/sec (1.00 MB/sec), 2.50 ms avg latency, 4.00 ms max latency, 2 ms 50th"), "{line}");
        let j = r.json(serde_json::json!({"acks": "1"}));
        assert_eq!(j["records"], 1024);
        assert!((j["mb_per_sec"].as_f64().unwrap() - 1.0).abs() < 1e-9);
        assert!(j["latency_ms"]["p99"].as_f64().unwrap() >= 3.9);
    }
}
