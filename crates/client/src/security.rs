//! A client's security settings from Kafka's client properties (a `--command-config` file):
//! `security.protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), `sasl.mechanism` (PLAIN,
//! SCRAM-SHA-256, SCRAM-SHA-512), the credentials in `sasl.jaas.config` (Kafka) or
//! `sasl.username` / `sasl.password` (librdkafka), and the PEM properties of [`crate::tls`].

use crate::sasl::{jaas, SaslCredentials, CLIENT_MECHANISMS};
use crate::tls::{self, ClientTls};

/// Kafka's `security.protocol`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(name: &str) -> Result<Self, String> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(Self::Plaintext),
            "SSL" => Ok(Self::Ssl),
            "SASL_PLAINTEXT" => Ok(Self::SaslPlaintext),
            "SASL_SSL" => Ok(Self::SaslSsl),
            _ => Err(format!(
                "security.protocol={name}: use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            )),
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// How a client's connections are secured. The default is PLAINTEXT.
#[derive(Clone, Debug, Default)]
pub struct Security {
    pub protocol: SecurityProtocol,
    /// Set for SSL and SASL_SSL.
    pub tls: Option<ClientTls>,
    /// Set for SASL_PLAINTEXT and SASL_SSL.
    pub sasl: Option<SaslCredentials>,
}

impl Security {
    /// Reads the security properties out of a client's properties (others are ignored; the
    /// last value of a repeated key wins, as in a Java properties file).
    pub fn from_properties(props: &[(String, String)]) -> Result<Self, String> {
        Self::from_lookup(&|key: &str| -> Option<String> {
            props
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        })
    }

    /// The same from any property lookup (the broker's view of its inter-broker listener).
    pub fn from_lookup(get: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let protocol = match get("security.protocol") {
            Some(p) => SecurityProtocol::parse(&p)?,
            None => SecurityProtocol::Plaintext,
        };
        let tls = if protocol.uses_tls() {
            Some(tls::client_config(get)?)
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            Some(sasl_credentials(get)?)
        } else {
            None
        };
        Ok(Security {
            protocol,
            tls,
            sasl,
        })
    }
}

fn sasl_credentials(get: &dyn Fn(&str) -> Option<String>) -> Result<SaslCredentials, String> {
    // Kafka's default mechanism is GSSAPI, which this client does not speak.
    let mechanism = get("sasl.mechanism")
        .or_else(|| get("sasl.mechanisms"))
        .unwrap_or_else(|| "GSSAPI".into())
        .trim()
        .to_owned();
    if !CLIENT_MECHANISMS.contains(&mechanism.as_str()) {
        return Err(format!(
            "sasl.mechanism={mechanism} is not supported (use {})",
            CLIENT_MECHANISMS.join(", ")
        ));
    }
    let (username, password) = match get("sasl.jaas.config") {
        Some(text) => {
            let entry = jaas::parse(&text)?;
            let field = |k: &str| {
                entry.options.get(k).cloned().ok_or_else(|| {
                    format!("sasl.jaas.config: the login module has no {k}=\"...\" option")
                })
            };
            (field("username")?, field("password")?)
        }
        None => match (get("sasl.username"), get("sasl.password")) {
            (Some(u), Some(p)) => (u, p),
            _ => {
                return Err(
                    "SASL needs sasl.jaas.config, or sasl.username and sasl.password".into(),
                )
            }
        },
    };
    Ok(SaslCredentials {
        mechanism,
        username,
        password,
    })
}

/// Parses a Java properties file as Kafka's tools read `--command-config`: `key=value`,
/// `key: value` or `key value`; `#` and `!` comment lines; a trailing `\` continues the line
/// (JAAS entries often span lines); `\t`, `\n`, `\\` and other escapes in values.
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut logical = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut line = line.trim_start().to_owned();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        loop {
            let trailing = line.chars().rev().take_while(|&c| c == '\\').count();
            if trailing % 2 == 1 {
                line.pop();
                logical.push_str(&line);
                match lines.next() {
                    Some(next) => line = next.trim_start().to_owned(),
                    None => {
                        line = String::new();
                        break;
                    }
                }
            } else {
                break;
            }
        }
        logical.push_str(&line);
        let entry = std::mem::take(&mut logical);
        if let Some(kv) = split_entry(&entry) {
            out.push(kv);
        }
    }
    out
}

fn split_entry(entry: &str) -> Option<(String, String)> {
    let mut key = String::new();
    let mut chars = entry.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    key.push(n);
                }
            }
            '=' | ':' => break,
            c if c.is_whitespace() => {
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('=') | Some(':')) {
                    chars.next();
                }
                break;
            }
            c => key.push(c),
        }
    }
    if key.is_empty() {
        return None;
    }
    let rest: String = chars.collect();
    Some((key, unescape(rest.trim_start())))
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// Reads a `--command-config` file.
pub fn read_properties_file(path: &std::path::Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read '{}': {e}", path.display()))?;
    Ok(parse_properties(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn java_properties_syntax() {
        let text = "# comment\n! also\n\nsecurity.protocol=SASL_SSL\nsasl.mechanism : SCRAM-SHA-512\n\
            sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    \
            username=\"bob\" \\\n    password=\"b=o\\\\b\";\nplain value\n";
        let props = parse_properties(text);
        assert_eq!(props[0], ("security.protocol".into(), "SASL_SSL".into()));
        assert_eq!(props[1], ("sasl.mechanism".into(), "SCRAM-SHA-512".into()));
        assert_eq!(
            props[2].1,
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"bob\" password=\"b=o\\b\";"
        );
        assert_eq!(props[3], ("plain".into(), "value".into()));
    }

    #[test]
    fn credentials_from_jaas_or_librdkafka_names() {
        let jaas = kv(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"bob\" password=\"pw\";",
            ),
        ]);
        let s = Security::from_properties(&jaas).unwrap();
        let c = s.sasl.unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("bob", "pw"));
        assert!(s.tls.is_none());
        let rd = kv(&[
            ("security.protocol", "sasl_plaintext"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "x"),
        ]);
        assert_eq!(
            Security::from_properties(&rd)
                .unwrap()
                .sasl
                .unwrap()
                .mechanism,
            "PLAIN"
        );
    }

    #[test]
    fn refusals_name_the_property() {
        let gssapi = kv(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.username", "a"),
        ]);
        assert!(Security::from_properties(&gssapi)
            .unwrap_err()
            .contains("GSSAPI"));
        let nouser = kv(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
        ]);
        assert!(Security::from_properties(&nouser)
            .unwrap_err()
            .contains("sasl.jaas.config"));
        let bad = kv(&[("security.protocol", "TLS")]);
        assert!(Security::from_properties(&bad)
            .unwrap_err()
            .contains("security.protocol"));
        let ssl = kv(&[("security.protocol", "SSL")]);
        assert!(Security::from_properties(&ssl)
            .unwrap_err()
            .contains("ssl.ca.location"));
        assert_eq!(
            Security::from_properties(&[]).unwrap().protocol,
            SecurityProtocol::Plaintext
        );
    }
}
