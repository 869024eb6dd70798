//! CreateAcls (30) and DeleteAcls (31): Kafka's `AclControlManager`. Each ACL of a create is
//! validated on its own (a bad one fails alone), an ACL identical to a stored one (or to an
//! earlier one of the same request) is answered success and stored once, and each new ACL gets
//! a fresh id. A delete removes every stored ACL one of its filters matches (each ACL once,
//! even when several filters match it) and answers, per filter, the ACLs it removed.

use std::collections::BTreeSet;

use rand::Rng;
use uuid::Uuid;

use super::Controller;
use crate::acl::{AclBinding, AclBindingFilter};
use crate::errors::ApiError;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

impl Controller {
    pub fn create_acls(
        &mut self,
        image: &MetadataImage,
        acls: &[AclBinding],
    ) -> (Vec<Result<(), ApiError>>, Vec<MetadataRecord>) {
        let mut records = Vec::new();
        let mut added: Vec<&AclBinding> = Vec::new();
        let mut ids = BTreeSet::new();
        let results = acls
            .iter()
            .map(|acl| {
                acl.validate_new()?;
                if !image.acls.contains(acl) && !added.contains(&acl) {
                    let id = self.new_acl_id(image, &ids);
                    ids.insert(id);
                    added.push(acl);
                    records.push(MetadataRecord::AccessControlEntry {
                        id,
                        acl: acl.clone(),
                    });
                }
                Ok(())
            })
            .collect();
        (results, records)
    }

    pub fn delete_acls(
        &self,
        image: &MetadataImage,
        filters: &[AclBindingFilter],
    ) -> (Vec<Result<Vec<AclBinding>, ApiError>>, Vec<MetadataRecord>) {
        let mut removed = BTreeSet::new();
        let mut records = Vec::new();
        let results = filters
            .iter()
            .map(|filter| {
                filter.validate()?;
                let mut matched = Vec::new();
                for (id, acl) in image.acls.matching(filter) {
                    if removed.insert(*id) {
                        records.push(MetadataRecord::RemoveAccessControlEntry { id: *id });
                        matched.push(acl.clone());
                    }
                }
                Ok(matched)
            })
            .collect();
        (results, records)
    }

    /// A fresh ACL id from the seeded RNG: never nil, never in use.
    fn new_acl_id(&mut self, image: &MetadataImage, taken: &BTreeSet<Uuid>) -> Uuid {
        loop {
            let bytes: [u8; 16] = self.rng.gen();
            let id = uuid::Builder::from_random_bytes(bytes).into_uuid();
            if !id.is_nil() && !image.acls.contains_id(&id) && !taken.contains(&id) {
                return id;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{AclOperation, AclPermission, PatternType, ResourceType};
    use crate::controller::ControllerConfig;

    fn acl(name: &str) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        }
    }

    fn commit(image: &MetadataImage, records: Vec<MetadataRecord>) -> MetadataImage {
        let numbered: Vec<_> = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| (image.offset + 1 + i as i64, r))
            .collect();
        image.apply(&numbered).unwrap()
    }

    #[test]
    fn creates_each_valid_acl_once_and_fails_bad_ones_alone() {
        let mut c = Controller::new(ControllerConfig::default(), 1, 7);
        let image = MetadataImage::empty("c".into());
        let bad = AclBinding {
            resource_name: String::new(),
            ..acl("x")
        };
        let (results, records) = c.create_acls(&image, &[acl("a"), bad, acl("a"), acl("b")]);
        assert!(results[0].is_ok() && results[2].is_ok() && results[3].is_ok());
        assert_eq!(
            results[1].as_ref().unwrap_err().code,
            crate::codes::INVALID_REQUEST
        );
        assert_eq!(records.len(), 2);
        let image = commit(&image, records);
        assert_eq!(image.acls.len(), 2);
        let (results, records) = c.create_acls(&image, &[acl("a")]);
        assert!(results[0].is_ok());
        assert!(records.is_empty(), "an existing ACL is not stored twice");
    }

    #[test]
    fn deletes_what_filters_match_once() {
        let mut c = Controller::new(ControllerConfig::default(), 1, 7);
        let image = MetadataImage::empty("c".into());
        let (_, records) = c.create_acls(&image, &[acl("a"), acl("b")]);
        let image = commit(&image, records);
        let only_a = AclBindingFilter {
            resource_name: Some("a".into()),
            ..AclBindingFilter::any()
        };
        let unknown = AclBindingFilter {
            operation: AclOperation::Unknown,
            ..AclBindingFilter::any()
        };
        let (results, records) = c.delete_acls(&image, &[only_a, AclBindingFilter::any(), unknown]);
        assert_eq!(results[0].as_ref().unwrap(), &vec![acl("a")]);
        assert_eq!(results[1].as_ref().unwrap(), &vec![acl("b")]);
        assert_eq!(
            results[2].as_ref().unwrap_err().code,
            crate::codes::INVALID_REQUEST
        );
        let image = commit(&image, records);
        assert!(image.acls.is_empty());
    }
}

/// The CreateAcls operation: per ACL, in request order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreateAcls {
    pub acls: Vec<AclBinding>,
}

impl super::ControllerOp for CreateAcls {
    const NAME: &'static str = "CreateAcls";
    type Response = Vec<Result<(), ApiError>>;

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<Self::Response>, ApiError> {
        let (results, records) = ctx.controller.create_acls(ctx.image, &self.acls);
        Ok(super::ControllerResult::new(records, results))
    }
}

/// The DeleteAcls operation: per filter, the ACLs it removed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeleteAcls {
    pub filters: Vec<AclBindingFilter>,
}

impl super::ControllerOp for DeleteAcls {
    const NAME: &'static str = "DeleteAcls";
    type Response = Vec<Result<Vec<AclBinding>, ApiError>>;

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<Self::Response>, ApiError> {
        let (results, records) = ctx.controller.delete_acls(ctx.image, &self.filters);
        Ok(super::ControllerResult::new(records, results))
    }
}
