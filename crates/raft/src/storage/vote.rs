//! The persisted vote and the last known committed log id.
//!
//! The vote must be durable before openraft acts on it (a node that forgets its vote could vote
//! twice in one term and elect two leaders), so it is fsynced and a corrupt vote file is an
//! error, never silently "no vote". The committed log id is only a hint that lets a restarted
//! node re-apply its own committed entries before it hears from a leader: it is written without
//! fsync and a missing or corrupt one just means "unknown".

use std::io;
use std::path::PathBuf;

use crate::storage::{invalid_data, read_framed_file, write_framed_file};
use crate::types::{LogId, Vote};

const VOTE_FILE: &str = "vote";
const COMMITTED_FILE: &str = "committed";

/// The vote and commit hint files of one data directory.
#[derive(Debug)]
pub struct VoteStore {
    dir: PathBuf,
}

impl VoteStore {
    pub fn new(dir: PathBuf) -> Self {
        VoteStore { dir }
    }

    pub fn save_vote(&self, vote: &Vote) -> io::Result<()> {
        let body = serde_json::to_vec(vote).map_err(invalid_data)?;
        write_framed_file(&self.dir, VOTE_FILE, &body, true)
    }

    pub fn read_vote(&self) -> io::Result<Option<Vote>> {
        match read_framed_file(&self.dir, VOTE_FILE)? {
            None => Ok(None),
            Some(body) => serde_json::from_slice(&body)
                .map(Some)
                .map_err(invalid_data),
        }
    }

    pub fn save_committed(&self, committed: Option<&LogId>) -> io::Result<()> {
        let body = serde_json::to_vec(&committed).map_err(invalid_data)?;
        write_framed_file(&self.dir, COMMITTED_FILE, &body, false)
    }

    pub fn read_committed(&self) -> Option<LogId> {
        match read_framed_file(&self.dir, COMMITTED_FILE) {
            Ok(Some(body)) => serde_json::from_slice(&body).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "ignoring an undecodable committed hint");
                None
            }),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "ignoring an unreadable committed hint");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, LeaderId};

    #[test]
    fn vote_and_committed_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = VoteStore::new(dir.path().to_path_buf());
        assert_eq!(store.read_vote().unwrap(), None);
        assert_eq!(store.read_committed(), None);
        let vote = Vote {
            leader_id: LeaderId::new(3, 2),
            committed: true,
        };
        store.save_vote(&vote).unwrap();
        let committed = LogId::new(CommittedLeaderId::new(3, 2), 17);
        store.save_committed(Some(&committed)).unwrap();
        let store = VoteStore::new(dir.path().to_path_buf());
        assert_eq!(store.read_vote().unwrap(), Some(vote));
        assert_eq!(store.read_committed(), Some(committed));
    }

    #[test]
    fn corrupt_vote_is_an_error_corrupt_hint_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let store = VoteStore::new(dir.path().to_path_buf());
        store.save_vote(&Vote::new(1, 1)).unwrap();
        store
            .save_committed(Some(&LogId::new(CommittedLeaderId::new(1, 1), 1)))
            .unwrap();
        for f in [VOTE_FILE, COMMITTED_FILE] {
            let p = dir.path().join(f);
            let mut b = std::fs::read(&p).unwrap();
            let last = b.len() - 1;
            b[last] ^= 0x20;
            std::fs::write(&p, b).unwrap();
        }
        assert!(store.read_vote().is_err());
        assert_eq!(store.read_committed(), None);
    }
}
