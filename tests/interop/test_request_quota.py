"""The request-time quota (KIP-124 `request_percentage`, issue 14): the share of one request
handler thread's time a client may use per quota window, measured as handler time.

* A client id limited to a tiny `request_percentage` sees throttle_time_ms > 0 on its Metadata
  responses and its request rate falls to about one request per quota window (the connection is
  muted for the throttle time, which Kafka bounds by one window), while another client id on the
  same broker is never throttled and keeps its rate.
* confluent-kafka's producer under the same quota gets throttle_time_ms (throttle_cb) in its
  Produce responses and still delivers everything.

Requests are sent on raw sockets so that the test, not a client library, counts them and reads
throttle_time_ms; the server's mute is what slows the throttled client down."""

from __future__ import annotations

import socket
import struct
import subprocess
import threading
import time

from confluent_kafka import Producer

from clients import OP_TIMEOUT, ck_conf, create_topic, unique_topic
from harness import RUNNEL_BIN, wait_until

# Three 1 s windows: a throttle is at most one window (1 s), so a throttled client manages about
# one request a second.
QUOTA_OVERRIDES = {"quota.window.num": "3", "quota.window.size.seconds": "1"}


def configs(broker, *args):
    out = subprocess.run(
        [RUNNEL_BIN, "configs", "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the broker")
        buf += chunk
    return buf


class MetadataClient:
    """Metadata v4 requests (throttle_time_ms is the first field of the v3+ response) on one
    connection with its own client id."""

    def __init__(self, bootstrap, client_id):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.client_id = client_id.encode()
        self.corr = 0

    def metadata(self):
        """One request; its throttle_time_ms."""
        self.corr += 1
        header = struct.pack(">hhih", 3, 4, self.corr, len(self.client_id)) + self.client_id
        body = struct.pack(">ib", -1, 0)  # all topics, no auto-creation
        payload = header + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _exact(self.sock, 4))
        corr, throttle_ms = struct.unpack_from(">ii", _exact(self.sock, size))
        assert corr == self.corr
        return throttle_ms

    def run_for(self, seconds):
        """Requests back to back for `seconds`: (requests per second, throttle times)."""
        throttles = []
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            throttles.append(self.metadata())
        return len(throttles) / (time.monotonic() - start), throttles

    def close(self):
        self.sock.close()


def limit(broker, client_id, percentage):
    configs(broker, "--entity-type", "clients", "--entity-name", client_id, "--alter",
            "--add-config", f"request_percentage={percentage}")
    wait_until(lambda: "request_percentage=" in configs(
        broker, "--entity-type", "clients", "--entity-name", client_id, "--describe"),
        desc="the quota is visible")


def test_a_client_over_its_request_percentage_is_throttled_and_others_are_not(broker_factory):
    b = broker_factory(overrides=QUOTA_OVERRIDES)
    # 0.0001 % of a thread is 1 us per second: every Metadata request exceeds it.
    limit(b, "greedy", "0.0001")

    polite = MetadataClient(b.bootstrap, "polite")
    greedy = MetadataClient(b.bootstrap, "greedy")
    try:
        free_rate, free_throttles = polite.run_for(1.5)
        assert set(free_throttles) == {0}
        assert free_rate > 20, f"unthrottled {free_rate:.1f} requests/s"

        # The greedy client and, at the same time, the polite one on another thread.
        polite_result = {}
        t = threading.Thread(target=lambda: polite_result.update(r=polite.run_for(3)))
        t.start()
        greedy_rate, greedy_throttles = greedy.run_for(3)
        t.join(timeout=30)
        polite_rate, polite_throttles = polite_result["r"]
        print(f"request_percentage=0.0001: throttled {greedy_rate:.2f} requests/s (throttles "
              f"{greedy_throttles} ms), others {polite_rate:.1f} requests/s")
        assert max(greedy_throttles) > 0, greedy_throttles
        # Kafka bounds a request-quota throttle by one quota window (1 s here).
        assert max(greedy_throttles) <= 1000, greedy_throttles
        # About one request per window; far below the unthrottled rate.
        assert greedy_rate < 3, f"throttled {greedy_rate:.2f} requests/s"
        assert greedy_rate < free_rate / 5
        assert set(polite_throttles) == {0}
        assert polite_rate > 20, f"unthrottled {polite_rate:.1f} requests/s"
    finally:
        polite.close()
        greedy.close()

    # Removing the quota lifts the throttle once the sampled window has passed.
    configs(b, "--entity-type", "clients", "--entity-name", "greedy", "--alter",
            "--delete-config", "request_percentage")
    again = MetadataClient(b.bootstrap, "greedy")
    try:
        wait_until(lambda: again.metadata() == 0 and again.metadata() == 0, timeout=15,
                   desc="greedy is no longer throttled")
    finally:
        again.close()


def test_a_producer_over_its_request_percentage_sees_throttle_time(broker_factory):
    b = broker_factory(overrides=QUOTA_OVERRIDES)
    topic = create_topic(b.bootstrap, unique_topic("rq"))
    limit(b, "busy-producer", "0.0001")
    throttles = []
    delivered = []
    p = Producer(ck_conf(b.bootstrap, **{
        "client.id": "busy-producer",
        "linger.ms": 0,
        "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
    }))
    for i in range(5):
        p.produce(topic, f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        p.flush(OP_TIMEOUT)
    p.poll(0)
    assert delivered == [None] * 5
    assert throttles and max(throttles) > 0, throttles
