//! `runnel perf produce|consume`: the project's throughput and latency tools, with the flags
//! of kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh.

mod consume;
mod produce;
mod report;

use anyhow::Result;
use clap::{Args, Subcommand};

/// `runnel perf` subcommands.
#[derive(Debug, Args)]
pub struct PerfArgs {
    #[command(subcommand)]
    pub command: PerfCommand,
}

#[derive(Debug, Subcommand)]
pub enum PerfCommand {
    /// Producer throughput and latency (kafka-producer-perf-test.sh).
    Produce(produce::PerfProduceArgs),
    /// Consumer throughput (kafka-consumer-perf-test.sh).
    Consume(consume::PerfConsumeArgs),
}

pub async fn run(args: PerfArgs) -> Result<()> {
    match args.command {
        PerfCommand::Produce(a) => produce::run(a).await,
        PerfCommand::Consume(a) => consume::run(a).await,
    }
}

/// A progress bar on stderr (hidden when stderr is not a terminal, so logs stay clean).
pub fn progress_bar(total: u64, unit: &str) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    let template = format!(
        "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}
