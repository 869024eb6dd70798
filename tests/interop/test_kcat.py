"""kcat (Debian's 1.7.1, linking librdkafka 2.0.2): metadata listing, produce and consume.

librdkafka 2.0.2 fails to parse an ApiVersions v3 response that carries the (default-valued)
tagged fields SupportedFeatures/FinalizedFeatures ("Read underflow") and then falls back to
older protocol versions or disconnects; these tests catch that regression.
"""

from __future__ import annotations

import json
import re

import pytest

from clients import (
    KCAT,
    create_topic,
    kcat,
    kcat_consume,
    kcat_errors,
    kp_consume_all,
    unique_topic,
)

def test_kcat_version_is_known():
    # Not skipped when kcat is missing: the librdkafka 2.0.2 regression check must run.
    assert KCAT, "kcat is not installed (scripts/test installs Debian's kcat with apt-get)"
    out = kcat("-V").stdout.decode()
    assert re.search(r"librdkafka \d+\.\d+\.\d+", out), out


def test_kcat_apiversions_v3_parses(broker):
    cp = kcat("-b", broker.bootstrap, "-L", "-d", "protocol,broker")
    err = cp.stderr.decode(errors="replace")
    assert "underflow" not in err.lower(), _grep(err, "underflow")
    assert "parse failure" not in err.lower(), _grep(err, "parse failure")
    assert "Received ApiVersionResponse (v3" in err, (
        "librdkafka did not get a v3 ApiVersions answer:\n" + _grep(err, "ApiVersion"))
    assert not kcat_errors(cp.stderr), kcat_errors(cp.stderr)


def _grep(text, word):
    return "\n".join(line for line in text.splitlines() if word.lower() in line.lower())[-3000:]


def test_kcat_metadata_listing(broker):
    t = create_topic(broker.bootstrap, unique_topic("kcatmd"), 3)
    cp = kcat("-b", broker.bootstrap, "-L", "-J")
    assert not kcat_errors(cp.stderr), kcat_errors(cp.stderr)
    md = json.loads(cp.stdout)
    assert [(b["id"], b["name"]) for b in md["brokers"]] == [(1, f"127.0.0.1:{broker.port}")]
    assert md.get("controllerid") == 1
    topics = {x["topic"]: x for x in md["topics"]}
    assert t in topics, sorted(topics)
    parts = sorted(topics[t]["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in parts] == [0, 1, 2]
    for p in parts:
        assert p["leader"] == 1
        assert [r["id"] for r in p["replicas"]] == [1]
        assert [r["id"] for r in p["isrs"]] == [1]

    # plain-text listing of a single topic
    out = kcat("-b", broker.bootstrap, "-L", "-t", t).stdout.decode()
    assert f'topic "{t}" with 3 partitions' in out, out
    assert f"broker 1 at 127.0.0.1:{broker.port}" in out, out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_then_consume(broker, codec):
    t = create_topic(broker.bootstrap, unique_topic(f"kcatp-{codec}"), 1)
    lines = [f"key{i}:value {i} " + "y" * (i % 50) for i in range(100)]
    cp = kcat("-b", broker.bootstrap, "-P", "-t", t, "-p", "0", "-K:", "-z", codec,
              "-X", "acks=all", input=("\n".join(lines) + "\n").encode())
    assert not kcat_errors(cp.stderr), kcat_errors(cp.stderr)

    assert kcat_consume(broker.bootstrap, t) == lines
    # offsets and partition as seen by kcat itself
    meta = kcat_consume(broker.bootstrap, t, fmt="%p/%o\\n")
    assert meta == [f"0/{i}" for i in range(100)]

    got = kp_consume_all(broker.bootstrap, t)
    assert [f"{k.decode()}:{v.decode()}" for _, k, v, _ in got[0]] == lines


def test_kcat_consume_from_offset_and_count(broker):
    t = create_topic(broker.bootstrap, unique_topic("kcatoff"), 1)
    kcat("-b", broker.bootstrap, "-P", "-t", t, "-p", "0",
         input="".join(f"m{i}\n" for i in range(20)).encode())
    out = kcat("-b", broker.bootstrap, "-C", "-t", t, "-p", "0", "-o", "15", "-e", "-q",
               "-f", "%o:%s\\n").stdout.decode().splitlines()
    assert out == [f"{i}:m{i}" for i in range(15, 20)]
    out = kcat("-b", broker.bootstrap, "-C", "-t", t, "-p", "0", "-o", "-3", "-e", "-q",
               "-f", "%s\\n").stdout.decode().splitlines()
    assert out == ["m17", "m18", "m19"], "relative offset -3 from the end"
