"""The offset and log-dir tools against a real broker, in the output formats of Kafka's
kafka-get-offsets.sh, kafka-delete-records.sh and kafka-log-dirs.sh."""

from __future__ import annotations

import json
import subprocess

from clients import ck_produce, create_topic, unique_topic
from harness import RUNNEL_BIN

BASE_TS = 1_700_000_000_000


def tool(*args, check=True):
    return subprocess.run([RUNNEL_BIN, *args], capture_output=True, text=True, timeout=60,
                          check=check)


def two_partition_topic(bootstrap):
    """Partition 0 holds 5 records (timestamps BASE_TS + 1000*i), partition 1 holds 2."""
    t = create_topic(bootstrap, unique_topic("tools"), partitions=2)
    ck_produce(bootstrap, t, [(None, f"v{i}".encode()) for i in range(5)], partition=0,
               timestamps=[BASE_TS + 1000 * i for i in range(5)])
    ck_produce(bootstrap, t, [(None, b"w0"), (None, b"w1")], partition=1)
    return t


def test_get_offsets_by_time_and_filters(broker):
    t = two_partition_topic(broker.bootstrap)

    def offsets(*extra):
        out = tool("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", t, *extra)
        return out.stdout.splitlines()

    assert offsets() == [f"{t}:0:5", f"{t}:1:2"]
    assert offsets("--time", "-2") == [f"{t}:0:0", f"{t}:1:0"]
    assert offsets("--time", "earliest", "--partitions", "1") == [f"{t}:1:0"]
    assert offsets("--time", str(BASE_TS + 2500), "--partitions", "0") == [f"{t}:0:3"]
    # After the last timestamp there is no offset: the partition is left out, as Kafka does.
    assert offsets("--time", str(BASE_TS + 10**9), "--partitions", "0") == []
    # --topic is a whole-name regular expression.
    prefix = t[: t.rindex("-")]
    lines = tool("get-offsets", "--bootstrap-server", broker.bootstrap,
                 "--topic", prefix + "-.*").stdout.splitlines()
    assert f"{t}:0:5" in lines and f"{t}:1:2" in lines
    none = tool("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "no-such-.*",
                check=False)
    assert none.returncode != 0
    assert "Could not match any topic-partitions" in none.stderr


def test_delete_records_from_offset_json(broker, tmp_path):
    t = two_partition_topic(broker.bootstrap)
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 3},
                                               {"topic": t, "partition": 1, "offset": -1}],
                                "version": 1}))
    out = tool("delete-records", "--bootstrap-server", broker.bootstrap,
               "--offset-json-file", str(spec)).stdout
    assert f"partition: {t}-0\tlow_watermark: 3" in out, out
    assert f"partition: {t}-1\tlow_watermark: 2" in out, out
    earliest = tool("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", t,
                    "--time", "earliest").stdout.splitlines()
    assert earliest == [f"{t}:0:3", f"{t}:1:2"]

    spec.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 4},
                                               {"topic": t, "partition": 0, "offset": 4}]}))
    dup = tool("delete-records", "--bootstrap-server", broker.bootstrap,
               "--offset-json-file", str(spec), check=False)
    assert dup.returncode != 0 and f"duplicate topic partitions: {t}-0" in dup.stderr


def test_log_dirs_describe_reports_replica_sizes(broker):
    t = two_partition_topic(broker.bootstrap)
    out = tool("log-dirs", "--describe", "--bootstrap-server", broker.bootstrap,
               "--topic-list", t).stdout.splitlines()
    assert out[0] == "Querying brokers for log directories information"
    assert out[1] == "Received log directory information from brokers 1"
    doc = json.loads(out[2])
    assert doc["version"] == 1
    [b] = doc["brokers"]
    [d] = b["logDirs"]
    assert b["broker"] == 1 and d["error"] is None
    sizes = {p["partition"]: p for p in d["partitions"]}
    assert set(sizes) == {f"{t}-0", f"{t}-1"}
    assert sizes[f"{t}-0"]["size"] > sizes[f"{t}-1"]["size"] > 0
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in d["partitions"])
    bad = tool("log-dirs", "--describe", "--bootstrap-server", broker.bootstrap,
               "--broker-list", "7", check=False)
    assert bad.returncode != 0 and "do not exist from --broker-list: 7" in bad.stderr
