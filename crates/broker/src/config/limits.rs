//! The listener's limits (docs/network-limits.md) from `max.connections*`,
//! `connections.max.idle.ms`, `socket.request.max.bytes` and `queued.max.request.bytes`.

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;

use super::BrokerConfig;
use crate::server::limits::{ConfiguredLimits, PerIpLimits, DEFAULT_REQUEST_MEMORY};
use crate::BrokerError;

impl BrokerConfig {
    /// The listener's limits as configured (validated: invalid values are startup errors).
    pub fn server_limits(&self) -> Result<ConfiguredLimits, BrokerError> {
        let non_negative = |key: &str| -> Result<u64, BrokerError> {
            let v = self.i64(key)?;
            u64::try_from(v)
                .map_err(|_| BrokerError::Config(format!("{key} must be >= 0, got {v}")))
        };
        let max_connections = non_negative("max.connections")?;
        let per_ip_default = non_negative("max.connections.per.ip")?;
        let overrides = parse_per_ip_overrides(self.str("max.connections.per.ip.overrides"))?;
        if per_ip_default == 0 && overrides.is_empty() {
            return Err(BrokerError::Config(
                "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides is set"
                    .into(),
            ));
        }
        let idle_ms = self.i64("connections.max.idle.ms")?;
        if idle_ms == 0 {
            return Err(BrokerError::Config(
                "connections.max.idle.ms must not be 0 (it would close every connection at once; -1 disables the idle timeout)"
                    .into(),
            ));
        }
        let max_request_bytes = non_negative("socket.request.max.bytes")?;
        let queued = self.i64("queued.max.request.bytes")?;
        let request_memory = match u64::try_from(queued) {
            Ok(q) if q > 0 && q < max_request_bytes => {
                return Err(BrokerError::Config(format!(
                    "queued.max.request.bytes ({q}) must be at least socket.request.max.bytes ({max_request_bytes}), or -1"
                )))
            }
            Ok(q) if q > 0 => q,
            _ => DEFAULT_REQUEST_MEMORY.max(max_request_bytes),
        };
        Ok(ConfiguredLimits {
            max_connections: self
                .props
                .contains_key("max.connections")
                .then_some(max_connections),
            per_ip: PerIpLimits {
                default: per_ip_default,
                overrides,
            },
            idle_timeout: u64::try_from(idle_ms).ok().map(Duration::from_millis),
            max_request_bytes: usize::try_from(max_request_bytes).unwrap_or(usize::MAX),
            request_memory,
            failed_auth_delay: Duration::from_millis(non_negative(
                "connection.failed.authentication.delay.ms",
            )?),
        })
    }
}

/// Parses `max.connections.per.ip.overrides`: `host:count,host:count` (Kafka's format). Host
/// names are resolved once, here; every address of a name gets its count.
fn parse_per_ip_overrides(raw: &str) -> Result<HashMap<IpAddr, u64>, BrokerError> {
    let mut out = HashMap::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = |why: &str| {
            BrokerError::Config(format!(
                "max.connections.per.ip.overrides entry '{entry}' {why}"
            ))
        };
        let (host, count) = entry
            .rsplit_once(':')
            .ok_or_else(|| bad("is not host:count"))?;
        let count: u64 = count
            .trim()
            .parse()
            .map_err(|_| bad("needs a count >= 0"))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => (host, 0)
                .to_socket_addrs()
                .map_err(|e| bad(&format!("names a host that does not resolve: {e}")))?
                .map(|a| a.ip())
                .collect(),
        };
        for ip in ips {
            out.insert(ip, count);
        }
    }
    Ok(out)
}
