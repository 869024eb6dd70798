//! The project's own producer writes one partition's batches in order (issue 11, known case 2).
//!
//! The fault campaign saw every new idempotent `runnel-client` producer fail its first
//! batches with OUT_OF_ORDER_SEQUENCE_NUMBER: each Produce request was a task that connected
//! and wrote by itself, so on a fresh connection a later batch could reach the broker first.
//! Requests are now written in the order they were made (`producer/sender.rs`).
//!
//! This test checks the property (per-partition offsets follow the send order, with fresh
//! connections to two of three leaders and no retries to hide a refused batch). It does not
//! reliably reproduce the race itself: that needs a connection slower to open than the next
//! request is to be made, which the campaign's proxies and load gave, and an idle loopback
//! rarely does (it passed on the old code here too). `scripts/faults` exercises it.

mod support;

use std::time::Duration;

use runnel_client::{Client, ClientConfig, Producer, ProducerConfig, ProducerRecord};
use support::cluster::{self, Cluster};

const RECORDS: usize = 300;
const PARTITIONS: i32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idempotent_producers_batches_reach_the_broker_in_sequence_order() {
    let cluster = Cluster::start(3, &[]);
    // RF 1 over three brokers: the producer, bootstrapped at one node, opens a fresh
    // connection to each other leader with its first batches in flight (where the race was).
    assert_eq!(
        cluster::create(&cluster.addr(0), "ordered", PARTITIONS, 1),
        0
    );
    // With no retries, a leader that has not applied the new topic yet would refuse the first
    // batch (UNKNOWN_TOPIC_OR_PARTITION, retriable in Kafka). A broker applies an image to its
    // replicas before it serves it in Metadata, so every node listing every leader is enough.
    for node in 0..3 {
        support::wait_until("every broker knows every leader of the topic", || {
            cluster::partition_states(&cluster.addr(node), "ordered").is_some_and(|ps| {
                ps.len() == PARTITIONS as usize && ps.iter().all(|p| p.leader >= 0)
            })
        });
    }
    for round in 0..3 {
        let client = Client::connect(ClientConfig::new(cluster.addr(0).as_str()))
            .await
            .unwrap();
        let config = ProducerConfig {
            idempotence: true,
            linger: Duration::ZERO,
            max_in_flight: 5,
            // An out-of-order batch must fail the test, not be retried into success.
            retries: 0,
            ..ProducerConfig::default()
        };
        let producer = Producer::new(client, config).await.unwrap();
        let mut deliveries = Vec::with_capacity(RECORDS);
        for i in 0..RECORDS {
            let partition = i32::try_from(i).unwrap() % PARTITIONS;
            let record =
                ProducerRecord::new("ordered", format!("r{round}-{i}")).with_partition(partition);
            deliveries.push((partition, producer.send(record).await.unwrap()));
        }
        let mut offsets: Vec<Vec<i64>> = vec![Vec::new(); 3];
        for (i, (partition, delivery)) in deliveries.into_iter().enumerate() {
            let metadata = delivery
                .wait()
                .await
                .unwrap_or_else(|e| panic!("round {round}, record {i}: {e}"));
            offsets[usize::try_from(partition).unwrap()].push(metadata.offset);
        }
        for (partition, offsets) in offsets.iter().enumerate() {
            assert!(
                offsets.windows(2).all(|w| w[0] < w[1]),
                "round {round}, partition {partition}: offsets follow the send order"
            );
        }
    }
}
