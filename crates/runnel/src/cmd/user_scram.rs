//! `runnel configs --entity-type users`: SCRAM credentials as kafka-configs.sh manages them
//! (KIP-554): `--add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`,
//! `--delete-config SCRAM-SHA-512`, `--describe`.
//!
//! As Kafka's tool does, the client salts the password (a random salt) and sends only the
//! salted password; the salting is the broker's one SCRAM implementation.

use anyhow::{bail, Result};
use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;
use rand::RngCore;
use runnel_broker::server::sasl::scram::{ScramCredential, ScramMechanism, MIN_ITERATIONS};
use runnel_client::Admin;

/// One `--add-config` SCRAM entry, parsed.
#[derive(PartialEq, Eq)]
pub struct ScramSet {
    pub mechanism: ScramMechanism,
    pub iterations: u32,
    password: String,
}

impl std::fmt::Debug for ScramSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ScramSet {{ {} iterations={} }}",
            self.mechanism.name(),
            self.iterations
        )
    }
}

/// `SCRAM-SHA-256` -> `iterations=8192,password=...` (the brackets already stripped).
pub fn parse_set(key: &str, value: &str) -> Result<ScramSet> {
    let Some(mechanism) = ScramMechanism::from_name(key) else {
        bail!("unknown user config '{key}' (SCRAM-SHA-256, SCRAM-SHA-512)");
    };
    let (mut iterations, mut password) = (MIN_ITERATIONS, None);
    for attr in value.split(',') {
        match attr.split_once('=') {
            Some(("iterations", v)) => match v.trim().parse::<u32>() {
                Ok(i) => iterations = i,
                Err(_) => bail!("{key}: iterations must be a number, got '{v}'"),
            },
            Some(("password", v)) => password = Some(v.to_string()),
            _ => bail!("{key}: expected [iterations=N,password=...]"),
        }
    }
    let Some(password) = password.filter(|p| !p.is_empty()) else {
        bail!("{key}: password=... is required");
    };
    Ok(ScramSet {
        mechanism,
        iterations,
        password,
    })
}

fn upsertion(user: &str, set: &ScramSet) -> ScramCredentialUpsertion {
    let mut salt = vec![0u8; 32];
    rand::thread_rng().fill_bytes(&mut salt);
    let salted =
        ScramCredential::salted_password(set.mechanism, &set.password, &salt, set.iterations);
    ScramCredentialUpsertion::default()
        .with_name(StrBytes::from_string(user.to_string()))
        .with_mechanism(set.mechanism.id())
        .with_iterations(i32::try_from(set.iterations).unwrap_or(i32::MAX))
        .with_salt(Bytes::from(salt))
        .with_salted_password(Bytes::from(salted))
}

pub async fn alter(
    admin: &Admin,
    user: &str,
    adds: &[(String, String)],
    deletes: &[String],
) -> Result<()> {
    let sets = adds
        .iter()
        .map(|(k, v)| parse_set(k, v))
        .collect::<Result<Vec<_>>>()?;
    let mut deletions = Vec::new();
    for key in deletes {
        let Some(m) = ScramMechanism::from_name(key) else {
            bail!("unknown user config '{key}' (SCRAM-SHA-256, SCRAM-SHA-512)");
        };
        deletions.push(
            ScramCredentialDeletion::default()
                .with_name(StrBytes::from_string(user.to_string()))
                .with_mechanism(m.id()),
        );
    }
    let request = AlterUserScramCredentialsRequest::default()
        .with_deletions(deletions)
        .with_upsertions(sets.iter().map(|s| upsertion(user, s)).collect());
    let response = admin.client().send_to_controller(&request).await?;
    for r in response.results {
        if r.error_code != 0 {
            let message = r.error_message.map(|m| m.to_string()).unwrap_or_default();
            bail!(
                "cannot update the credentials of user {}: error {} {message}",
                &*r.user,
                r.error_code
            );
        }
    }
    println!("Completed updating config for user {user}.");
    Ok(())
}

pub async fn describe(admin: &Admin, user: Option<&str>) -> Result<()> {
    let users =
        user.map(|u| vec![UserName::default().with_name(StrBytes::from_string(u.to_string()))]);
    let request = DescribeUserScramCredentialsRequest::default().with_users(users);
    let response = admin.client().send_to_controller(&request).await?;
    for r in response.results {
        if r.error_code != 0 {
            continue; // kafka-configs prints nothing for a user without credentials
        }
        let infos: Vec<String> = r
            .credential_infos
            .iter()
            .filter_map(|i| {
                ScramMechanism::from_id(i.mechanism)
                    .map(|m| format!("{}=iterations={}", m.name(), i.iterations))
            })
            .collect();
        println!(
            "SCRAM credential configs for user-principal '{}' are {}",
            &*r.user,
            infos.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_configs_scram_syntax() {
        let s = parse_set("SCRAM-SHA-256", "iterations=8192,password=a=b").unwrap();
        assert_eq!(
            (s.mechanism, s.iterations, s.password.as_str()),
            (ScramMechanism::Sha256, 8192, "a=b")
        );
        assert!(!format!("{s:?}").contains("a=b"));
        assert_eq!(
            parse_set("SCRAM-SHA-512", "password=x").unwrap().iterations,
            4096
        );
        assert!(parse_set("SCRAM-SHA-1", "password=x").is_err());
        assert!(parse_set("SCRAM-SHA-256", "iterations=8192").is_err());
        assert!(parse_set("SCRAM-SHA-256", "salt=x,password=y").is_err());
    }
}
