//! `runnel leader-election`: kafka-leader-election.sh (preferred or unclean leader election
//! through the ElectLeaders API), with its flags, validation messages and output.

mod json_file;
mod report;

use runnel_codes::{CLUSTER_AUTHORIZATION_FAILED, REQUEST_TIMED_OUT};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use runnel_client::admin::ElectionType;
use runnel_client::{Admin, ClientError, TopicPartition};

pub use json_file::parse_election_data;
pub use report::election_report;

/// Kafka's admin-client default API timeout, which the tool uses.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Flags of kafka-leader-election.sh.
#[derive(Debug, Args)]
pub struct LeaderElectionArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// `preferred` (move leadership to the first assigned replica) or `unclean` (elect any
    /// live replica for a partition without a leader).
    #[arg(long, value_name = "TYPE", value_parser = parse_election_type)]
    pub election_type: ElectionType,
    /// Elect on every eligible partition.
    #[arg(long)]
    pub all_topic_partitions: bool,
    /// The topic to elect on (needs --partition).
    #[arg(long)]
    pub topic: Option<String>,
    /// The partition to elect on (only with --topic).
    #[arg(long)]
    pub partition: Option<i32>,
    /// JSON file `{"partitions": [{"topic": "foo", "partition": 1}, ...]}`.
    #[arg(long, value_name = "FILE")]
    pub path_to_json_file: Option<String>,
}

/// `preferred` / `unclean`, case-insensitive like joptsimple's enum converter.
pub fn parse_election_type(s: &str) -> Result<ElectionType, String> {
    match s.to_ascii_lowercase().as_str() {
        "preferred" => Ok(ElectionType::Preferred),
        "unclean" => Ok(ElectionType::Unclean),
        _ => Err(format!(
            "'{s}' is not a valid election type: use preferred or unclean"
        )),
    }
}

/// Which partitions to elect on: `None` = all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `--all-topic-partitions`.
    All,
    /// `--topic T --partition P`.
    One(TopicPartition),
    /// `--path-to-json-file F`.
    File(String),
}

/// The tool's option checks, with its messages.
pub fn validate(args: &LeaderElectionArgs) -> Result<Target> {
    let chosen = [
        args.topic.is_some(),
        args.all_topic_partitions,
        args.path_to_json_file.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if chosen != 1 {
        bail!("One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file");
    }
    match (&args.topic, args.partition) {
        (Some(_), None) => bail!("Missing required option(s): partition"),
        (None, Some(_)) => bail!("Option partition is only allowed if topic is used"),
        (Some(topic), Some(partition)) => {
            return Ok(Target::One(TopicPartition::new(topic.clone(), partition)))
        }
        (None, None) => {}
    }
    Ok(match &args.path_to_json_file {
        Some(path) => Target::File(path.clone()),
        None => Target::All,
    })
}

pub async fn run(args: LeaderElectionArgs) -> Result<()> {
    let target = validate(&args)?;
    let partitions = match target {
        Target::All => None,
        Target::One(tp) => Some(vec![tp]),
        Target::File(path) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read --path-to-json-file {path}"))?;
            Some(parse_election_data(&text)?)
        }
    };
    let client = super::connect(&args.bootstrap_server).await?;
    let admin = Admin::new(client);
    let results = match admin
        .elect_leaders(args.election_type, partitions.as_deref(), TIMEOUT)
        .await
    {
        Ok(results) => results,
        Err(ClientError::Timeout(..))
        | Err(ClientError::Kafka {
            code: REQUEST_TIMED_OUT,
            ..
        }) => {
            println!("Timeout waiting for election results");
            bail!("Timeout waiting for election results");
        }
        Err(ClientError::Kafka {
            code: CLUSTER_AUTHORIZATION_FAILED,
            ..
        }) => {
            println!("Not authorized to perform leader election");
            bail!("Not authorized to perform leader election");
        }
        Err(e) => return Err(e.into()),
    };
    let (lines, failed) = election_report(args.election_type, &results);
    for line in lines {
        println!("{line}");
    }
    if failed > 0 {
        bail!("{failed} replica(s) could not be elected");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: LeaderElectionArgs,
    }

    fn parse(extra: &[&str]) -> Result<Target> {
        let mut argv = vec![
            "runnel",
            "--bootstrap-server",
            "localhost:9092",
            "--election-type",
            "PREFERRED",
        ];
        argv.extend_from_slice(extra);
        let cli = Cli::try_parse_from(argv)?;
        assert_eq!(cli.args.election_type, ElectionType::Preferred);
        validate(&cli.args)
    }

    fn message(r: Result<Target>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn exactly_one_target() {
        assert_eq!(parse(&["--all-topic-partitions"]).ok(), Some(Target::All));
        assert_eq!(
            parse(&["--topic", "t", "--partition", "2"]).ok(),
            Some(Target::One(TopicPartition::new("t", 2)))
        );
        assert_eq!(
            parse(&["--path-to-json-file", "f.json"]).ok(),
            Some(Target::File("f.json".into()))
        );
        let one_only = "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file";
        assert_eq!(message(parse(&[])), one_only);
        assert_eq!(
            message(parse(&[
                "--all-topic-partitions",
                "--topic",
                "t",
                "--partition",
                "0"
            ])),
            one_only
        );
        assert_eq!(
            message(parse(&["--topic", "t"])),
            "Missing required option(s): partition"
        );
        assert_eq!(
            message(parse(&["--all-topic-partitions", "--partition", "0"])),
            "Option partition is only allowed if topic is used"
        );
    }

    #[test]
    fn election_types() {
        assert_eq!(parse_election_type("unclean"), Ok(ElectionType::Unclean));
        assert_eq!(
            parse_election_type("Preferred"),
            Ok(ElectionType::Preferred)
        );
        assert!(parse_election_type("random").is_err());
        let missing = Cli::try_parse_from(["runnel", "--bootstrap-server", "h:1"]);
        assert!(missing.is_err());
    }
}
