//! Kafka's listener properties: `listeners`, `advertised.listeners`,
//! `listener.security.protocol.map` and `inter.broker.listener.name` (pure parsing).
//!
//! A listener is `NAME://host:port`; its name maps to a security protocol through the map
//! (Kafka's default maps each protocol's name to itself). An empty host binds every interface.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Kafka's `SecurityProtocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Kafka's `SecurityProtocol.id`, as registered in `BrokerRegistrationRecord`.
    pub fn id(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// `listener.security.protocol.map`'s default (`EndPoint.DefaultSecurityProtocolMap`).
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// One `NAME://host:port` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub protocol: SecurityProtocol,
    /// As written: "" means every interface (bind) or the bound address (advertise).
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// Where to bind: a numeric IP, or every interface for an empty host.
    pub fn bind_addr(&self) -> Result<SocketAddr, String> {
        let ip = if self.host.is_empty() {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            self.host.parse().map_err(|_| {
                format!(
                    "listener {} must bind a numeric IP, got '{}'",
                    self.name, self.host
                )
            })?
        };
        Ok(SocketAddr::new(ip, self.port))
    }
}

pub fn parse_protocol_map(text: &str) -> Result<BTreeMap<String, SecurityProtocol>, String> {
    let mut map = BTreeMap::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, protocol) = entry.split_once(':').ok_or_else(|| {
            format!("listener.security.protocol.map: expected NAME:PROTOCOL, got '{entry}'")
        })?;
        let protocol = SecurityProtocol::from_name(protocol.trim()).ok_or_else(|| {
            format!("listener.security.protocol.map: unknown security protocol '{protocol}'")
        })?;
        let name = name.trim().to_ascii_uppercase();
        if map.insert(name.clone(), protocol).is_some() {
            return Err(format!(
                "listener.security.protocol.map: '{name}' appears twice"
            ));
        }
    }
    Ok(map)
}

/// The names of `controller.listener.names`, upper-cased, in order.
pub fn controller_listener_names(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_ascii_uppercase)
        .collect()
}

/// `listener.security.protocol.map` in force (Kafka's `effectiveListenerSecurityProtocolMap`):
/// the explicit map, else the default one plus PLAINTEXT for each controller listener name,
/// unless a controller name or a listener name is SSL or SASL_* (then the default alone).
pub fn effective_protocol_map(
    explicit: Option<&str>,
    controller_names: Option<&str>,
    listeners: Option<&str>,
) -> Result<BTreeMap<String, SecurityProtocol>, String> {
    if let Some(text) = explicit {
        return parse_protocol_map(text);
    }
    let mut map = parse_protocol_map(DEFAULT_PROTOCOL_MAP)?;
    let controllers = controller_listener_names(controller_names.unwrap_or(""));
    let secured = |name: &str| matches!(name, "SSL" | "SASL_SSL" | "SASL_PLAINTEXT");
    let listener_names = listeners.unwrap_or("").split(',').filter_map(|entry| {
        entry
            .trim()
            .split_once("://")
            .map(|(name, _)| name.to_ascii_uppercase())
    });
    if !controllers.iter().any(|n| secured(n)) && !listener_names.into_iter().any(|n| secured(&n)) {
        for name in controllers {
            map.entry(name).or_insert(SecurityProtocol::Plaintext);
        }
    }
    Ok(map)
}

/// Parses `listeners` or `advertised.listeners` (`property` names it in errors).
pub fn parse_listeners(
    property: &str,
    text: &str,
    map: &BTreeMap<String, SecurityProtocol>,
) -> Result<Vec<Endpoint>, String> {
    let mut out: Vec<Endpoint> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, address) = entry
            .split_once("://")
            .ok_or_else(|| format!("{property}: expected NAME://HOST:PORT, got '{entry}'"))?;
        let name = name.to_ascii_uppercase();
        let protocol = *map.get(&name).ok_or_else(|| {
            format!("{property}: listener '{name}' is not in listener.security.protocol.map")
        })?;
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| format!("{property}: expected HOST:PORT in '{entry}'"))?;
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("{property}: bad port in '{entry}'"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if out.iter().any(|e| e.name == name) {
            return Err(format!("{property}: listener '{name}' appears twice"));
        }
        if port != 0 && out.iter().any(|e| e.port == port && e.host == host) {
            return Err(format!("{property}: two listeners on {host}:{port}"));
        }
        out.push(Endpoint {
            name,
            protocol,
            host,
            port,
        });
    }
    if out.is_empty() {
        return Err(format!("{property}: no listener given"));
    }
    Ok(out)
}

/// `inter.broker.listener.name`, else the listener named after
/// `security.inter.broker.protocol` (Kafka's rule: setting both is an error).
pub fn inter_broker_listener(
    listeners: &[Endpoint],
    name: Option<&str>,
    protocol: Option<&str>,
) -> Result<String, String> {
    let wanted = match (name, protocol) {
        (Some(_), Some(_)) => return Err(
            "only one of inter.broker.listener.name and security.inter.broker.protocol may be set"
                .into(),
        ),
        (Some(n), None) => n.to_ascii_uppercase(),
        (None, Some(p)) => p.to_ascii_uppercase(),
        (None, None) => "PLAINTEXT".to_string(),
    };
    if listeners.iter().any(|l| l.name == wanted) {
        Ok(wanted)
    } else if name.is_none() && protocol.is_none() {
        // Nothing configured and no PLAINTEXT listener: the first listener carries inter-broker
        // traffic (Kafka would refuse to start; this keeps single-listener setups working).
        Ok(listeners[0].name.clone())
    } else {
        Err(format!(
            "the inter-broker listener '{wanted}' is not one of the listeners"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_map() -> BTreeMap<String, SecurityProtocol> {
        parse_protocol_map(DEFAULT_PROTOCOL_MAP).unwrap()
    }

    #[test]
    fn parses_kafka_listener_lists() {
        let l = parse_listeners(
            "listeners",
            "PLAINTEXT://127.0.0.1:9092, SASL_SSL://:9094",
            &default_map(),
        )
        .unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[1].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(l[1].bind_addr().unwrap(), "0.0.0.0:9094".parse().unwrap());
        let v6 = parse_listeners("listeners", "SSL://[::1]:9093", &default_map()).unwrap();
        assert_eq!(v6[0].bind_addr().unwrap(), "[::1]:9093".parse().unwrap());
    }

    #[test]
    fn custom_names_map_to_protocols() {
        let map =
            parse_protocol_map("CLIENT:SASL_SSL,REPLICATION:SSL,PLAINTEXT:PLAINTEXT").unwrap();
        let l = parse_listeners(
            "listeners",
            "client://127.0.0.1:0,REPLICATION://127.0.0.1:0",
            &map,
        )
        .unwrap();
        assert_eq!(l[0].name, "CLIENT");
        assert!(l[0].protocol.uses_sasl() && l[0].protocol.uses_tls());
        assert_eq!(
            inter_broker_listener(&l, Some("replication"), None).unwrap(),
            "REPLICATION"
        );
    }

    #[test]
    fn refuses_bad_lists() {
        let map = default_map();
        for bad in [
            "",
            "PLAINTEXT:9092",
            "FOO://127.0.0.1:1",
            "PLAINTEXT://127.0.0.1:x",
            "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",
            "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:1",
        ] {
            assert!(parse_listeners("listeners", bad, &map).is_err(), "{bad}");
        }
        assert!(parse_protocol_map("A:NOPE").is_err());
        assert!(parse_protocol_map("A:SSL,a:SSL").is_err());
    }

    #[test]
    fn controller_names_default_to_plaintext_as_in_kafka() {
        let m = effective_protocol_map(
            None,
            Some("CONTROLLER"),
            Some("PLAINTEXT://:9092,CONTROLLER://:9093"),
        )
        .unwrap();
        assert_eq!(m.get("CONTROLLER"), Some(&SecurityProtocol::Plaintext));
        // An SSL or SASL_* listener: no implicit mapping (Kafka's rule).
        let m = effective_protocol_map(None, Some("CONTROLLER"), Some("SSL://:9093")).unwrap();
        assert_eq!(m.get("CONTROLLER"), None);
        // An explicit map is taken as written.
        let m = effective_protocol_map(Some("CONTROLLER:SSL"), Some("CONTROLLER"), None).unwrap();
        assert_eq!(m.get("CONTROLLER"), Some(&SecurityProtocol::Ssl));
        assert_eq!(m.get("PLAINTEXT"), None);
    }

    #[test]
    fn inter_broker_listener_follows_kafka() {
        let l = parse_listeners("listeners", "PLAINTEXT://:1,SSL://:2", &default_map()).unwrap();
        assert_eq!(inter_broker_listener(&l, None, None).unwrap(), "PLAINTEXT");
        assert_eq!(inter_broker_listener(&l, None, Some("SSL")).unwrap(), "SSL");
        assert!(inter_broker_listener(&l, Some("SSL"), Some("SSL")).is_err());
        assert!(inter_broker_listener(&l, Some("NOPE"), None).is_err());
    }
}
