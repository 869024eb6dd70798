//! Kafka's PEM properties, read once for both sides: the broker's TLS listeners and the
//! client's TLS connections (`security.protocol=SSL|SASL_SSL`).
//!
//! Key stores: `ssl.keystore.type=PEM` with `ssl.keystore.location` (one file holding the key
//! and the chain) or inline `ssl.keystore.certificate.chain` + `ssl.keystore.key`; for a client
//! also librdkafka's `ssl.certificate.location` + `ssl.key.location`. Trust stores:
//! `ssl.truststore.type=PEM` with `ssl.truststore.location` or inline
//! `ssl.truststore.certificates`; for a client also librdkafka's `ssl.ca.location`.
//! `ssl.enabled.protocols` (TLSv1.2, TLSv1.3). Encrypted keys (`ssl.key.password`) are refused.

use std::io::BufReader;
use std::sync::Arc;

use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::{self, ClientConfig, DigitallySignedStruct, RootCertStore};

/// A property as one side sees it (a listener: its `listener.name.<name>.` override, else the
/// global one; a client: its properties file).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

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

/// A certificate chain and its key.
pub type KeyPair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The configured certificate chain and key, `None` when none is configured.
pub fn keystore_opt(get: Lookup) -> Result<Option<KeyPair>, String> {
    require_pem(get, "ssl.keystore.type")?;
    if get("ssl.key.password").is_some_and(|p| !p.is_empty()) {
        return Err("ssl.key.password: encrypted PEM keys are not supported".into());
    }
    if let Some(path) = get("ssl.keystore.location") {
        let pem = read_file("ssl.keystore.location", &path)?;
        return Ok(Some((
            certs(&pem, "ssl.keystore.location")?,
            key(&pem, "ssl.keystore.location")?,
        )));
    }
    if let (Some(chain), Some(k)) = (
        get("ssl.keystore.certificate.chain"),
        get("ssl.keystore.key"),
    ) {
        return Ok(Some((
            certs(chain.as_bytes(), "ssl.keystore.certificate.chain")?,
            key(k.as_bytes(), "ssl.keystore.key")?,
        )));
    }
    match (get("ssl.certificate.location"), get("ssl.key.location")) {
        (Some(cert), Some(k)) => Ok(Some((
            certs(
                &read_file("ssl.certificate.location", &cert)?,
                "ssl.certificate.location",
            )?,
            key(&read_file("ssl.key.location", &k)?, "ssl.key.location")?,
        ))),
        (None, None) => Ok(None),
        _ => Err("ssl.certificate.location and ssl.key.location go together".into()),
    }
}

/// A listener's certificate chain and key (required).
pub fn keystore(get: Lookup) -> Result<KeyPair, String> {
    keystore_opt(get)?.ok_or_else(|| {
        "a TLS listener needs ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key".into()
    })
}

/// The configured CAs, `None` when none are configured.
pub fn truststore(get: Lookup) -> Result<Option<RootCertStore>, String> {
    require_pem(get, "ssl.truststore.type")?;
    let pem = match (
        get("ssl.truststore.location"),
        get("ssl.truststore.certificates"),
        get("ssl.ca.location"),
    ) {
        (Some(path), _, _) => read_file("ssl.truststore.location", &path)?,
        (None, Some(inline), _) => inline.into_bytes(),
        (None, None, Some(path)) => read_file("ssl.ca.location", &path)?,
        (None, None, None) => return Ok(None),
    };
    let mut roots = RootCertStore::empty();
    for cert in certs(&pem, "ssl.truststore")? {
        roots
            .add(cert)
            .map_err(|e| format!("ssl.truststore: unusable CA certificate: {e}"))?;
    }
    Ok(Some(roots))
}

/// A client's TLS settings: rustls' config and whether the broker's name is checked.
#[derive(Clone, Debug)]
pub struct ClientTls {
    pub config: Arc<ClientConfig>,
}

/// Builds a client's TLS config from Kafka's client properties. The broker's certificate must
/// chain to the configured CAs; its name is checked against the address connected to unless
/// `ssl.endpoint.identification.algorithm` is empty (Kafka's way to turn that off).
pub fn client_config(get: Lookup) -> Result<ClientTls, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = enabled_protocols(get)?;
    let roots = truststore(get)?
        .ok_or("TLS needs the CA certificates: ssl.truststore.location (PEM) or ssl.ca.location")?;
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("ssl.truststore: {e}"))?;
    let check_name = match get("ssl.endpoint.identification.algorithm").as_deref() {
        None | Some("https") => true,
        Some("") | Some("none") => false,
        Some(other) => {
            return Err(format!(
                "ssl.endpoint.identification.algorithm={other}: use https or an empty value"
            ))
        }
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| format!("ssl.enabled.protocols: {e}"))?;
    let builder = if check_name {
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyName(verifier)))
    };
    let config = match keystore_opt(get)? {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("ssl.keystore: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    Ok(ClientTls {
        config: Arc::new(config),
    })
}

/// The server name rustls checks the broker's certificate against: the host of `host:port`.
pub fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = match addr.rsplit_once(':') {
        Some((host, _)) => host,
        None => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|e| format!("'{host}' is not a host name: {e}"))
}

/// Verifies the chain and signatures but accepts any name (the endpoint check turned off).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
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
    fn a_client_needs_cas_and_pem() {
        let err = client_config(&props(&[])).err().unwrap();
        assert!(err.contains("ssl.ca.location"), "{err}");
        let jks = props(&[("ssl.truststore.type", "JKS")]);
        assert!(client_config(&jks).err().unwrap().contains("only PEM"));
        let half = props(&[("ssl.certificate.location", "/nonexistent")]);
        assert!(keystore_opt(&half).is_err());
        assert!(keystore_opt(&props(&[])).unwrap().is_none());
        let enc = props(&[("ssl.key.password", "x")]);
        assert!(keystore_opt(&enc).err().unwrap().contains("encrypted"));
    }

    #[test]
    fn server_names_from_addresses() {
        assert!(matches!(
            server_name("127.0.0.1:9092").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("[::1]:9092").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("localhost:9092").unwrap(),
            ServerName::DnsName(_)
        ));
    }
}
