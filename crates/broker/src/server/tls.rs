//! TLS listeners with rustls, configured by Kafka's PEM properties.
//!
//! `ssl.keystore.type=PEM` with `ssl.keystore.location` (one file holding the key and the
//! chain) or inline `ssl.keystore.certificate.chain` + `ssl.keystore.key`;
//! `ssl.truststore.type=PEM` with `ssl.truststore.location` or inline
//! `ssl.truststore.certificates` (the CAs client certificates must chain to);
//! `ssl.client.auth` none/requested/required; `ssl.enabled.protocols` (TLSv1.2, TLSv1.3).
//! Every property may be prefixed `listener.name.<name>.` for one listener (Kafka's rule).

use std::io::BufReader;
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// A property as a listener sees it: the `listener.name.<name>.` override, else the global one.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

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

/// `ssl.enabled.protocols` (Kafka's default `TLSv1.2,TLSv1.3`) as rustls versions.
pub fn enabled_protocols(
    get: Lookup,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let raw = get("ssl.enabled.protocols").unwrap_or_else(|| "TLSv1.2,TLSv1.3".into());
    let mut out = Vec::new();
    for p in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match p {
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            other => {
                return Err(format!(
                    "ssl.enabled.protocols: '{other}' is not supported (TLSv1.2, TLSv1.3)"
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("ssl.enabled.protocols is empty".into());
    }
    Ok(out)
}

fn require_pem(get: Lookup, key: &str) -> Result<(), String> {
    match get(key).as_deref() {
        None | Some("PEM") => Ok(()),
        Some(other) => Err(format!("{key}={other} is not supported (only PEM)")),
    }
}

fn read_file(key: &str, path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{key}: cannot read '{path}': {e}"))
}

fn certs(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = rustls_pemfile::certs(&mut BufReader::new(pem))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what}: bad PEM certificate: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what}: no certificate found"));
    }
    Ok(certs)
}

fn key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, String> {
    rustls_pemfile::private_key(&mut BufReader::new(pem))
        .map_err(|e| format!("{what}: bad PEM key: {e}"))?
        .ok_or_else(|| {
            format!("{what}: no unencrypted private key found (ssl.key.password is not supported)")
        })
}

/// The listener's certificate chain and key.
fn keystore(get: Lookup) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    require_pem(get, "ssl.keystore.type")?;
    if let Some(path) = get("ssl.keystore.location") {
        let pem = read_file("ssl.keystore.location", &path)?;
        return Ok((
            certs(&pem, "ssl.keystore.location")?,
            key(&pem, "ssl.keystore.location")?,
        ));
    }
    match (get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")) {
        (Some(chain), Some(k)) => Ok((
            certs(chain.as_bytes(), "ssl.keystore.certificate.chain")?,
            key(k.as_bytes(), "ssl.keystore.key")?,
        )),
        _ => Err("a TLS listener needs ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key".into()),
    }
}

fn truststore(get: Lookup) -> Result<Option<RootCertStore>, String> {
    require_pem(get, "ssl.truststore.type")?;
    let pem = match (
        get("ssl.truststore.location"),
        get("ssl.truststore.certificates"),
    ) {
        (Some(path), _) => read_file("ssl.truststore.location", &path)?,
        (None, Some(inline)) => inline.into_bytes(),
        (None, None) => return Ok(None),
    };
    let mut roots = RootCertStore::empty();
    for cert in certs(&pem, "ssl.truststore")? {
        roots
            .add(cert)
            .map_err(|e| format!("ssl.truststore: unusable CA certificate: {e}"))?;
    }
    Ok(Some(roots))
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
