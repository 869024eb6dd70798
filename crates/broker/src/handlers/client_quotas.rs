//! DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546.
//!
//! Describe answers from the local image, Alter is decided by the controller
//! (`runnel_metadata::quota`); this module only translates. Authorization as Kafka's
//! `KafkaApis`: DESCRIBE_CONFIGS on the cluster for Describe, ALTER_CONFIGS on the cluster for
//! Alter (CLUSTER_AUTHORIZATION_FAILED for the request / every entry).

use std::sync::Arc;

use kafka_protocol::messages::{
    alter_client_quotas_request, alter_client_quotas_response, describe_client_quotas_response,
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use runnel_metadata::acl::AclOperation;
use runnel_metadata::quota::{self, FilterComponent, QuotaAlteration};

use super::str_bytes;
use crate::context::{Broker, RequestContext};
use crate::errors::code;

pub async fn describe(
    broker: &Arc<Broker>,
    request: DescribeClientQuotasRequest,
    _version: i16,
    ctx: &RequestContext,
) -> DescribeClientQuotasResponse {
    if !broker.authorized_cluster(ctx, AclOperation::DescribeConfigs) {
        return DescribeClientQuotasResponse::default()
            .with_error_code(code::CLUSTER_AUTHORIZATION_FAILED)
            .with_error_message(Some(str_bytes("Cluster authorization failed.")))
            .with_entries(None);
    }
    let components: Vec<FilterComponent> = request
        .components
        .iter()
        .map(|c| FilterComponent {
            entity_type: c.entity_type.to_string(),
            match_type: c.match_type,
            matched: c._match.as_ref().map(|m| m.to_string()),
        })
        .collect();
    let image = broker.image();
    match quota::describe_client_quotas(&image.client_quotas, &components, request.strict) {
        Ok(found) => {
            let entries = found
                .into_iter()
                .map(|(entity, values)| {
                    describe_client_quotas_response::EntryData::default()
                        .with_entity(
                            entity
                                .parts()
                                .into_iter()
                                .map(|(t, n)| {
                                    describe_client_quotas_response::EntityData::default()
                                        .with_entity_type(str_bytes(t))
                                        .with_entity_name(n.map(str_bytes))
                                })
                                .collect(),
                        )
                        .with_values(
                            values
                                .iter()
                                .map(|(k, v)| {
                                    describe_client_quotas_response::ValueData::default()
                                        .with_key(str_bytes(k))
                                        .with_value(*v)
                                })
                                .collect(),
                        )
                })
                .collect();
            DescribeClientQuotasResponse::default().with_entries(Some(entries))
        }
        Err(e) => DescribeClientQuotasResponse::default()
            .with_error_code(e.code)
            .with_error_message(Some(str_bytes(&e.message)))
            .with_entries(None),
    }
}

pub async fn alter(
    broker: &Arc<Broker>,
    request: AlterClientQuotasRequest,
    _version: i16,
    ctx: &RequestContext,
) -> AlterClientQuotasResponse {
    if !broker.authorized_cluster(ctx, AclOperation::AlterConfigs) {
        let denied = runnel_metadata::ApiError::new(
            code::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.",
        );
        let results = vec![Err(denied); request.entries.len()];
        return alter_answer(&request, results);
    }
    let alterations: Vec<QuotaAlteration> = request.entries.iter().map(alteration).collect();
    let count = alterations.len();
    let results = match broker
        .controller
        .run(runnel_metadata::quota::AlterClientQuotas {
            alterations,
            validate_only: request.validate_only,
        })
        .await
    {
        Ok(results) if results.len() == count => results,
        Ok(_) => vec![
            Err(runnel_metadata::ApiError::new(
                code::UNKNOWN_SERVER_ERROR,
                "the controller answered a different number of entries",
            ));
            count
        ],
        Err(e) => vec![Err(e); count],
    };
    alter_answer(&request, results)
}

/// One entry of the request as the controller's operation takes it.
fn alteration(entry: &alter_client_quotas_request::EntryData) -> QuotaAlteration {
    QuotaAlteration {
        entity: entry
            .entity
            .iter()
            .map(|e| {
                (
                    e.entity_type.to_string(),
                    e.entity_name.as_ref().map(|n| n.to_string()),
                )
            })
            .collect(),
        ops: entry
            .ops
            .iter()
            .map(|op| (op.key.to_string(), (!op.remove).then_some(op.value)))
            .collect(),
    }
}

/// The response: each entry's entity echoed with its result.
fn alter_answer(
    request: &AlterClientQuotasRequest,
    results: Vec<Result<(), runnel_metadata::ApiError>>,
) -> AlterClientQuotasResponse {
    let echo = |entry: &alter_client_quotas_request::EntryData| {
        entry
            .entity
            .iter()
            .map(|e| {
                alter_client_quotas_response::EntityData::default()
                    .with_entity_type(e.entity_type.clone())
                    .with_entity_name(e.entity_name.clone())
            })
            .collect::<Vec<_>>()
    };
    AlterClientQuotasResponse::default().with_entries(
        request
            .entries
            .iter()
            .zip(results)
            .map(|(entry, r)| {
                let out =
                    alter_client_quotas_response::EntryData::default().with_entity(echo(entry));
                match r {
                    Ok(()) => out,
                    Err(e) => out
                        .with_error_code(e.code)
                        .with_error_message(Some(str_bytes(&e.message))),
                }
            })
            .collect(),
    )
}
