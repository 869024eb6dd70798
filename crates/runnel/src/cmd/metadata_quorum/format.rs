//! kafka-metadata-quorum.sh's two views, reproduced byte for byte (Kafka 3.3-3.8, before
//! KIP-853 added directory ids): `--status` is a fixed-width key list, `--replication` a table
//! whose cells are padded to the column width and each followed by a tab (Kafka's
//! `ToolsUtils.prettyPrintTable`). Scripts that parse Kafka's output keep working.

use anyhow::{bail, Result};
use runnel_client::admin::{QuorumInfo, QuorumReplica};

/// The `--status` text: Kafka computes the maximum lag against the voter with the smallest
/// log end offset (the first one on ties) and its lag time from the caught-up timestamps,
/// 0 when that voter is the leader itself and -1 when a timestamp is unknown.
pub fn status_text(cluster_id: Option<&str>, info: &QuorumInfo) -> Result<String> {
    let leader_index = leader_index(info)?;
    let leader = &info.voters[leader_index];
    // `min_by_key` keeps the first of equal minima, like Java's `Stream.min`.
    let (lagging_index, lagging) = info
        .voters
        .iter()
        .enumerate()
        .min_by_key(|(_, v)| v.log_end_offset)
        .unwrap_or((leader_index, leader));
    let max_lag = leader.log_end_offset - lagging.log_end_offset;
    let max_lag_time_ms = if lagging_index == leader_index {
        0
    } else {
        match (
            leader.last_caught_up_timestamp,
            lagging.last_caught_up_timestamp,
        ) {
            (Some(l), Some(f)) => l - f,
            _ => -1,
        }
    };
    Ok(format!(
        "ClusterId:              {}\n\
         LeaderId:               {}\n\
         LeaderEpoch:            {}\n\
         HighWatermark:          {}\n\
         MaxFollowerLag:         {max_lag}\n\
         MaxFollowerLagTimeMs:   {max_lag_time_ms}\n\
         CurrentVoters:          {}\n\
         CurrentObservers:       {}\n",
        cluster_id.unwrap_or("null"),
        info.leader_id,
        info.leader_epoch,
        info.high_watermark,
        id_list(&info.voters),
        id_list(&info.observers),
    ))
}

/// The `--replication` table: the leader, then the other voters (Follower), then the
/// observers. With `now_ms` (`--human-readable`), timestamps print as `N ms ago`.
pub fn replication_text(info: &QuorumInfo, now_ms: Option<i64>) -> Result<String> {
    let leader = &info.voters[leader_index(info)?];
    let mut rows: Vec<[String; 6]> = Vec::new();
    let mut add = |r: &QuorumReplica, status: &str| -> Result<()> {
        rows.push([
            r.replica_id.to_string(),
            r.log_end_offset.to_string(),
            (leader.log_end_offset - r.log_end_offset).to_string(),
            timestamp(r.last_fetch_timestamp, now_ms, "last fetch")?,
            timestamp(r.last_caught_up_timestamp, now_ms, "last caught up")?,
            status.to_owned(),
        ]);
        Ok(())
    };
    add(leader, "Leader")?;
    for v in info
        .voters
        .iter()
        .filter(|v| v.replica_id != info.leader_id)
    {
        add(v, "Follower")?;
    }
    for o in &info.observers {
        add(o, "Observer")?;
    }
    let headers = [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    .map(str::to_owned);
    Ok(pretty_table(&headers, &rows))
}

/// Kafka's `ToolsUtils.prettyPrintTable`: every cell left-justified to its column's widest
/// value and followed by a tab, the last one included.
pub(crate) fn pretty_table<const N: usize>(headers: &[String; N], rows: &[[String; N]]) -> String {
    let mut widths = headers.clone().map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(headers).chain(rows) {
        for (cell, w) in row.iter().zip(widths) {
            out.push_str(&format!("{cell:<w$}\t"));
        }
        out.push('\n');
    }
    out
}

/// The leader's position among the voters; Kafka's tool fails when it is missing (no leader
/// elected), and so do we, with a readable message instead of Java's "No value present".
fn leader_index(info: &QuorumInfo) -> Result<usize> {
    match info
        .voters
        .iter()
        .position(|v| v.replica_id == info.leader_id)
    {
        Some(i) => Ok(i),
        None if info.leader_id < 0 => {
            bail!(
                "the metadata quorum has no leader yet (LeaderId {}, LeaderEpoch {})",
                info.leader_id,
                info.leader_epoch
            )
        }
        None => bail!(
            "the quorum leader {} is not among the voters {}",
            info.leader_id,
            id_list(&info.voters)
        ),
    }
}

/// `[1,2,3]`: Kafka's `Utils.mkString(ids, "[", "]", ",")`.
fn id_list(replicas: &[QuorumReplica]) -> String {
    let ids: Vec<String> = replicas.iter().map(|r| r.replica_id.to_string()).collect();
    format!("[{}]", ids.join(","))
}

/// A timestamp cell: `-1` when unknown, else the value or, human-readable, `N ms ago`
/// (Kafka refuses timestamps in the future or before the epoch as clock drift).
fn timestamp(ts: Option<i64>, now_ms: Option<i64>, what: &str) -> Result<String> {
    let (Some(ts), Some(now)) = (ts, now_ms) else {
        return Ok(ts.unwrap_or(-1).to_string());
    };
    if ts <= 0 || ts > now {
        bail!(
            "Error while computing relative time, possible drift in system clock.\n\
             Current timestamp is {now}, {what} timestamp is {ts}"
        );
    }
    Ok(format!("{} ms ago", now - ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(id: i32, leo: i64, fetch: Option<i64>, caught_up: Option<i64>) -> QuorumReplica {
        QuorumReplica {
            replica_id: id,
            log_end_offset: leo,
            last_fetch_timestamp: fetch,
            last_caught_up_timestamp: caught_up,
        }
    }

    /// Three voters (leader 2) and one observer, like a 3-controller + 1-broker cluster.
    fn quorum() -> QuorumInfo {
        QuorumInfo {
            leader_id: 2,
            leader_epoch: 5,
            high_watermark: 2467,
            voters: vec![
                replica(1, 2467, Some(1_697_594_204_419), Some(1_697_594_204_419)),
                replica(2, 2467, Some(1_697_594_204_877), Some(1_697_594_204_877)),
                replica(3, 2460, Some(1_697_594_204_420), Some(1_697_594_204_000)),
            ],
            observers: vec![replica(4, 2400, Some(1_697_594_204_500), None)],
        }
    }

    #[test]
    fn status_matches_kafka() {
        let text = status_text(Some("ZGI1NTk0YmY3NzVjNDk5MA"), &quorum()).unwrap();
        assert_eq!(
            text,
            "ClusterId:              ZGI1NTk0YmY3NzVjNDk5MA\n\
             LeaderId:               2\n\
             LeaderEpoch:            5\n\
             HighWatermark:          2467\n\
             MaxFollowerLag:         7\n\
             MaxFollowerLagTimeMs:   877\n\
             CurrentVoters:          [1,2,3]\n\
             CurrentObservers:       [4]\n"
        );
    }

    #[test]
    fn status_lag_edge_cases() {
        // All caught up: the first minimal voter is 1, not the leader, so the lag time is
        // the difference of caught-up timestamps even though the lag is 0 (Kafka does this).
        let mut q = quorum();
        q.voters[2].log_end_offset = 2467;
        let text = status_text(None, &q).unwrap();
        assert!(text.starts_with("ClusterId:              null\n"));
        assert!(text.contains("MaxFollowerLag:         0\n"));
        assert!(text.contains("MaxFollowerLagTimeMs:   458\n"));
        // A single voter is its own most-lagging voter: 0 ms.
        let single = QuorumInfo {
            voters: vec![replica(2, 10, None, None)],
            observers: vec![],
            ..quorum()
        };
        let text = status_text(Some("c"), &single).unwrap();
        assert!(text.contains("MaxFollowerLagTimeMs:   0\n"));
        assert!(text.contains("CurrentVoters:          [2]\nCurrentObservers:       []\n"));
        // Unknown caught-up time of the lagging voter: -1.
        let mut q = quorum();
        q.voters[2].last_caught_up_timestamp = None;
        assert!(status_text(Some("c"), &q)
            .unwrap()
            .contains("MaxFollowerLagTimeMs:   -1\n"));
    }

    #[test]
    fn no_leader_is_an_error() {
        let mut q = quorum();
        q.leader_id = -1;
        assert!(status_text(Some("c"), &q)
            .unwrap_err()
            .to_string()
            .contains("no leader"));
        q.leader_id = 9;
        assert!(replication_text(&q, None).is_err());
    }

    #[test]
    fn replication_table_matches_kafka() {
        let text = replication_text(&quorum(), None).unwrap();
        let expected = [
            "NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t",
            "2     \t2467        \t0  \t1697594204877     \t1697594204877        \tLeader  \t",
            "1     \t2467        \t0  \t1697594204419     \t1697594204419        \tFollower\t",
            "3     \t2460        \t7  \t1697594204420     \t1697594204000        \tFollower\t",
            "4     \t2400        \t67 \t1697594204500     \t-1                   \tObserver\t",
        ];
        assert_eq!(text, expected.join("\n") + "\n");
    }

    #[test]
    fn replication_human_readable() {
        let now = 1_697_594_205_000;
        let text = replication_text(&quorum(), Some(now)).unwrap();
        let leader_line = text.lines().nth(1).unwrap();
        assert!(leader_line.starts_with("2     \t2467        \t0  \t123 ms ago"));
        assert!(text.lines().nth(4).unwrap().contains("\t-1 "));
        // A timestamp in the future is clock drift, as in Kafka.
        assert!(replication_text(&quorum(), Some(1_000)).is_err());
    }
}
