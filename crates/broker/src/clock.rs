//! Wall-clock milliseconds since the Unix epoch, as Kafka timestamps use. The one place the
//! broker reads the clock for timestamps and deadlines measured in epoch time.

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
