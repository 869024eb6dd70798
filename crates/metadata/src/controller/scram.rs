//! AlterUserScramCredentials (KIP-554) as the controller decides it (Kafka's
//! `ScramControlManager`): per-user results and the credential records to commit.
//!
//! The broker turns the client's salted password into the stored and server keys before the
//! request gets here, so the controller and the log only ever see the salted form.

use serde::{Deserialize, Serialize};

use crate::errors::ApiError;
use crate::image::MetadataImage;
use crate::records::{MetadataRecord, SecretBytes};

use crate::errors::codes::{
    DUPLICATE_RESOURCE, RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM,
};

/// KIP-554's mechanism ids and Kafka's iteration bounds for them.
const MECHANISMS: &[i8] = &[1, 2];
const MIN_ITERATIONS: i32 = 4096;
const MAX_ITERATIONS: i32 = 16384;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramDeletion {
    pub name: String,
    pub mechanism: i8,
}

/// A credential to set, already salted and hashed by the broker.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramUpsertion {
    pub name: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramUpsertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ScramUpsertion {{ name: {:?}, mechanism: {}, iterations: {} }}",
            self.name, self.mechanism, self.iterations
        )
    }
}

/// One user's result (Kafka answers per user, in request order of first appearance).
pub type ScramAlterResult = (String, Result<(), ApiError>);

/// Decides the request: a user named twice for the same mechanism fails as a whole with
/// DUPLICATE_RESOURCE, as in Kafka; every other user is decided on its own.
pub fn alter_user_scram_credentials(
    image: &MetadataImage,
    deletions: &[ScramDeletion],
    upsertions: &[ScramUpsertion],
) -> (Vec<ScramAlterResult>, Vec<MetadataRecord>) {
    let mut users: Vec<String> = Vec::new();
    let mut seen: Vec<(String, i8)> = Vec::new();
    let mut duplicates: Vec<String> = Vec::new();
    let ops = deletions
        .iter()
        .map(|d| (&d.name, d.mechanism))
        .chain(upsertions.iter().map(|u| (&u.name, u.mechanism)));
    for (name, mechanism) in ops {
        if !users.contains(name) {
            users.push(name.clone());
        }
        let key = (name.clone(), mechanism);
        if seen.contains(&key) {
            duplicates.push(name.clone());
        }
        seen.push(key);
    }
    let mut errors: Vec<(String, ApiError)> = Vec::new();
    let mut fail = |name: &str, code: i16, message: String| {
        if !errors.iter().any(|(n, _)| n == name) {
            errors.push((name.to_string(), ApiError::new(code, message)));
        }
    };
    for name in &duplicates {
        fail(
            name,
            DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request".into(),
        );
    }
    for d in deletions {
        if d.name.is_empty() {
            fail(
                &d.name,
                UNACCEPTABLE_CREDENTIAL,
                "Username must not be empty".into(),
            );
        } else if !MECHANISMS.contains(&d.mechanism) {
            fail(
                &d.name,
                UNSUPPORTED_SASL_MECHANISM,
                "Unknown SCRAM mechanism".into(),
            );
        } else if !image
            .scram_credentials
            .contains_key(&(d.name.clone(), d.mechanism))
        {
            fail(
                &d.name,
                RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist".into(),
            );
        }
    }
    for u in upsertions {
        if u.name.is_empty() {
            fail(
                &u.name,
                UNACCEPTABLE_CREDENTIAL,
                "Username must not be empty".into(),
            );
        } else if !MECHANISMS.contains(&u.mechanism) {
            fail(
                &u.name,
                UNSUPPORTED_SASL_MECHANISM,
                "Unknown SCRAM mechanism".into(),
            );
        } else if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&u.iterations) {
            fail(
                &u.name,
                UNACCEPTABLE_CREDENTIAL,
                format!("Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}"),
            );
        } else if u.salt.is_empty() || u.stored_key.is_empty() || u.server_key.is_empty() {
            fail(
                &u.name,
                UNACCEPTABLE_CREDENTIAL,
                "Salt and salted password must not be empty".into(),
            );
        }
    }
    let failed = |name: &str| errors.iter().any(|(n, _)| n == name);
    let mut records = Vec::new();
    for d in deletions.iter().filter(|d| !failed(&d.name)) {
        records.push(MetadataRecord::RemoveUserScramCredential {
            name: d.name.clone(),
            mechanism: d.mechanism,
        });
    }
    for u in upsertions.iter().filter(|u| !failed(&u.name)) {
        records.push(MetadataRecord::UserScramCredential {
            name: u.name.clone(),
            mechanism: u.mechanism,
            salt: SecretBytes(u.salt.clone()),
            stored_key: SecretBytes(u.stored_key.clone()),
            server_key: SecretBytes(u.server_key.clone()),
            // Validated to lie within MIN..=MAX_ITERATIONS above.
            iterations: u.iterations as u32,
        });
    }
    let results = users
        .into_iter()
        .map(|name| {
            let result = match errors.iter().find(|(n, _)| *n == name) {
                Some((_, e)) => Err(e.clone()),
                None => Ok(()),
            };
            (name, result)
        })
        .collect();
    (results, records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramUpsertion {
        ScramUpsertion {
            name: name.into(),
            mechanism,
            iterations,
            salt: vec![1],
            stored_key: vec![2],
            server_key: vec![3],
        }
    }

    fn codes(results: &[ScramAlterResult]) -> Vec<(String, i16)> {
        results
            .iter()
            .map(|(n, r)| (n.clone(), r.as_ref().err().map_or(0, |e| e.code)))
            .collect()
    }

    #[test]
    fn upserts_then_deletes_with_kafka_errors() {
        let image = MetadataImage::empty("c".into());
        let (results, records) = alter_user_scram_credentials(
            &image,
            &[ScramDeletion {
                name: "ghost".into(),
                mechanism: 1,
            }],
            &[
                upsert("alice", 2, 8192),
                upsert("bob", 2, 10),
                upsert("carol", 7, 8192),
                upsert("dave", 1, 4096),
                upsert("dave", 1, 4096),
            ],
        );
        assert_eq!(
            codes(&results),
            vec![
                ("ghost".into(), RESOURCE_NOT_FOUND),
                ("alice".into(), 0),
                ("bob".into(), UNACCEPTABLE_CREDENTIAL),
                ("carol".into(), UNSUPPORTED_SASL_MECHANISM),
                ("dave".into(), DUPLICATE_RESOURCE),
            ]
        );
        assert_eq!(records.len(), 1);
        let image = image.apply(&[(0, records[0].clone())]).unwrap();
        assert_eq!(
            image.scram_credentials[&("alice".to_string(), 2)].iterations,
            8192
        );
        let (results, records) = alter_user_scram_credentials(
            &image,
            &[ScramDeletion {
                name: "alice".into(),
                mechanism: 2,
            }],
            &[],
        );
        assert_eq!(codes(&results), vec![("alice".into(), 0)]);
        let image = image.apply(&[(1, records[0].clone())]).unwrap();
        assert!(image.scram_credentials.is_empty());
    }
}

/// The AlterUserScramCredentials operation (KIP-554: credentials arrive salted and hashed,
/// never a password).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterUserScramCredentials {
    pub deletions: Vec<ScramDeletion>,
    pub upsertions: Vec<ScramUpsertion>,
}

impl super::ControllerOp for AlterUserScramCredentials {
    const NAME: &'static str = "AlterUserScramCredentials";
    type Response = Vec<ScramAlterResult>;

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<Self::Response>, ApiError> {
        let (results, records) =
            alter_user_scram_credentials(ctx.image, &self.deletions, &self.upsertions);
        Ok(super::ControllerResult::new(records, results))
    }
}
