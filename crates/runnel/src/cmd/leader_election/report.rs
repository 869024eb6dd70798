//! kafka-leader-election.sh's report of per-partition election results.

use runnel_client::admin::{ElectionType, ItemResults};
use runnel_client::TopicPartition;
use runnel_codes::ELECTION_NOT_NEEDED;

use crate::cmd::java_exception::exception_line;

/// The lines the tool prints and how many partitions failed. ELECTION_NOT_NEEDED counts as
/// "valid replica already elected", not as a failure.
pub fn election_report(
    election_type: ElectionType,
    results: &ItemResults<TopicPartition>,
) -> (Vec<String>, usize) {
    let mut succeeded = Vec::new();
    let mut noop = Vec::new();
    let mut failed = Vec::new();
    for (tp, result) in results {
        match result {
            Ok(()) => succeeded.push(tp.to_string()),
            Err(e) if e.code() == Some(ELECTION_NOT_NEEDED) => noop.push(tp.to_string()),
            Err(e) => failed.push((tp, e)),
        }
    }
    let mut lines = Vec::new();
    if !succeeded.is_empty() {
        lines.push(format!(
            "Successfully completed leader election ({election_type}) for partitions {}",
            succeeded.join(", ")
        ));
    }
    if !noop.is_empty() {
        lines.push(format!(
            "Valid replica already elected for partitions {}",
            noop.join(", ")
        ));
    }
    for (tp, e) in &failed {
        lines.push(format!(
            "Error completing leader election ({election_type}) for partition: {tp}: {}",
            exception_line(e)
        ));
    }
    (lines, failed.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_client::ClientError;

    #[test]
    fn groups_results_like_the_kafka_tool() {
        let results: ItemResults<TopicPartition> = vec![
            (TopicPartition::new("t", 0), Ok(())),
            (
                TopicPartition::new("t", 1),
                Err(ClientError::kafka(
                    runnel_codes::PREFERRED_LEADER_NOT_AVAILABLE,
                    None,
                )),
            ),
            (
                TopicPartition::new("t", 2),
                Err(ClientError::kafka(runnel_codes::ELECTION_NOT_NEEDED, None)),
            ),
            (TopicPartition::new("u", 0), Ok(())),
            (
                TopicPartition::new("v", 0),
                Err(ClientError::kafka(runnel_codes::ELECTION_NOT_NEEDED, None)),
            ),
        ];
        let (lines, failed) = election_report(ElectionType::Preferred, &results);
        assert_eq!(failed, 1);
        assert_eq!(
            lines,
            vec![
                "Successfully completed leader election (PREFERRED) for partitions t-0, u-0",
                "Valid replica already elected for partitions t-2, v-0",
                "Error completing leader election (PREFERRED) for partition: t-1: org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: The preferred leader was not available.",
            ]
        );
    }

    #[test]
    fn unclean_and_empty() {
        let results: ItemResults<TopicPartition> = vec![(
            TopicPartition::new("t", 0),
            Err(ClientError::kafka(
                runnel_codes::ELIGIBLE_LEADERS_NOT_AVAILABLE,
                None,
            )),
        )];
        let (lines, failed) = election_report(ElectionType::Unclean, &results);
        assert_eq!(failed, 1);
        assert_eq!(
            lines[0],
            "Error completing leader election (UNCLEAN) for partition: t-0: org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: Eligible topic partition leaders are not available."
        );
        assert_eq!(
            election_report(ElectionType::Unclean, &Vec::new()),
            (vec![], 0)
        );
    }
}
