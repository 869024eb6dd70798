//! CreateAcls (30), DescribeAcls (29), DeleteAcls (31), as Kafka's `AclApis`: without an
//! authorizer every one is SECURITY_DISABLED; Create / Delete need ALTER on the cluster and go
//! to the active controller (ACLs are metadata records); Describe needs DESCRIBE on the
//! cluster and is answered from this broker's image.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use runnel_metadata::acl::{
    AclBinding, AclBindingFilter, AclOperation, AclPermission, PatternType, ResourceType,
};
use runnel_metadata::ApiError;

use crate::context::{Broker, RequestContext};

/// The refusal every ACL request gets before it is looked at, if any.
fn gate(broker: &Broker, ctx: &RequestContext, op: AclOperation) -> Option<ApiError> {
    if broker.authorizer.is_none() {
        return Some(ApiError::security_disabled("No Authorizer is configured."));
    }
    (!broker.authorized_cluster(ctx, op))
        .then(|| ApiError::cluster_authorization_failed("Cluster authorization failed."))
}

fn text(s: Option<&StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}

pub async fn create(
    broker: &Arc<Broker>,
    request: CreateAclsRequest,
    _version: i16,
    ctx: &RequestContext,
) -> CreateAclsResponse {
    let answer = |e: Option<&ApiError>| {
        AclCreationResult::default()
            .with_error_code(e.map_or(0, |e| e.code))
            .with_error_message(e.map(|e| StrBytes::from_string(e.message.clone())))
    };
    if let Some(e) = gate(broker, ctx, AclOperation::Alter) {
        let results = request.creations.iter().map(|_| answer(Some(&e))).collect();
        return CreateAclsResponse::default().with_results(results);
    }
    let acls: Vec<AclBinding> = request
        .creations
        .iter()
        .map(|c| AclBinding {
            resource_type: ResourceType::from_code(c.resource_type),
            resource_name: c.resource_name.to_string(),
            pattern_type: PatternType::from_code(c.resource_pattern_type),
            principal: c.principal.to_string(),
            host: c.host.to_string(),
            operation: AclOperation::from_code(c.operation),
            permission: AclPermission::from_code(c.permission_type),
        })
        .collect();
    let count = acls.len();
    let results = match broker
        .controller
        .run(runnel_metadata::controller::CreateAcls { acls })
        .await
    {
        Ok(results) => results.iter().map(|r| answer(r.as_ref().err())).collect(),
        Err(e) => (0..count).map(|_| answer(Some(&e))).collect(),
    };
    CreateAclsResponse::default().with_results(results)
}

pub async fn describe(
    broker: &Arc<Broker>,
    request: DescribeAclsRequest,
    _version: i16,
    ctx: &RequestContext,
) -> DescribeAclsResponse {
    let filter = AclBindingFilter {
        resource_type: ResourceType::from_code(request.resource_type_filter),
        resource_name: text(request.resource_name_filter.as_ref()),
        pattern_type: PatternType::from_code(request.pattern_type_filter),
        principal: text(request.principal_filter.as_ref()),
        host: text(request.host_filter.as_ref()),
        operation: AclOperation::from_code(request.operation),
        permission: AclPermission::from_code(request.permission_type),
    };
    if let Some(e) = gate(broker, ctx, AclOperation::Describe).or_else(|| filter.validate().err()) {
        return DescribeAclsResponse::default()
            .with_error_code(e.code)
            .with_error_message(Some(StrBytes::from_string(e.message)));
    }
    let image = broker.image();
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for (_, acl) in image.acls.matching(&filter) {
        by_resource
            .entry((
                acl.resource_type.code(),
                acl.resource_name.clone(),
                acl.pattern_type.code(),
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(StrBytes::from_string(acl.principal.clone()))
                    .with_host(StrBytes::from_string(acl.host.clone()))
                    .with_operation(acl.operation.code())
                    .with_permission_type(acl.permission.code()),
            );
    }
    let resources = by_resource
        .into_iter()
        .map(|((rt, name, pt), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(rt)
                .with_resource_name(StrBytes::from_string(name))
                .with_pattern_type(pt)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}

pub async fn delete(
    broker: &Arc<Broker>,
    request: DeleteAclsRequest,
    _version: i16,
    ctx: &RequestContext,
) -> DeleteAclsResponse {
    let failed = |e: &ApiError| {
        DeleteAclsFilterResult::default()
            .with_error_code(e.code)
            .with_error_message(Some(StrBytes::from_string(e.message.clone())))
    };
    if let Some(e) = gate(broker, ctx, AclOperation::Alter) {
        let results = request.filters.iter().map(|_| failed(&e)).collect();
        return DeleteAclsResponse::default().with_filter_results(results);
    }
    let filters: Vec<AclBindingFilter> = request
        .filters
        .iter()
        .map(|f| AclBindingFilter {
            resource_type: ResourceType::from_code(f.resource_type_filter),
            resource_name: text(f.resource_name_filter.as_ref()),
            pattern_type: PatternType::from_code(f.pattern_type_filter),
            principal: text(f.principal_filter.as_ref()),
            host: text(f.host_filter.as_ref()),
            operation: AclOperation::from_code(f.operation),
            permission: AclPermission::from_code(f.permission_type),
        })
        .collect();
    let count = filters.len();
    let results = match broker
        .controller
        .run(runnel_metadata::controller::DeleteAcls { filters })
        .await
    {
        Ok(results) => results
            .into_iter()
            .map(|r| match r {
                Ok(acls) => DeleteAclsFilterResult::default()
                    .with_matching_acls(acls.iter().map(matching_acl).collect()),
                Err(e) => failed(&e),
            })
            .collect(),
        Err(e) => (0..count).map(|_| failed(&e)).collect(),
    };
    DeleteAclsResponse::default().with_filter_results(results)
}

fn matching_acl(acl: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(acl.resource_type.code())
        .with_resource_name(StrBytes::from_string(acl.resource_name.clone()))
        .with_pattern_type(acl.pattern_type.code())
        .with_principal(StrBytes::from_string(acl.principal.clone()))
        .with_host(StrBytes::from_string(acl.host.clone()))
        .with_operation(acl.operation.code())
        .with_permission_type(acl.permission.code())
}
