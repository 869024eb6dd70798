//! TLS listeners with rustls, configured by Kafka's PEM properties.
//!
//! `ssl.keystore.type=PEM` with `ssl.keystore.location` (one file holding the key and the
//! chain) or inline `ssl.keystore.certificate.chain` + `ssl.keystore.key`;
//! `ssl.truststore.type=PEM` with `ssl.truststore.location` or inline
//! `ssl.truststore.certificates` (the CAs client certificates must chain to);
//! `ssl.client.auth` none/requested/required; `ssl.enabled.protocols` (TLSv1.2, TLSv1.3).
//! Every property may be prefixed `listener.name.<name>.` for one listener (Kafka's rule).

use std::sync::Arc;

use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// A property as a listener sees it (the PEM readers are shared with the client).
pub use runnel_client::tls::{enabled_protocols, Lookup};
use runnel_client::tls::{keystore, truststore};

use super::principal_mapping::SslPrincipalMapper;

/// Kafka's `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

pub fn client_auth(get: Lookup) -> Result<ClientAuth, String> {
    match get("ssl.client.auth").as_deref().unwrap_or("none") {
        "none" => Ok(ClientAuth::None),
        "requested" => Ok(ClientAuth::Requested),
        "required" => Ok(ClientAuth::Required),
        other => Err(format!(
            "ssl.client.auth must be none, requested or required, got '{other}'"
        )),
    }
}

/// A TLS listener: its acceptor and how a client certificate's DN becomes the principal
/// (`ssl.principal.mapping.rules`, Kafka's default `DEFAULT`).
#[derive(Clone)]
pub struct ListenerTls {
    pub acceptor: TlsAcceptor,
    pub principal_mapper: Arc<SslPrincipalMapper>,
}

impl ListenerTls {
    /// The principal name of the verified client certificate: `Ok(None)` without one, an
    /// error when no mapping rule applies to its DN (Kafka's `NoMatchingRule`, which fails the
    /// authentication).
    pub fn certificate_principal(
        &self,
        tls: &tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    ) -> Result<Option<String>, String> {
        let Some(dn) = crate::server::client_certificate_dn(tls) else {
            return Ok(None);
        };
        match self.principal_mapper.name(&dn) {
            Some(name) => Ok(Some(name)),
            None => Err(format!(
                "no ssl.principal.mapping.rules rule applies to {dn}"
            )),
        }
    }
}

/// Builds one TLS listener (startup errors name the property at fault).
pub fn listener_tls(get: Lookup) -> Result<ListenerTls, String> {
    let rules = get("ssl.principal.mapping.rules").unwrap_or_else(|| "DEFAULT".into());
    let principal_mapper = Arc::new(
        SslPrincipalMapper::parse(&rules)
            .map_err(|e| format!("ssl.principal.mapping.rules: {e}"))?,
    );
    Ok(ListenerTls {
        acceptor: acceptor(get)?,
        principal_mapper,
    })
}

/// Builds the acceptor for one TLS listener (startup errors name the property at fault).
pub fn acceptor(get: Lookup) -> Result<TlsAcceptor, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = enabled_protocols(get)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("ssl.enabled.protocols: {e}"))?;
    let auth = client_auth(get)?;
    let builder = match (auth, truststore(get)?) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            return Err("ssl.client.auth requested/required needs ssl.truststore.location".into())
        }
        (auth, Some(roots)) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("ssl.truststore: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let (chain, key) = keystore(get)?;
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("ssl.keystore: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Something built from a listener's PEM files that follows them: when the path, modification
/// time or size of `ssl.keystore.location` or `ssl.truststore.location` changes (a replaced
/// file, or a new path set by a dynamic `listener.name.<l>.ssl.keystore.location` AlterConfigs,
/// as Kafka's `kafka-configs --entity-type brokers --entity-name <id>` does), the next
/// connection gets a value rebuilt from them (certificate rotation without a restart).
/// Connections already open keep their session. A rebuild that fails (a half-written file)
/// keeps the previous value, logs a warning and is retried on the next connection.
///
/// One rule for both sides: [`ReloadingAcceptor`] (listeners) and [`ReloadingSecurity`]
/// (this node dialing other nodes: inter-broker and controller clients).
pub struct Reloading<T: Clone> {
    what: &'static str,
    lookup: OwnedLookup,
    build: fn(Lookup) -> Result<T, String>,
    state: parking_lot::Mutex<(Vec<Stamp>, T)>,
}

/// A listener's acceptor and principal mapping.
pub type ReloadingAcceptor = Reloading<ListenerTls>;

/// How this node secures a connection it opens to another node's listener.
pub type ReloadingSecurity = Reloading<runnel_client::Security>;

/// A listener's properties, kept to rebuild the value later.
pub type OwnedLookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A watched file's identity: path, modification time and length (`None` if unreadable).
type Stamp = (String, Option<(std::time::SystemTime, u64)>);

impl ReloadingAcceptor {
    /// Builds the listener's acceptor now (errors are startup errors).
    pub fn new(lookup: OwnedLookup) -> Result<Self, String> {
        Reloading::build("TLS key or trust store", lookup, listener_tls)
    }
}

impl ReloadingSecurity {
    /// Builds the dialing side's security now (errors are startup errors).
    pub fn new(lookup: OwnedLookup) -> Result<Self, String> {
        Reloading::build(
            "outgoing connections' TLS key or trust store",
            lookup,
            |get| runnel_client::Security::from_lookup(get),
        )
    }

    /// A fixed security (PLAINTEXT, or tests): nothing to watch.
    pub fn fixed(security: runnel_client::Security) -> Self {
        Reloading {
            what: "security",
            lookup: Box::new(|_| None),
            build: |_| Ok(runnel_client::Security::default()),
            state: parking_lot::Mutex::new((Vec::new(), security)),
        }
    }
}

impl<T: Clone> Reloading<T> {
    fn build(
        what: &'static str,
        lookup: OwnedLookup,
        build: fn(Lookup) -> Result<T, String>,
    ) -> Result<Self, String> {
        let value = build(&*lookup)?;
        let stamps = stamps(&*lookup);
        Ok(Reloading {
            what,
            lookup,
            build,
            state: parking_lot::Mutex::new((stamps, value)),
        })
    }

    /// The value for a new connection, rebuilt first if a watched file changed.
    pub fn current(&self) -> T {
        let now = stamps(&*self.lookup);
        let mut state = self.state.lock();
        if now != state.0 {
            match (self.build)(&*self.lookup) {
                Ok(fresh) => {
                    tracing::info!(files = ?now.iter().map(|(p, _)| p).collect::<Vec<_>>(), "{} changed: reloaded", self.what);
                    *state = (now, fresh);
                }
                Err(e) => tracing::warn!(
                    "{} changed but cannot be loaded (keeping the previous one): {e}",
                    self.what
                ),
            }
        }
        state.1.clone()
    }
}

fn stamps(get: Lookup) -> Vec<Stamp> {
    ["ssl.keystore.location", "ssl.truststore.location"]
        .iter()
        .filter_map(|key| get(key))
        .map(|path| {
            let meta = std::fs::metadata(&path)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len())));
            (path, meta)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    #[test]
    fn property_values_follow_kafka() {
        assert_eq!(client_auth(&props(&[])).unwrap(), ClientAuth::None);
        assert_eq!(
            client_auth(&props(&[("ssl.client.auth", "required")])).unwrap(),
            ClientAuth::Required
        );
        assert!(client_auth(&props(&[("ssl.client.auth", "maybe")])).is_err());
        assert_eq!(enabled_protocols(&props(&[])).unwrap().len(), 2);
        assert!(enabled_protocols(&props(&[("ssl.enabled.protocols", "TLSv1.1")])).is_err());
        let only13 = props(&[("ssl.enabled.protocols", "TLSv1.3")]);
        assert_eq!(enabled_protocols(&only13).unwrap().len(), 1);
    }

    #[test]
    fn missing_or_non_pem_keystores_are_startup_errors() {
        let err = acceptor(&props(&[])).err().unwrap();
        assert!(err.contains("ssl.keystore.location"), "{err}");
        let jks = props(&[("ssl.keystore.type", "JKS")]);
        assert!(acceptor(&jks).err().unwrap().contains("only PEM"));
        let rules = props(&[("ssl.principal.mapping.rules", "RULE:^CN=(.*)$/$1")]);
        let err = listener_tls(&rules).err().unwrap();
        assert!(err.contains("ssl.principal.mapping.rules"), "{err}");
    }
}
