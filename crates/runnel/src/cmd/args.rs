//! Parsers for the Kafka tools' flag syntaxes: `k=v` properties, `--replica-assignment`
//! lists, and kafka-configs' `--add-config` with `[a,b]` list values.

use anyhow::{bail, Context, Result};

/// Splits `key=value` at the first `=` (values may contain `=`), trimming spaces.
pub fn parse_kv(s: &str) -> Result<(String, String)> {
    let (k, v) = s
        .split_once('=')
        .with_context(|| format!("'{s}' is not of the form key=value"))?;
    let k = k.trim();
    if k.is_empty() {
        bail!("'{s}' has an empty key");
    }
    Ok((k.to_owned(), v.trim().to_owned()))
}

/// Parses repeated `key=value` flags.
pub fn parse_kvs(items: &[String]) -> Result<Vec<(String, String)>> {
    items.iter().map(|s| parse_kv(s)).collect()
}

/// Looks up the last value of `key` in parsed properties.
pub fn prop<'a>(props: &'a [(String, String)], key: &str) -> Option<&'a str> {
    props
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// A boolean property (`true`/`false`, Kafka style), `default` when absent.
pub fn prop_bool(props: &[(String, String)], key: &str, default: bool) -> Result<bool> {
    match prop(props, key) {
        None => Ok(default),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => bail!("{key}={v}: use true or false"),
    }
}

/// Unescapes `\t`, `\n`, `\r` and `\\` as Kafka's console tools do for separators.
pub fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `--replica-assignment 0:1,1:2,2:0`: partitions separated by `,`, replicas (preferred
/// leader first) by `:`. Every partition must have the same, duplicate-free replica count,
/// as kafka-topics requires.
pub fn parse_replica_assignment(s: &str) -> Result<Vec<Vec<i32>>> {
    let mut out: Vec<Vec<i32>> = Vec::new();
    for (i, part) in s.split(',').enumerate() {
        let part = part.trim();
        if part.is_empty() {
            bail!("--replica-assignment: partition {i} has no replicas");
        }
        let replicas: Vec<i32> = part
            .split(':')
            .map(|b| {
                b.trim()
                    .parse::<i32>()
                    .with_context(|| format!("--replica-assignment: '{b}' is not a broker id"))
            })
            .collect::<Result<_>>()?;
        let mut sorted = replicas.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != replicas.len() {
            bail!("--replica-assignment: partition {i} lists a broker twice ({part})");
        }
        if let Some(first) = out.first() {
            if first.len() != replicas.len() {
                bail!(
                    "--replica-assignment: partition {i} has replication factor {} but partition 0 has {}",
                    replicas.len(),
                    first.len()
                );
            }
        }
        out.push(replicas);
    }
    Ok(out)
}

/// kafka-configs `--add-config 'k1=v1,k2=[v1,v2],k3=v3'`: commas inside `[...]` belong to the
/// value (brackets are removed).
pub fn parse_add_config(s: &str) -> Result<Vec<(String, String)>> {
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in s.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        if depth < 0 {
            bail!("--add-config: unbalanced ']' in '{s}'");
        }
        current.push(c);
    }
    if depth != 0 {
        bail!("--add-config: unbalanced '[' in '{s}'");
    }
    items.push(current);
    items
        .into_iter()
        .filter(|i| !i.trim().is_empty())
        .map(|i| {
            let (k, v) = parse_kv(&i)?;
            let v = match v.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                Some(inner) => inner.to_owned(),
                None => v,
            };
            Ok((k, v))
        })
        .collect()
}

/// kafka-configs `--delete-config k1,k2`.
pub fn parse_delete_config(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_splits_at_first_equals() {
        assert_eq!(parse_kv("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert_eq!(
            parse_kv(" retention.ms = 1000 ").unwrap(),
            ("retention.ms".into(), "1000".into())
        );
        assert!(parse_kv("novalue").is_err());
        assert!(parse_kv("=x").is_err());
    }

    #[test]
    fn replica_assignment_syntax() {
        assert_eq!(
            parse_replica_assignment("0:1,1:2,2:0").unwrap(),
            vec![vec![0, 1], vec![1, 2], vec![2, 0]]
        );
        // The seed's example: five partitions with one replica each.
        assert_eq!(
            parse_replica_assignment("1000,1001,1002,1003,1004").unwrap(),
            vec![vec![1000], vec![1001], vec![1002], vec![1003], vec![1004]]
        );
        assert!(parse_replica_assignment("0:0").is_err());
        assert!(parse_replica_assignment("0:1,2").is_err());
        assert!(parse_replica_assignment("0:x").is_err());
        assert!(parse_replica_assignment("0,,1").is_err());
    }

    #[test]
    fn add_config_with_lists() {
        assert_eq!(
            parse_add_config("k1=v1,k2=[a,b],k3=v3").unwrap(),
            vec![
                ("k1".into(), "v1".into()),
                ("k2".into(), "a,b".into()),
                ("k3".into(), "v3".into())
            ]
        );
        assert!(parse_add_config("k=[a").is_err());
        assert_eq!(parse_delete_config("a, b,,c"), vec!["a", "b", "c"]);
    }

    #[test]
    fn properties() {
        let props = parse_kvs(&[
            "print.key=true".into(),
            "key.separator=:".into(),
            "print.key=false".into(),
        ])
        .unwrap();
        assert_eq!(prop(&props, "key.separator"), Some(":"));
        assert!(!prop_bool(&props, "print.key", true).unwrap());
        assert!(prop_bool(&props, "print.offset", true).unwrap());
        assert_eq!(unescape("\\t|\\n"), "\t|\n");
    }
}
