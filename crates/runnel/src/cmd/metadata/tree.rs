//! The metadata image printed as the seed's ZooKeeper tree: one line per znode, the path and
//! the JSON Kafka kept there, with Kafka's key order. KRaft has no such tree, but the seed's
//! walkthrough of topic creation is told in these paths, so showing the image this way lets a
//! reader follow the seed against a running cluster.

use anyhow::{Context, Result};
use runnel_client::admin::{MetadataTree, TreePartition, TreeTopic};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

/// `/controller`.
#[derive(Serialize)]
struct ControllerZnode {
    version: i32,
    brokerid: i32,
}

/// `/brokers/ids/<id>` (Runnel's fields: what registration records).
#[derive(Serialize)]
struct BrokerZnode<'a> {
    host: &'a str,
    port: u16,
    rack: Option<&'a str>,
    fenced: bool,
    epoch: i64,
}

/// `/brokers/topics/<t>`: version 3 is the layout that carries the topic id.
#[derive(Serialize)]
struct TopicZnode<'a> {
    version: i32,
    topic_id: &'a str,
    partitions: Assignment<'a>,
}

/// The `partitions` map of a topic znode, `{"0":[1,2,3],"1":[...]}` in partition order.
struct Assignment<'a>(&'a [TreePartition]);

impl Serialize for Assignment<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for p in self.0 {
            map.serialize_entry(&p.partition.to_string(), &p.replicas)?;
        }
        map.end()
    }
}

/// `/brokers/topics/<t>/partitions/<p>/state`.
#[derive(Serialize)]
struct StateZnode<'a> {
    controller_epoch: i32,
    leader: i32,
    version: i32,
    leader_epoch: i32,
    isr: &'a [i32],
}

/// The whole tree: controller, controller epoch, brokers by id, then each topic (by name)
/// followed by its partitions' states (by index). No `/controller` line while no controller
/// is elected, as in ZooKeeper, where the ephemeral node is absent then.
pub fn tree_text(tree: &MetadataTree) -> Result<String> {
    let mut out = String::new();
    let mut line = |path: &str, value: String| {
        out.push_str(path);
        out.push(' ');
        out.push_str(&value);
        out.push('\n');
    };
    if let Some(id) = tree.controller.filter(|id| *id >= 0) {
        line(
            "/controller",
            json(&ControllerZnode {
                version: 1,
                brokerid: id,
            })?,
        );
    }
    line("/controller_epoch", tree.controller_epoch.to_string());
    let mut brokers: Vec<_> = tree.brokers.iter().collect();
    brokers.sort_by_key(|b| b.id);
    for b in brokers {
        let znode = BrokerZnode {
            host: &b.host,
            port: b.port,
            rack: b.rack.as_deref(),
            fenced: b.fenced,
            epoch: b.epoch,
        };
        line(&format!("/brokers/ids/{}", b.id), json(&znode)?);
    }
    let mut topics: Vec<&TreeTopic> = tree.topics.iter().collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for t in topics {
        let mut partitions = t.partitions.clone();
        partitions.sort_by_key(|p| p.partition);
        let znode = TopicZnode {
            version: 3,
            topic_id: &t.id,
            partitions: Assignment(&partitions),
        };
        line(&format!("/brokers/topics/{}", t.name), json(&znode)?);
        for p in &partitions {
            let state = StateZnode {
                controller_epoch: p.controller_epoch,
                leader: p.leader.unwrap_or(-1),
                version: 1,
                leader_epoch: p.leader_epoch,
                isr: &p.isr,
            };
            line(
                &format!(
                    "/brokers/topics/{}/partitions/{}/state",
                    t.name, p.partition
                ),
                json(&state)?,
            );
        }
    }
    Ok(out)
}

fn json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).context("rendering a znode as JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(json: &str) -> MetadataTree {
        serde_json::from_str(json).expect("fixture")
    }

    #[test]
    fn seed_example() {
        let t = tree(
            r#"{"cluster_id":"c","controller":1,"controller_epoch":3,
            "brokers":[{"id":2,"host":"127.0.0.1","port":9093,"rack":"b","fenced":true,"epoch":14},
                       {"id":1,"host":"127.0.0.1","port":9092,"rack":null,"fenced":false,"epoch":12}],
            "topics":[{"name":"t","id":"w2Xc0Jt6S8aVbE8JmV2o9A","partitions":[
              {"partition":1,"replicas":[2,1],"leader":null,"leader_epoch":4,"isr":[],"partition_epoch":5,"controller_epoch":3},
              {"partition":0,"replicas":[1,2],"leader":1,"leader_epoch":0,"isr":[1,2],"partition_epoch":0,"controller_epoch":3}]},
              {"name":"a","id":"AAAAAAAAAAAAAAAAAAAAAA","partitions":[]}]}"#,
        );
        let expected = r#"/controller {"version":1,"brokerid":1}
/controller_epoch 3
/brokers/ids/1 {"host":"127.0.0.1","port":9092,"rack":null,"fenced":false,"epoch":12}
/brokers/ids/2 {"host":"127.0.0.1","port":9093,"rack":"b","fenced":true,"epoch":14}
/brokers/topics/a {"version":3,"topic_id":"AAAAAAAAAAAAAAAAAAAAAA","partitions":{}}
/brokers/topics/t {"version":3,"topic_id":"w2Xc0Jt6S8aVbE8JmV2o9A","partitions":{"0":[1,2],"1":[2,1]}}
/brokers/topics/t/partitions/0/state {"controller_epoch":3,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}
/brokers/topics/t/partitions/1/state {"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":4,"isr":[]}
"#;
        assert_eq!(tree_text(&t).unwrap(), expected);
    }

    #[test]
    fn no_controller_means_no_controller_znode() {
        for controller in ["null", "-1"] {
            let t = tree(&format!(
                r#"{{"cluster_id":"c","controller":{controller},"controller_epoch":0,"brokers":[],"topics":[]}}"#
            ));
            assert_eq!(tree_text(&t).unwrap(), "/controller_epoch 0\n");
        }
    }
}
