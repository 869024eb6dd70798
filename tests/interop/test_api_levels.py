"""Kafka 4.x API levels (issue 12): the advertised version table, and librdkafka's
0011_produce_batch defect — every invalid record of a batch is reported on its own (Produce
v8+ `record_errors`, KIP-467), so exactly the keyless records of a batch to a compacted topic
fail with INVALID_RECORD and the others with librdkafka's _INVALID_DIFFERENT_RECORD."""

from __future__ import annotations

import socket
import subprocess
import struct

from confluent_kafka import KafkaError, Producer

from clients import OP_TIMEOUT, ck_conf, create_topic, unique_topic
from harness import RUNNEL_BIN

API_VERSIONS = 18

# (api key, min, max) a Kafka 4.x broker serves and Runnel advertises.
KAFKA_4X = {
    0: (3, 13),    # Produce
    1: (4, 18),    # Fetch (v18: KIP-1166's replica high-watermark, ignored as Kafka's broker does)
    2: (1, 10),    # ListOffsets
    3: (0, 13),    # Metadata (v0-3 deprecated, kept by 4.x)
    10: (0, 6),    # FindCoordinator
    11: (0, 9),    # JoinGroup
    13: (0, 5),    # LeaveGroup
    8: (2, 10),    # OffsetCommit (v9: KIP-848 member epochs, v10: topic ids)
    9: (1, 10),    # OffsetFetch (v10: topic ids)
    15: (0, 6),    # DescribeGroups
    18: (0, 4),    # ApiVersions
    20: (1, 6),    # DeleteTopics
    22: (0, 6),    # InitProducerId (v6: KIP-939, refused as with two-phase commit off)
    55: (0, 2),    # DescribeQuorum
    57: (0, 2),    # UpdateFeatures
    60: (0, 2),    # DescribeCluster
    69: (0, 1),    # ConsumerGroupDescribe
    71: (0, 0),    # GetTelemetrySubscriptions
    72: (0, 0),    # PushTelemetry
    74: (0, 1),    # ListConfigResources
    66: (0, 2),    # ListTransactions (v2: KIP-1152's transactional id pattern)
}


def _api_versions_v0(broker):
    with socket.create_connection((broker.host, broker.port), timeout=5) as s:
        client_id = b"api-levels"
        payload = struct.pack(">hhih", API_VERSIONS, 0, 5, len(client_id)) + client_id
        s.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _recv(s, 4))[0]
        body = _recv(s, size)
    corr, err, n = struct.unpack_from(">ihi", body, 0)
    assert (corr, err) == (5, 0)
    apis = {}
    for i in range(n):
        k, lo, hi = struct.unpack_from(">hhh", body, 10 + 6 * i)
        apis[k] = (lo, hi)
    return apis


def _recv(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def test_kafka_4x_levels_are_advertised(broker):
    apis = _api_versions_v0(broker)
    for key, levels in KAFKA_4X.items():
        assert apis.get(key) == levels, f"API {key}: {apis.get(key)} != {levels}"


def test_invalid_records_fail_one_by_one(broker):
    """librdkafka 0011_produce_batch: 100 records in one batch, 10 without a key, to a compacted
    topic: 10 INVALID_RECORD, the other 90 fail as collateral, nothing is stored."""
    topic = create_topic(broker.bootstrap, unique_topic("keyless"), config={"cleanup.policy": "compact"})
    p = Producer(ck_conf(broker.bootstrap, **{
        "linger.ms": 1000, "batch.num.messages": 1000, "message.timeout.ms": 15000,
        "enable.idempotence": False, "retries": 0,
    }))
    errors = []

    def report(err, msg):
        errors.append(err.code() if err is not None else None)

    for i in range(100):
        key = None if i % 10 == 3 else f"k{i}".encode()
        p.produce(topic, value=b"v", key=key, partition=0, on_delivery=report)
    assert p.flush(OP_TIMEOUT + 5) == 0
    assert len(errors) == 100
    invalid = sum(1 for e in errors if e == KafkaError.INVALID_RECORD)
    assert invalid == 10, f"INVALID_RECORD for {invalid} records: {errors}"
    assert all(e is not None for e in errors), "the batch is refused as a whole"


def test_features_describe_as_kafka_features_sh(broker):
    out = subprocess.run(
        [RUNNEL_BIN, "features", "--bootstrap-server", broker.bootstrap, "describe"],
        capture_output=True, timeout=30, check=True,
    ).stdout.decode().splitlines()
    names = [line.split("\t")[0] for line in out]
    assert names == ["Feature: group.version", "Feature: kraft.version",
                     "Feature: metadata.version", "Feature: transaction.version"], out
    mv = out[2].split("\t")
    assert mv[1:4] == ["SupportedMinVersion: 3.3-IV3", "SupportedMaxVersion: 4.0-IV3",
                       "FinalizedVersionLevel: 4.0-IV3"], out
    assert out[0].split("\t")[3] == "FinalizedVersionLevel: 1"
    # KIP-890 part 2: a new cluster is at transaction.version 2, as Kafka 4.0's.
    assert out[3].split("\t")[1:4] == ["SupportedMinVersion: 0", "SupportedMaxVersion: 2",
                                       "FinalizedVersionLevel: 2"]
