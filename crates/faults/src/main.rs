//! `runnel-faults`: a Jepsen-style fault campaign against real Runnel clusters (see
//! docs/faults.md). `scripts/faults` is the entry point.

mod checker;
mod cluster;
mod ctp_checker;
mod ctp_workload;
mod disk;
mod executor;
mod history;
mod nemesis;
mod owner;
mod proxy;
mod run;
mod selftest;
mod table;
mod timeline;
mod txn_checker;
mod txn_workload;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use nemesis::Family;
use run::{Options, Scenario};

#[derive(Parser, Debug)]
#[command(
    name = "runnel-faults",
    about = "Fault campaign: partitions, pauses, crashes, full disks, checked by a history checker"
)]
struct Args {
    /// Seconds of faults and load (healing and the final read come after).
    #[arg(long, default_value_t = 60)]
    time: u64,
    /// Fault families, comma-separated: partition, kill, pause, disk, term, latency.
    #[arg(long, default_value = "partition,kill,pause,disk")]
    nemesis: String,
    /// Seed of the schedule (default: random, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Several runs, one per seed (comma-separated), e.g. the CI's short variant.
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<u64>,
    /// Cluster size.
    #[arg(long, default_value_t = 3)]
    nodes: i32,
    /// How many of the nodes (the highest ids) are broker-only (`--process-roles broker`,
    /// observers of the metadata quorum); the others are broker and controller.
    #[arg(long, default_value_t = 0)]
    broker_only: i32,
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    #[arg(long, default_value_t = 3)]
    producers: usize,
    #[arg(long, default_value_t = 2)]
    consumers: usize,
    /// Pause between a producer's sends, ms.
    #[arg(long, default_value_t = 10)]
    pace_ms: u64,
    /// A Python with confluent-kafka for the librdkafka producers (none: Rust producers only).
    #[arg(long, env = "RUNNEL_FAULTS_PYTHON")]
    python: Option<PathBuf>,
    /// How many confluent-kafka producers run beside the Rust ones (with --python).
    #[arg(long, default_value_t = 1)]
    ck_producers: usize,
    /// How many confluent-kafka transactional producers run (with --python; 0: none), with one
    /// read_committed follower, on their own topic.
    #[arg(long, default_value_t = 2)]
    txn_producers: usize,
    /// How many consume-transform-produce processors run (with --python; 0: none): exactly
    /// once from `faults-ctp-in` to `faults-ctp-out` with the offsets in the transaction,
    /// killed -9 and made zombies with the kill and pause nemeses.
    #[arg(long, default_value_t = 1)]
    ctp_processors: usize,
    /// The runnel binary.
    #[arg(long, env = "RUNNEL_BIN")]
    bin: PathBuf,
    /// Where run directories go.
    #[arg(long, default_value = "target/faults")]
    out: PathBuf,
    /// Keep the brokers' data dirs of passing runs too.
    #[arg(long)]
    keep: bool,
    /// Run the must-fail scenarios; exit 0 only if the checker caught each.
    #[arg(long)]
    self_test: bool,
    /// Re-judge a recorded run directory's history.jsonl.
    #[arg(long)]
    check: Option<PathBuf>,
    /// Print the campaign tables (per run, per nemesis) over these run directories.
    #[arg(long, num_args = 1..)]
    table: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match real_main(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("runnel-faults: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &args.check {
        let report = checker::check(&history::load(&dir.join("history.jsonl"))?);
        print!("{}", run::render_report(&report));
        return Ok(exit_for(&report));
    }
    if !args.table.is_empty() {
        let mut runs = Vec::new();
        for dir in &args.table {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            runs.push((name, history::load(&dir.join("history.jsonl"))?));
        }
        print!("{}", table::render(&runs));
        return Ok(ExitCode::SUCCESS);
    }
    let families: Vec<Family> = args
        .nemesis
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(str::parse)
        .collect::<Result<_, String>>()
        .map_err(anyhow::Error::msg)?;
    if args.self_test {
        return self_test(&args, &families);
    }
    let seeds = if args.seeds.is_empty() {
        vec![args
            .seed
            .unwrap_or_else(|| u64::from(rand::random::<u32>()))]
    } else {
        args.seeds.clone()
    };
    let mut worst = 0u8;
    for seed in seeds {
        let opts = options(&args, &families, seed, Scenario::Random, "run");
        println!(
            "reproduce: scripts/faults --time {} --nemesis {} --nodes {}{} --seed {seed}",
            args.time,
            args.nemesis,
            args.nodes,
            if args.broker_only > 0 {
                format!(" --broker-only {}", args.broker_only)
            } else {
                String::new()
            }
        );
        let out = run::run(&opts)?;
        print!("{}", run::render_report(&out.report));
        println!(
            "run dir: {} ({:.0} s)",
            out.dir.display(),
            out.elapsed.as_secs_f64()
        );
        let code = code_for(&out.report);
        if code == 0 && !args.keep {
            cleanup(&out.dir, args.nodes);
        }
        worst = worst.max(code);
        println!("{}", out.report.summary_line());
    }
    Ok(ExitCode::from(worst))
}

fn options(
    args: &Args,
    families: &[Family],
    seed: u64,
    scenario: Scenario,
    label: &str,
) -> Options {
    Options {
        bin: args.bin.clone(),
        dir: run::default_dir(&args.out, label, seed),
        nodes: args.nodes,
        broker_only: args.broker_only,
        partitions: args.partitions,
        producers: args.producers,
        consumers: args.consumers,
        time_s: args.time,
        seed,
        families: families.to_vec(),
        scenario,
        pace_ms: args.pace_ms,
        python: args.python.clone(),
        ck_producers: args.ck_producers,
        txn_producers: args.txn_producers,
        ctp_processors: args.ctp_processors,
    }
}

/// 0: safe; 1: a safety violation; 2: inconclusive (the final read did not complete: a
/// liveness problem, reported, but no safety verdict).
fn code_for(report: &checker::Report) -> u8 {
    if report.safety_violations() > 0 {
        1
    } else if !report.complete() {
        2
    } else {
        0
    }
}

fn exit_for(report: &checker::Report) -> ExitCode {
    ExitCode::from(code_for(report))
}

/// The data dirs are the big part of a run dir; history, timeline, report and logs stay.
fn cleanup(dir: &std::path::Path, nodes: i32) {
    for id in 1..=nodes {
        let _ = std::fs::remove_dir_all(dir.join(format!("node-{id}")));
    }
}

fn self_test(args: &Args, _families: &[Family]) -> anyhow::Result<ExitCode> {
    let mut all_caught = true;
    let mut scenarios = vec![
        (Scenario::Unclean, "selftest-unclean"),
        (Scenario::DropAcked, "selftest-drop-acked"),
    ];
    if args.python.is_some() {
        scenarios.push((Scenario::CtpOffsetsOutside, "selftest-ctp-offsets-outside"));
    } else {
        println!(
            "self-test selftest-ctp-offsets-outside: skipped (needs --python with confluent-kafka)"
        );
    }
    for (scenario, label) in scenarios {
        let mut opts = options(args, &[], args.seed.unwrap_or(1), scenario, label);
        opts.nodes = 3;
        opts.broker_only = 0;
        if scenario == Scenario::CtpOffsetsOutside {
            opts.time_s = 40;
            opts.ctp_processors = 1;
        }
        let out = run::run(&opts)?;
        print!("{}", run::render_report(&out.report));
        println!("{}", out.report.summary_line());
        let caught = match scenario {
            Scenario::CtpOffsetsOutside => out
                .report
                .ctp
                .as_ref()
                .is_some_and(|c| !c.duplicated.is_empty()),
            _ => !out.report.lost.is_empty() || !out.report.divergent.is_empty(),
        };
        println!(
            "self-test {label}: {} ({})",
            if caught { "CAUGHT" } else { "NOT CAUGHT" },
            out.dir.display()
        );
        if caught && !args.keep {
            cleanup(&out.dir, 3);
        }
        all_caught &= caught;
    }
    println!(
        "self-test: {}",
        if all_caught {
            "every must-fail mode was caught"
        } else {
            "FAILED: a must-fail mode went unnoticed"
        }
    );
    Ok(ExitCode::from(if all_caught { 0 } else { 1 }))
}
