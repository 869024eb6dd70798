//! The `--config` TOML file, flattened to Kafka property names.

use std::path::Path;

use crate::BrokerError;

/// Reads a flat TOML file (`"log.retention.ms" = 1000` or nested tables joined by dots); also
/// read by `runnel storage`.
pub fn read_toml(path: &Path) -> Result<Vec<(String, String)>, BrokerError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BrokerError::Config(format!("cannot read {}: {e}", path.display())))?;
    let value: toml::Table = text
        .parse()
        .map_err(|e| BrokerError::Config(format!("{} is not valid TOML: {e}", path.display())))?;
    let mut out = Vec::new();
    flatten("", &value, &mut out);
    Ok(out)
}

fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, String)>) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out),
            toml::Value::String(s) => out.push((key, s.clone())),
            other => out.push((key, other.to_string())),
        }
    }
}
