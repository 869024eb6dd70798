//! The listener's limits (docs/network-limits.md): how many connections, per IP and in total,
//! how long a connection may stay idle, and how much memory requests may hold. Pure decisions
//! only; the server applies them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

/// What `queued.max.request.bytes = -1` (Kafka's default: unbounded) means here: the bytes of
/// requests being received or handled are bounded by this many, or by `socket.request.max.bytes`
/// when that is larger (a request of the maximum size must always fit).
pub const DEFAULT_REQUEST_MEMORY: u64 = 512 * 1024 * 1024;

/// File descriptors kept for segment files, checkpoints and the quorum when `max.connections`
/// is derived from the FD limit: a quarter of the limit, at least this many.
const MIN_FD_RESERVE: u64 = 256;

/// The limits in force, resolved from the broker properties and the process FD limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// `max.connections` in force (Kafka's default Int.MaxValue is capped by the FD budget).
    pub max_connections: usize,
    pub per_ip: PerIpLimits,
    /// `connections.max.idle.ms`; None when negative (Kafka: no idle expiry).
    pub idle_timeout: Option<Duration>,
    /// `socket.request.max.bytes`.
    pub max_request_bytes: usize,
    /// `queued.max.request.bytes` in force (see [`DEFAULT_REQUEST_MEMORY`]).
    pub request_memory: u64,
    /// `connection.failed.authentication.delay.ms`: how long a connection whose authentication
    /// failed stays open after the failure response (Kafka's default 100 ms), so the client
    /// reads the response before the close, and a password guesser is slowed down.
    pub failed_auth_delay: Duration,
}

/// The properties as configured, before the FD limit is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredLimits {
    /// `max.connections` if set explicitly (an explicit value is used as given).
    pub max_connections: Option<u64>,
    pub per_ip: PerIpLimits,
    pub idle_timeout: Option<Duration>,
    pub max_request_bytes: usize,
    pub request_memory: u64,
    pub failed_auth_delay: Duration,
}

impl ConfiguredLimits {
    /// Resolves the limits for a process whose soft `RLIMIT_NOFILE` is `fd_limit` (None: unknown).
    pub fn resolve(&self, fd_limit: Option<u64>) -> ServerLimits {
        let max_connections = match (self.max_connections, fd_limit) {
            (Some(explicit), _) => explicit,
            (None, Some(limit)) => fd_budget(limit),
            (None, None) => i32::MAX as u64,
        };
        ServerLimits {
            max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
            per_ip: self.per_ip.clone(),
            idle_timeout: self.idle_timeout,
            max_request_bytes: self.max_request_bytes,
            request_memory: self.request_memory,
            failed_auth_delay: self.failed_auth_delay,
        }
    }
}

/// Connections the FD table can take besides the broker's files: the limit minus a reserve of
/// a quarter (at least [`MIN_FD_RESERVE`]), never below one.
pub fn fd_budget(fd_limit: u64) -> u64 {
    let reserve = (fd_limit / 4).max(MIN_FD_RESERVE);
    fd_limit.saturating_sub(reserve).clamp(1, i32::MAX as u64)
}

/// `max.connections.per.ip` and its `max.connections.per.ip.overrides`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerIpLimits {
    pub default: u64,
    pub overrides: HashMap<IpAddr, u64>,
}

impl PerIpLimits {
    pub fn limit_for(&self, ip: IpAddr) -> u64 {
        self.overrides.get(&ip).copied().unwrap_or(self.default)
    }
}

/// Refused at accept: this address already holds its maximum of connections.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{ip} already has the configured maximum of {max} connections")]
pub struct TooManyConnections {
    pub ip: IpAddr,
    pub max: u64,
}

/// Open connections per client address (Kafka's `ConnectionQuotas`, counted at accept).
#[derive(Debug, Default)]
pub struct ConnectionCounts {
    by_ip: HashMap<IpAddr, u64>,
}

impl ConnectionCounts {
    /// Counts a new connection from `ip`, or refuses it when `ip` is at its limit.
    pub fn open(&mut self, ip: IpAddr, limits: &PerIpLimits) -> Result<(), TooManyConnections> {
        let max = limits.limit_for(ip);
        let count = self.by_ip.entry(ip).or_insert(0);
        if *count >= max {
            if *count == 0 {
                self.by_ip.remove(&ip);
            }
            return Err(TooManyConnections { ip, max });
        }
        *count += 1;
        Ok(())
    }

    /// Forgets one connection of `ip` (the address's entry goes with its last one).
    pub fn close(&mut self, ip: IpAddr) {
        if let Some(count) = self.by_ip.get_mut(&ip) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.by_ip.remove(&ip);
            }
        }
    }

    pub fn of(&self, ip: IpAddr) -> u64 {
        self.by_ip.get(&ip).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn limits(default: u64, overrides: &[(&str, u64)]) -> PerIpLimits {
        PerIpLimits {
            default,
            overrides: overrides
                .iter()
                .map(|(ip, n)| (ip.parse().unwrap(), *n))
                .collect(),
        }
    }

    #[test]
    fn per_ip_limit_refuses_the_connection_over_it() {
        let l = limits(2, &[("10.0.0.9", 0)]);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let mut c = ConnectionCounts::default();
        assert!(c.open(a, &l).is_ok());
        assert!(c.open(a, &l).is_ok());
        assert_eq!(c.open(a, &l), Err(TooManyConnections { ip: a, max: 2 }));
        c.close(a);
        assert!(c.open(a, &l).is_ok(), "a closed connection frees its slot");
        let banned: IpAddr = "10.0.0.9".parse().unwrap();
        assert!(
            c.open(banned, &l).is_err(),
            "an override of 0 bans the address"
        );
        assert_eq!(c.of(banned), 0);
    }

    #[test]
    fn fd_budget_keeps_a_reserve_for_files() {
        assert_eq!(fd_budget(1024), 768);
        assert_eq!(fd_budget(20_000), 15_000);
        assert_eq!(fd_budget(100), 1);
        assert_eq!(fd_budget(u64::MAX), i32::MAX as u64);
    }

    #[test]
    fn an_explicit_max_connections_is_used_as_given() {
        let configured = ConfiguredLimits {
            max_connections: Some(5),
            per_ip: limits(10, &[]),
            idle_timeout: None,
            max_request_bytes: 100,
            request_memory: 100,
            failed_auth_delay: Duration::from_millis(100),
        };
        assert_eq!(configured.resolve(Some(1024)).max_connections, 5);
        let derived = ConfiguredLimits {
            max_connections: None,
            ..configured
        };
        assert_eq!(derived.resolve(Some(1024)).max_connections, 768);
        assert_eq!(derived.resolve(None).max_connections, i32::MAX as usize);
    }

    proptest! {
        /// Whatever the order of opens and closes, no address ever holds more than its limit
        /// and the counts equal the connections actually open.
        #[test]
        fn counts_never_exceed_the_limit(ops in proptest::collection::vec((0u8..4, any::<bool>()), 0..200)) {
            let l = limits(3, &[("10.0.0.2", 1)]);
            let mut c = ConnectionCounts::default();
            let mut open: HashMap<IpAddr, u64> = HashMap::new();
            for (host, is_open) in ops {
                let ip = IpAddr::from([10, 0, 0, host]);
                if is_open {
                    if c.open(ip, &l).is_ok() {
                        *open.entry(ip).or_default() += 1;
                    }
                } else if open.get(&ip).copied().unwrap_or(0) > 0 {
                    c.close(ip);
                    *open.entry(ip).or_default() -= 1;
                }
                prop_assert!(c.of(ip) <= l.limit_for(ip));
                prop_assert_eq!(c.of(ip), open.get(&ip).copied().unwrap_or(0));
            }
        }
    }
}
