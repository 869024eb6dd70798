//! Value validation for topic config keys, with Kafka's `ConfigException` wording
//! ("Invalid value X for configuration Y: reason"), reported as 40 INVALID_CONFIG.

use super::keys::{topic_config_def, ConfigType, TopicConfigDef, Validator};
use crate::errors::ApiError;

/// A parsed config value, typed as the key's definition says.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigValue {
    Boolean(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    String(String),
    List(Vec<String>),
}

/// Validates one topic-level key and value: unknown key or bad value -> 40 INVALID_CONFIG.
pub fn validate_topic_config(name: &str, value: &str) -> Result<(), ApiError> {
    let def = topic_config_def(name)
        .ok_or_else(|| ApiError::invalid_config(format!("Unknown topic config name: {name}")))?;
    parse_value(def, value).map(|_| ())
}

/// Parses and validates `value` for `def` (the error is already INVALID_CONFIG).
pub fn parse_value(def: &TopicConfigDef, value: &str) -> Result<ConfigValue, ApiError> {
    let fail = |reason: String| {
        ApiError::invalid_config(format!(
            "Invalid value {value} for configuration {}: {reason}",
            def.name
        ))
    };
    let parsed = parse_type(def.ty, value).map_err(fail)?;
    check(def.validator, &parsed).map_err(fail)?;
    Ok(parsed)
}

/// Kafka's `ConfigDef.parseType`: the string is trimmed first.
fn parse_type(ty: ConfigType, value: &str) -> Result<ConfigValue, String> {
    let trimmed = value.trim();
    let not_a_number = || format!("Not a number of type {}", ty.java_name());
    Ok(match ty {
        ConfigType::Boolean => {
            if trimmed.eq_ignore_ascii_case("true") {
                ConfigValue::Boolean(true)
            } else if trimmed.eq_ignore_ascii_case("false") {
                ConfigValue::Boolean(false)
            } else {
                return Err("Expected value to be either true or false".into());
            }
        }
        ConfigType::Int => ConfigValue::Int(trimmed.parse().map_err(|_| not_a_number())?),
        ConfigType::Short => {
            let n: i16 = trimmed.parse().map_err(|_| not_a_number())?;
            ConfigValue::Int(i32::from(n))
        }
        ConfigType::Long => ConfigValue::Long(trimmed.parse().map_err(|_| not_a_number())?),
        ConfigType::Double => {
            let d: f64 = trimmed.parse().map_err(|_| not_a_number())?;
            if !d.is_finite() {
                return Err(not_a_number());
            }
            ConfigValue::Double(d)
        }
        ConfigType::String | ConfigType::Class => ConfigValue::String(trimmed.to_string()),
        // Kafka does not trim passwords.
        ConfigType::Password => ConfigValue::String(value.to_string()),
        ConfigType::List => ConfigValue::List(split_list(trimmed)),
    })
}

/// Splits a LIST value on commas, trimming each element; `""` is the empty list.
pub fn split_list(value: &str) -> Vec<String> {
    let value = value.trim();
    if value.is_empty() {
        return Vec::new();
    }
    value.split(',').map(|s| s.trim().to_string()).collect()
}

fn as_i64(v: &ConfigValue) -> Option<i64> {
    match v {
        ConfigValue::Int(i) => Some(i64::from(*i)),
        ConfigValue::Long(l) => Some(*l),
        _ => None,
    }
}

fn check(validator: Validator, v: &ConfigValue) -> Result<(), String> {
    match validator {
        Validator::None => Ok(()),
        Validator::AtLeast(min) => match as_i64(v) {
            Some(n) if n < min => Err(format!("Value must be at least {min}")),
            _ => Ok(()),
        },
        Validator::Between(min, max) => match as_i64(v) {
            Some(n) if n < min => Err(format!("Value must be at least {min}")),
            Some(n) if n > max => Err(format!("Value must be no more than {max}")),
            _ => Ok(()),
        },
        Validator::BetweenF(min, max) => match v {
            ConfigValue::Double(d) if *d < min => Err(format!("Value must be at least {min}")),
            ConfigValue::Double(d) if *d > max => Err(format!("Value must be no more than {max}")),
            _ => Ok(()),
        },
        Validator::OneOf(allowed) => match v {
            ConfigValue::String(s) if !allowed.contains(&s.as_str()) => {
                Err(format!("String must be one of: {}", allowed.join(", ")))
            }
            _ => Ok(()),
        },
        Validator::ListOf(allowed) => match v {
            ConfigValue::List(items) if items.iter().any(|i| !allowed.contains(&i.as_str())) => {
                Err(format!("String must be one of: {}", allowed.join(", ")))
            }
            _ => Ok(()),
        },
        Validator::ThrottledReplicas => match v {
            ConfigValue::List(items) => check_throttled(items),
            _ => Ok(()),
        },
        Validator::GzipLevel => match as_i64(v) {
            Some(n) if n == -1 || (1..=9).contains(&n) => Ok(()),
            Some(_) => Err("Value must be between 1 and 9, or -1".into()),
            None => Ok(()),
        },
        Validator::MessageFormatVersion => match v {
            ConfigValue::String(s) if !is_version(s) => {
                Err(format!("Version `{s}` is not a valid version"))
            }
            _ => Ok(()),
        },
    }
}

fn check_throttled(items: &[String]) -> Result<(), String> {
    let ok = match items {
        [] => true,
        [one] if one == "*" => true,
        _ => items.iter().all(|item| {
            item.split_once(':').is_some_and(|(p, b)| {
                p.trim().parse::<i32>().is_ok() && b.trim().parse::<i32>().is_ok()
            })
        }),
    };
    if ok {
        Ok(())
    } else {
        Err("must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...".into())
    }
}

/// `0.10.2`, `2.8`, `3.0-IV1`, `2.8-IV0`: dotted numbers with an optional `-IVn` suffix.
fn is_version(s: &str) -> bool {
    let (numbers, iv) = match s.split_once('-') {
        Some((n, suffix)) => (n, Some(suffix)),
        None => (s, None),
    };
    let numbers_ok = {
        let parts: Vec<&str> = numbers.split('.').collect();
        (2..=3).contains(&parts.len())
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    };
    let iv_ok = iv.is_none_or(|iv| {
        iv.strip_prefix("IV")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    numbers_ok && iv_ok
}
