//! DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554.
//!
//! Describe reads the local image; Alter turns each salted password into the stored and server
//! keys here (so only those travel to the controller and into the log) and forwards the rest.

use std::sync::Arc;

use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use runnel_metadata::{ScramDeletion, ScramUpsertion};

use super::str_bytes;
use crate::context::Broker;
use crate::server::sasl::scram::{ScramCredential, ScramMechanism};

use crate::errors::code::{DUPLICATE_RESOURCE, RESOURCE_NOT_FOUND};

pub async fn describe(
    broker: &Arc<Broker>,
    request: DescribeUserScramCredentialsRequest,
    _version: i16,
) -> DescribeUserScramCredentialsResponse {
    let image = broker.image();
    let infos = |user: &str| -> Vec<CredentialInfo> {
        image
            .scram_credentials
            .iter()
            .filter(|((name, _), _)| name == user)
            .map(|((_, mechanism), c)| {
                CredentialInfo::default()
                    .with_mechanism(*mechanism)
                    .with_iterations(i32::try_from(c.iterations).unwrap_or(i32::MAX))
            })
            .collect()
    };
    let users: Vec<String> = match &request.users {
        // Null or empty: every user with a credential.
        None => Vec::new(),
        Some(list) => list.iter().map(|u| u.name.to_string()).collect(),
    };
    let results = if users.is_empty() {
        let mut names: Vec<&String> = image.scram_credentials.keys().map(|(n, _)| n).collect();
        names.dedup();
        names
            .into_iter()
            .map(|n| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(str_bytes(n))
                    .with_credential_infos(infos(n))
            })
            .collect()
    } else {
        users
            .iter()
            .enumerate()
            .map(|(i, user)| {
                let result = DescribeUserScramCredentialsResult::default().with_user(str_bytes(user));
                if users[..i].contains(user) || users[i + 1..].contains(user) {
                    return result
                        .with_error_code(DUPLICATE_RESOURCE)
                        .with_error_message(Some(str_bytes("Cannot describe SCRAM credentials for the same user twice in a single request")));
                }
                let found = infos(user);
                if found.is_empty() {
                    return result
                        .with_error_code(RESOURCE_NOT_FOUND)
                        .with_error_message(Some(str_bytes(&format!("Attempt to describe a user credential that does not exist: {user}"))));
                }
                result.with_credential_infos(found)
            })
            .collect()
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

pub async fn alter(
    broker: &Arc<Broker>,
    request: AlterUserScramCredentialsRequest,
    _version: i16,
) -> AlterUserScramCredentialsResponse {
    let deletions = request
        .deletions
        .iter()
        .map(|d| ScramDeletion {
            name: d.name.to_string(),
            mechanism: d.mechanism,
        })
        .collect();
    let upsertions = request.upsertions.iter().map(upsertion).collect();
    let results = match broker
        .controller
        .run(runnel_metadata::controller::AlterUserScramCredentials {
            deletions,
            upsertions,
        })
        .await
    {
        Ok(results) => results
            .into_iter()
            .map(|(user, r)| {
                let result = AlterUserScramCredentialsResult::default().with_user(str_bytes(&user));
                match r {
                    Ok(()) => result,
                    Err(e) => result
                        .with_error_code(e.code)
                        .with_error_message(Some(str_bytes(&e.message))),
                }
            })
            .collect(),
        Err(e) => {
            let mut users: Vec<String> = request
                .deletions
                .iter()
                .map(|d| d.name.to_string())
                .collect();
            users.extend(request.upsertions.iter().map(|u| u.name.to_string()));
            users.dedup();
            users
                .into_iter()
                .map(|user| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(str_bytes(&user))
                        .with_error_code(e.code)
                        .with_error_message(Some(str_bytes(&e.message)))
                })
                .collect()
        }
    };
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// One upsertion with the salted password turned into stored / server keys, so neither the
/// controller nor the log sees it. An unknown mechanism or bad iteration count keeps empty
/// keys: the controller answers it with Kafka's error.
fn upsertion(u: &ScramCredentialUpsertion) -> ScramUpsertion {
    let keys = ScramMechanism::from_id(u.mechanism)
        .zip(u32::try_from(u.iterations).ok())
        .map(|(m, iterations)| {
            ScramCredential::from_salted_password(m, &u.salted_password, &u.salt, iterations)
        });
    ScramUpsertion {
        name: u.name.to_string(),
        mechanism: u.mechanism,
        iterations: u.iterations,
        salt: u.salt.to_vec(),
        stored_key: keys
            .as_ref()
            .map(|k| k.stored_key.clone())
            .unwrap_or_default(),
        server_key: keys.map(|k| k.server_key).unwrap_or_default(),
    }
}
