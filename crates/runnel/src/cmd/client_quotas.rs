//! `runnel configs --entity-type users|clients`: client quotas as kafka-configs.sh manages
//! them (KIP-546): `--add-config producer_byte_rate=1048576,consumer_byte_rate=2097152`,
//! `--delete-config request_percentage`, `--describe`, with `--entity-name X` or
//! `--entity-default`.

use anyhow::{bail, Result};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;
use runnel_client::Admin;
use runnel_metadata::quota::{CLIENT_ID, QUOTA_KEYS, USER};

/// Kafka's quota keys for users and client ids.
pub fn is_quota_key(key: &str) -> bool {
    QUOTA_KEYS.iter().any(|(k, _)| *k == key)
}

/// One part of the entity: (Kafka entity type, name; `None` = the default entity).
pub type Part = (&'static str, Option<String>);

/// The entity type for a kafka-configs.sh type name (`users`, `clients`).
pub fn part(entity_type: &str, name: Option<&str>) -> Result<Part> {
    let t = match entity_type {
        "users" => USER,
        "clients" => CLIENT_ID,
        other => bail!("client quotas are for users and clients, not {other}"),
    };
    Ok((t, name.map(str::to_string)))
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub async fn alter(
    admin: &Admin,
    entity: &[Part],
    adds: &[(String, String)],
    deletes: &[String],
) -> Result<()> {
    let mut ops = Vec::new();
    for (key, value) in adds {
        if !is_quota_key(key) {
            bail!("Only quota configs can be added here. Unexpected config name: {key}");
        }
        let Ok(v) = value.trim().parse::<f64>() else {
            bail!("{key}: '{value}' is not a number");
        };
        ops.push(OpData::default().with_key(s(key)).with_value(v));
    }
    for key in deletes {
        if !is_quota_key(key) {
            bail!("Only quota configs can be deleted here. Unexpected config name: {key}");
        }
        ops.push(OpData::default().with_key(s(key)).with_remove(true));
    }
    let entity_data = entity
        .iter()
        .map(|(t, n)| {
            EntityData::default()
                .with_entity_type(s(t))
                .with_entity_name(n.as_deref().map(s))
        })
        .collect();
    let request = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
        .with_entity(entity_data)
        .with_ops(ops)]);
    let response = admin.client().send_to_controller(&request).await?;
    for e in response.entries {
        if e.error_code != 0 {
            let message = e.error_message.map(|m| m.to_string()).unwrap_or_default();
            bail!("cannot alter the quotas: error {} {message}", e.error_code);
        }
    }
    Ok(())
}

/// Prints every entity the filter matches (kafka-configs.sh: "contains only" the given types;
/// a type without a name matches any name of it).
pub async fn describe(admin: &Admin, filter: &[Part]) -> Result<()> {
    let components = filter
        .iter()
        .map(|(t, n)| {
            let c = ComponentData::default().with_entity_type(s(t));
            match n {
                Some(name) if name.is_empty() => c.with_match_type(1).with_match(None),
                Some(name) => c.with_match_type(0).with_match(Some(s(name))),
                None => c.with_match_type(2).with_match(None),
            }
        })
        .collect();
    let request = DescribeClientQuotasRequest::default()
        .with_components(components)
        .with_strict(true);
    let response = admin.client().send_to_controller(&request).await?;
    if response.error_code != 0 {
        let message = response
            .error_message
            .map(|m| m.to_string())
            .unwrap_or_default();
        bail!(
            "cannot describe the quotas: error {} {message}",
            response.error_code
        );
    }
    for entry in response.entries.unwrap_or_default() {
        let mut parts: Vec<(usize, String)> = entry
            .entity
            .iter()
            .map(|e| {
                let (order, label) = match &*e.entity_type {
                    USER => (0, "user-principal"),
                    CLIENT_ID => (1, "client-id"),
                    _ => (2, "ip"),
                };
                let text = match &e.entity_name {
                    Some(n) => format!("{label} '{}'", &**n),
                    None => format!("the default {label}"),
                };
                (order, text)
            })
            .collect();
        parts.sort();
        let entity: Vec<String> = parts.into_iter().map(|(_, t)| t).collect();
        let values: Vec<String> = entry
            .values
            .iter()
            .map(|v| format!("{}={}", &*v.key, java_double(v.value)))
            .collect();
        println!(
            "Quota configs for {} are {}",
            entity.join(", "),
            values.join(", ")
        );
    }
    Ok(())
}

/// A double as Java's `Double.toString` writes the common cases (`1048576.0`, `1.048576E7`).
pub fn java_double(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let plain = v.to_string();
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sci = format!("{v:E}");
        match sci.split_once('E') {
            Some((m, e)) if !m.contains('.') => format!("{m}.0E{e}"),
            _ => sci,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_java() {
        assert_eq!(java_double(1048576.0), "1048576.0");
        assert_eq!(java_double(12.5), "12.5");
        assert_eq!(java_double(10485760.0), "1.048576E7");
        assert_eq!(java_double(1e7), "1.0E7");
    }

    #[test]
    fn parts_map_kafka_configs_types() {
        assert_eq!(part("users", Some("a")).unwrap(), (USER, Some("a".into())));
        assert_eq!(part("clients", None).unwrap(), (CLIENT_ID, None));
        assert!(part("topics", None).is_err());
        assert!(is_quota_key("producer_byte_rate") && !is_quota_key("SCRAM-SHA-256"));
    }
}
