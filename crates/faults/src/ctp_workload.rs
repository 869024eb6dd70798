//! The consume-transform-produce workload (exactly-once with the offsets in the transaction,
//! docs/faults.md): the project's idempotent producers write inputs to `faults-ctp-in`
//! (`workload::produce` with [`Stream::CtpInput`]); processors (`ck_txn.py process`,
//! confluent-kafka, since the project's client has no transactions) consume it read_committed
//! in group `faults-ctp` and, per batch, write one output per input to `faults-ctp-out` and
//! commit the consumed offsets with `send_offsets_to_transaction`, in one transaction. The
//! harness kills processors with `kill -9` and makes zombies of them (SIGSTOP while a new
//! process with the same `transactional.id` takes over, then SIGCONT: it must be fenced), on
//! a seeded plan ([`plan`]); a processor that exits on its own is started again. A
//! read_committed follower reads the output during the run; after the inputs stop, the
//! harness waits until the group's committed offsets reach the input's end, stops the
//! processors and reads the output read_committed. `ctp_checker.rs` judges the history.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use runnel_client::Admin;
use tokio::io::AsyncBufReadExt;

use crate::history::Event;
use crate::txn_workload::{self, Reads};
use crate::workload::{self, Setup};

pub const CTP_IN: &str = "faults-ctp-in";
pub const CTP_OUT: &str = "faults-ctp-out";
/// The processors' consumer group (`ck_txn.py` uses the same name).
pub const CTP_GROUP: &str = "faults-ctp";

/// What the harness does to a processor process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcFault {
    /// `kill -9`; the next process starts `down_ms` later.
    Kill { down_ms: u64 },
    /// SIGSTOP; a new process starts at once and fences it; SIGCONT `stopped_ms` later.
    Zombie { stopped_ms: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStep {
    pub at_ms: u64,
    pub fault: ProcFault,
}

/// The seeded faults of processor `id`: one every 8-20 s from 8 s until `until_ms`, kills
/// with `kill`, zombies with `pause` (none with neither).
pub fn plan(seed: u64, id: usize, kill: bool, pause: bool, until_ms: u64) -> Vec<ProcStep> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xC7_0000 ^ ((id as u64) << 32));
    let mut steps = Vec::new();
    if !kill && !pause {
        return steps;
    }
    let mut at = 8_000 + rng.gen_range(0..4_000);
    while at < until_ms {
        let zombie = pause && (!kill || rng.gen_bool(0.4));
        let fault = if zombie {
            ProcFault::Zombie {
                stopped_ms: rng.gen_range(4_000..10_000),
            }
        } else {
            ProcFault::Kill {
                down_ms: rng.gen_range(500..3_000),
            }
        };
        steps.push(ProcStep { at_ms: at, fault });
        at += rng.gen_range(8_000..20_000);
    }
    steps
}

/// One processor process.
struct Proc {
    child: tokio::process::Child,
    /// Closing it asks the process to finish its transaction and exit.
    stdin: Option<tokio::process::ChildStdin>,
    launch: u32,
}

impl Proc {
    fn signal(&self, sig: i32) {
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: kill(2) on a child this harness spawned and has not reaped.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

/// What a supervisor needs to start processor `id`.
#[derive(Clone)]
pub struct Processor {
    pub setup: Setup,
    pub python: PathBuf,
    pub id: usize,
    /// The self-test's deliberate bug (`ck_txn.py process ... FAULT`).
    pub fault: Option<String>,
}

impl Processor {
    fn record(&self, action: &str, launch: u32) {
        let rec = &self.setup.rec;
        rec.info(format!(
            "processor {}: {action} (process {launch})",
            self.id
        ));
        rec.record(Event::CtpProcess {
            t: rec.now(),
            action: action.into(),
            launch,
        });
    }

    fn spawn(&self, launch: u32) -> Option<Proc> {
        let mut cmd = txn_workload::command(&self.python, &self.setup, "process");
        cmd.arg(self.id.to_string())
            .arg(CTP_OUT)
            .arg(launch.to_string());
        if let Some(f) = &self.fault {
            cmd.arg(f);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                self.setup
                    .rec
                    .info(format!("processor {}: cannot start: {e}", self.id));
                return None;
            }
        };
        let stdin = child.stdin.take();
        if let Some(stdout) = child.stdout.take() {
            let rec = self.setup.rec.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    txn_workload::record_line(&rec, &line, Reads::CtpOutput);
                }
            });
        }
        self.record("start", launch);
        Some(Proc {
            child,
            stdin,
            launch,
        })
    }
}

/// A paused processor a newer process has taken over from.
struct Zombie {
    proc: Proc,
    resume_at: u64,
    /// Once resumed: when it is ended if it has not exited (been fenced) by itself.
    end_at: Option<u64>,
}

/// Runs processor `p` until its setup's `stop`, applying `steps`; then lets the current
/// process finish its transaction (45 s at most) and ends every process.
pub async fn supervise(p: Processor, steps: Vec<ProcStep>) {
    let rec = p.setup.rec.clone();
    let mut launch = 0u32;
    let mut current = p.spawn(launch);
    let mut restart_at = 0u64;
    let mut zombies: Vec<Zombie> = Vec::new();
    let mut steps = steps.into_iter().peekable();
    while !p.setup.stop.load(std::sync::atomic::Ordering::SeqCst) {
        let now = rec.now();
        if current.as_mut().is_some_and(Proc::exited) {
            p.record("exited", launch);
            current = None;
            restart_at = now + 500;
        }
        if current.is_none() && now >= restart_at {
            launch += 1;
            current = p.spawn(launch);
            restart_at = now + 1_000;
        }
        tend_zombies(&p, &mut zombies, now);
        let Some(step) = steps.next_if(|s| s.at_ms <= now) else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Some(mut c) = current.take() else {
            continue;
        };
        match step.fault {
            ProcFault::Kill { down_ms } => {
                let _ = c.child.start_kill();
                let _ = c.child.wait().await;
                p.record("kill -9", c.launch);
                restart_at = now + down_ms;
            }
            ProcFault::Zombie { stopped_ms } => {
                c.signal(libc::SIGSTOP);
                p.record("pause", c.launch);
                zombies.push(Zombie {
                    proc: c,
                    resume_at: now + stopped_ms,
                    end_at: None,
                });
                launch += 1;
                current = p.spawn(launch);
            }
        }
    }
    if let Some(mut c) = current {
        drop(c.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(45), c.child.wait()).await;
        let _ = c.child.start_kill();
        let _ = c.child.wait().await;
    }
    for mut z in zombies {
        z.proc.signal(libc::SIGCONT);
        let _ = z.proc.child.start_kill();
        let _ = z.proc.child.wait().await;
    }
}

/// Resumes zombies when due; one still running 40 s after its resumption (never fenced) is
/// ended; exited ones are dropped.
fn tend_zombies(p: &Processor, zombies: &mut Vec<Zombie>, now: u64) {
    for z in zombies.iter_mut() {
        if z.end_at.is_none() && z.resume_at <= now {
            z.proc.signal(libc::SIGCONT);
            p.record("resume", z.proc.launch);
            z.end_at = Some(now + 40_000);
        }
        if z.end_at.is_some_and(|e| e <= now) {
            p.record("ended (not fenced within 40 s)", z.proc.launch);
            let _ = z.proc.child.start_kill();
            z.end_at = Some(u64::MAX);
        }
    }
    zombies.retain_mut(|z| {
        let gone = z.proc.exited();
        if gone {
            p.record("zombie exited", z.proc.launch);
        }
        !gone
    });
}

/// Each input partition's end offset, then the processors' committed offsets until they reach
/// it (within `within`): (caught up, what was seen).
pub async fn wait_caught_up(s: &Setup, within: Duration) -> (bool, String) {
    let deadline = Instant::now() + within;
    let outcome = async {
        let admin = Admin::new(workload::client_until(&s.bootstrap, deadline).await?);
        let ends = workload::end_offsets(&admin, &s.topic, s.partitions, deadline).await?;
        loop {
            let committed = admin.list_group_offsets(CTP_GROUP, None).await;
            let behind: Vec<(i32, i64, Option<i64>)> = ends
                .iter()
                .map(|(p, end)| {
                    let at = committed.as_ref().ok().and_then(|list| {
                        list.iter()
                            .find(|(tp, _)| tp.topic == s.topic && tp.partition == *p)
                            .and_then(|(_, o)| o.as_ref().map(|o| o.offset))
                    });
                    (*p, *end, at)
                })
                .filter(|(_, end, at)| at.is_none_or(|at| at < *end))
                .collect();
            if behind.is_empty() {
                return anyhow::Ok(format!("committed offsets reached the ends {ends:?}"));
            }
            if Instant::now() > deadline {
                anyhow::bail!("behind (partition, end, committed): {behind:?}");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    };
    match outcome.await {
        Ok(detail) => (true, detail),
        Err(e) => (false, format!("the processors did not catch up: {e:#}")),
    }
}

/// After the inputs stopped: waits for the processors to catch up, stops them (`ctp_stop` is
/// their setup's stop flag), joins `tasks` (theirs, the follower's, the watcher's) and reads
/// the output topic read_committed.
pub async fn finish(
    input: &Setup,
    output: &Setup,
    python: &Path,
    tasks: Vec<tokio::task::JoinHandle<()>>,
) {
    let (caught_up, detail) = wait_caught_up(input, Duration::from_secs(90)).await;
    input
        .rec
        .info(format!("consume-transform-produce: {detail}"));
    output.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(60), t).await;
    }
    txn_workload::final_read(
        output,
        python,
        Duration::from_secs(90),
        Reads::CtpOutput,
        caught_up,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_is_a_function_of_the_seed_and_the_families() {
        assert_eq!(
            plan(7, 0, true, true, 120_000),
            plan(7, 0, true, true, 120_000)
        );
        assert!(plan(7, 0, false, false, 120_000).is_empty());
        let kills = plan(7, 0, true, false, 120_000);
        assert!(kills.len() >= 5, "{kills:?}");
        assert!(kills
            .iter()
            .all(|s| matches!(s.fault, ProcFault::Kill { .. }) && s.at_ms < 120_000));
        let zombies = plan(7, 0, false, true, 120_000);
        assert!(zombies
            .iter()
            .all(|s| matches!(s.fault, ProcFault::Zombie { .. })));
        assert!(kills.windows(2).all(|w| w[1].at_ms >= w[0].at_ms + 8_000));
    }
}
