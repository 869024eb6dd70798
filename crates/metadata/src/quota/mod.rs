//! Client quotas (KIP-13 byte rates, KIP-124 request percentage, KIP-546 the admin API), as
//! Kafka's `ClientQuotaControlManager` (alter), `ClientQuotasImage` (describe) and
//! `ClientQuotaManager`'s default callback (which quota applies to a connection) decide them.
//!
//! An entity is a user, a client id, or a user with a client id; either part may be Kafka's
//! `<default>` entity (a `None` name on the wire). The rate arithmetic that enforces a quota is
//! in [`rate`].

pub mod rate;
pub mod request;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::errors::codes::UNSUPPORTED_VERSION;
use crate::errors::{codes, ApiError};
use crate::records::MetadataRecord;

/// Kafka's entity type names.
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// The quota keys a user / client-id entity takes, with whether the value must be integral
/// (Kafka's LONG keys) or may be fractional (DOUBLE).
pub const QUOTA_KEYS: &[(&str, bool)] = &[
    (PRODUCER_BYTE_RATE, true),
    (CONSUMER_BYTE_RATE, true),
    (REQUEST_PERCENTAGE, false),
    (CONTROLLER_MUTATION_RATE, false),
];
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";

/// One part of an entity: a name, or Kafka's `<default>` entity of that type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// From the wire (`None` = the default entity).
    pub fn from_wire(name: Option<&str>) -> Self {
        match name {
            None => EntityName::Default,
            Some(n) => EntityName::Named(n.to_string()),
        }
    }

    /// To the wire (`None` = the default entity).
    pub fn to_wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(n) => Some(n),
        }
    }
}

/// A quota entity: a user, a client id, or both (never neither: [`QuotaEntity::new`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
}

impl QuotaEntity {
    pub fn user(name: EntityName) -> Self {
        QuotaEntity {
            user: Some(name),
            client_id: None,
        }
    }

    pub fn client(name: EntityName) -> Self {
        QuotaEntity {
            user: None,
            client_id: Some(name),
        }
    }

    pub fn user_client(user: EntityName, client_id: EntityName) -> Self {
        QuotaEntity {
            user: Some(user),
            client_id: Some(client_id),
        }
    }

    /// (entity type, name) pairs as the wire carries them, user first.
    pub fn parts(&self) -> Vec<(&'static str, Option<&str>)> {
        let mut out = Vec::with_capacity(2);
        if let Some(u) = &self.user {
            out.push((USER, u.to_wire()));
        }
        if let Some(c) = &self.client_id {
            out.push((CLIENT_ID, c.to_wire()));
        }
        out
    }

    /// Kafka's rendering, e.g. `ClientQuotaEntity(user=alice, client-id=<default>)`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .parts()
            .into_iter()
            .map(|(t, n)| format!("{t}={}", n.unwrap_or("<default>")))
            .collect();
        format!("ClientQuotaEntity({})", parts.join(", "))
    }
}

/// A quota value: a finite, positive `f64` once validated (JSON stores no NaN or infinity).
/// Compared bit for bit so records stay `Eq`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// The quotas of every entity (the image's `client_quotas`).
pub type ClientQuotas = BTreeMap<QuotaEntity, QuotaValues>;

/// One entity's quotas by key.
pub type QuotaValues = BTreeMap<String, f64>;

/// Applies one `ClientQuotaRecord` (an empty entity's map is dropped, as Kafka's replay does).
pub fn replay(quotas: &mut ClientQuotas, entity: &QuotaEntity, key: &str, value: Option<f64>) {
    match value {
        Some(v) => {
            quotas
                .entry(entity.clone())
                .or_default()
                .insert(key.to_string(), v);
        }
        None => {
            if let Some(map) = quotas.get_mut(entity) {
                map.remove(key);
                if map.is_empty() {
                    quotas.remove(entity);
                }
            }
        }
    }
}

/// One entity of an AlterClientQuotas request, as the wire gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaAlteration {
    /// (entity type, name; `None` = default), in request order.
    pub entity: Vec<(String, Option<String>)>,
    /// (key, `Some(value)` to set / `None` to remove), in request order. Carried between
    /// nodes as the value's bits, so a NaN or infinite value a client sent reaches the
    /// controller's check instead of failing the JSON encoding.
    #[serde(with = "ops_as_bits")]
    pub ops: Vec<(String, Option<f64>)>,
}

mod ops_as_bits {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(
        ops: &[(String, Option<f64>)],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let bits: Vec<(&str, Option<u64>)> = ops
            .iter()
            .map(|(k, v)| (k.as_str(), v.map(f64::to_bits)))
            .collect();
        bits.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<(String, Option<f64>)>, D::Error> {
        let bits: Vec<(String, Option<u64>)> = Vec::deserialize(deserializer)?;
        Ok(bits
            .into_iter()
            .map(|(k, v)| (k, v.map(f64::from_bits)))
            .collect())
    }
}

/// One entry's result, in request order.
pub type QuotaAlterResult = Result<(), ApiError>;

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(codes::INVALID_REQUEST, message)
}

/// The entity an alteration names, or Kafka's INVALID_REQUEST.
pub fn validate_entity(parts: &[(String, Option<String>)]) -> Result<QuotaEntity, ApiError> {
    if parts.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    let mut entity = QuotaEntity {
        user: None,
        client_id: None,
    };
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (entity_type, name) in parts {
        if !seen.insert(entity_type) {
            return Err(invalid(format!(
                "Invalid client quota entity, duplicate entity entry {entity_type}"
            )));
        }
        let slot = match entity_type.as_str() {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            IP => {
                return Err(invalid(
                    "IP quota entities (connection_creation_rate) are not supported",
                ))
            }
            other => {
                return Err(invalid(format!(
                    "Unhandled client quota entity type: {other}"
                )))
            }
        };
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {entity_type} not supported")));
        }
        *slot = Some(EntityName::from_wire(name.as_deref()));
    }
    Ok(entity)
}

/// Kafka's key and value checks for a user / client-id quota.
pub fn validate_key_value(key: &str, value: f64) -> Result<(), ApiError> {
    let Some(&(_, integral)) = QUOTA_KEYS.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    // NaN is refused too; an infinite value cannot be stored (nor is it a rate).
    if value.is_nan() || value <= 0.0 {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    if !value.is_finite() {
        return Err(invalid(format!("Quota {key} must be finite")));
    }
    if integral {
        // Kafka's LONG bound (i64::MAX as f64 rounds up to 2^63).
        if value >= 9_223_372_036_854_775_808.0 {
            return Err(invalid(format!(
                "Proposed value for {key} is too large for a LONG."
            )));
        }
        if (value % 1.0).abs() > 1e-6 {
            return Err(invalid(format!("{key} cannot be a fractional value.")));
        }
    }
    Ok(())
}

/// Decides AlterClientQuotas as Kafka's controller does: per entry a result, and the records
/// of the entries that passed (only changed values are written; removing an absent key writes
/// nothing). A duplicate key fails its entry; an entity named twice fails the later entries.
pub fn alter_client_quotas(
    quotas: &ClientQuotas,
    alterations: &[QuotaAlteration],
) -> (Vec<QuotaAlterResult>, Vec<MetadataRecord>) {
    let mut results = Vec::with_capacity(alterations.len());
    let mut records = Vec::new();
    let mut entities_seen: Vec<QuotaEntity> = Vec::new();
    for alteration in alterations {
        let decided = decide_one(quotas, alteration, &mut entities_seen);
        match decided {
            Ok(mut r) => {
                records.append(&mut r);
                results.push(Ok(()));
            }
            Err(e) => results.push(Err(e)),
        }
    }
    (results, records)
}

/// The AlterClientQuotas operation (KIP-546): the controller validates and decides each
/// entry and commits the records of every entry that passed as one atomic batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlterClientQuotas {
    pub alterations: Vec<QuotaAlteration>,
    pub validate_only: bool,
}

impl crate::controller::ControllerOp for AlterClientQuotas {
    const NAME: &'static str = "AlterClientQuotas";
    type Response = Vec<QuotaAlterResult>;

    fn decide(
        &self,
        ctx: &mut crate::controller::OpContext<'_>,
    ) -> Result<crate::controller::ControllerResult<Self::Response>, ApiError> {
        let (results, records) = alter_client_quotas(&ctx.image.client_quotas, &self.alterations);
        let records = if self.validate_only {
            Vec::new()
        } else {
            records
        };
        Ok(crate::controller::ControllerResult::new(records, results))
    }
}

fn decide_one(
    quotas: &ClientQuotas,
    alteration: &QuotaAlteration,
    entities_seen: &mut Vec<QuotaEntity>,
) -> Result<Vec<MetadataRecord>, ApiError> {
    let entity = validate_entity(&alteration.entity)?;
    if entities_seen.contains(&entity) {
        return Err(invalid(format!(
            "Ignoring duplicate entity {}",
            entity.describe()
        )));
    }
    entities_seen.push(entity.clone());
    let mut keys: BTreeSet<&str> = BTreeSet::new();
    for (key, _) in &alteration.ops {
        if !keys.insert(key) {
            return Err(invalid(format!(
                "Duplicate quota key {key} not updating quota for this entity {}",
                entity.describe()
            )));
        }
    }
    let current = quotas.get(&entity);
    let mut records = Vec::new();
    for (key, value) in &alteration.ops {
        let existing = current.and_then(|m| m.get(key)).copied();
        match value {
            None => {
                if existing.is_some() {
                    records.push(MetadataRecord::ClientQuota {
                        entity: entity.clone(),
                        key: key.clone(),
                        value: None,
                    });
                }
            }
            Some(v) => {
                validate_key_value(key, *v)?;
                if existing.map(f64::to_bits) != Some(v.to_bits()) {
                    records.push(MetadataRecord::ClientQuota {
                        entity: entity.clone(),
                        key: key.clone(),
                        value: Some(QuotaValue(*v)),
                    });
                }
            }
        }
    }
    Ok(records)
}

/// How a DescribeClientQuotas filter component matches (Kafka's match types 0, 1, 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchType {
    Exact(String),
    Default,
    Specified,
}

/// One filter component from the wire: (entity type, match type id, match string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterComponent {
    pub entity_type: String,
    pub match_type: i8,
    pub matched: Option<String>,
}

/// The entities a DescribeClientQuotas filter selects, with their quotas, as Kafka's
/// `ClientQuotasImage.describe`: INVALID_REQUEST for a malformed filter, UNSUPPORTED_VERSION
/// for an unknown entity type.
pub fn describe_client_quotas<'a>(
    quotas: &'a ClientQuotas,
    components: &[FilterComponent],
    strict: bool,
) -> Result<Vec<(&'a QuotaEntity, &'a QuotaValues)>, ApiError> {
    let mut filter: Vec<(&str, MatchType)> = Vec::new();
    for c in components {
        let t = c.entity_type.as_str();
        if t.is_empty() {
            return Err(invalid("Invalid empty entity type."));
        }
        if filter.iter().any(|(seen, _)| *seen == t) {
            return Err(invalid(format!(
                "Entity type {t} cannot appear more than once in the filter."
            )));
        }
        if ![IP, USER, CLIENT_ID].contains(&t) {
            return Err(ApiError::new(
                UNSUPPORTED_VERSION,
                format!("Unsupported entity type {t}"),
            ));
        }
        let m =
            match (c.match_type, &c.matched) {
                (0, Some(name)) => MatchType::Exact(name.clone()),
                (0, None) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                    ))
                }
                (1, None) => MatchType::Default,
                (1, Some(_)) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                    ))
                }
                (2, None) => MatchType::Specified,
                (2, Some(_)) => return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )),
                (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
            };
        filter.push((t, m));
    }
    let has = |t: &str| filter.iter().any(|(s, _)| *s == t);
    if has(IP) && (has(USER) || has(CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be \
             used with user or clientId filter component.",
        ));
    }
    Ok(quotas
        .iter()
        .filter(|(entity, _)| matches(entity, &filter, strict))
        .collect())
}

fn matches(entity: &QuotaEntity, filter: &[(&str, MatchType)], strict: bool) -> bool {
    if strict && entity.parts().len() != filter.len() {
        return false;
    }
    filter.iter().all(|(t, m)| {
        let part = match *t {
            USER => entity.user.as_ref(),
            CLIENT_ID => entity.client_id.as_ref(),
            _ => None,
        };
        match (part, m) {
            (None, _) => false,
            (Some(EntityName::Named(n)), MatchType::Exact(want)) => n == want,
            (Some(EntityName::Default), MatchType::Default) => true,
            (Some(_), MatchType::Specified) => true,
            _ => false,
        }
    })
}

/// Which connections share one rate sensor (Kafka's quota metric tags): the user part and the
/// client-id part, `""` where the applying quota does not distinguish it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SensorKey {
    pub user: String,
    pub client_id: String,
}

/// The quota `key` that applies to a connection of `user` with `client_id`, and the sensor it
/// is measured on, in Kafka's precedence order (the first entity that sets `key` wins):
///
/// 1. `/config/users/<user>/clients/<client-id>`
/// 2. `/config/users/<user>/clients/<default>`
/// 3. `/config/users/<user>`
/// 4. `/config/users/<default>/clients/<client-id>`
/// 5. `/config/users/<default>/clients/<default>`
/// 6. `/config/users/<default>`
/// 7. `/config/clients/<client-id>`
/// 8. `/config/clients/<default>`
///
/// User-and-client levels (1, 2, 4, 5) keep one sensor per (user, client id); user levels
/// (3, 6) one per user, shared by its client ids; client levels (7, 8) one per client id,
/// shared by its users. An empty client id matches only the user levels, as in Kafka.
pub fn applicable_quota(
    quotas: &ClientQuotas,
    user: &str,
    client_id: &str,
    key: &str,
) -> Option<(f64, SensorKey)> {
    use EntityName::{Default as D, Named as N};
    let u = || N(user.to_string());
    let c = || N(client_id.to_string());
    let both = SensorKey {
        user: user.to_string(),
        client_id: client_id.to_string(),
    };
    let user_only = SensorKey {
        user: user.to_string(),
        client_id: String::new(),
    };
    let client_only = SensorKey {
        user: String::new(),
        client_id: client_id.to_string(),
    };
    let has_user = !user.is_empty();
    let has_client = !client_id.is_empty();
    let levels: [(bool, QuotaEntity, &SensorKey); 8] = [
        (
            has_user && has_client,
            QuotaEntity::user_client(u(), c()),
            &both,
        ),
        (
            has_user && has_client,
            QuotaEntity::user_client(u(), D),
            &both,
        ),
        (has_user, QuotaEntity::user(u()), &user_only),
        (
            has_user && has_client,
            QuotaEntity::user_client(D, c()),
            &both,
        ),
        (
            has_user && has_client,
            QuotaEntity::user_client(D, D),
            &both,
        ),
        (has_user, QuotaEntity::user(D), &user_only),
        (has_client, QuotaEntity::client(c()), &client_only),
        (has_client, QuotaEntity::client(D), &client_only),
    ];
    let found = levels
        .into_iter()
        .filter(|(eligible, _, _)| *eligible)
        .find_map(|(_, entity, sensor)| {
            quotas
                .get(&entity)
                .and_then(|m| m.get(key))
                .map(|v| (*v, sensor.clone()))
        });
    found
}

#[cfg(test)]
mod tests;
