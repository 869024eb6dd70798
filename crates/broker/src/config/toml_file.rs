//! The `--config` file (TOML, or Kafka's `server.properties`), flattened to Kafka property names.

use std::path::Path;

use crate::BrokerError;

/// Reads `runnel broker --config`: TOML ([`read_toml`]), else Kafka's `server.properties`
/// (Java properties syntax); also read by `runnel storage`.
/// A `.toml` file must be valid TOML (its errors are reported, not re-read as properties).
pub fn read_config_file(path: &Path) -> Result<Vec<(String, String)>, BrokerError> {
    match read_toml(path) {
        Ok(pairs) => Ok(pairs),
        Err(toml_error) if path.extension().is_some_and(|e| e == "toml") => Err(toml_error),
        Err(_) => runnel_client::security::read_properties_file(path).map_err(BrokerError::Config),
    }
}

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
