//! Runnel's own request (api key 32000, not advertised): the metadata image as the seed's
//! ZooKeeper tree and the controller's state-change log, for `runnel metadata --tree/--events`.
//! The body is JSON in both directions; only Runnel's CLI sends it.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::context::Broker;
use crate::errors::code;
use crate::node::base64_url;

pub const API_KEY: i16 = 32000;

pub async fn handle(broker: &Arc<Broker>, body: &[u8]) -> Value {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match request.get("what").and_then(Value::as_str) {
        Some("tree") => tree(broker),
        Some("events") => {
            let since = request.get("since").and_then(Value::as_u64).unwrap_or(0);
            match broker
                .controller
                .run(runnel_metadata::controller::Events { since })
                .await
            {
                Ok((events, next)) => json!({
                    "events": events.into_iter().map(|(seq, e)| json!({
                        "seq": seq,
                        "time_ms": e.time_ms,
                        "controller_epoch": e.controller_epoch,
                        "topic": e.topic,
                        "partition": e.partition,
                        "replica": e.replica,
                        "from": e.from,
                        "to": e.to,
                        "detail": e.detail,
                    })).collect::<Vec<_>>(),
                    "next": next,
                }),
                Err(e) => json!({"error": {"code": e.code, "message": e.message}}),
            }
        }
        // This process's authentication counters (Kafka's metric names; issue 14).
        Some("security") => crate::server::auth_failures::AUTH_STATS.to_json(),
        _ => {
            json!({"error": {"code": code::INVALID_REQUEST, "message": "expected {\"what\": \"tree\"}, {\"what\": \"events\", \"since\": N} or {\"what\": \"security\"}"}})
        }
    }
}

fn tree(broker: &Arc<Broker>) -> Value {
    let image = broker.image();
    let controller_epoch = broker
        .quorum
        .as_ref()
        .map_or(1, |q| q.term().min(i32::MAX as u64) as i64);
    let brokers: Vec<Value> = image
        .brokers
        .values()
        .map(|b| json!({"id": b.id, "host": b.host, "port": b.port, "rack": b.rack, "fenced": b.fenced, "epoch": b.epoch,
            "endpoints": b.endpoints.iter().map(|e| json!({"name": e.name, "host": e.host, "port": e.port})).collect::<Vec<_>>()}))
        .collect();
    let topics: Vec<Value> = image
        .topics
        .values()
        .map(|t| {
            json!({
                "name": t.name,
                "id": base64_url(t.id.as_bytes()),
                "partitions": t.partitions.values().map(|p| json!({
                    "partition": p.partition,
                    "replicas": p.replicas,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "isr": p.isr,
                    "partition_epoch": p.partition_epoch,
                    "controller_epoch": controller_epoch,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "cluster_id": image.cluster_id,
        "controller": broker.active_controller_id(),
        "controller_epoch": controller_epoch,
        "brokers": brokers,
        "topics": topics,
    })
}
