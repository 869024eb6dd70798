//! Raising the soft `RLIMIT_NOFILE` to the hard limit at start, as Kafka's packaging asks of the
//! operator: sockets and segment files share one FD table, and the usual soft limit (1024) is
//! far below what a broker needs.

/// What to ask for when the hard limit is "unlimited" (Linux refuses soft limits above
/// `fs.nr_open`, whose default is this).
#[cfg(unix)]
const UNLIMITED_TARGET: u64 = 1 << 20;

/// Raises the soft limit to the hard one and returns the soft limit now in force (None where
/// the platform has no such limit or it cannot be read).
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // rlim_t is u64 here but not on every unix
pub fn raise_nofile_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot read RLIMIT_NOFILE");
        return None;
    }
    let soft = limit.rlim_cur as u64;
    let target = if limit.rlim_max == libc::RLIM_INFINITY {
        UNLIMITED_TARGET.max(soft)
    } else {
        limit.rlim_max as u64
    };
    if target <= soft {
        return Some(soft);
    }
    let raised = libc::rlimit {
        rlim_cur: target as libc::rlim_t,
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        tracing::warn!(
            soft,
            target,
            error = %std::io::Error::last_os_error(),
            "cannot raise RLIMIT_NOFILE; keeping the soft limit"
        );
        return Some(soft);
    }
    tracing::info!(from = soft, to = target, "raised RLIMIT_NOFILE");
    Some(target)
}

#[cfg(not(unix))]
pub fn raise_nofile_limit() -> Option<u64> {
    None
}

#[cfg(all(test, unix))]
#[allow(clippy::unnecessary_cast)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let now = raise_nofile_limit().expect("linux has RLIMIT_NOFILE");
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        assert_eq!(limit.rlim_cur as u64, now);
        if limit.rlim_max != libc::RLIM_INFINITY {
            assert_eq!(limit.rlim_cur, limit.rlim_max);
        }
    }
}
