"""KIP-848 (`group.protocol=consumer`) groups under subscription churn, with librdkafka.

librdkafka's own 0045_subscribe_update "many updates" and 0045_resubscribe_with_regex cases,
reproduced at a smaller size: one member changes its subscription again and again and must
converge to exactly the partitions of its last subscription, never getting a fatal error; a
resubscribe from a literal topic to a regex plus a literal gets the literal topic first
(Kafka resolves regexes asynchronously).
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError

from clients import OP_TIMEOUT, admin, ck_conf, unique_topic, wait_topic_ready
from confluent_kafka.admin import NewTopic
from harness import wait_until

PARTITIONS = 4
# librdkafka's test waits 30 s per check; the broker's rebalance timeout is what bounds it.
CONVERGE_S = 30


class Member:
    """One consumer-protocol member; errors reported through error_cb are kept, fatal or not."""

    def __init__(self, bootstrap, group):
        self.errors = []
        self.c = Consumer(ck_conf(bootstrap, **{
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": self.errors.append,
        }))

    def fatal(self):
        return [e for e in self.errors if e.fatal() or e.code() == KafkaError.INVALID_REQUEST]

    def assigned(self):
        return sorted((tp.topic, tp.partition) for tp in self.c.assignment())

    def wait_assignment(self, expected, desc):
        def converged():
            self.c.poll(0.05)
            assert not self.fatal(), f"fatal error from the group coordinator: {self.fatal()}"
            return self.assigned() == expected

        wait_until(converged, timeout=CONVERGE_S, interval=0.01,
                   desc=f"{desc}: assignment {expected}, have {self.assigned()}")


def create_topics(bootstrap, names, partitions=PARTITIONS):
    adm = admin(bootstrap)
    futures = adm.create_topics([NewTopic(n, partitions, 1) for n in names],
                                operation_timeout=OP_TIMEOUT)
    for f in futures.values():
        f.result(OP_TIMEOUT)
    for n in names:
        wait_topic_ready(adm, n, partitions)


def expected_of(topics, partitions=PARTITIONS):
    return sorted((t, p) for t in topics for p in range(partitions))


@pytest.mark.timeout(600)
def test_many_subscription_updates_converge_without_fatal_errors(broker):
    """0045_subscribe_update "many updates" without its unsubscribes: subscribe to a sliding
    window of five topics, back to back, and check the assignment every fifth time.

    librdkafka's test also unsubscribes every seventh time right after subscribing. Against
    Runnel that hits a librdkafka race (v2.16): when the unsubscribe arrives while the
    cooperative revocation of the previous change is still running, the leave is sent from
    the steady state and the subscriptions made meanwhile are never applied, so the client
    never heartbeats again. Runnel answers a heartbeat within a millisecond (Kafka only after
    the group records are written), which makes that interleaving the common one. The
    unsubscribe/resubscribe part is covered at the protocol level by
    crates/runnel/tests/consumer_group_churn.rs."""
    topics = [unique_topic(f"churn{i}") for i in range(36)]
    create_topics(broker.bootstrap, topics)
    m = Member(broker.bootstrap, unique_topic("g-churn"))
    try:
        for i in range(len(topics)):
            window = topics[i:i + 5]
            m.c.subscribe(window)
            if i % 5 == 0 or i == len(topics) - 1:
                m.wait_assignment(expected_of(window), f"update {i}")
        assert not m.fatal()
    finally:
        m.c.close()


@pytest.mark.timeout(300)
def test_resubscribe_from_literal_to_regex_gets_the_literal_topic_first(broker):
    """0045_resubscribe_with_regex: after a literal subscription, subscribing to a regex plus a
    literal topic first yields the literal topic alone; the regex's topics follow once the
    coordinator has resolved it."""
    prefix = unique_topic("rgx")
    t1, t2, ta = f"{prefix}-regex1", f"{prefix}-regex2", unique_topic("lit-a")
    create_topics(broker.bootstrap, [t1, t2], partitions=4)
    create_topics(broker.bootstrap, [ta], partitions=2)
    m = Member(broker.bootstrap, unique_topic("g-rgx"))
    try:
        m.c.subscribe([t1])
        m.wait_assignment(expected_of([t1]), "literal")
        m.c.unsubscribe()
        m.wait_assignment([], "unsubscribed")
        # Every assignment step is recorded by the rebalance callback: sampling `assignment()`
        # between polls can miss the literal-only step when the regex resolves within one poll.
        steps = []
        m.c.subscribe([f"^{prefix}-regex.*", ta],
                      on_assign=lambda _c, tps: steps.append(
                          sorted((tp.topic, tp.partition) for tp in tps)))

        def both():
            m.c.poll(0.05)
            return m.assigned() == sorted(expected_of([t1, t2]) + expected_of([ta], 2))

        wait_until(both, timeout=CONVERGE_S, interval=0.01,
                   desc=f"regex + literal, assignment steps {steps}")
        non_empty = [a for a in steps if a]
        assert non_empty[0] == expected_of([ta], 2), f"first assignment step was {non_empty[0]}"
        assert not m.fatal()
    finally:
        m.c.close()
