//! The fsync group commit: whoever finds no flush running fsyncs for everyone waiting.

use std::sync::atomic::Ordering;

use runnel_log::LogError;

use super::Partition;

impl Partition {
    /// Whether `flush.messages` says the appended data must be fsynced before acknowledging.
    pub fn needs_flush(&self) -> bool {
        let every = self.role.read().config.flush_messages;
        every > 0 && every != i64::MAX && self.log.lock().unflushed_messages() >= every as u64
    }

    /// Waits until everything below `offset` is fsynced. One fsync serves every waiter
    /// (group commit): whoever finds no flush running becomes the flusher; the rest wait for it.
    pub async fn wait_flushed(&self, offset: i64) -> Result<(), LogError> {
        let mut rx = self.flushed.subscribe();
        loop {
            if *rx.borrow_and_update() >= offset {
                return Ok(());
            }
            if self
                .flushing
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                let result = self.flush_once().await;
                // Clear before publishing so a woken waiter can take over the next flush.
                self.flushing.store(false, Ordering::Release);
                match result {
                    Ok(up_to) => {
                        self.flushed.send_replace(up_to);
                    }
                    Err(e) => return Err(e),
                }
            } else if rx.changed().await.is_err() {
                return Ok(());
            }
        }
    }

    async fn flush_once(&self) -> Result<i64, LogError> {
        let target = self.log.lock().flush_target();
        let up_to = target.up_to_offset();
        let target = tokio::task::spawn_blocking(move || target.sync())
            .await
            .map_err(|e| LogError::Io(std::io::Error::other(e)))?;
        target?;
        self.log.lock().mark_flushed(up_to);
        Ok(up_to)
    }
}
