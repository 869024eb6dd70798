//! A broker of a metadata quorum serves clients only once the controller unfenced it, as
//! Kafka's `BrokerServer` waits for "the broker to be unfenced" before it enables request
//! processing. Before, `start` returned right after the registration: a client's first
//! Metadata could name no controller (-1, no live broker), and librdkafka's admin client then
//! waits for a broker state change that never comes (a CreateTopics right after startup timed
//! out "waiting for controller" in CI).

mod support;

use support::InProcessBroker;

fn free_port() -> u16 {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    socket.local_addr().expect("local address").port()
}

#[test]
fn a_one_voter_quorum_node_is_unfenced_and_its_own_controller_when_start_returns() {
    let controller = free_port();
    let voters = format!("controller.quorum.voters=1@127.0.0.1:{controller}");
    let listeners =
        format!("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{controller}");
    let broker = InProcessBroker::start(&[
        "process.roles=broker,controller",
        "controller.listener.names=CONTROLLER",
        &voters,
        &listeners,
    ]);
    let image = broker.broker.image();
    let registration = image.brokers.get(&1).expect("node 1 registered");
    assert!(
        !registration.fenced,
        "fenced when start returned: {registration:?}"
    );
    assert_eq!(broker.broker.controller_id(), 1);
}
