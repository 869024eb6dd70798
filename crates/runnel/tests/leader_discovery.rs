//! KIP-951 (leader discovery optimisations), on the wire: a Produce v10+ or Fetch v16+ answered
//! NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH) names the partition's current leader and
//! epoch and carries that leader's endpoint once in `node_endpoints`, so a client can move
//! without a Metadata round trip; older versions have no such fields and only the error.

mod support;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use support::cluster::{live_broker_ids, metadata, partition_states, topic_partitions, Cluster};
use support::{batch, wait_until, Wire};

use runnel_codes::{FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn produce(wire: &mut Wire, version: i16, topic: &str) -> ProduceResponse {
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(&[(None, "v")], Compression::None))),
            ])]);
    wire.call(ApiKey::Produce, version, &req)
}

/// The topic id (Fetch v13+ names topics by id), from Metadata v12.
fn topic_id(addr: &str, topic: &str) -> uuid::Uuid {
    let mut wire = Wire::connect(addr);
    let m: MetadataResponse = wire.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name(topic))),
        ])),
    );
    m.topics[0].topic_id
}

fn fetch(wire: &mut Wire, version: i16, topic: uuid::Uuid, epoch: i32) -> FetchResponse {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic_id(topic)
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_current_leader_epoch(epoch)
                .with_partition_max_bytes(1 << 20)])]);
    wire.call(ApiKey::Fetch, version, &req)
}

/// The (host, port) Metadata advertises for broker `id`.
fn advertised(addr: &str, id: i32) -> (String, i32) {
    let m = metadata(addr).expect("metadata");
    let b = m
        .brokers
        .iter()
        .find(|b| b.node_id.0 == id)
        .expect("leader is listed");
    (b.host.to_string(), b.port)
}

fn endpoint_of(endpoints: &[(i32, String, i32)], id: i32) -> Vec<(String, i32)> {
    endpoints
        .iter()
        .filter(|(n, _, _)| *n == id)
        .map(|(_, h, p)| (h.clone(), *p))
        .collect()
}

#[test]
fn a_non_leader_names_the_leader_and_its_endpoint() {
    let cluster = Cluster::start(3, &["auto.leader.rebalance.enable=false"]);
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(support::cluster::create(&cluster.addr(0), "d", 1, 1), 0);
    wait_until("every broker knows the leader", || {
        (0..3).all(|i| {
            topic_partitions(&cluster.addr(i), "d").is_some_and(|p| p.len() == 1 && p[0].0 > 0)
        })
    });
    let leader = topic_partitions(&cluster.addr(0), "d").unwrap()[0].0;
    let epoch = partition_states(&cluster.addr(0), "d").unwrap()[0].leader_epoch;
    let other = (1..=3).find(|&id| id != leader).unwrap();
    let other_addr = cluster.addr(cluster.index_of(other));
    let expected = advertised(&other_addr, leader);
    let id = topic_id(&other_addr, "d");
    let mut wire = Wire::connect(&other_addr);

    // Produce v10+: the error, the leader and epoch, the endpoint once.
    for version in [10, 11] {
        let resp = produce(&mut wire, version, "d");
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, NOT_LEADER_OR_FOLLOWER, "produce v{version}");
        assert_eq!(
            (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
            (leader, epoch),
            "produce v{version}"
        );
        let endpoints: Vec<_> = resp
            .node_endpoints
            .iter()
            .map(|e| (e.node_id.0, e.host.to_string(), e.port))
            .collect();
        assert_eq!(
            endpoint_of(&endpoints, leader),
            vec![expected.clone()],
            "v{version}"
        );
        assert_eq!(
            endpoints.len(),
            1,
            "only the leader's endpoint: {endpoints:?}"
        );
    }
    // Produce v9 has no such fields: only the error.
    let resp = produce(&mut wire, 9, "d");
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code,
        NOT_LEADER_OR_FOLLOWER
    );

    // Fetch v16+ from a broker that holds no replica.
    let resp = fetch(&mut wire, 16, id, epoch);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, NOT_LEADER_OR_FOLLOWER);
    assert_eq!(
        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
        (leader, epoch)
    );
    let endpoints: Vec<_> = resp
        .node_endpoints
        .iter()
        .map(|e| (e.node_id.0, e.host.to_string(), e.port))
        .collect();
    assert_eq!(endpoint_of(&endpoints, leader), vec![expected.clone()]);

    let leader_addr = cluster.addr(cluster.index_of(leader));
    let mut at_leader = Wire::connect(&leader_addr);
    let produced = produce(&mut at_leader, 9, "d");
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    let resp = fetch(&mut at_leader, 16, id, epoch);
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);
    assert!(resp.node_endpoints.is_empty(), "no hint without an error");
}

#[test]
fn a_fetch_with_an_old_epoch_is_fenced_and_told_the_new_one() {
    let mut cluster = Cluster::start(3, &["auto.leader.rebalance.enable=false"]);
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(support::cluster::create(&cluster.addr(0), "e", 1, 3), 0);
    wait_until("a leader with a full ISR", || {
        support::cluster::leader_and_isr(&cluster.addr(0), "e")
            .is_some_and(|(l, isr)| l > 0 && isr.len() == 3)
    });
    let old_leader = support::cluster::leader_and_isr(&cluster.addr(0), "e")
        .unwrap()
        .0;
    let old_epoch = partition_states(&cluster.addr(0), "e").unwrap()[0].leader_epoch;
    let stopped = cluster.index_of(old_leader);
    assert!(cluster.stop(stopped), "the leader shuts down cleanly");
    let survivor = (0..3).find(|&i| i != stopped).unwrap();
    wait_until("a new leader in a new epoch", || {
        partition_states(&cluster.addr(survivor), "e").is_some_and(|p| {
            p[0].leader_epoch > old_epoch && p[0].leader != old_leader && p[0].leader > 0
        })
    });
    let state = &partition_states(&cluster.addr(survivor), "e").unwrap()[0];
    let (leader, epoch) = (state.leader, state.leader_epoch);
    let leader_addr = cluster.addr(cluster.index_of(leader));
    let id = topic_id(&leader_addr, "e");
    let mut wire = Wire::connect(&leader_addr);
    wait_until("the new leader serves the new epoch", || {
        fetch(&mut wire, 16, id, epoch).responses[0].partitions[0].error_code == 0
    });
    let resp = fetch(&mut wire, 16, id, old_epoch);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, FENCED_LEADER_EPOCH);
    assert_eq!(
        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
        (leader, epoch)
    );
    let ids: Vec<i32> = resp.node_endpoints.iter().map(|e| e.node_id.0).collect();
    assert_eq!(ids, vec![leader]);
}
