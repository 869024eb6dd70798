//! Progress lines for long admin operations (waiting for reassignments): one line per
//! interval on stderr, only when stderr is a terminal or `--progress` asks for it, so scripts
//! that capture stderr see nothing they did not ask for. stdout keeps Kafka's output.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How often a line is printed.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// Decides when a line is due (pure: the caller passes the time).
#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    started: Instant,
    last: Option<Instant>,
    interval: Duration,
}

impl Progress {
    /// Enabled by `--progress`, or when stderr is a terminal.
    pub fn new(flag: bool, now: Instant) -> Progress {
        Progress::with(flag || std::io::stderr().is_terminal(), now, INTERVAL)
    }

    pub fn with(enabled: bool, now: Instant, interval: Duration) -> Progress {
        Progress {
            enabled,
            started: now,
            last: None,
            interval,
        }
    }

    /// Whether a line is due at `now` (the first one at once, then one per interval); marks
    /// it printed when it is.
    pub fn due(&mut self, now: Instant) -> bool {
        if !self.enabled {
            return false;
        }
        match self.last {
            Some(last) if now.saturating_duration_since(last) < self.interval => false,
            _ => {
                self.last = Some(now);
                true
            }
        }
    }

    /// Prints the final line (due or not: the last state is always shown when enabled).
    pub fn finish(&mut self, now: Instant, line: impl FnOnce(Duration) -> String) {
        if self.enabled {
            self.last = Some(now);
            eprintln!("{}", line(self.elapsed(now)));
        }
    }

    /// Time since the operation started.
    pub fn elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }

    /// Prints `line()` on stderr when a line is due.
    pub fn report(&mut self, now: Instant, line: impl FnOnce(Duration) -> String) {
        if self.due(now) {
            eprintln!("{}", line(self.elapsed(now)));
        }
    }
}

/// The line of a reassignment wait.
pub fn reassignment_line(done: usize, total: usize, elapsed: Duration) -> String {
    format!(
        "[{:.1}s] reassignment: {done}/{total} partitions done, {} still moving",
        elapsed.as_secs_f64(),
        total.saturating_sub(done)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_none_when_disabled() {
        let t0 = Instant::now();
        let mut p = Progress::with(true, t0, Duration::from_secs(1));
        assert!(p.due(t0), "the first line comes at once");
        assert!(!p.due(t0 + Duration::from_millis(500)));
        assert!(p.due(t0 + Duration::from_millis(1000)));
        assert!(!p.due(t0 + Duration::from_millis(1999)));
        assert!(p.due(t0 + Duration::from_millis(2500)));
        let mut off = Progress::with(false, t0, Duration::from_secs(1));
        assert!(!off.due(t0) && !off.due(t0 + Duration::from_secs(10)));
        assert_eq!(
            reassignment_line(3, 8, Duration::from_millis(12_340)),
            "[12.3s] reassignment: 3/8 partitions done, 5 still moving"
        );
    }
}
