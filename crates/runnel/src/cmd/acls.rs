//! `runnel acls`: kafka-acls.sh. `--add`, `--remove` and `--list` ACLs over CreateAcls,
//! DeleteAcls and DescribeAcls, with its flags (`--allow-principal`, `--deny-principal`,
//! `--allow-host`, `--deny-host`, `--operation`, `--topic`, `--group`, `--cluster`,
//! `--transactional-id`, `--resource-pattern-type`, `--producer`, `--consumer`, `--idempotent`,
//! `--principal`, `--force`) and its output lines. Which ACLs a command means is decided by the
//! pure [`plan`]; the rest sends the requests and prints.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;

use anyhow::{bail, Result};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;
use runnel_client::ClientError;
use runnel_metadata::acl::{
    parse_principal, AclBinding, AclOperation, AclPermission, PatternType, ResourceType,
    CLUSTER_NAME,
};

#[derive(Debug, Clone, clap::Args)]
pub struct AclsArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long)]
    pub bootstrap_server: String,
    /// Add ACLs.
    #[arg(long)]
    pub add: bool,
    /// Remove ACLs.
    #[arg(long)]
    pub remove: bool,
    /// List ACLs (of the given resources, or all).
    #[arg(long)]
    pub list: bool,
    /// Topic the ACLs apply to ('*' = every topic).
    #[arg(long)]
    pub topic: Vec<String>,
    /// The cluster resource.
    #[arg(long)]
    pub cluster: bool,
    /// Consumer group the ACLs apply to ('*' = every group).
    #[arg(long)]
    pub group: Vec<String>,
    /// Transactional id the ACLs apply to ('*' = every one).
    #[arg(long = "transactional-id")]
    pub transactional_id: Vec<String>,
    /// literal or prefixed (adding); also any or match (listing, removing).
    #[arg(long = "resource-pattern-type", default_value = "literal")]
    pub resource_pattern_type: String,
    /// Operation allowed or denied (default All).
    #[arg(long)]
    pub operation: Vec<String>,
    /// Principal allowed, as type:name (User:alice, User:*).
    #[arg(long = "allow-principal")]
    pub allow_principal: Vec<String>,
    /// Principal denied, as type:name.
    #[arg(long = "deny-principal")]
    pub deny_principal: Vec<String>,
    /// Host the allowed principals may connect from (default * when a principal is given).
    #[arg(long = "allow-host")]
    pub allow_host: Vec<String>,
    /// Host the denied principals are refused from (default *).
    #[arg(long = "deny-host")]
    pub deny_host: Vec<String>,
    /// With --list: only the ACLs of this principal.
    #[arg(long)]
    pub principal: Vec<String>,
    /// Producer role: Write, Describe, Create on the topics; Write, Describe on transactional ids.
    #[arg(long)]
    pub producer: bool,
    /// Consumer role: Read, Describe on the topics; Read on the groups.
    #[arg(long)]
    pub consumer: bool,
    /// With --producer: IdempotentWrite on the cluster.
    #[arg(long)]
    pub idempotent: bool,
    /// Do not ask before removing.
    #[arg(long)]
    pub force: bool,
}

/// A resource pattern or pattern filter: type, name, pattern type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Resource {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            self.resource_type, self.name, self.pattern_type
        )
    }
}

/// One access-control entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    pub permission: AclPermission,
}

impl Entry {
    fn binding(&self, r: &Resource) -> AclBinding {
        AclBinding {
            resource_type: r.resource_type,
            resource_name: r.name.clone(),
            pattern_type: r.pattern_type,
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation: self.operation,
            permission: self.permission,
        }
    }
}

/// What a command means: for `--add` / `--remove`, the entries of each resource (empty for a
/// `--remove` without principals: every ACL of that filter); for `--list`, the filters.
pub type Plan = BTreeMap<Resource, BTreeSet<Entry>>;

fn pattern_type(args: &AclsArgs) -> Result<PatternType> {
    match PatternType::parse(&args.resource_pattern_type) {
        Some(p) if p != PatternType::Unknown => Ok(p),
        _ => bail!(
            "Unknown resource-pattern-type: {} (use LITERAL, PREFIXED, ANY or MATCH)",
            args.resource_pattern_type
        ),
    }
}

/// Kafka's checkArgs: one action, and the combinations the role options allow.
fn check_args(args: &AclsArgs) -> Result<()> {
    let actions = [args.add, args.remove, args.list]
        .iter()
        .filter(|a| **a)
        .count();
    if actions != 1 {
        bail!("Command must include exactly one action: --list, --add, --remove.");
    }
    let has_acl_opts = !args.allow_principal.is_empty()
        || !args.deny_principal.is_empty()
        || !args.allow_host.is_empty()
        || !args.deny_host.is_empty();
    if args.list && (args.producer || args.consumer || has_acl_opts) {
        bail!("Option \"[list]\" can't be used with options \"[producer], [consumer], [allow-host], [allow-principal], [deny-host], [deny-principal]\"");
    }
    if (args.producer || args.consumer)
        && (!args.operation.is_empty()
            || !args.deny_principal.is_empty()
            || !args.deny_host.is_empty())
    {
        bail!("With --producer or --consumer, --operation, --deny-principal and --deny-host can't be used");
    }
    if !args.principal.is_empty() && !args.list {
        bail!("The --principal option is only available if --list is set");
    }
    if args.producer && args.topic.is_empty() {
        bail!("With --producer you must specify a --topic");
    }
    if args.idempotent && !args.producer {
        bail!("The --idempotent option is only available if --producer is set");
    }
    if args.consumer
        && (args.topic.is_empty()
            || args.group.is_empty()
            || (!args.producer && (args.cluster || !args.transactional_id.is_empty())))
    {
        bail!("With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id option should be specified.");
    }
    for p in args
        .allow_principal
        .iter()
        .chain(&args.deny_principal)
        .chain(&args.principal)
    {
        if parse_principal(p.trim()).is_none() {
            bail!("expected a string in format principalType:principalName but got {p}");
        }
    }
    Ok(())
}

/// The resources named on the command line (Kafka's getResourceFilter).
pub fn resources(args: &AclsArgs) -> Result<Vec<Resource>> {
    let pt = pattern_type(args)?;
    let mut out = Vec::new();
    let named = |rt, name: &String| Resource {
        resource_type: rt,
        name: name.trim().to_owned(),
        pattern_type: pt,
    };
    out.extend(args.topic.iter().map(|t| named(ResourceType::Topic, t)));
    if pt == PatternType::Literal && (args.cluster || args.idempotent) {
        out.push(Resource {
            resource_type: ResourceType::Cluster,
            name: CLUSTER_NAME.into(),
            pattern_type: PatternType::Literal,
        });
    }
    out.extend(args.group.iter().map(|g| named(ResourceType::Group, g)));
    out.extend(
        args.transactional_id
            .iter()
            .map(|t| named(ResourceType::TransactionalId, t)),
    );
    Ok(out)
}

fn entries(args: &AclsArgs, ops: &[AclOperation]) -> BTreeSet<Entry> {
    let hosts = |hosts: &[String], principals: &[String]| -> Vec<String> {
        if !hosts.is_empty() {
            hosts.iter().map(|h| h.trim().to_owned()).collect()
        } else if !principals.is_empty() {
            vec!["*".into()]
        } else {
            Vec::new()
        }
    };
    let mut out = BTreeSet::new();
    for (principals, hosts, permission) in [
        (
            &args.allow_principal,
            hosts(&args.allow_host, &args.allow_principal),
            AclPermission::Allow,
        ),
        (
            &args.deny_principal,
            hosts(&args.deny_host, &args.deny_principal),
            AclPermission::Deny,
        ),
    ] {
        for p in principals {
            for op in ops {
                for h in &hosts {
                    out.insert(Entry {
                        principal: p.trim().to_owned(),
                        host: h.clone(),
                        operation: *op,
                        permission,
                    });
                }
            }
        }
    }
    out
}

/// The entries per resource of `--add` / `--remove` (Kafka's getResourceFilterToAcls).
pub fn plan(args: &AclsArgs) -> Result<Plan> {
    use AclOperation::*;
    check_args(args)?;
    let filters = resources(args)?;
    if filters.is_empty() {
        bail!("You must provide at least one resource: --topic <topic> or --cluster or --group <group>");
    }
    let mut plan = Plan::new();
    if !args.producer && !args.consumer {
        let ops = if args.operation.is_empty() {
            vec![All]
        } else {
            args.operation
                .iter()
                .map(|o| match AclOperation::parse(o.trim()) {
                    Some(op) if !matches!(op, Unknown | Any) => Ok(op),
                    _ => bail!("Unknown operation: {o}"),
                })
                .collect::<Result<Vec<_>>>()?
        };
        let acls = entries(args, &ops);
        for f in &filters {
            plan.insert(f.clone(), acls.clone());
        }
    }
    if args.producer {
        for f in &filters {
            let ops: &[AclOperation] = match f.resource_type {
                ResourceType::Topic => &[Write, Describe, Create],
                ResourceType::TransactionalId => &[Write, Describe],
                _ => continue,
            };
            plan.entry(f.clone())
                .or_default()
                .extend(entries(args, ops));
        }
        if args.idempotent {
            if let Some(cluster) = filters
                .iter()
                .find(|f| f.resource_type == ResourceType::Cluster)
            {
                plan.entry(cluster.clone())
                    .or_default()
                    .extend(entries(args, &[IdempotentWrite]));
            }
        }
    }
    if args.consumer {
        for f in &filters {
            let ops: &[AclOperation] = match f.resource_type {
                ResourceType::Topic => &[Read, Describe],
                ResourceType::Group => &[Read],
                _ => continue,
            };
            plan.entry(f.clone())
                .or_default()
                .extend(entries(args, ops));
        }
    }
    for (resource, acls) in &plan {
        let valid = AclOperation::supported_by(resource.resource_type);
        if acls
            .iter()
            .any(|a| a.operation != All && !valid.contains(&a.operation))
        {
            let mut names: Vec<&str> = valid.iter().map(|o| o.name()).collect();
            names.push(All.name());
            bail!(
                "ResourceType {} only supports operations {}",
                resource.resource_type,
                names.join(", ")
            );
        }
    }
    if args.add {
        if !matches!(
            pattern_type(args)?,
            PatternType::Literal | PatternType::Prefixed
        ) {
            bail!(
                "A '--resource-pattern-type' value of '{}' is not valid when adding acls.",
                pattern_type(args)?
            );
        }
        if plan.values().any(|acls| acls.is_empty()) {
            bail!("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.");
        }
    }
    Ok(plan)
}

/// kafka-acls.sh's block for one resource: a header line, the entries indented by a tab.
pub fn block(header: &str, resource: &Resource, acls: &BTreeSet<Entry>) -> String {
    let lines: Vec<String> = acls
        .iter()
        .map(|a| format!("\t{}", a.binding(resource).describe_entry()))
        .collect();
    format!("{header} `{resource}`: \n {} \n", lines.join("\n"))
}

fn opt(s: &str) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.to_owned()))
}

pub async fn run(args: AclsArgs) -> Result<()> {
    if args.list {
        check_args(&args)?;
        return list(&args).await;
    }
    let plan = plan(&args)?;
    let client = super::connect(&args.bootstrap_server).await?;
    let conn = client.any_connection().await?;
    if args.add {
        for (resource, acls) in &plan {
            print!("{}", block("Adding ACLs for resource", resource, acls));
            println!();
            let mut req = CreateAclsRequest::default();
            req.creations = acls
                .iter()
                .map(|a| {
                    let mut c = AclCreation::default();
                    c.resource_type = resource.resource_type.code();
                    c.resource_name = StrBytes::from_string(resource.name.clone());
                    c.resource_pattern_type = resource.pattern_type.code();
                    c.principal = StrBytes::from_string(a.principal.clone());
                    c.host = StrBytes::from_string(a.host.clone());
                    c.operation = a.operation.code();
                    c.permission_type = a.permission.code();
                    c
                })
                .collect();
            let resp = conn.send(&req).await?;
            for r in resp.results {
                ClientError::check(r.error_code, r.error_message.as_ref().map(|m| m.as_str()))?;
            }
        }
        return Ok(());
    }
    for (resource, acls) in &plan {
        let question = if acls.is_empty() {
            format!(
                "Are you sure you want to delete all ACLs for resource filter `{resource}`? (y/n)"
            )
        } else {
            let text = block("Are you sure you want to remove ACLs:", resource, acls);
            // Kafka's wording: "...remove ACLs: \n <entries> \n from resource filter `...`? (y/n)"
            let body = text.split_once('\n').map(|(_, b)| b).unwrap_or_default();
            format!("Are you sure you want to remove ACLs: \n{body} from resource filter `{resource}`? (y/n)")
        };
        if !args.force {
            println!("{question}");
            let mut answer = String::new();
            std::io::stdin().lock().read_line(&mut answer)?;
            if !answer.trim().eq_ignore_ascii_case("y") {
                continue;
            }
        }
        let filter = |a: Option<&Entry>| {
            let mut f = DeleteAclsFilter::default();
            f.principal_filter = None;
            f.host_filter = None;
            f.resource_type_filter = resource.resource_type.code();
            f.resource_name_filter = opt(&resource.name);
            f.pattern_type_filter = resource.pattern_type.code();
            match a {
                Some(a) => {
                    f.principal_filter = opt(&a.principal);
                    f.host_filter = opt(&a.host);
                    f.operation = a.operation.code();
                    f.permission_type = a.permission.code();
                }
                None => {
                    f.operation = AclOperation::Any.code();
                    f.permission_type = AclPermission::Any.code();
                }
            }
            f
        };
        let mut req = DeleteAclsRequest::default();
        req.filters = if acls.is_empty() {
            vec![filter(None)]
        } else {
            acls.iter().map(|a| filter(Some(a))).collect()
        };
        let resp = conn.send(&req).await?;
        for r in resp.filter_results {
            ClientError::check(r.error_code, r.error_message.as_ref().map(|m| m.as_str()))?;
        }
    }
    Ok(())
}

async fn list(args: &AclsArgs) -> Result<()> {
    let filters = resources(args)?;
    let client = super::connect(&args.bootstrap_server).await?;
    let conn = client.any_connection().await?;
    // kafka-protocol's default filters are "" rather than null (any): clear them.
    let any = || {
        let mut req = DescribeAclsRequest::default();
        req.resource_name_filter = None;
        req.principal_filter = None;
        req.host_filter = None;
        req
    };
    let mut requests = Vec::new();
    if filters.is_empty() {
        let mut req = any();
        req.resource_type_filter = ResourceType::Any.code();
        req.pattern_type_filter = PatternType::Any.code();
        req.operation = AclOperation::Any.code();
        req.permission_type = AclPermission::Any.code();
        requests.push(req);
    }
    for f in &filters {
        let mut req = any();
        req.resource_type_filter = f.resource_type.code();
        req.resource_name_filter = opt(&f.name);
        req.pattern_type_filter = f.pattern_type.code();
        req.operation = AclOperation::Any.code();
        req.permission_type = AclPermission::Any.code();
        requests.push(req);
    }
    let mut found: Plan = Plan::new();
    for req in requests {
        let resp = conn.send(&req).await?;
        ClientError::check(
            resp.error_code,
            resp.error_message.as_ref().map(|m| m.as_str()),
        )?;
        for r in resp.resources {
            let resource = Resource {
                resource_type: ResourceType::from_code(r.resource_type),
                name: r.resource_name.to_string(),
                pattern_type: PatternType::from_code(r.pattern_type),
            };
            let set = found.entry(resource).or_default();
            for a in r.acls {
                set.insert(Entry {
                    principal: a.principal.to_string(),
                    host: a.host.to_string(),
                    operation: AclOperation::from_code(a.operation),
                    permission: AclPermission::from_code(a.permission_type),
                });
            }
        }
    }
    if args.principal.is_empty() {
        for (resource, acls) in &found {
            println!("{}", block("Current ACLs for resource", resource, acls));
        }
        return Ok(());
    }
    for principal in &args.principal {
        let principal = principal.trim();
        println!("ACLs for principal `{principal}`");
        for (resource, acls) in &found {
            let mine: BTreeSet<Entry> = acls
                .iter()
                .filter(|a| a.principal == principal)
                .cloned()
                .collect();
            if !mine.is_empty() {
                println!("{}", block("Current ACLs for resource", resource, &mine));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: AclsArgs,
    }

    fn parse(argv: &[&str]) -> AclsArgs {
        let mut full = vec!["acls", "--bootstrap-server", "h:1"];
        full.extend_from_slice(argv);
        Cli::try_parse_from(full).unwrap().args
    }

    #[test]
    fn add_with_principal_and_operations() {
        let a = parse(&[
            "--add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--operation",
            "Describe",
            "--topic",
            "t",
        ]);
        let p = plan(&a).unwrap();
        let (r, acls) = p.iter().next().unwrap();
        assert_eq!(
            r.to_string(),
            "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
        );
        assert_eq!(acls.len(), 2);
        assert!(acls
            .iter()
            .all(|e| e.host == "*" && e.permission == AclPermission::Allow));
        assert_eq!(
            block("Adding ACLs for resource", r, acls),
            "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n"
        );
    }

    #[test]
    fn producer_and_consumer_roles() {
        let a = parse(&[
            "--add",
            "--allow-principal",
            "User:bob",
            "--producer",
            "--consumer",
            "--topic",
            "t",
            "--group",
            "g",
            "--idempotent",
        ]);
        let p = plan(&a).unwrap();
        let ops = |rt: ResourceType| -> BTreeSet<AclOperation> {
            p.iter()
                .filter(|(r, _)| r.resource_type == rt)
                .flat_map(|(_, acls)| acls.iter().map(|e| e.operation))
                .collect()
        };
        use AclOperation::*;
        assert_eq!(
            ops(ResourceType::Topic),
            [Read, Write, Create, Describe].into()
        );
        assert_eq!(ops(ResourceType::Group), [Read].into());
        assert_eq!(ops(ResourceType::Cluster), [IdempotentWrite].into());
    }

    #[test]
    fn kafkas_refusals() {
        let refused = |argv: &[&str]| plan(&parse(argv)).unwrap_err().to_string();
        assert!(refused(&["--add", "--list", "--topic", "t"]).contains("exactly one action"));
        assert!(refused(&["--add", "--topic", "t"]).contains("--allow-principal"));
        assert!(
            refused(&["--add", "--allow-principal", "User:a"]).contains("at least one resource")
        );
        assert!(refused(&[
            "--add",
            "--allow-principal",
            "User:a",
            "--operation",
            "Write",
            "--group",
            "g"
        ])
        .contains("only supports operations"));
        assert!(
            refused(&["--add", "--allow-principal", "alice", "--topic", "t"])
                .contains("principalType")
        );
        assert!(refused(&[
            "--add",
            "--allow-principal",
            "User:a",
            "--topic",
            "t",
            "--resource-pattern-type",
            "match"
        ])
        .contains("not valid when adding"));
        assert!(refused(&[
            "--add",
            "--consumer",
            "--allow-principal",
            "User:a",
            "--topic",
            "t"
        ])
        .contains("--group"));
        assert!(refused(&[
            "--add",
            "--producer",
            "--operation",
            "Read",
            "--allow-principal",
            "User:a",
            "--topic",
            "t"
        ])
        .contains("--operation"));
        // --remove without principals removes every ACL of the filter.
        let p = plan(&parse(&[
            "--remove",
            "--topic",
            "t",
            "--resource-pattern-type",
            "prefixed",
        ]))
        .unwrap();
        assert!(p.values().all(|acls| acls.is_empty()));
        // A DENY entry from --deny-principal with its own hosts.
        let p = plan(&parse(&[
            "--add",
            "--deny-principal",
            "User:x",
            "--deny-host",
            "10.0.0.1",
            "--cluster",
        ]))
        .unwrap();
        let e = p.values().next().unwrap().iter().next().unwrap();
        assert_eq!(
            (e.host.as_str(), e.permission, e.operation),
            ("10.0.0.1", AclPermission::Deny, AclOperation::All)
        );
    }
}
