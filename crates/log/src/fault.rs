//! Test-only fault injection: lets unit tests make the next data write, index write or fsync
//! fail, to prove that a failed append leaves nothing behind and that a failed fsync stops the
//! log for good (fsyncgate). The log crate's own tests arm faults per thread; with the
//! `fault-injection` feature (enabled only as a dev-dependency, by the broker's tests) a fault
//! can also be armed for the whole process, for tests whose I/O runs on other threads. In
//! builds with neither, [`check`] is an empty inline function.

use std::io;

/// A point where a test may inject an I/O error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// After a segment's `.log` write (the bytes are in the file, the call still fails).
    LogWrite,
    /// Between the offset-index and the time-index write of an append.
    IndexWrite,
    /// Before each file fsync of a flush.
    Sync,
}

#[cfg(test)]
thread_local! {
    static ARMED: std::cell::RefCell<Vec<Fault>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(feature = "fault-injection")]
static PROCESS_ARMED: std::sync::Mutex<Vec<Fault>> = std::sync::Mutex::new(Vec::new());
#[cfg(feature = "fault-injection")]
static PROCESS_ANY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes the next [`check`] of `fault` on any thread fail (once per arming).
#[cfg(feature = "fault-injection")]
pub fn arm_process_wide(fault: Fault) {
    if let Ok(mut armed) = PROCESS_ARMED.lock() {
        armed.push(fault);
        PROCESS_ANY.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Fails with an injected error if a test armed `fault` on this thread, or for the process
/// (once per arming).
#[inline]
pub(crate) fn check(fault: Fault) -> io::Result<()> {
    #[cfg(feature = "fault-injection")]
    if PROCESS_ANY.load(std::sync::atomic::Ordering::Relaxed) {
        if let Ok(mut armed) = PROCESS_ARMED.lock() {
            if let Some(i) = armed.iter().position(|f| *f == fault) {
                armed.remove(i);
                return Err(io::Error::other(format!("injected {fault:?} failure")));
            }
        }
    }
    #[cfg(test)]
    {
        let hit = ARMED.with(|a| {
            let mut a = a.borrow_mut();
            a.iter()
                .position(|f| *f == fault)
                .map(|i| a.remove(i))
                .is_some()
        });
        if hit {
            return Err(io::Error::other(format!("injected {fault:?} failure")));
        }
    }
    let _ = fault;
    Ok(())
}

/// Makes the next [`check`] of `fault` on this thread fail.
#[cfg(test)]
pub(crate) fn arm(fault: Fault) {
    ARMED.with(|a| a.borrow_mut().push(fault));
}
