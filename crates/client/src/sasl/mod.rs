//! SASL for both sides: SCRAM's math (RFC 5802/7677) and Kafka's JAAS syntax live here so the
//! broker's server side and this client's side are one implementation; [`client_exchange`] is
//! the client's part of SaslHandshake + SaslAuthenticate.

pub mod jaas;
pub mod scram;

use scram::ScramMechanism;

/// What a client authenticates with (`sasl.mechanism` and the user's name and password).
#[derive(Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    pub username: String,
    pub password: String,
}

/// Never prints the password.
impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SaslCredentials {{ mechanism: {}, username: {} }}",
            self.mechanism, self.username
        )
    }
}

/// The mechanisms this client speaks.
pub const CLIENT_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// The client's side of one mechanism's token exchange, as a state machine: [`ClientExchange::first`]
/// gives the first token, [`ClientExchange::next`] answers each server token (`None` when done).
#[derive(Debug)]
pub enum ClientExchange {
    Plain,
    ScramFirst {
        mechanism: ScramMechanism,
        client_first: String,
    },
    ScramFinal {
        server_signature: String,
    },
    Done,
}

impl ClientExchange {
    /// Starts an exchange; `nonce` is the client's random SCRAM nonce (printable, no comma).
    pub fn start(creds: &SaslCredentials, nonce: &str) -> Result<(Self, Vec<u8>), String> {
        if creds.mechanism == "PLAIN" {
            let token = format!("\0{}\0{}", creds.username, creds.password).into_bytes();
            return Ok((ClientExchange::Plain, token));
        }
        let mechanism = ScramMechanism::from_name(&creds.mechanism).ok_or_else(|| {
            format!(
                "sasl.mechanism={} is not supported (use {})",
                creds.mechanism,
                CLIENT_MECHANISMS.join(", ")
            )
        })?;
        let client_first = scram::client_first_message(&creds.username, nonce);
        let token = client_first.clone().into_bytes();
        Ok((
            ClientExchange::ScramFirst {
                mechanism,
                client_first,
            },
            token,
        ))
    }

    /// Answers a server token: `Ok(Some(token))` to send, `Ok(None)` when authenticated.
    pub fn next(
        &mut self,
        creds: &SaslCredentials,
        server: &[u8],
    ) -> Result<Option<Vec<u8>>, String> {
        match std::mem::replace(self, ClientExchange::Done) {
            ClientExchange::Plain | ClientExchange::Done => Ok(None),
            ClientExchange::ScramFirst {
                mechanism,
                client_first,
            } => {
                let server_first = std::str::from_utf8(server)
                    .map_err(|_| "SCRAM server-first message is not UTF-8".to_string())?;
                if let Some(err) = server_first.strip_prefix("e=") {
                    return Err(format!("SCRAM: {err}"));
                }
                let (final_message, server_signature) = scram::client_final_message(
                    mechanism,
                    &creds.password,
                    &client_first,
                    server_first,
                )
                .map_err(|e| e.to_string())?;
                *self = ClientExchange::ScramFinal { server_signature };
                Ok(Some(final_message.into_bytes()))
            }
            ClientExchange::ScramFinal { server_signature } => {
                if !scram::constant_time_eq(server, server_signature.as_bytes()) {
                    return Err("SCRAM: the broker's signature does not match (not the broker holding the credential)".into());
                }
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scram::{parse_client_first, server_first, ScramCredential};
    use super::*;

    fn creds(mechanism: &str, password: &str) -> SaslCredentials {
        SaslCredentials {
            mechanism: mechanism.into(),
            username: "alice".into(),
            password: password.into(),
        }
    }

    #[test]
    fn plain_token_and_hidden_password() {
        let c = creds("PLAIN", "s3cret");
        let (mut ex, token) = ClientExchange::start(&c, "n").unwrap();
        assert_eq!(token, b"\0alice\0s3cret");
        assert_eq!(ex.next(&c, b"").unwrap(), None);
        assert!(!format!("{c:?}").contains("s3cret"));
        assert!(ClientExchange::start(&creds("GSSAPI", "x"), "n").is_err());
    }

    #[test]
    fn scram_client_against_the_server_side() {
        for mech in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let stored = ScramCredential::new(mech, "pw", b"salt", 4096);
            for (password, ok) in [("pw", true), ("wrong", false)] {
                let c = creds(mech.name(), password);
                let (mut ex, first) = ClientExchange::start(&c, "clientnonce").unwrap();
                let parsed = parse_client_first(&first).unwrap();
                let (server, sfirst) = server_first(mech, parsed, stored.clone(), "servernonce");
                let fin = ex.next(&c, sfirst.as_bytes()).unwrap().unwrap();
                match server.client_final(&fin) {
                    Ok(sig) => {
                        assert!(ok);
                        assert_eq!(ex.next(&c, sig.as_bytes()).unwrap(), None);
                    }
                    Err(_) => assert!(!ok),
                }
            }
            // A forged server signature is refused.
            let c = creds(mech.name(), "pw");
            let (mut ex, first) = ClientExchange::start(&c, "n1").unwrap();
            let (_, sfirst) = server_first(
                mech,
                parse_client_first(&first).unwrap(),
                stored.clone(),
                "s",
            );
            ex.next(&c, sfirst.as_bytes()).unwrap();
            assert!(ex.next(&c, b"v=AAAA").is_err());
        }
    }
}
