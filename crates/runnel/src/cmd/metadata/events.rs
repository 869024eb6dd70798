//! One line per state-change event, in the spirit of Kafka's state-change.log: when, under
//! which controller epoch, which partition (and replica), and the transition.
//! `[2023-11-14T22:13:20.000Z] epoch=3 t-0 replica 2 NewReplica -> OnlineReplica detail`.

use runnel_client::admin::StateChangeEvent;

use super::iso_time::iso8601_utc;

/// The line for one event; `replica R` only for replica-state events, the detail only when
/// there is one, flattened to a single line so `--follow` output stays one event per line.
pub fn event_line(e: &StateChangeEvent) -> String {
    let mut line = format!(
        "[{}] epoch={} {}-{}",
        iso8601_utc(e.time_ms),
        e.controller_epoch,
        e.topic,
        e.partition
    );
    if let Some(r) = e.replica {
        line.push_str(&format!(" replica {r}"));
    }
    line.push_str(&format!(" {} -> {}", e.from, e.to));
    if let Some(detail) = e.detail.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
        line.push(' ');
        line.push_str(&detail.replace(['\n', '\r'], " "));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_client::admin::StateChangeEvents;

    #[test]
    fn partition_and_replica_events() {
        let events: StateChangeEvents = serde_json::from_str(
            r#"{"events":[
              {"seq":17,"time_ms":1700000000000,"controller_epoch":3,"topic":"t","partition":0,
               "replica":null,"from":"NonExistentPartition","to":"NewPartition","detail":""},
              {"seq":18,"time_ms":1700000000042,"controller_epoch":3,"topic":"t","partition":0,
               "replica":2,"from":"NewReplica","to":"OnlineReplica","detail":"leader 1"},
              {"seq":19,"time_ms":1700000000050,"controller_epoch":4,"topic":"my.topic-x","partition":11,
               "replica":null,"from":"NewPartition","to":"OnlinePartition",
               "detail":"leader=1 isr=[1,2]\nelected"}],"next":20}"#,
        )
        .expect("fixture");
        let lines: Vec<String> = events.events.iter().map(event_line).collect();
        assert_eq!(
            lines,
            [
                "[2023-11-14T22:13:20.000Z] epoch=3 t-0 NonExistentPartition -> NewPartition",
                "[2023-11-14T22:13:20.042Z] epoch=3 t-0 replica 2 NewReplica -> OnlineReplica leader 1",
                "[2023-11-14T22:13:20.050Z] epoch=4 my.topic-x-11 NewPartition -> OnlinePartition leader=1 isr=[1,2] elected",
            ]
        );
    }
}
