//! Kafka's `sasl.jaas.config` value: one JAAS login module entry,
//! `<class> <flag> key="value" ...;` (`JaasConfig`'s grammar, one module).

use std::collections::BTreeMap;

/// One login module entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

impl JaasEntry {
    /// PLAIN's users: every `user_<name>="<password>"` option (`PlainServerCallbackHandler`).
    pub fn plain_users(&self) -> BTreeMap<String, String> {
        self.options
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("user_").map(|u| (u.to_string(), v.clone())))
            .collect()
    }
}

const FLAGS: &[&str] = &["required", "requisite", "sufficient", "optional"];

/// Parses one entry; the trailing `;` is required, as in Kafka.
pub fn parse(text: &str) -> Result<JaasEntry, String> {
    let mut tokens = tokenize(text)?.into_iter();
    let login_module = match tokens.next() {
        Some(Token::Word(w)) => w,
        _ => return Err("sasl.jaas.config: expected a login module class".into()),
    };
    let flag = match tokens.next() {
        Some(Token::Word(w)) if FLAGS.contains(&w.to_ascii_lowercase().as_str()) => {
            w.to_ascii_lowercase()
        }
        _ => {
            return Err(format!(
                "sasl.jaas.config: expected a control flag ({})",
                FLAGS.join(", ")
            ))
        }
    };
    let mut options = BTreeMap::new();
    loop {
        match tokens.next() {
            Some(Token::Semicolon) => break,
            Some(Token::Word(key)) => {
                if tokens.next() != Some(Token::Equals) {
                    return Err(format!("sasl.jaas.config: expected '=' after '{key}'"));
                }
                match tokens.next() {
                    Some(Token::Word(v)) | Some(Token::Quoted(v)) => {
                        options.insert(key, v);
                    }
                    _ => return Err(format!("sasl.jaas.config: expected a value for '{key}'")),
                }
            }
            _ => return Err("sasl.jaas.config: expected an option or ';'".into()),
        }
    }
    if tokens.next().is_some() {
        return Err("sasl.jaas.config: exactly one login module is expected".into());
    }
    Ok(JaasEntry {
        login_module,
        flag,
        options,
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '=' => {
                chars.next();
                out.push(Token::Equals);
            }
            ';' => {
                chars.next();
                out.push(Token::Semicolon);
            }
            '"' => {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(escaped) => value.push(escaped),
                            None => return Err("sasl.jaas.config: unterminated string".into()),
                        },
                        Some(ch) => value.push(ch),
                        None => return Err("sasl.jaas.config: unterminated string".into()),
                    }
                }
                out.push(Token::Quoted(value));
            }
            _ => {
                let mut word = String::new();
                while let Some(&ch) = chars.peek() {
                    if ch.is_whitespace() || ch == '=' || ch == ';' || ch == '"' {
                        break;
                    }
                    word.push(ch);
                    chars.next();
                }
                out.push(Token::Word(word));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_plain_server_config() {
        let entry = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret"
               user_admin="admin-secret" user_alice="a\"lice";"#,
        )
        .unwrap();
        assert_eq!(
            entry.login_module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(entry.flag, "required");
        assert_eq!(entry.options["username"], "admin");
        let users = entry.plain_users();
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "a\"lice");
    }

    #[test]
    fn refuses_malformed_entries() {
        for bad in [
            "",
            "Module required a=\"b\"",
            "Module maybe a=\"b\";",
            "Module required a;",
            "Module required a=\"unterminated;",
            "M required; N required;",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("M required a=b;").is_ok());
    }
}
