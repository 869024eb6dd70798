//! `runnel reassign-partitions`: kafka-reassign-partitions.sh's `--generate`, `--execute`,
//! `--verify`, `--cancel` and `--list`, through AlterPartitionReassignments (API 45) and
//! ListPartitionReassignments (API 46). A broker without those APIs gets one
//! UNSUPPORTED_VERSION line and a non-zero exit.

mod cancel;
mod current;
mod execute;
mod generate;
mod json;
mod list;
mod log_dir_moves;
mod verify;

use anyhow::{bail, Context, Result};
use clap::Args;
use runnel_client::Admin;

/// Flags of kafka-reassign-partitions.sh that Runnel implements.
#[derive(Debug, Args)]
pub struct ReassignArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// Propose an assignment of --topics-to-move-json-file onto --broker-list.
    #[arg(long)]
    pub generate: bool,
    /// Start the reassignments of --reassignment-json-file.
    #[arg(long)]
    pub execute: bool,
    /// Report the state of the reassignments of --reassignment-json-file.
    #[arg(long)]
    pub verify: bool,
    /// Cancel the running reassignments of --reassignment-json-file.
    #[arg(long)]
    pub cancel: bool,
    /// List the running reassignments.
    #[arg(long)]
    pub list: bool,
    /// The reassignment JSON (as --generate proposes it).
    #[arg(long, value_name = "FILE")]
    pub reassignment_json_file: Option<String>,
    /// `{"topics": [{"topic": "foo"}], "version": 1}`: the topics --generate moves.
    #[arg(long, value_name = "FILE")]
    pub topics_to_move_json_file: Option<String>,
    /// Target brokers of --generate: `1,2,3`.
    #[arg(long, value_name = "IDS")]
    pub broker_list: Option<String>,
    /// With --generate: ignore broker racks.
    #[arg(long)]
    pub disable_rack_aware: bool,
    /// With --execute: start even while other reassignments run.
    #[arg(long)]
    pub additional: bool,
    /// With --verify: leave the replication throttles alone.
    #[arg(long)]
    pub preserve_throttles: bool,
    /// With --execute or --verify (Runnel's addition): wait until every reassignment of the
    /// file has finished, at most this many milliseconds (then fail).
    #[arg(long, value_name = "MS")]
    pub wait_ms: Option<u64>,
    /// While waiting, print a progress line per second on stderr even when stderr is not a
    /// terminal.
    #[arg(long)]
    pub progress: bool,
}

/// `--wait-ms` with `--progress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub timeout: std::time::Duration,
    pub progress: bool,
}

/// The chosen action with its inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `--generate`: topics file, broker list, rack awareness.
    Generate {
        topics_file: String,
        broker_list: String,
        rack_aware: bool,
    },
    /// `--execute`: reassignment file, `--additional`.
    Execute {
        file: String,
        additional: bool,
        wait: Option<Wait>,
    },
    /// `--verify`: reassignment file, `--preserve-throttles`.
    Verify {
        file: String,
        preserve_throttles: bool,
        wait: Option<Wait>,
    },
    /// `--cancel`: reassignment file, `--preserve-throttles`.
    Cancel {
        file: String,
        preserve_throttles: bool,
    },
    /// `--list`.
    List,
}

/// The tool's option checks (one action, its required options, no foreign options), with
/// its messages.
pub fn validate(args: &ReassignArgs) -> Result<Action> {
    let actions = [
        (args.generate, "generate"),
        (args.execute, "execute"),
        (args.verify, "verify"),
        (args.cancel, "cancel"),
        (args.list, "list"),
    ];
    let chosen: Vec<&str> = actions
        .iter()
        .filter(|(set, _)| *set)
        .map(|(_, n)| *n)
        .collect();
    let [action] = chosen.as_slice() else {
        bail!("Command must include exactly one action: --generate, --execute, --verify, --cancel, --list");
    };
    let options = [
        (
            "reassignment-json-file",
            args.reassignment_json_file.is_some(),
        ),
        (
            "topics-to-move-json-file",
            args.topics_to_move_json_file.is_some(),
        ),
        ("broker-list", args.broker_list.is_some()),
        ("disable-rack-aware", args.disable_rack_aware),
        ("additional", args.additional),
        ("preserve-throttles", args.preserve_throttles),
        ("wait-ms", args.wait_ms.is_some()),
        ("progress", args.progress),
    ];
    let (required, permitted): (&[&str], &[&str]) = match *action {
        "generate" => (
            &["topics-to-move-json-file", "broker-list"],
            &["disable-rack-aware"],
        ),
        "execute" => (
            &["reassignment-json-file"],
            &["additional", "wait-ms", "progress"],
        ),
        "verify" => (
            &["reassignment-json-file"],
            &["preserve-throttles", "wait-ms", "progress"],
        ),
        "cancel" => (&["reassignment-json-file"], &["preserve-throttles"]),
        _ => (&[], &[]),
    };
    for name in required {
        if !options.iter().any(|(n, set)| n == name && *set) {
            bail!("Missing required argument \"[{name}]\"");
        }
    }
    if let Some((name, _)) = options
        .iter()
        .find(|(n, set)| *set && !required.contains(n) && !permitted.contains(n))
    {
        bail!("Option \"[{name}]\" can't be used with action \"[{action}]\"");
    }
    if args.progress && args.wait_ms.is_none() {
        bail!("Option \"[progress]\" needs \"[wait-ms]\"");
    }
    let wait = args.wait_ms.map(|ms| Wait {
        timeout: std::time::Duration::from_millis(ms),
        progress: args.progress,
    });
    let file = || args.reassignment_json_file.clone().unwrap_or_default();
    Ok(match *action {
        "generate" => Action::Generate {
            topics_file: args.topics_to_move_json_file.clone().unwrap_or_default(),
            broker_list: args.broker_list.clone().unwrap_or_default(),
            rack_aware: !args.disable_rack_aware,
        },
        "execute" => Action::Execute {
            file: file(),
            additional: args.additional,
            wait,
        },
        "verify" => Action::Verify {
            file: file(),
            preserve_throttles: args.preserve_throttles,
            wait,
        },
        "cancel" => Action::Cancel {
            file: file(),
            preserve_throttles: args.preserve_throttles,
        },
        _ => Action::List,
    })
}

fn read(path: &str) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))
}

pub async fn run(args: ReassignArgs) -> Result<()> {
    let action = validate(&args)?;
    // Read the input before connecting, so a bad path fails without network traffic.
    let input = match &action {
        Action::Generate { topics_file, .. } => read(topics_file)?,
        Action::Execute { file, .. }
        | Action::Verify { file, .. }
        | Action::Cancel { file, .. } => read(file)?,
        Action::List => String::new(),
    };
    let client = super::connect(&args.bootstrap_server).await?;
    let admin = Admin::new(client);
    match action {
        Action::Generate {
            broker_list,
            rack_aware,
            ..
        } => generate::generate(&admin, &input, &broker_list, rack_aware).await,
        Action::Execute {
            additional, wait, ..
        } => {
            execute::execute(&admin, &input, additional).await?;
            match wait {
                Some(wait) => verify::wait_done(&admin, &input, wait).await,
                None => Ok(()),
            }
        }
        Action::Verify {
            preserve_throttles,
            wait,
            ..
        } => {
            if let Some(wait) = wait {
                verify::wait_done(&admin, &input, wait).await?;
            }
            verify::verify(&admin, &input, preserve_throttles).await
        }
        Action::Cancel {
            preserve_throttles, ..
        } => cancel::cancel(&admin, &input, preserve_throttles).await,
        Action::List => list::list(&admin).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: ReassignArgs,
    }

    fn parse(extra: &[&str]) -> Result<Action> {
        let mut argv = vec!["runnel", "--bootstrap-server", "localhost:9092"];
        argv.extend_from_slice(extra);
        validate(&Cli::try_parse_from(argv)?.args)
    }

    fn message(r: Result<Action>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn actions_and_their_options() {
        assert_eq!(
            parse(&[
                "--generate",
                "--topics-to-move-json-file",
                "t.json",
                "--broker-list",
                "1,2,3"
            ])
            .ok(),
            Some(Action::Generate {
                topics_file: "t.json".into(),
                broker_list: "1,2,3".into(),
                rack_aware: true,
            })
        );
        assert_eq!(
            parse(&[
                "--execute",
                "--reassignment-json-file",
                "r.json",
                "--additional"
            ])
            .ok(),
            Some(Action::Execute {
                file: "r.json".into(),
                additional: true,
                wait: None,
            })
        );
        assert_eq!(
            parse(&["--verify", "--reassignment-json-file", "r.json"]).ok(),
            Some(Action::Verify {
                file: "r.json".into(),
                preserve_throttles: false,
                wait: None,
            })
        );
        assert_eq!(
            parse(&[
                "--verify",
                "--reassignment-json-file",
                "r.json",
                "--wait-ms",
                "5000",
                "--progress"
            ])
            .ok(),
            Some(Action::Verify {
                file: "r.json".into(),
                preserve_throttles: false,
                wait: Some(Wait {
                    timeout: std::time::Duration::from_secs(5),
                    progress: true
                }),
            })
        );
        assert!(parse(&[
            "--verify",
            "--reassignment-json-file",
            "r.json",
            "--progress"
        ])
        .is_err());
        assert!(parse(&[
            "--cancel",
            "--reassignment-json-file",
            "r.json",
            "--wait-ms",
            "1"
        ])
        .is_err());
        assert_eq!(
            parse(&["--cancel", "--reassignment-json-file", "r.json"]).ok(),
            Some(Action::Cancel {
                file: "r.json".into(),
                preserve_throttles: false
            })
        );
        assert_eq!(parse(&["--list"]).ok(), Some(Action::List));
    }

    #[test]
    fn kafkas_validation_messages() {
        assert_eq!(
            message(parse(&[])),
            "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"
        );
        assert_eq!(
            message(parse(&["--execute", "--verify"])),
            "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"
        );
        assert_eq!(
            message(parse(&["--execute"])),
            "Missing required argument \"[reassignment-json-file]\""
        );
        assert_eq!(
            message(parse(&[
                "--generate",
                "--topics-to-move-json-file",
                "t.json"
            ])),
            "Missing required argument \"[broker-list]\""
        );
        assert_eq!(
            message(parse(&[
                "--execute",
                "--reassignment-json-file",
                "r.json",
                "--broker-list",
                "1"
            ])),
            "Option \"[broker-list]\" can't be used with action \"[execute]\""
        );
        assert_eq!(
            message(parse(&["--list", "--preserve-throttles"])),
            "Option \"[preserve-throttles]\" can't be used with action \"[list]\""
        );
    }
}
