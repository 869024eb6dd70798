//! The event loop shared by the coordinator shells (`group_manager`, `txn_manager`): one task
//! that owns its state and reacts, one event at a time, to a command, its periodic tick, a new
//! metadata image (leadership may have moved) or the progress of a partition an answer waits on
//! (its purgatory). Nothing in the loop awaits replication, so one stuck write delays only the
//! answers that depend on it.

use std::sync::Arc;
use std::time::Duration;

use runnel_metadata::MetadataImage;
use tokio::sync::{mpsc, watch};

use crate::replica::partition::{any_progress, Progress};

/// What a coordinator shell provides to [`spawn_loop`].
pub trait CoordinatorTask: Send + 'static {
    type Command: Send + 'static;

    /// Loads the partitions that became ours and drops those that left.
    fn follow_leadership(&mut self);
    fn handle(&mut self, command: Self::Command);
    fn tick(&mut self);
    /// Progress watches of the partitions whose answers wait in the purgatory.
    fn watch_parked(&self) -> Vec<watch::Receiver<Progress>>;
    /// Completes the answers whose records have replicated; whether any still wait.
    fn complete_replicated(&mut self) -> bool;
    fn image(&mut self) -> &mut watch::Receiver<Arc<MetadataImage>>;
}

/// Runs `task` until its command channel closes or the image sender is gone.
pub fn spawn_loop<T: CoordinatorTask>(
    mut task: T,
    mut commands: mpsc::Receiver<T::Command>,
    tick_every: Duration,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(tick_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        task.follow_leadership();
        loop {
            // Subscribed before the HWs are read, so an advance in between is not missed.
            let mut parked = task.watch_parked();
            let waiting = task.complete_replicated();
            tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => task.handle(command),
                    None => return,
                },
                _ = tick.tick() => task.tick(),
                changed = task.image().changed() => {
                    if changed.is_err() {
                        return;
                    }
                    task.follow_leadership();
                }
                _ = any_progress(parked.iter_mut()), if waiting => {}
            }
        }
    });
}
