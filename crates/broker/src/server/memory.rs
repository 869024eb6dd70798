//! Request memory shared by all connections (`queued.max.request.bytes`, docs/network-limits.md).
//!
//! A connection takes memory from the pool before it lets a request's bytes into a buffer and
//! gives it back when the request has been handled. When the pool is empty, connections wait
//! for memory and so stop reading from their sockets: TCP pushes back on the senders, nobody is
//! failed (Kafka mutes its channels the same way). The pool is fair (first come, first served),
//! so a small request is not starved by a large one.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Memory is counted in units of this many bytes, so a pool of terabytes fits the semaphore's
/// `u32` acquisitions.
const UNIT: u64 = 1024;

/// The pool. Cloning shares it.
#[derive(Clone, Debug)]
pub struct RequestMemory {
    units: Arc<Semaphore>,
    capacity_units: u64,
}

impl RequestMemory {
    pub fn new(bytes: u64) -> Self {
        let capacity_units = bytes.div_ceil(UNIT).clamp(1, Semaphore::MAX_PERMITS as u64);
        let permits = usize::try_from(capacity_units).unwrap_or(Semaphore::MAX_PERMITS);
        RequestMemory {
            units: Arc::new(Semaphore::new(permits)),
            capacity_units,
        }
    }

    /// An empty lease: the memory one request holds.
    pub fn lease(&self) -> Lease {
        Lease {
            pool: self.clone(),
            permits: None,
        }
    }

    /// Bytes free right now (for tests and logs).
    pub fn available_bytes(&self) -> u64 {
        self.units.available_permits() as u64 * UNIT
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_units * UNIT
    }
}

/// Memory held by one request until it is dropped (after the request has been handled).
#[derive(Debug)]
pub struct Lease {
    pool: RequestMemory,
    permits: Option<OwnedSemaphorePermit>,
}

impl Lease {
    /// Takes `bytes` more from the pool, waiting while it has too little. A request can never
    /// ask for more than the whole pool (`queued.max.request.bytes >= socket.request.max.bytes`
    /// is checked at startup); a larger ask is clamped so it cannot wait forever.
    pub async fn grow(&mut self, bytes: usize) {
        let wanted = (bytes as u64).div_ceil(UNIT).min(self.pool.capacity_units);
        let held = self.permits.as_ref().map_or(0, |p| p.num_permits() as u64);
        let units = wanted.min(self.pool.capacity_units.saturating_sub(held));
        let Ok(units) = u32::try_from(units) else {
            return;
        };
        if units == 0 {
            return;
        }
        // The semaphore is never closed, so acquiring only fails if it were.
        let Ok(more) = self.pool.units.clone().acquire_many_owned(units).await else {
            return;
        };
        match &mut self.permits {
            Some(permits) => permits.merge(more),
            None => self.permits = Some(more),
        }
    }

    pub fn held_bytes(&self) -> u64 {
        self.permits.as_ref().map_or(0, |p| p.num_permits() as u64) * UNIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn an_empty_pool_makes_readers_wait_until_memory_is_returned() {
        let pool = RequestMemory::new(64 * 1024);
        let mut first = pool.lease();
        first.grow(64 * 1024).await;
        assert_eq!(pool.available_bytes(), 0);
        let mut second = pool.lease();
        let waiting = tokio::time::timeout(Duration::from_millis(50), second.grow(1)).await;
        assert!(waiting.is_err(), "no memory: the reader waits");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), second.grow(1))
            .await
            .expect("memory returned by a handled request is handed out again");
        assert_eq!(second.held_bytes(), 1024);
    }

    #[tokio::test]
    async fn a_lease_never_asks_for_more_than_the_pool() {
        let pool = RequestMemory::new(10 * 1024);
        let mut lease = pool.lease();
        lease.grow(4 * 1024).await;
        tokio::time::timeout(Duration::from_secs(5), lease.grow(100 * 1024))
            .await
            .expect("clamped to the pool");
        assert_eq!(lease.held_bytes(), 10 * 1024);
    }
}
