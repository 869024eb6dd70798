//! SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's `ScramSaslServer` speaks it.
//!
//! Pure: the caller supplies the nonce and the stored credential, so every step is a function
//! of its inputs and the RFC's test vectors check it. Only the salted form
//! ([`ScramCredential`]) is ever kept; the password exists only while a credential is made.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Kafka's `ScramMechanism`: the two hashes it supports and its iteration bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

/// Kafka's bounds on a credential's iteration count (`ScramMechanism.minIterations`, and
/// `AlterUserScramCredentials`' maximum).
pub const MIN_ITERATIONS: u32 = 4096;
pub const MAX_ITERATIONS: u32 = 16384;

impl ScramMechanism {
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
            "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// KIP-554's mechanism id (1 = SHA-256, 2 = SHA-512).
    pub fn id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_id(id: i8) -> Option<Self> {
        match id {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // Any key length is valid for HMAC, so `new_from_slice` cannot fail here.
        match self {
            ScramMechanism::Sha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    /// RFC 5802's `Hi()`: PBKDF2 with this mechanism's HMAC.
    fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }
}

/// What the server stores for a user and mechanism (Kafka's `ScramCredential`).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

/// Never prints the keys: a credential must not reach a log line.
impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScramCredential {{ iterations: {} }}", self.iterations)
    }
}

impl ScramCredential {
    /// Salts and hashes `password` (RFC 5802 section 3).
    pub fn new(mechanism: ScramMechanism, password: &str, salt: &[u8], iterations: u32) -> Self {
        let salted = mechanism.hi(password.as_bytes(), salt, iterations);
        Self::from_salted_password(mechanism, &salted, salt, iterations)
    }

    /// The stored form of a `SaltedPassword` (what KIP-554's AlterUserScramCredentials sends).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Self {
        let client_key = mechanism.hmac(salted, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted, b"Server Key"),
            iterations,
        }
    }

    /// `SaltedPassword` for a password (the client side of KIP-554, and bootstrapping).
    pub fn salted_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Vec<u8> {
        mechanism.hi(password.as_bytes(), salt, iterations)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("invalid SCRAM message: {0}")]
    Malformed(&'static str),
    #[error("authentication failed: invalid credentials")]
    BadProof,
    #[error("authentication failed: invalid nonce")]
    BadNonce,
}

/// The client's first message, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    pub username: String,
    pub nonce: String,
    /// `client-first-message-bare`, which the signatures cover.
    pub bare: String,
    gs2_header: String,
}

/// Parses `gs2-header client-first-message-bare` (`n,,n=user,r=nonce`). Channel binding is
/// not offered (`p=` is refused), as in Kafka.
pub fn parse_client_first(message: &[u8]) -> Result<ClientFirst, ScramError> {
    let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))?;
    let mut parts = text.splitn(3, ',');
    let cbind = parts.next().ok_or(ScramError::Malformed("empty"))?;
    if cbind != "n" && cbind != "y" {
        return Err(ScramError::Malformed("channel binding is not supported"));
    }
    let authzid = parts.next().ok_or(ScramError::Malformed("no gs2 header"))?;
    let bare = parts
        .next()
        .ok_or(ScramError::Malformed("no bare message"))?;
    let mut attrs = bare.split(',');
    let username = attrs
        .next()
        .and_then(|a| a.strip_prefix("n="))
        .ok_or(ScramError::Malformed("no username"))?;
    let nonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or(ScramError::Malformed("no nonce"))?;
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(ScramError::Malformed("bad nonce"));
    }
    let username = unescape_username(username)?;
    if let Some(authz) = authzid.strip_prefix("a=") {
        // Kafka allows an authorization id only when it names the authenticating user.
        if unescape_username(authz)? != username {
            return Err(ScramError::Malformed(
                "authorization id differs from the user",
            ));
        }
    }
    Ok(ClientFirst {
        username,
        nonce: nonce.to_string(),
        bare: bare.to_string(),
        gs2_header: format!("{cbind},{authzid},"),
    })
}

/// RFC 5802's `saslname`: `=2C` is `,` and `=3D` is `=`; any other `=` is an error.
fn unescape_username(raw: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let code = rest.get(i..i + 3);
        match code {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("bad escape in username")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(ScramError::Malformed("empty username"));
    }
    Ok(out)
}

fn escape_username(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// The server's state between its first message and the client's final one.
#[derive(Debug)]
pub struct ServerExchange {
    mechanism: ScramMechanism,
    credential: ScramCredential,
    client_first: ClientFirst,
    server_first: String,
    nonce: String,
}

/// Answers the client's first message: `r=<client+server nonce>,s=<salt>,i=<iterations>`.
pub fn server_first(
    mechanism: ScramMechanism,
    client_first: ClientFirst,
    credential: ScramCredential,
    server_nonce: &str,
) -> (ServerExchange, String) {
    let nonce = format!("{}{}", client_first.nonce, server_nonce);
    let message = format!(
        "r={nonce},s={},i={}",
        B64.encode(&credential.salt),
        credential.iterations
    );
    let exchange = ServerExchange {
        mechanism,
        credential,
        client_first,
        server_first: message.clone(),
        nonce,
    };
    (exchange, message)
}

impl ServerExchange {
    pub fn username(&self) -> &str {
        &self.client_first.username
    }

    /// Checks `c=...,r=...,p=<proof>`; on success returns `v=<server signature>`.
    pub fn client_final(&self, message: &[u8]) -> Result<String, ScramError> {
        let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("no proof"))?;
        let mut attrs = without_proof.split(',');
        let binding = attrs
            .next()
            .and_then(|a| a.strip_prefix("c="))
            .ok_or(ScramError::Malformed("no channel binding"))?;
        let nonce = attrs
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or(ScramError::Malformed("no nonce"))?;
        let expected_binding = B64.encode(self.client_first.gs2_header.as_bytes());
        if binding != expected_binding {
            return Err(ScramError::Malformed(
                "channel binding differs from gs2 header",
            ));
        }
        if nonce != self.nonce {
            return Err(ScramError::BadNonce);
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("proof is not base64"))?;
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first.bare, self.server_first
        );
        let m = self.mechanism;
        let client_signature = m.hmac(&self.credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(ScramError::BadProof);
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        if !constant_time_eq(&m.hash(&client_key), &self.credential.stored_key) {
            return Err(ScramError::BadProof);
        }
        let server_signature = m.hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)))
    }
}

/// Compares secrets without an early exit, so timing does not reveal how much matched.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The client's side, for the project's own client and for tests: the first message.
pub fn client_first_message(username: &str, client_nonce: &str) -> String {
    format!("n,,n={},r={client_nonce}", escape_username(username))
}

/// The client's final message and the server signature it must then receive.
pub fn client_final_message(
    mechanism: ScramMechanism,
    password: &str,
    client_first: &str,
    server_first: &str,
) -> Result<(String, String), ScramError> {
    let bare = client_first
        .strip_prefix("n,,")
        .ok_or(ScramError::Malformed("client first message"))?;
    let mut nonce = None;
    let mut salt = None;
    let mut iterations = None;
    for attr in server_first.split(',') {
        if let Some(v) = attr.strip_prefix("r=") {
            nonce = Some(v);
        } else if let Some(v) = attr.strip_prefix("s=") {
            salt = B64.decode(v).ok();
        } else if let Some(v) = attr.strip_prefix("i=") {
            iterations = v.parse::<u32>().ok();
        }
    }
    let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
        return Err(ScramError::Malformed("server first message"));
    };
    let client_nonce = bare.split(",r=").nth(1).unwrap_or_default();
    if !nonce.starts_with(client_nonce) || iterations == 0 {
        return Err(ScramError::BadNonce);
    }
    let m = mechanism;
    let salted = m.hi(password.as_bytes(), &salt, iterations);
    let client_key = m.hmac(&salted, b"Client Key");
    let stored_key = m.hash(&client_key);
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("{bare},{server_first},{without_proof}");
    let signature = m.hmac(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(a, b)| a ^ b)
        .collect();
    let server_key = m.hmac(&salted, b"Server Key");
    let server_signature = m.hmac(&server_key, auth_message.as_bytes());
    Ok((
        format!("{without_proof},p={}", B64.encode(proof)),
        format!("v={}", B64.encode(server_signature)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7677 section 3: user "user", password "pencil".
    const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    const SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc_credential() -> ScramCredential {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        ScramCredential::new(ScramMechanism::Sha256, "pencil", &salt, 4096)
    }

    #[test]
    fn server_side_matches_rfc_7677() {
        let first = parse_client_first(CLIENT_FIRST.as_bytes()).unwrap();
        assert_eq!(first.username, "user");
        let (exchange, server_first) = server_first(
            ScramMechanism::Sha256,
            first,
            rfc_credential(),
            SERVER_NONCE,
        );
        assert_eq!(server_first, SERVER_FIRST);
        assert_eq!(
            exchange.client_final(CLIENT_FINAL.as_bytes()).unwrap(),
            SERVER_FINAL
        );
    }

    #[test]
    fn client_side_matches_rfc_7677() {
        let (final_message, signature) =
            client_final_message(ScramMechanism::Sha256, "pencil", CLIENT_FIRST, SERVER_FIRST)
                .unwrap();
        assert_eq!(final_message, CLIENT_FINAL);
        assert_eq!(signature, SERVER_FINAL);
    }

    #[test]
    fn wrong_password_and_replayed_nonce_fail() {
        for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let cred = ScramCredential::new(mechanism, "right", b"salt-bytes", 4096);
            let client_first = client_first_message("al,ice=", "abc");
            let first = parse_client_first(client_first.as_bytes()).unwrap();
            assert_eq!(first.username, "al,ice=");
            let (ex, sf) = server_first(mechanism, first, cred.clone(), "xyz");
            let (good, expected) =
                client_final_message(mechanism, "right", &client_first, &sf).unwrap();
            assert_eq!(ex.client_final(good.as_bytes()).unwrap(), expected);
            let (bad, _) = client_final_message(mechanism, "wrong", &client_first, &sf).unwrap();
            assert_eq!(ex.client_final(bad.as_bytes()), Err(ScramError::BadProof));
            let replay = good.replace("abcxyz", "abcxyq");
            assert_eq!(
                ex.client_final(replay.as_bytes()),
                Err(ScramError::BadNonce)
            );
        }
    }

    #[test]
    fn malformed_first_messages_are_refused() {
        for bad in [
            "",
            "p=tls,,n=u,r=x",
            "n,,r=x",
            "n,,n=u",
            "n,,n=a=2Xb,r=x",
            "n,a=bob,n=u,r=x",
        ] {
            assert!(parse_client_first(bad.as_bytes()).is_err(), "{bad}");
        }
        assert!(parse_client_first(b"n,a=u,n=u,r=x").is_ok());
    }

    #[test]
    fn debug_output_hides_the_keys() {
        let shown = format!("{:?}", rfc_credential());
        assert_eq!(shown, "ScramCredential { iterations: 4096 }");
    }
}
