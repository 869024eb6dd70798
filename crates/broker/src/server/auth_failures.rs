//! Authentication outcomes: counted (Kafka's selector metrics `failed-authentication-total`,
//! `successful-authentication-total`, `successful-reauthentication-total`,
//! `failed-reauthentication-total`, `expired-connections-killed-count`) and failures logged
//! at most once per client address and principal per [`LOG_INTERVAL`].
//!
//! Why rate limited: a misconfigured client (or an attacker) reconnecting in a loop with a
//! wrong password would otherwise write a warning per attempt. Why per address *and*
//! principal: the first failure of each distinct pair is what an operator needs to see.
//! The limiter is pure (time is an argument) and bounded ([`MAX_KEYS`]); the counters are
//! process-wide, as a broker process's metrics are, and are shown by Runnel's describe request
//! (`{"what": "security"}`, `handlers/runnel_describe`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{json, Value};

/// How long a logged (address, principal) pair stays quiet.
pub const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Pairs remembered at most: beyond it, expired ones are forgotten first, and if all are
/// recent a new pair is not logged (but still counted), so a flood of spoofed names cannot
/// grow memory.
pub const MAX_KEYS: usize = 4096;

/// The pure part: which failures to log.
#[derive(Debug, Default)]
pub struct LogLimiter {
    last: HashMap<(IpAddr, String), Instant>,
}

impl LogLimiter {
    /// Whether a failure from `ip` as `principal` at `now` should be logged (and, if so,
    /// remembers it).
    pub fn should_log(&mut self, ip: IpAddr, principal: &str, now: Instant) -> bool {
        let key = (ip, principal.to_string());
        if let Some(at) = self.last.get(&key) {
            if now.saturating_duration_since(*at) < LOG_INTERVAL {
                return false;
            }
        } else if self.last.len() >= MAX_KEYS {
            self.last
                .retain(|_, at| now.saturating_duration_since(*at) < LOG_INTERVAL);
            if self.last.len() >= MAX_KEYS {
                return false;
            }
        }
        self.last.insert(key, now);
        true
    }
}

/// The process's authentication counters and failure log.
#[derive(Debug, Default)]
pub struct AuthStats {
    failed: AtomicU64,
    succeeded: AtomicU64,
    reauth_failed: AtomicU64,
    reauth_succeeded: AtomicU64,
    expired_killed: AtomicU64,
    limiter: Mutex<LogLimiter>,
}

/// This broker process's authentication statistics.
pub static AUTH_STATS: LazyLock<AuthStats> = LazyLock::new(AuthStats::default);

impl AuthStats {
    /// Counts one failed authentication (TLS or SASL) and logs it unless the same address and
    /// principal was logged within [`LOG_INTERVAL`]. `reason` must not carry a secret (the
    /// SASL state machine's messages name the user only).
    pub fn failed(
        &self,
        listener: &str,
        peer: std::net::SocketAddr,
        principal: Option<&str>,
        reason: &str,
    ) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let principal = principal.unwrap_or("unknown");
        if self
            .limiter
            .lock()
            .should_log(peer.ip(), principal, Instant::now())
        {
            tracing::warn!(%peer, %listener, %principal, "authentication failed, closing the connection: {reason} (further failures from this address and principal are counted, not logged, for {}s)", LOG_INTERVAL.as_secs());
        }
    }

    pub fn succeeded(&self) {
        self.succeeded.fetch_add(1, Ordering::Relaxed);
    }

    pub fn reauth_succeeded(&self) {
        self.reauth_succeeded.fetch_add(1, Ordering::Relaxed);
    }

    pub fn reauth_failed(&self) {
        self.reauth_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection closed because its session expired (KIP-368) before it re-authenticated.
    pub fn expired_killed(&self) {
        self.expired_killed.fetch_add(1, Ordering::Relaxed);
    }

    pub fn failed_total(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// The counters under Kafka's metric names.
    pub fn to_json(&self) -> Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "failed-authentication-total": get(&self.failed),
            "successful-authentication-total": get(&self.succeeded),
            "failed-reauthentication-total": get(&self.reauth_failed),
            "successful-reauthentication-total": get(&self.reauth_succeeded),
            "expired-connections-killed-count": get(&self.expired_killed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_once_per_address_and_principal_per_interval() {
        let mut l = LogLimiter::default();
        let t0 = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(l.should_log(a, "alice", t0));
        assert!(!l.should_log(a, "alice", t0 + Duration::from_secs(1)));
        assert!(l.should_log(a, "bob", t0 + Duration::from_secs(1)));
        assert!(l.should_log(b, "alice", t0 + Duration::from_secs(1)));
        assert!(!l.should_log(a, "alice", t0 + LOG_INTERVAL - Duration::from_millis(1)));
        assert!(l.should_log(a, "alice", t0 + LOG_INTERVAL));
    }

    #[test]
    fn memory_is_bounded_and_expired_pairs_make_room() {
        let mut l = LogLimiter::default();
        let t0 = Instant::now();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for i in 0..MAX_KEYS {
            assert!(l.should_log(ip, &format!("u{i}"), t0));
        }
        // Full of recent pairs: a new one is not logged and not remembered.
        assert!(!l.should_log(ip, "new", t0 + Duration::from_secs(1)));
        assert_eq!(l.last.len(), MAX_KEYS);
        // Once they expire, they are dropped to make room.
        assert!(l.should_log(ip, "new", t0 + LOG_INTERVAL));
        assert_eq!(l.last.len(), 1);
    }
}
