//! The shell of authorization: asks the pure authorizer (`runnel_metadata::acl`) about the
//! request's principal and client address against the ACLs of the current image. Without an
//! authorizer (`authorizer.class.name` empty) everything is allowed, as in Kafka.

use runnel_metadata::acl::{AclOperation, Requester, ResourceType, CLUSTER_NAME};

use crate::context::{Broker, RequestContext};

impl Broker {
    /// May the requester perform `op` on `(resource_type, name)`?
    pub fn authorized(
        &self,
        ctx: &RequestContext,
        op: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let Some(authorizer) = &self.authorizer else {
            return true;
        };
        let (principal, host) = requester(ctx);
        let who = Requester {
            principal: &principal,
            host: &host,
        };
        authorizer.authorize(&self.image().acls, who, op, resource_type, name)
    }

    pub fn authorized_topic(&self, ctx: &RequestContext, op: AclOperation, topic: &str) -> bool {
        self.authorized(ctx, op, ResourceType::Topic, topic)
    }

    pub fn authorized_group(&self, ctx: &RequestContext, op: AclOperation, group: &str) -> bool {
        self.authorized(ctx, op, ResourceType::Group, group)
    }

    pub fn authorized_cluster(&self, ctx: &RequestContext, op: AclOperation) -> bool {
        self.authorized(ctx, op, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// May the requester perform `op` on some resource of the type (Kafka's
    /// `authorizeByResourceType`)?
    pub fn authorized_any(
        &self,
        ctx: &RequestContext,
        op: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        let Some(authorizer) = &self.authorizer else {
            return true;
        };
        let (principal, host) = requester(ctx);
        let who = Requester {
            principal: &principal,
            host: &host,
        };
        authorizer.authorize_by_resource_type(&self.image().acls, who, op, resource_type)
    }

    /// KIP-430's bit field of the operations the requester may perform on the resource: bit
    /// `code` set for each allowed operation of the resource type.
    pub fn authorized_operations(
        &self,
        ctx: &RequestContext,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        AclOperation::supported_by(resource_type)
            .iter()
            .filter(|op| self.authorized(ctx, **op, resource_type, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }
}

/// The principal as `type:name` and the client address as Kafka's ACL hosts name it.
fn requester(ctx: &RequestContext) -> (String, String) {
    (ctx.principal.to_string(), ctx.peer.ip().to_string())
}
