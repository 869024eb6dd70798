//! `runnel configs`: kafka-configs.sh for topics, brokers, users (SCRAM credentials and client
//! quotas) and clients (client quotas).

use anyhow::{bail, Result};
use clap::{ArgGroup, Args, ValueEnum};
use runnel_client::admin::{
    AlterConfigOp, ConfigEntry, ConfigOpType, ConfigResource, ConfigSource,
};
use runnel_client::Admin;

use super::args::{parse_add_config, parse_delete_config};
use super::client_quotas;

/// Entity types kafka-configs.sh accepts that Runnel implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EntityType {
    /// Topic configs.
    Topics,
    /// Broker configs.
    Brokers,
    /// SCRAM credentials (KIP-554) and client quotas (KIP-546) of users.
    Users,
    /// Client quotas of client ids (KIP-546).
    Clients,
}

/// Flags of kafka-configs.sh that Runnel implements.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("action").required(true).args(["describe", "alter"])))]
pub struct ConfigsArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// topics, brokers, users or clients.
    #[arg(long, value_enum)]
    pub entity_type: EntityType,
    /// Topic name or broker id (all topics / the cluster default when omitted).
    #[arg(long)]
    pub entity_name: Option<String>,
    /// The cluster-wide default broker config.
    #[arg(long)]
    pub entity_default: bool,
    /// Show configs.
    #[arg(long)]
    pub describe: bool,
    /// Change configs.
    #[arg(long)]
    pub alter: bool,
    /// With --describe: all configs, not only dynamic ones.
    #[arg(long)]
    pub all: bool,
    /// `k1=v1,k2=[a,b]`: configs to set.
    #[arg(long, value_name = "CONFIGS")]
    pub add_config: Option<String>,
    /// `k1,k2`: configs to remove.
    #[arg(long, value_name = "KEYS")]
    pub delete_config: Option<String>,
}

pub async fn run(args: ConfigsArgs) -> Result<()> {
    let client = super::connect(&args.bootstrap_server).await?;
    let admin = Admin::new(client);
    if args.entity_default && args.entity_type == EntityType::Topics {
        bail!("--entity-default is only valid with --entity-type brokers");
    }
    if args.entity_type == EntityType::Users {
        return users(&admin, &args).await;
    }
    if args.entity_type == EntityType::Clients {
        return clients(&admin, &args).await;
    }
    if args.describe {
        describe(&admin, &args).await
    } else {
        alter(&admin, &args).await
    }
}

/// `--entity-name X` / `--entity-default` / neither, as kafka-configs.sh's describe filter:
/// an exact name, the default entity (`Some("")`), or any name (`None`).
fn quota_filter(args: &ConfigsArgs) -> Option<String> {
    if args.entity_default {
        Some(String::new())
    } else {
        args.entity_name.clone()
    }
}

/// The entity to alter: a name, or the default (`None`) with `--entity-default`.
fn quota_entity(args: &ConfigsArgs, type_name: &str) -> Result<client_quotas::Part> {
    match (&args.entity_name, args.entity_default) {
        (Some(_), true) => bail!("--entity-name and --entity-default cannot be combined"),
        (Some(name), false) => client_quotas::part(type_name, Some(name)),
        (None, true) => client_quotas::part(type_name, None),
        (None, false) => bail!("--alter needs --entity-name or --entity-default"),
    }
}

/// `--add-config` and `--delete-config`, parsed.
struct Changes {
    adds: Vec<(String, String)>,
    deletes: Vec<String>,
}

fn adds_and_deletes(args: &ConfigsArgs) -> Result<Changes> {
    let adds = match &args.add_config {
        Some(s) => parse_add_config(s)?,
        None => Vec::new(),
    };
    let deletes = args
        .delete_config
        .as_deref()
        .map(parse_delete_config)
        .unwrap_or_default();
    if adds.is_empty() && deletes.is_empty() {
        bail!("--alter needs --add-config and/or --delete-config");
    }
    Ok(Changes { adds, deletes })
}

/// Prints a quota alteration's outcome as kafka-configs.sh does.
fn completed(type_name: &str, args: &ConfigsArgs) {
    match &args.entity_name {
        Some(name) => println!(
            "Completed updating config for {} {name}.",
            type_name.trim_end_matches('s')
        ),
        None => println!("Completed updating default config for {type_name} in the cluster."),
    }
}

async fn clients(admin: &Admin, args: &ConfigsArgs) -> Result<()> {
    if args.describe {
        let filter = vec![(runnel_metadata::quota::CLIENT_ID, quota_filter(args))];
        return client_quotas::describe(admin, &filter).await;
    }
    let entity = quota_entity(args, "clients")?;
    let Changes { adds, deletes } = adds_and_deletes(args)?;
    client_quotas::alter(admin, &[entity], &adds, &deletes).await?;
    completed("clients", args);
    Ok(())
}

async fn users(admin: &Admin, args: &ConfigsArgs) -> Result<()> {
    if args.describe {
        // Quotas first, then (for a named user or all users) SCRAM credentials, as Kafka.
        let filter = vec![(runnel_metadata::quota::USER, quota_filter(args))];
        client_quotas::describe(admin, &filter).await?;
        if args.entity_default {
            return Ok(());
        }
        return super::user_scram::describe(admin, args.entity_name.as_deref()).await;
    }
    let Changes { adds, deletes } = adds_and_deletes(args)?;
    let keys = || adds.iter().map(|(k, _)| k).chain(deletes.iter());
    if keys().any(|k| client_quotas::is_quota_key(k)) {
        if keys().any(|k| !client_quotas::is_quota_key(k)) {
            bail!(
                "Cannot alter both quota and SCRAM credential configs simultaneously for 'users'"
            );
        }
        let entity = quota_entity(args, "users")?;
        client_quotas::alter(admin, &[entity], &adds, &deletes).await?;
        completed("users", args);
        return Ok(());
    }
    if args.entity_default {
        bail!("The use of --entity-default is not allowed with User SCRAM Credentials");
    }
    let Some(user) = &args.entity_name else {
        bail!("--alter needs --entity-name for users");
    };
    super::user_scram::alter(admin, user, &adds, &deletes).await
}

fn resource(args: &ConfigsArgs, name: &str) -> ConfigResource {
    match args.entity_type {
        EntityType::Topics => ConfigResource::topic(name),
        // Users never reach the config APIs (`users` handles them).
        EntityType::Brokers | EntityType::Users | EntityType::Clients => {
            ConfigResource::broker(name)
        }
    }
}

async fn describe(admin: &Admin, args: &ConfigsArgs) -> Result<()> {
    let names: Vec<String> = match (&args.entity_name, args.entity_type) {
        (Some(n), _) => vec![n.clone()],
        (None, EntityType::Topics) => admin.list_topics(true).await?,
        (None, EntityType::Brokers) if args.entity_default => vec![String::new()],
        (None, EntityType::Brokers | EntityType::Users | EntityType::Clients) => admin
            .describe_cluster()
            .await?
            .brokers
            .iter()
            .map(|b| b.id.to_string())
            .collect(),
    };
    let mut out = String::new();
    for name in names {
        let entries = admin.describe_configs(&resource(args, &name), None).await?;
        out.push_str(&format_describe(
            args.entity_type,
            &name,
            &entries,
            args.all,
        ));
    }
    print!("{out}");
    Ok(())
}

async fn alter(admin: &Admin, args: &ConfigsArgs) -> Result<()> {
    let name = match (&args.entity_name, args.entity_default) {
        (Some(n), false) => n.clone(),
        (None, true) => String::new(),
        (Some(_), true) => bail!("--entity-name and --entity-default cannot be used together"),
        (None, false) => bail!("--alter needs --entity-name (or --entity-default for brokers)"),
    };
    let adds = match &args.add_config {
        Some(s) => parse_add_config(s)?,
        None => Vec::new(),
    };
    let deletes = args
        .delete_config
        .as_deref()
        .map(parse_delete_config)
        .unwrap_or_default();
    if adds.is_empty() && deletes.is_empty() {
        bail!("--alter needs --add-config and/or --delete-config");
    }
    if let Some((k, _)) = adds.iter().find(|(k, _)| deletes.contains(k)) {
        bail!("config {k} is both added and deleted");
    }
    let res = resource(args, &name);
    if admin.supports_incremental_alter().await? {
        let mut ops: Vec<AlterConfigOp> = adds
            .iter()
            .map(|(k, v)| AlterConfigOp {
                name: k.clone(),
                op: ConfigOpType::Set,
                value: Some(v.clone()),
            })
            .collect();
        ops.extend(deletes.iter().map(|k| AlterConfigOp {
            name: k.clone(),
            op: ConfigOpType::Delete,
            value: None,
        }));
        admin.incremental_alter_configs(&res, &ops, false).await?;
    } else {
        // Legacy AlterConfigs replaces the whole dynamic set: merge with what is there.
        let dynamic = dynamic_source(args.entity_type, &name);
        let mut configs: Vec<(String, String)> = admin
            .describe_configs(&res, None)
            .await?
            .into_iter()
            .filter(|e| e.source == dynamic && !deletes.contains(&e.name))
            .filter_map(|e| e.value.map(|v| (e.name, v)))
            .collect();
        for (k, v) in adds {
            configs.retain(|(ck, _)| *ck != k);
            configs.push((k, v));
        }
        admin.alter_configs(&res, &configs, false).await?;
    }
    match (args.entity_type, name.is_empty()) {
        (EntityType::Brokers | EntityType::Users | EntityType::Clients, true) => {
            println!("Completed updating default config for brokers in the cluster.")
        }
        (EntityType::Brokers | EntityType::Users | EntityType::Clients, false) => {
            println!("Completed updating config for broker {name}.")
        }
        (EntityType::Topics, _) => println!("Completed updating config for topic {name}."),
    }
    Ok(())
}

fn dynamic_source(entity: EntityType, name: &str) -> ConfigSource {
    match (entity, name.is_empty()) {
        (EntityType::Topics, _) => ConfigSource::DynamicTopicConfig,
        (EntityType::Brokers | EntityType::Users | EntityType::Clients, true) => {
            ConfigSource::DynamicDefaultBrokerConfig
        }
        (EntityType::Brokers | EntityType::Users | EntityType::Clients, false) => {
            ConfigSource::DynamicBrokerConfig
        }
    }
}

/// kafka-configs `--describe` text for one entity.
pub fn format_describe(
    entity: EntityType,
    name: &str,
    entries: &[ConfigEntry],
    all: bool,
) -> String {
    let kind = if all { "All" } else { "Dynamic" };
    let mut out = match (entity, name.is_empty()) {
        (EntityType::Topics, _) => format!("{kind} configs for topic {name} are:\n"),
        (EntityType::Brokers | EntityType::Users | EntityType::Clients, true) => {
            "Default configs for brokers in the cluster are:\n".to_string()
        }
        (EntityType::Brokers | EntityType::Users | EntityType::Clients, false) => {
            format!("{kind} configs for broker {name} are:\n")
        }
    };
    let wanted = dynamic_source(entity, name);
    for e in entries.iter().filter(|e| all || e.source == wanted) {
        let value = if e.sensitive {
            "null".to_string()
        } else {
            e.value.clone().unwrap_or_else(|| "null".into())
        };
        let synonyms = e
            .synonyms
            .iter()
            .map(|s| {
                let v = if e.sensitive {
                    "null".to_string()
                } else {
                    s.value.clone().unwrap_or_else(|| "null".into())
                };
                format!("{}:{}={}", s.source.java_name(), s.name, v)
            })
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&format!(
            "  {}={} sensitive={} synonyms={{{}}}\n",
            e.name, value, e.sensitive, synonyms
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_client::admin::ConfigSynonym;

    fn entry(name: &str, value: &str, source: ConfigSource) -> ConfigEntry {
        ConfigEntry {
            name: name.into(),
            value: Some(value.into()),
            read_only: false,
            source,
            sensitive: false,
            synonyms: vec![
                ConfigSynonym {
                    name: name.into(),
                    value: Some(value.into()),
                    source,
                },
                ConfigSynonym {
                    name: format!("log.{name}"),
                    value: Some("604800000".into()),
                    source: ConfigSource::DefaultConfig,
                },
            ],
        }
    }

    #[test]
    fn dynamic_topic_configs_in_kafka_format() {
        let entries = vec![
            entry("retention.ms", "1000", ConfigSource::DynamicTopicConfig),
            entry("segment.bytes", "1073741824", ConfigSource::DefaultConfig),
        ];
        assert_eq!(
            format_describe(EntityType::Topics, "t", &entries, false),
            "Dynamic configs for topic t are:\n  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, DEFAULT_CONFIG:log.retention.ms=604800000}\n"
        );
        let all = format_describe(EntityType::Topics, "t", &entries, true);
        assert!(all.starts_with("All configs for topic t are:\n"));
        assert_eq!(all.lines().count(), 3);
    }

    #[test]
    fn broker_headers() {
        assert_eq!(
            format_describe(EntityType::Brokers, "1", &[], false),
            "Dynamic configs for broker 1 are:\n"
        );
        assert_eq!(
            format_describe(EntityType::Brokers, "", &[], false),
            "Default configs for brokers in the cluster are:\n"
        );
    }
}
