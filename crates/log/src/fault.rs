//! Test-only fault injection: lets unit tests make the next data write, index write or fsync
//! fail, to prove that a failed append leaves nothing behind and that a failed fsync stops the
//! log for good (fsyncgate). In non-test builds [`check`] is an empty inline function.

use std::io;

/// A point where a test may inject an I/O error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
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

/// Fails with an injected error if a test armed `fault` on this thread (once per arming).
#[inline]
pub(crate) fn check(fault: Fault) -> io::Result<()> {
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
