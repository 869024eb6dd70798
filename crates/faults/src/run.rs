//! One run: cluster behind proxies, topic, workload, nemesis (a random schedule, or one of the
//! self-test's scenarios), healing, final read, checker, report files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use runnel_client::admin::NewTopic;
use runnel_client::Admin;

use crate::checker::{self, Report};
use crate::cluster::Cluster;
use crate::ctp_workload::{self, Processor, CTP_GROUP, CTP_IN, CTP_OUT};
use crate::executor::Executor;
use crate::history::{Event, Outcome, Recorder};
use crate::nemesis::{self, Family};
use crate::proxy::{self, Network};
use crate::txn_workload::{self, Reads, TXN_TOPIC};
use crate::workload::{self, Setup, Stream};

pub const TOPIC: &str = "faults";

/// What drives the faults of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// The seeded random schedule over `--nemesis`.
    Random,
    /// Self-test: `unclean.leader.election.enable=true`, the leader's followers cut off (its
    /// ISR shrinks to itself), then the leader killed: an out-of-sync replica takes over.
    Unclean,
    /// Self-test: every replica of partition 0 loses its last batches at once (kill -9 of all
    /// nodes, the tail of the log cut, restart): acknowledged writes vanish.
    DropAcked,
    /// Self-test: the consume-transform-produce processor commits its offsets outside the
    /// transaction, after it, and sometimes dies in between: inputs are processed twice.
    CtpOffsetsOutside,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub bin: PathBuf,
    pub dir: PathBuf,
    pub nodes: i32,
    /// How many of the nodes (the highest ids) are broker-only (`--process-roles broker`).
    pub broker_only: i32,
    pub partitions: i32,
    pub producers: usize,
    pub consumers: usize,
    pub time_s: u64,
    pub seed: u64,
    pub families: Vec<Family>,
    pub scenario: Scenario,
    pub pace_ms: u64,
    /// A Python with confluent-kafka: that many more producers use librdkafka.
    pub python: Option<PathBuf>,
    pub ck_producers: usize,
    /// With `python`: that many transactional producers and a read_committed follower.
    pub txn_producers: usize,
    /// With `python`: that many consume-transform-produce processors (0: no such workload).
    pub ctp_processors: usize,
}

pub struct Outcomes {
    pub report: Report,
    pub dir: PathBuf,
    pub elapsed: Duration,
}

fn overrides(scenario: Scenario) -> Vec<String> {
    let mut o: Vec<String> = [
        "broker.session.timeout.ms=3000",
        "broker.heartbeat.interval.ms=500",
        "replica.lag.time.max.ms=3000",
        "offsets.topic.num.partitions=3",
        "group.initial.rebalance.delay.ms=0",
        "log.segment.bytes=1048576",
        "auto.leader.rebalance.enable=true",
        "leader.imbalance.check.interval.seconds=10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if scenario == Scenario::Unclean {
        o.push("auto.leader.rebalance.enable=false".into());
    }
    o
}

pub fn run(opts: &Options) -> anyhow::Result<Outcomes> {
    let started = Instant::now();
    std::fs::create_dir_all(&opts.dir)?;
    let rec = Recorder::create(&opts.dir.join("history.jsonl"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let net = Network::new();
    let disk = opts.families.contains(&Family::Disk) && opts.scenario == Scenario::Random;
    let cluster = Cluster::new(
        opts.bin.clone(),
        &opts.dir,
        opts.nodes,
        opts.broker_only,
        overrides(opts.scenario),
        net.clone(),
    )?;
    if disk {
        for n in &cluster.nodes {
            crate::disk::mount_tmpfs(&n.data_dir, 128)?;
        }
    }
    let mounts: Vec<PathBuf> = if disk {
        cluster.nodes.iter().map(|n| n.data_dir.clone()).collect()
    } else {
        Vec::new()
    };
    let result = run_mounted(opts, &rec, &rt, net, cluster, disk);
    for m in &mounts {
        crate::disk::unmount_keeping(m);
    }
    let events = rec.events();
    let report = checker::check(&events);
    std::fs::write(
        opts.dir.join("timeline.svg"),
        crate::timeline::render(&events),
    )?;
    std::fs::write(
        opts.dir.join("report.txt"),
        format!("{}{}\n", render_report(&report), report.summary_line()),
    )?;
    rt.shutdown_timeout(Duration::from_secs(2));
    result?;
    Ok(Outcomes {
        report,
        dir: opts.dir.clone(),
        elapsed: started.elapsed(),
    })
}

fn run_mounted(
    opts: &Options,
    rec: &Recorder,
    rt: &tokio::runtime::Runtime,
    net: Arc<Network>,
    mut cluster: Cluster,
    disk: bool,
) -> anyhow::Result<()> {
    for n in &cluster.nodes {
        let real_kafka = format!("127.0.0.1:{}", n.kafka_port).parse()?;
        let real_ctrl = format!("127.0.0.1:{}", n.controller_port).parse()?;
        let kl = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", n.kafka_proxy)))?;
        let cl = rt.block_on(tokio::net::TcpListener::bind((
            "127.0.0.1",
            n.controller_proxy,
        )))?;
        rt.spawn(proxy::serve(
            net.clone(),
            n.id,
            proxy::Listener::Kafka,
            kl,
            real_kafka,
        ));
        rt.spawn(proxy::serve(
            net.clone(),
            n.id,
            proxy::Listener::Controller,
            cl,
            real_ctrl,
        ));
    }
    let waits: Vec<_> = (1..=opts.nodes)
        .map(|id| cluster.spawn(id))
        .collect::<anyhow::Result<_>>()?;
    for (i, rx) in waits.into_iter().enumerate() {
        rx.recv_timeout(Duration::from_secs(90))
            .with_context(|| format!("node {} did not start listening", i + 1))?;
    }
    let bootstrap = cluster.bootstrap();
    rec.info(format!(
        "cluster of {} ({} broker-only) up behind proxies: {bootstrap}",
        opts.nodes, opts.broker_only
    ));
    let partitions = match opts.scenario {
        Scenario::Unclean => 1,
        _ => opts.partitions,
    };
    rt.block_on(create_topic(&bootstrap, TOPIC, opts.scenario, partitions))?;
    rec.info(format!(
        "topic {TOPIC}: {partitions} partitions, RF 3, full ISR"
    ));
    let txn_python = opts
        .python
        .clone()
        .filter(|_| opts.txn_producers > 0 && opts.scenario == Scenario::Random);
    if txn_python.is_some() {
        rt.block_on(create_topic(
            &bootstrap,
            TXN_TOPIC,
            opts.scenario,
            partitions,
        ))?;
        rec.info(format!(
            "topic {TXN_TOPIC}: {partitions} partitions, RF 3, full ISR; {} transactional producers",
            opts.txn_producers
        ));
    }
    let ctp_python = opts.python.clone().filter(|_| {
        opts.ctp_processors > 0
            && matches!(
                opts.scenario,
                Scenario::Random | Scenario::CtpOffsetsOutside
            )
    });
    if ctp_python.is_some() {
        for topic in [CTP_IN, CTP_OUT] {
            rt.block_on(create_topic(&bootstrap, topic, opts.scenario, partitions))?;
        }
        rec.info(format!(
            "topics {CTP_IN} -> {CTP_OUT}: {partitions} partitions each, RF 3; {} processors",
            opts.ctp_processors
        ));
    }
    let cluster = Arc::new(Mutex::new(cluster));
    let stop = Arc::new(AtomicBool::new(false));
    let setup = Setup {
        bootstrap: bootstrap.clone(),
        topic: TOPIC.into(),
        partitions,
        rec: rec.clone(),
        stop: stop.clone(),
        stream: Stream::Queue,
    };
    let mut tasks = Vec::new();
    for id in 0..opts.producers {
        tasks.push(rt.spawn(workload::produce(
            setup.clone(),
            id,
            Duration::from_millis(opts.pace_ms),
        )));
    }
    if let Some(python) = &opts.python {
        for id in 0..opts.ck_producers {
            tasks.push(rt.spawn(workload::produce_confluent(
                setup.clone(),
                id,
                python.clone(),
                Duration::from_millis(opts.pace_ms),
            )));
        }
    }
    for id in 0..opts.consumers {
        tasks.push(rt.spawn(workload::consume(setup.clone(), id)));
    }
    let txn_setup = Setup {
        topic: TXN_TOPIC.into(),
        ..setup.clone()
    };
    if let Some(python) = &txn_python {
        for id in 0..opts.txn_producers {
            tasks.push(rt.spawn(txn_workload::produce(
                txn_setup.clone(),
                id,
                python.clone(),
                Duration::from_millis(opts.pace_ms.max(20)),
                opts.seed,
            )));
        }
        tasks.push(rt.spawn(txn_workload::follow(
            txn_setup.clone(),
            0,
            python.clone(),
            Reads::Txn,
        )));
    }
    tasks.push(rt.spawn(workload::watch_offsets(setup.clone(), workload::GROUP)));
    let ctp = ctp_python
        .as_ref()
        .map(|python| start_ctp(opts, rt, &setup, python, &mut tasks));
    let executor = Executor {
        cluster: cluster.clone(),
        rec: rec.clone(),
        nodes: opts.nodes,
        voters: opts.nodes - opts.broker_only,
        runtime: rt.handle().clone(),
        bootstrap: bootstrap.clone(),
        disk,
    };
    let duration_ms = opts.time_s * 1000;
    match opts.scenario {
        Scenario::Random => {
            let steps = nemesis::schedule(opts.seed, &opts.families, opts.nodes, duration_ms);
            executor.run(&steps);
            sleep_until(rec, duration_ms);
        }
        Scenario::Unclean => crate::selftest::unclean(&executor)?,
        Scenario::DropAcked => crate::selftest::drop_acked(&executor, partitions)?,
        Scenario::CtpOffsetsOutside => sleep_until(rec, duration_ms),
    }
    executor.heal_all();
    rec.info("every fault healed; waiting for acknowledgments on every partition");
    let healed = rec.now();
    let recovered = wait_recovery(rec, healed, partitions, Duration::from_secs(60));
    if !recovered {
        rec.info("LIVENESS: not every partition acknowledged a write within 60 s of healing");
    }
    stop.store(true, Ordering::SeqCst);
    rt.block_on(async {
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(60), t).await;
        }
    });
    rec.info("workload stopped; final reads (queue, transactions, consume-transform-produce)");
    let within = Duration::from_secs(90);
    rt.block_on(async {
        let txn = async {
            if let Some(python) = &txn_python {
                txn_workload::final_read(&txn_setup, python, within, Reads::Txn, true).await;
            }
        };
        let ctp = async {
            if let (Some(c), Some(python)) = (ctp, &ctp_python) {
                ctp_workload::finish(&c.input, &c.output, python, c.tasks).await;
            }
        };
        tokio::join!(workload::final_read(&setup, within), txn, ctp);
    });
    cluster.lock().unwrap_or_else(|p| p.into_inner()).stop_all();
    Ok(())
}

/// The consume-transform-produce workload while it runs: the setups of its input and output
/// topics and the tasks that stop with the output's flag (processors, follower, watcher).
struct CtpRun {
    input: Setup,
    output: Setup,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Starts the consume-transform-produce workload: an input producer (into `tasks`: it stops
/// with the other producers), the processors with their seeded faults, a read_committed
/// follower of the output and a watcher of the group's committed offsets.
fn start_ctp(
    opts: &Options,
    rt: &tokio::runtime::Runtime,
    setup: &Setup,
    python: &Path,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> CtpRun {
    let input = Setup {
        topic: CTP_IN.into(),
        stream: Stream::CtpInput,
        ..setup.clone()
    };
    let pace = Duration::from_millis((opts.pace_ms * 3).max(30));
    tasks.push(rt.spawn(workload::produce(input.clone(), 0, pace)));
    let output = Setup {
        topic: CTP_OUT.into(),
        stop: Arc::new(AtomicBool::new(false)),
        ..setup.clone()
    };
    let processor_input = Setup {
        stop: output.stop.clone(),
        ..input.clone()
    };
    let (kill, pause) = match opts.scenario {
        Scenario::Random => (
            opts.families.contains(&Family::Kill),
            opts.families.contains(&Family::Pause),
        ),
        _ => (false, false),
    };
    let fault = (opts.scenario == Scenario::CtpOffsetsOutside).then(|| "offsets-outside".into());
    let mut ctp_tasks = Vec::new();
    for id in 0..opts.ctp_processors {
        let steps = ctp_workload::plan(opts.seed, id, kill, pause, opts.time_s * 1000);
        let p = Processor {
            setup: processor_input.clone(),
            python: python.to_path_buf(),
            id,
            fault: fault.clone(),
        };
        ctp_tasks.push(rt.spawn(ctp_workload::supervise(p, steps)));
    }
    ctp_tasks.push(rt.spawn(txn_workload::follow(
        output.clone(),
        1,
        python.to_path_buf(),
        Reads::CtpOutput,
    )));
    ctp_tasks.push(rt.spawn(workload::watch_offsets(processor_input, CTP_GROUP)));
    CtpRun {
        input,
        output,
        tasks: ctp_tasks,
    }
}

fn sleep_until(rec: &Recorder, t_ms: u64) {
    while rec.now() < t_ms {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Until every partition acknowledged a write invoked after `since` (at least 3 s of load).
fn wait_recovery(rec: &Recorder, since: u64, partitions: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    std::thread::sleep(Duration::from_secs(3));
    loop {
        let acked: std::collections::BTreeSet<i32> = rec.scan(|events| {
            events
                .iter()
                .rev()
                .filter_map(|e| match e {
                    Event::Produce {
                        t,
                        partition,
                        outcome: Outcome::Ok { .. },
                        ..
                    } if *t >= since => Some(*partition),
                    _ => None,
                })
                .collect()
        });
        if acked.len() == usize::try_from(partitions).unwrap_or(0) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

async fn create_topic(
    bootstrap: &str,
    name: &str,
    scenario: Scenario,
    partitions: i32,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let admin = Admin::new(workload::client_until(bootstrap, deadline).await?);
    let mut topic = NewTopic::new(name, partitions, 3);
    topic.configs = match scenario {
        Scenario::Unclean => vec![
            ("unclean.leader.election.enable".into(), "true".into()),
            ("min.insync.replicas".into(), "1".into()),
        ],
        _ => vec![("min.insync.replicas".into(), "2".into())],
    };
    loop {
        match admin
            .create_topics(std::slice::from_ref(&topic), false, Duration::from_secs(10))
            .await
        {
            Ok(r) if r.iter().all(|(_, x)| x.is_ok()) => break,
            Ok(r)
                if r.iter().any(|(_, x)| {
                    x.as_ref()
                        .is_err_and(|e| e.to_string().contains("TOPIC_ALREADY_EXISTS"))
                }) =>
            {
                break
            }
            other if Instant::now() > deadline => anyhow::bail!("CreateTopics: {other:?}"),
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    loop {
        let names = [name.to_string()];
        if let Ok(topics) = admin.describe_topics(Some(&names[..])).await {
            let ready = topics.first().is_some_and(|t| {
                t.partitions.len() == usize::try_from(partitions).unwrap_or(0)
                    && t.partitions
                        .iter()
                        .all(|p| p.leader.is_some() && p.isr.len() == 3)
            });
            if ready {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            anyhow::bail!("topic {name} has no leader and full ISR everywhere after 120 s");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

pub fn render_report(r: &Report) -> String {
    let mut s = String::new();
    use std::fmt::Write;
    let _ = writeln!(s, "final read complete: {}", r.final_read_complete);
    let _ = writeln!(
        s,
        "acknowledged: {}, failed (indeterminate): {}",
        r.acked, r.failed
    );
    let _ = writeln!(s, "longest unavailability: {} ms", r.longest_unavailable_ms);
    let show = |s: &mut String, name: &str, items: Vec<String>| {
        let _ = writeln!(s, "{name}: {}", items.len());
        for i in items.iter().take(20) {
            let _ = writeln!(s, "  {i}");
        }
    };
    show(
        &mut s,
        "lost",
        r.lost.iter().map(|(p, v)| format!("p{p} {v}")).collect(),
    );
    show(
        &mut s,
        "duplicated",
        r.duplicated
            .iter()
            .map(|(p, v)| format!("p{p} {v}"))
            .collect(),
    );
    show(
        &mut s,
        "reordered",
        r.reordered
            .iter()
            .map(|(p, v)| format!("p{p} {v}"))
            .collect(),
    );
    show(
        &mut s,
        "divergent",
        r.divergent
            .iter()
            .map(|(p, o, v)| format!("p{p}@{o} {v:?}"))
            .collect(),
    );
    show(
        &mut s,
        "vanished (read, later gone)",
        r.vanished
            .iter()
            .map(|(p, v)| format!("p{p} {v}"))
            .collect(),
    );
    show(
        &mut s,
        "committed-offset regressions",
        r.regressions
            .iter()
            .map(|(p, f, o)| format!("p{p} {o} after {f}"))
            .collect(),
    );
    if let Some(t) = &r.txn {
        let _ = writeln!(
            s,
            "transactions: final read_committed read complete: {}",
            t.final_read_complete
        );
        let _ = writeln!(s, "{}", t.summary_line());
        show(
            &mut s,
            "txn aborted reads",
            t.aborted_reads
                .iter()
                .map(|(p, v)| format!("p{p} {v}"))
                .collect(),
        );
        show(
            &mut s,
            "txn lost",
            t.lost.iter().map(|(p, v)| format!("p{p} {v}")).collect(),
        );
        show(
            &mut s,
            "txn duplicated",
            t.duplicated
                .iter()
                .map(|(p, v)| format!("p{p} {v}"))
                .collect(),
        );
        show(&mut s, "txn torn", t.torn.clone());
        show(
            &mut s,
            "txn divergent",
            t.divergent
                .iter()
                .map(|(p, o, v)| format!("p{p}@{o} {v:?}"))
                .collect(),
        );
    }
    if let Some(c) = &r.ctp {
        render_ctp(&mut s, c);
    }
    s
}

fn render_ctp(s: &mut String, c: &crate::ctp_checker::CtpReport) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "consume-transform-produce: final read_committed read after catching up: {}",
        c.final_read_complete
    );
    let _ = writeln!(s, "{}", c.summary_line());
    let pv = |items: &[(i32, String)]| -> Vec<String> {
        items.iter().map(|(p, v)| format!("p{p} {v}")).collect()
    };
    let lists = [
        ("ctp lost", pv(&c.lost)),
        ("ctp duplicated", pv(&c.duplicated)),
        ("ctp aborted reads", pv(&c.aborted_reads)),
        ("ctp torn", c.torn.clone()),
        (
            "ctp divergent",
            c.divergent
                .iter()
                .map(|(p, o, v)| format!("p{p}@{o} {v:?}"))
                .collect(),
        ),
        (
            "ctp committed-offset regressions",
            c.regressions
                .iter()
                .map(|(p, f, o)| format!("p{p} {o} after {f}"))
                .collect(),
        ),
    ];
    for (name, items) in lists {
        let _ = writeln!(s, "{name}: {}", items.len());
        for i in items.iter().take(20) {
            let _ = writeln!(s, "  {i}");
        }
    }
}

pub fn default_dir(root: &Path, label: &str, seed: u64) -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    root.join(format!("{stamp}-{label}-seed{seed}"))
}
