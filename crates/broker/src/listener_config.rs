//! The broker's listeners from its configuration: which to bind, what each advertises, and
//! each one's TLS and SASL settings (`listener.name.<name>.` overrides first, as in Kafka).
//!
//! Without `listeners`, `--listen` is the one PLAINTEXT listener (the shorthand keeps working).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use runnel_metadata::MetadataImage;
use tokio::sync::watch;

use crate::config::BrokerConfig;
use crate::server::listeners::{self, Endpoint, SecurityProtocol};
use crate::server::sasl::scram::{ScramCredential, ScramMechanism};
use crate::server::sasl::{jaas, SaslConfig, ScramStore, PLAIN};
use crate::server::{tls, ListenerRuntime};
use crate::BrokerError;

/// The listeners as configured.
#[derive(Debug, Clone)]
pub struct ListenerPlan {
    pub listeners: Vec<Endpoint>,
    /// `advertised.listeners` by listener name (an empty host means the bound address).
    pub advertised: BTreeMap<String, (String, u16)>,
    /// The listener brokers use among themselves (its address is the registered one).
    pub inter_broker: String,
}

fn config_error(e: String) -> BrokerError {
    BrokerError::Config(e)
}

impl BrokerConfig {
    fn listener_prop(&self, listener: &str, key: &str) -> Option<String> {
        let prefixed = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
        // Kafka's reconfigurable SSL settings (`SslConfigs.RECONFIGURABLE_CONFIGS`): a dynamic
        // per-broker value wins over the static ones.
        if is_reconfigurable_ssl(key) {
            if let Some(v) = self.dynamic.read().get(&prefixed) {
                return Some(v.clone());
            }
        }
        self.props
            .get(&prefixed)
            .or_else(|| self.props.get(key))
            .cloned()
    }

    /// [`Self::listener_prop`] as an owned lookup, for what re-reads properties later (the
    /// reloading TLS acceptor).
    fn owned_lookup(&self, listener: &str) -> tls::OwnedLookup {
        let config = self.clone();
        let listener = listener.to_string();
        Box::new(move |key: &str| config.listener_prop(&listener, key))
    }

    /// `listener.security.protocol.map`, Kafka's default when unset.
    fn protocol_map(&self) -> Result<BTreeMap<String, SecurityProtocol>, BrokerError> {
        let get = |k: &str| self.props.get(k).map(String::as_str);
        listeners::effective_protocol_map(
            get("listener.security.protocol.map"),
            get("controller.listener.names"),
            get("listeners"),
        )
        .map_err(config_error)
    }

    /// `controller.listener.names`, upper-cased (empty when unset).
    fn controller_listener_names(&self) -> Vec<String> {
        listeners::controller_listener_names(
            self.props
                .get("controller.listener.names")
                .map(String::as_str)
                .unwrap_or(""),
        )
    }

    pub fn listener_plan(&self) -> Result<ListenerPlan, BrokerError> {
        let map = self.protocol_map()?;
        // A `controller.listener.names` entry in `listeners` is the quorum listener
        // (`config::controller_listener_address`), not a Kafka client listener.
        let controllers = self.controller_listener_names();
        let mut listeners = match self.props.get("listeners") {
            Some(text) => listeners::parse_listeners("listeners", text, &map)
                .map_err(config_error)?
                .into_iter()
                .filter(|l| !controllers.contains(&l.name))
                .collect(),
            None => Vec::new(),
        };
        if listeners.is_empty() {
            // No `listeners`, or only the controller's (a controller-only node): `--listen`.
            listeners.push(Endpoint {
                name: "PLAINTEXT".into(),
                protocol: SecurityProtocol::Plaintext,
                host: self.listen.ip().to_string(),
                port: self.listen.port(),
            });
        }
        for l in &listeners {
            l.bind_addr().map_err(config_error)?;
        }
        let inter_broker = listeners::inter_broker_listener(
            &listeners,
            self.props
                .get("inter.broker.listener.name")
                .map(String::as_str),
            self.props
                .get("security.inter.broker.protocol")
                .map(String::as_str),
        )
        .map_err(config_error)?;
        let mut advertised = BTreeMap::new();
        if let Some(text) = self.props.get("advertised.listeners") {
            for a in listeners::parse_listeners("advertised.listeners", text, &map)
                .map_err(config_error)?
                .into_iter()
                .filter(|a| !controllers.contains(&a.name))
            {
                if !listeners.iter().any(|l| l.name == a.name) {
                    return Err(config_error(format!(
                        "advertised.listeners names '{}', which is not in listeners",
                        a.name
                    )));
                }
                advertised.insert(a.name, (a.host, a.port));
            }
        }
        if let Some(adv) = &self.advertise {
            // --advertise is the shorthand for the inter-broker listener's advertised address.
            let (h, p) = adv.rsplit_once(':').ok_or_else(|| {
                config_error(format!("--advertise expects HOST:PORT, got '{adv}'"))
            })?;
            let port = p
                .parse::<u16>()
                .map_err(|_| config_error(format!("--advertise has a bad port: '{adv}'")))?;
            advertised
                .entry(inter_broker.clone())
                .or_insert((h.to_string(), port));
        }
        Ok(ListenerPlan {
            listeners,
            advertised,
            inter_broker,
        })
    }

    /// How this broker's own connections to other brokers (replica fetches, WriteTxnMarkers,
    /// AddPartitionsToTxn verification) are secured: the inter-broker listener's protocol,
    /// `sasl.mechanism.inter.broker.protocol` with the username/password of that listener's
    /// `listener.name.<name>.<mechanism>.sasl.jaas.config`, and the listener's trust store and
    /// key store for TLS (Kafka's rule: a broker is a client of its own inter-broker listener).
    pub fn inter_broker_security(
        &self,
        plan: &ListenerPlan,
    ) -> Result<tls::ReloadingSecurity, BrokerError> {
        let name = plan.inter_broker.clone();
        let protocol = plan
            .listeners
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.protocol);
        let Some(protocol) = protocol else {
            return Ok(tls::ReloadingSecurity::fixed(
                runnel_client::Security::default(),
            ));
        };
        self.dialing_security(&name, protocol, "sasl.mechanism.inter.broker.protocol")
            .map_err(|e| config_error(format!("inter-broker listener {name}: {e}")))
    }

    /// How this node dials listener `name` of other nodes: its protocol, the mechanism named by
    /// `mechanism_key` (Kafka's default GSSAPI is refused) with the username/password of
    /// `listener.name.<name>.<mechanism>.sasl.jaas.config`, and the listener's PEM stores,
    /// re-read when they change (`tls::ReloadingSecurity`) so the next dial uses them.
    fn dialing_security(
        &self,
        name: &str,
        protocol: SecurityProtocol,
        mechanism_key: &str,
    ) -> Result<tls::ReloadingSecurity, String> {
        let protocol_name = protocol.name();
        let mechanism = self
            .props
            .get(mechanism_key)
            .cloned()
            .unwrap_or_else(|| "GSSAPI".into());
        let jaas_key = format!(
            "listener.name.{}.{}.sasl.jaas.config",
            name.to_ascii_lowercase(),
            mechanism.to_ascii_lowercase()
        );
        let config = self.clone();
        let name = name.to_string();
        let get = move |key: &str| -> Option<String> {
            match key {
                "security.protocol" => Some(protocol_name.into()),
                "sasl.mechanism" => Some(mechanism.clone()),
                "sasl.jaas.config" => config
                    .props
                    .get(&jaas_key)
                    .or_else(|| config.props.get("sasl.jaas.config"))
                    .cloned(),
                // The broker's certificate names itself, not the peer it dials by address.
                "ssl.endpoint.identification.algorithm" => config
                    .listener_prop(&name, key)
                    .or_else(|| Some("https".into())),
                other => config.listener_prop(&name, other),
            }
        };
        tls::ReloadingSecurity::new(Box::new(get))
    }

    /// The controller (quorum) listener's connection cap:
    /// `listener.name.<controller listener>.max.connections` when set, else
    /// [`runnel_raft::config::DEFAULT_MAX_CONNECTIONS`]. Kafka's broker-wide `max.connections`
    /// is unbounded by default; the quorum listener shares this process's descriptor table
    /// with the Kafka listeners and the logs, so it is bounded on its own.
    pub fn controller_max_connections(&self) -> Result<usize, BrokerError> {
        let names = self.controller_listener_names();
        let name = names.first().map(String::as_str).unwrap_or("CONTROLLER");
        let key = format!(
            "listener.name.{}.max.connections",
            name.to_ascii_lowercase()
        );
        let Some(value) = self.props.get(&key) else {
            return Ok(runnel_raft::config::DEFAULT_MAX_CONNECTIONS);
        };
        match value.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(config_error(format!(
                "{key}={value}: expected a positive number of connections"
            ))),
        }
    }

    /// The controller (quorum) listener's security: `controller.listener.names` (its first
    /// name), that name's protocol in `listener.security.protocol.map`, the listener's
    /// `listener.name.<name>.` TLS and SASL properties for accepting, and
    /// `sasl.mechanism.controller.protocol` for dialing. Without `controller.listener.names`
    /// the listener is PLAINTEXT, as before. SASL there is PLAIN only (see
    /// `controller_security`).
    pub fn controller_security(
        &self,
    ) -> Result<Arc<dyn runnel_raft::ChannelSecurity>, BrokerError> {
        if !self.props.contains_key("controller.listener.names") {
            return Ok(Arc::new(runnel_raft::Plaintext));
        }
        let names = self.controller_listener_names();
        let Some(name) = names.first().map(String::as_str) else {
            return Err(config_error("controller.listener.names is empty".into()));
        };
        let map = self.protocol_map()?;
        let protocol = *map.get(name).ok_or_else(|| {
            config_error(format!(
                "controller.listener.names names {name}, which listener.security.protocol.map does not map to a security protocol"
            ))
        })?;
        if protocol == SecurityProtocol::Plaintext {
            return Ok(Arc::new(runnel_raft::Plaintext));
        }
        let context = |e: String| config_error(format!("controller listener {name}: {e}"));
        let tls = if protocol.uses_tls() {
            Some(Arc::new(
                tls::ReloadingAcceptor::new(self.owned_lookup(name)).map_err(context)?,
            ))
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            // No SCRAM store: the credentials live in the log this listener replicates.
            let (_tx, empty) = watch::channel(Arc::new(MetadataImage::empty(String::new())));
            let config = self.sasl_config(name, &empty).map_err(context)?;
            if let Some(m) = config.mechanisms.iter().find(|m| *m != PLAIN) {
                return Err(context(format!(
                    "sasl.enabled.mechanisms: {m} is not supported on the controller listener (PLAIN only: SCRAM credentials are stored in the metadata log the controllers replicate)"
                )));
            }
            Some(Arc::new(config))
        } else {
            None
        };
        let client = self
            .dialing_security(name, protocol, "sasl.mechanism.controller.protocol")
            .map_err(context)?;
        tracing::info!("controller listener {name}: {}", protocol.name());
        Ok(Arc::new(crate::controller::security::ControllerSecurity {
            listener: name.to_string(),
            protocol: protocol.name(),
            tls,
            sasl,
            client,
        }))
    }

    /// TLS and SASL for one listener; errors are startup errors naming the property.
    pub fn listener_runtime(
        &self,
        endpoint: &Endpoint,
        image: &watch::Receiver<Arc<MetadataImage>>,
    ) -> Result<ListenerRuntime, BrokerError> {
        let name = &endpoint.name;
        let context = |e: String| config_error(format!("listener {name}: {e}"));
        let tls = if endpoint.protocol.uses_tls() {
            Some(Arc::new(
                tls::ReloadingAcceptor::new(self.owned_lookup(name)).map_err(context)?,
            ))
        } else {
            None
        };
        let sasl = if endpoint.protocol.uses_sasl() {
            Some(Arc::new(self.sasl_config(name, image).map_err(context)?))
        } else {
            None
        };
        Ok(ListenerRuntime {
            name: name.clone(),
            tls,
            sasl,
        })
    }

    fn sasl_config(
        &self,
        listener: &str,
        image: &watch::Receiver<Arc<MetadataImage>>,
    ) -> Result<SaslConfig, String> {
        // Kafka's default is GSSAPI, which Runnel does not implement: the list must be given.
        let enabled = self
            .listener_prop(listener, "sasl.enabled.mechanisms")
            .ok_or(
            "a SASL listener needs sasl.enabled.mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
        )?;
        let mechanisms: Vec<String> = enabled
            .split(',')
            .map(|m| m.trim().to_ascii_uppercase())
            .filter(|m| !m.is_empty())
            .collect();
        for m in &mechanisms {
            if m != PLAIN && ScramMechanism::from_name(m).is_none() {
                return Err(format!("sasl.enabled.mechanisms: {m} is not supported"));
            }
        }
        let mut plain_users = BTreeMap::new();
        if mechanisms.iter().any(|m| m == PLAIN) {
            let key = format!(
                "listener.name.{}.plain.sasl.jaas.config",
                listener.to_ascii_lowercase()
            );
            let text = self
                .props
                .get(&key)
                .or_else(|| self.props.get("sasl.jaas.config"))
                .ok_or_else(|| format!("PLAIN needs {key} (or sasl.jaas.config) with user_<name>=\"<password>\" entries"))?;
            plain_users = jaas::parse(text)?.plain_users();
        }
        let max_reauth_ms = match self.listener_prop(listener, "connections.max.reauth.ms") {
            None => 0,
            Some(v) => v
                .trim()
                .parse::<i64>()
                .map_err(|_| format!("connections.max.reauth.ms must be a long, got '{v}'"))?,
        };
        let max_receive_size = self
            .listener_prop(listener, "sasl.server.max.receive.size")
            .unwrap_or_else(|| self.str("sasl.server.max.receive.size").to_string())
            .trim()
            .parse::<i32>()
            .ok()
            .and_then(|v| usize::try_from(v).ok())
            .filter(|v| *v > 0)
            .ok_or("sasl.server.max.receive.size must be a positive int")?;
        Ok(SaslConfig {
            mechanisms,
            plain_users,
            scram: scram_store(image.clone()),
            max_reauth_ms,
            max_receive_size,
        })
    }
}

/// The key and trust store settings Kafka reloads on a dynamic update.
fn is_reconfigurable_ssl(key: &str) -> bool {
    matches!(
        key,
        "ssl.keystore.type"
            | "ssl.keystore.location"
            | "ssl.keystore.password"
            | "ssl.key.password"
            | "ssl.keystore.key"
            | "ssl.keystore.certificate.chain"
            | "ssl.truststore.type"
            | "ssl.truststore.location"
            | "ssl.truststore.password"
            | "ssl.truststore.certificates"
    )
}

/// SCRAM credentials as the replicated metadata holds them, read at each authentication.
fn scram_store(image: watch::Receiver<Arc<MetadataImage>>) -> ScramStore {
    Arc::new(move |user: &str, mechanism: ScramMechanism| {
        let image = image.borrow().clone();
        let stored = image
            .scram_credentials
            .get(&(user.to_string(), mechanism.id()))?;
        Some(ScramCredential {
            salt: stored.salt.clone(),
            stored_key: stored.stored_key.clone(),
            server_key: stored.server_key.clone(),
            iterations: stored.iterations,
        })
    })
}

/// Where a bound listener is advertised: `advertised.listeners`, else the bound address.
pub fn advertised_endpoint(plan: &ListenerPlan, name: &str, bound: SocketAddr) -> (String, u16) {
    match plan.advertised.get(name) {
        Some((host, port)) if !host.is_empty() => {
            (host.clone(), if *port == 0 { bound.port() } else { *port })
        }
        _ => (bound.ip().to_string(), bound.port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_config() -> BrokerConfig {
        BrokerConfig {
            node_id: 1,
            listen: "127.0.0.1:0".parse().unwrap(),
            advertise: None,
            data_dir: "./x".into(),
            log_dirs: vec!["./x".into()],
            cluster: None,
            props: BTreeMap::new(),
            dynamic: Default::default(),
        }
    }

    fn plan(props: &[(&str, &str)]) -> Result<ListenerPlan, BrokerError> {
        let mut config = test_config();
        for (k, v) in props {
            config.props.insert(k.to_string(), v.to_string());
        }
        config.listener_plan()
    }

    fn inter_broker(props: &[(&str, &str)]) -> Result<runnel_client::Security, BrokerError> {
        let mut config = test_config();
        for (k, v) in props {
            config.props.insert(k.to_string(), v.to_string());
        }
        let plan = config.listener_plan()?;
        config.inter_broker_security(&plan).map(|s| s.current())
    }

    #[test]
    fn the_controller_listeners_cap_comes_from_its_own_max_connections() {
        let cap = |props: &[(&str, &str)]| {
            let mut config = test_config();
            for (k, v) in props {
                config.props.insert(k.to_string(), v.to_string());
            }
            config.controller_max_connections()
        };
        let default = runnel_raft::config::DEFAULT_MAX_CONNECTIONS;
        // The broker-wide max.connections is the Kafka listeners' (unbounded by default).
        assert_eq!(cap(&[("max.connections", "2147483647")]).unwrap(), default);
        assert_eq!(
            cap(&[("listener.name.controller.max.connections", "50")]).unwrap(),
            50
        );
        let named = [
            ("controller.listener.names", "QUORUM"),
            ("listener.name.quorum.max.connections", "7"),
            ("listener.name.controller.max.connections", "50"),
        ];
        assert_eq!(cap(&named).unwrap(), 7);
        for bad in ["0", "-1", "many"] {
            let e = cap(&[("listener.name.controller.max.connections", bad)]).unwrap_err();
            assert!(e.to_string().contains("positive number"), "{e}");
        }
    }

    #[test]
    fn inter_broker_credentials_come_from_the_listener() {
        assert!(inter_broker(&[]).unwrap().sasl.is_none());
        let listeners = (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        );
        let ib = ("inter.broker.listener.name", "SASL_PLAINTEXT");
        // Kafka's default mechanism (GSSAPI) is refused at startup, naming the listener.
        let err = inter_broker(&[listeners, ib]).unwrap_err().to_string();
        assert!(
            err.contains("SASL_PLAINTEXT") && err.contains("GSSAPI"),
            "{err}"
        );
        let s = inter_broker(&[
            listeners,
            ib,
            ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
            (
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"b\" password=\"p\";",
            ),
        ])
        .unwrap();
        let creds = s.sasl.unwrap();
        assert_eq!(
            (creds.mechanism.as_str(), creds.username.as_str()),
            ("SCRAM-SHA-512", "b")
        );
        assert!(s.tls.is_none());
    }

    #[test]
    fn controller_listener_security_from_kafka_properties() {
        let security = |props: &[(&str, &str)]| {
            let mut config = test_config();
            for (k, v) in props {
                config.props.insert(k.to_string(), v.to_string());
            }
            config.controller_security()
        };
        // Without controller.listener.names: PLAINTEXT, as before.
        assert_eq!(security(&[]).ok().unwrap().protocol(), "PLAINTEXT");
        let names = ("controller.listener.names", "CONTROLLER");
        let map = (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        );
        // Kafka's effective map: an unmapped controller name is PLAINTEXT by default...
        assert_eq!(security(&[names]).ok().unwrap().protocol(), "PLAINTEXT");
        // ... but not under an explicit map that leaves it out.
        let partial = ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT");
        let err = security(&[names, partial]).err().unwrap().to_string();
        assert!(err.contains("listener.security.protocol.map"), "{err}");
        let jaas = (
            "listener.name.controller.plain.sasl.jaas.config",
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="n" password="p" user_n="p";"#,
        );
        let mechanisms = ("listener.name.controller.sasl.enabled.mechanisms", "PLAIN");
        // Kafka's default sasl.mechanism.controller.protocol (GSSAPI) is refused.
        let err = security(&[names, map, jaas, mechanisms])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("GSSAPI"), "{err}");
        let mechanism = ("sasl.mechanism.controller.protocol", "PLAIN");
        let ok = security(&[names, map, jaas, mechanisms, mechanism])
            .ok()
            .unwrap();
        assert_eq!(ok.protocol(), "SASL_PLAINTEXT");
        // SCRAM cannot be checked before the metadata log is replicated.
        let scram = (
            "listener.name.controller.sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-512",
        );
        let err = security(&[names, map, jaas, scram, mechanism])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("SCRAM-SHA-512"), "{err}");
    }

    #[test]
    fn listen_flag_is_the_plaintext_shorthand() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.listeners.len(), 1);
        assert_eq!(p.listeners[0].name, "PLAINTEXT");
        assert_eq!(p.inter_broker, "PLAINTEXT");
    }

    #[test]
    fn listeners_and_advertised_listeners() {
        let p = plan(&[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            ),
            ("advertised.listeners", "SASL_SSL://broker.example:9094"),
        ])
        .unwrap();
        let bound: SocketAddr = "127.0.0.1:5555".parse().unwrap();
        assert_eq!(
            advertised_endpoint(&p, "SASL_SSL", bound),
            ("broker.example".to_string(), 9094)
        );
        assert_eq!(
            advertised_endpoint(&p, "PLAINTEXT", bound),
            ("127.0.0.1".to_string(), 5555)
        );
        assert!(plan(&[
            ("listeners", "PLAINTEXT://127.0.0.1:0"),
            ("advertised.listeners", "SSL://h:1")
        ])
        .is_err());
        assert!(plan(&[("listeners", "PLAINTEXT://localhost:0")]).is_err());
    }

    #[test]
    fn sasl_listener_settings_are_validated() {
        let mut config = test_config();
        let (_tx, image) = watch::channel(Arc::new(MetadataImage::empty("c".into())));
        let sasl = Endpoint {
            name: "SASL_PLAINTEXT".into(),
            protocol: SecurityProtocol::SaslPlaintext,
            host: "127.0.0.1".into(),
            port: 0,
        };
        assert!(config.listener_runtime(&sasl, &image).is_err());
        config.props.insert(
            "sasl.enabled.mechanisms".into(),
            "PLAIN,SCRAM-SHA-512".into(),
        );
        assert!(
            config.listener_runtime(&sasl, &image).is_err(),
            "PLAIN without JAAS"
        );
        config.props.insert(
            "listener.name.sasl_plaintext.plain.sasl.jaas.config".into(),
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="pw";"#
                .into(),
        );
        let runtime = config.listener_runtime(&sasl, &image).unwrap();
        let sasl = runtime.sasl.unwrap();
        assert_eq!(sasl.plain_users["alice"], "pw");
        assert!((sasl.scram)("alice", ScramMechanism::Sha512).is_none());
    }
}
