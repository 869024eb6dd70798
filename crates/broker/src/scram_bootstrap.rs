//! `--add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]'`: SCRAM users for a new
//! cluster, in the syntax of `kafka-storage.sh format --add-scram` (also
//! `iterations=N`, default 4096 as there).
//!
//! Kafka writes them into the bootstrap metadata at format time; Runnel has no format step, so
//! at startup each one is added through AlterUserScramCredentials only when that user has no
//! credential for that mechanism yet: a password changed later is never reset by a restart.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::RngCore;
use runnel_metadata::ScramUpsertion;

use crate::context::Broker;
use crate::server::sasl::scram::{ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};

/// One `--add-scram` value. The password is dropped once the credential is salted.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapUser {
    pub mechanism: ScramMechanism,
    pub name: String,
    password: String,
    pub iterations: u32,
}

impl std::fmt::Debug for BootstrapUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BootstrapUser {{ {} {} }}",
            self.mechanism.name(),
            self.name
        )
    }
}

/// Parses `MECHANISM=[key=value,...]` (values may be quoted with `"`).
pub fn parse(text: &str) -> Result<BootstrapUser, String> {
    let (mechanism, rest) = text.split_once('=').ok_or_else(|| {
        format!("--add-scram expects MECHANISM=[name=...,password=...], got '{text}'")
    })?;
    let mechanism = ScramMechanism::from_name(mechanism.trim()).ok_or_else(|| {
        format!("--add-scram: unknown mechanism '{mechanism}' (SCRAM-SHA-256, SCRAM-SHA-512)")
    })?;
    let body = rest
        .trim()
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or("--add-scram: the attributes go in [...]")?;
    let (mut name, mut password, mut iterations) = (None, None, MIN_ITERATIONS);
    for attr in body.split(',') {
        let (k, v) = attr
            .split_once('=')
            .ok_or_else(|| format!("--add-scram: expected key=value, got '{attr}'"))?;
        let v = v.trim().trim_matches('"').to_string();
        match k.trim() {
            "name" => name = Some(v),
            "password" => password = Some(v),
            "iterations" => {
                iterations = v
                    .parse::<u32>()
                    .ok()
                    .filter(|i| (MIN_ITERATIONS..=MAX_ITERATIONS).contains(i))
                    .ok_or_else(|| {
                        format!(
                            "--add-scram: iterations must be {MIN_ITERATIONS}..={MAX_ITERATIONS}"
                        )
                    })?
            }
            other => return Err(format!("--add-scram: unknown attribute '{other}'")),
        }
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or("--add-scram: name=... is required")?;
    let password = password
        .filter(|p| !p.is_empty())
        .ok_or("--add-scram: password=... is required")?;
    Ok(BootstrapUser {
        mechanism,
        name,
        password,
        iterations,
    })
}

impl BootstrapUser {
    /// The salted upsertion (a fresh random salt, as Kafka's format does).
    pub fn upsertion(&self) -> ScramUpsertion {
        let mut salt = vec![0u8; 32];
        rand::thread_rng().fill_bytes(&mut salt);
        let c = ScramCredential::new(self.mechanism, &self.password, &salt, self.iterations);
        ScramUpsertion {
            name: self.name.clone(),
            mechanism: self.mechanism.id(),
            // At most MAX_ITERATIONS, checked by `parse`.
            iterations: self.iterations as i32,
            salt: c.salt,
            stored_key: c.stored_key,
            server_key: c.server_key,
        }
    }
}

/// How long the bootstrap keeps asking while no controller answers (a cluster still forming).
const BOOTSTRAP_PATIENCE: Duration = Duration::from_secs(300);
const BOOTSTRAP_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Adds the users that have no credential yet (retrying while the controller comes up).
pub fn spawn(broker: Arc<Broker>, users: Vec<BootstrapUser>) {
    spawn_salted(broker, users.iter().map(BootstrapUser::upsertion).collect());
}

/// As [`spawn`], for credentials salted already: those `runnel storage format --add-scram`
/// wrote into the data directory's bootstrap file (`crate::meta_properties::Bootstrap`).
///
/// In a forming cluster the first attempts meet no controller (NOT_CONTROLLER, a quorum
/// without a leader), so it retries with a backoff until the controller answers or
/// [`BOOTSTRAP_PATIENCE`] runs out; each attempt first drops the credentials the image already
/// has (another node's bootstrap may have added them).
pub fn spawn_salted(broker: Arc<Broker>, credentials: Vec<ScramUpsertion>) {
    if credentials.is_empty() {
        return;
    }
    spawn_bootstrap(
        broker,
        "bootstrap SCRAM credentials",
        move |image| {
            let missing: Vec<ScramUpsertion> = credentials
                .iter()
                .filter(|u| {
                    !image
                        .scram_credentials
                        .contains_key(&(u.name.clone(), u.mechanism))
                })
                .cloned()
                .collect();
            (!missing.is_empty()).then(|| runnel_metadata::controller::AlterUserScramCredentials {
                deletions: Vec::new(),
                upsertions: missing,
            })
        },
        |results| {
            for (user, result) in results {
                match result {
                    Ok(()) => tracing::info!(%user, "bootstrap SCRAM credential added"),
                    Err(e) => {
                        tracing::warn!(%user, error = %e, "bootstrap SCRAM credential refused")
                    }
                }
            }
        },
    );
}

/// Records the feature levels `runnel storage format --release-version / --feature` wrote into
/// the data directory's bootstrap file, if the cluster has recorded none yet
/// (`runnel_metadata::controller::BootstrapFeatures`), retrying as [`spawn_salted`].
pub fn spawn_features(broker: Arc<Broker>, levels: std::collections::BTreeMap<String, i16>) {
    if levels.is_empty() {
        return;
    }
    spawn_bootstrap(
        broker,
        "bootstrap feature levels",
        move |image| {
            image
                .features
                .is_empty()
                .then(|| runnel_metadata::controller::BootstrapFeatures {
                    levels: levels.clone(),
                })
        },
        |recorded| {
            if recorded {
                tracing::info!("bootstrap feature levels recorded");
            }
        },
    );
}

/// Runs the operation `next` makes from the current image (`None`: nothing left to do) at the
/// active controller, retrying with a backoff while no controller answers, for at most
/// [`BOOTSTRAP_PATIENCE`]; `answered` gets the controller's answer.
fn spawn_bootstrap<O: runnel_metadata::controller::ControllerOp>(
    broker: Arc<Broker>,
    what: &'static str,
    next: impl Fn(&runnel_metadata::image::MetadataImage) -> Option<O> + Send + 'static,
    answered: impl FnOnce(O::Response) + Send + 'static,
) {
    tokio::spawn(async move {
        let deadline = Instant::now() + BOOTSTRAP_PATIENCE;
        let mut backoff = Duration::from_millis(100);
        loop {
            let Some(op) = next(&broker.image()) else {
                return;
            };
            match broker.controller.run(op).await {
                Ok(response) => {
                    answered(response);
                    return;
                }
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!(error = %e, "{what}: controller not ready, retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BOOTSTRAP_BACKOFF_MAX);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot add the {what}");
                    return;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_storage_syntax() {
        let u = parse("SCRAM-SHA-512=[name=alice,password=\"a-secret\"]").unwrap();
        assert_eq!(
            (u.mechanism, u.name.as_str(), u.iterations),
            (ScramMechanism::Sha512, "alice", 4096)
        );
        assert!(!format!("{u:?}").contains("a-secret"));
        let u = parse("SCRAM-SHA-256=[name=bob,password=x,iterations=8192]").unwrap();
        assert_eq!(u.iterations, 8192);
        for bad in [
            "SCRAM-SHA-1=[name=a,password=b]",
            "SCRAM-SHA-256=name=a,password=b",
            "SCRAM-SHA-256=[password=b]",
            "SCRAM-SHA-256=[name=a]",
            "SCRAM-SHA-256=[name=a,password=b,iterations=10]",
            "SCRAM-SHA-256=[name=a,password=b,salt=c]",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let up = parse("SCRAM-SHA-256=[name=a,password=b]")
            .unwrap()
            .upsertion();
        assert_eq!(
            (up.mechanism, up.salt.len(), up.stored_key.len()),
            (1, 32, 32)
        );
    }
}
