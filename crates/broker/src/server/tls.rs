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

/// Builds the acceptor for one TLS listener (startup errors name the property at fault).
pub fn acceptor(get: Lookup) -> Result<TlsAcceptor, String> {
    let mapping = get("ssl.principal.mapping.rules").unwrap_or_else(|| "DEFAULT".into());
    if mapping.trim() != "DEFAULT" {
        return Err("ssl.principal.mapping.rules: only DEFAULT (the full DN) is supported".into());
    }
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

/// A listener's acceptor that follows its PEM files: when the modification time or size of
/// `ssl.keystore.location` or `ssl.truststore.location` changes, the next accepted connection
/// gets an acceptor rebuilt from them (certificate rotation without a restart; Kafka does it
/// through a dynamic `listener.name.<l>.ssl.keystore.location` update). Connections already
/// open keep their session. A rebuild that fails (a half-written file) keeps the previous
/// acceptor, logs a warning and is retried on the next connection.
pub struct ReloadingAcceptor {
    lookup: OwnedLookup,
    state: parking_lot::Mutex<(Vec<Stamp>, TlsAcceptor)>,
}

/// A listener's properties, kept to rebuild the acceptor later.
pub type OwnedLookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A watched file's identity: path, modification time and length (`None` if unreadable).
type Stamp = (String, Option<(std::time::SystemTime, u64)>);

impl ReloadingAcceptor {
    /// Builds the acceptor now (errors are startup errors) and remembers the files it read.
    pub fn new(lookup: OwnedLookup) -> Result<Self, String> {
        let acceptor = acceptor(&*lookup)?;
        let stamps = stamps(&*lookup);
        Ok(ReloadingAcceptor {
            lookup,
            state: parking_lot::Mutex::new((stamps, acceptor)),
        })
    }

    /// The acceptor for a new connection, rebuilt first if a watched file changed.
    pub fn current(&self) -> TlsAcceptor {
        let now = stamps(&*self.lookup);
        let mut state = self.state.lock();
        if now != state.0 {
            match acceptor(&*self.lookup) {
                Ok(fresh) => {
                    tracing::info!(files = ?now.iter().map(|(p, _)| p).collect::<Vec<_>>(), "TLS key or trust store changed: reloaded");
                    *state = (now, fresh);
                }
                Err(e) => tracing::warn!("TLS key or trust store changed but cannot be loaded (keeping the previous one): {e}"),
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
        let rules = props(&[("ssl.principal.mapping.rules", "RULE:^CN=(.*)$/$1/")]);
        assert!(acceptor(&rules).is_err());
    }
}
