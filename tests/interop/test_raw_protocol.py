"""Raw sockets: framing, ApiVersions negotiation (spec K.1, K.2), and garbage input that must
close only its own connection while a real producer on another connection keeps working."""

from __future__ import annotations

import random
import socket
import struct
import threading

import pytest
from confluent_kafka import Producer

from clients import DeliveryLog, OP_TIMEOUT, ck_conf, create_topic, kcat, unique_topic
from harness import wait_until

API_VERSIONS = 18


def _connect(broker):
    s = socket.create_connection((broker.host, broker.port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _header_v1(api_key, version, corr, client_id=b"interop-raw"):
    return struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id


def _frame(payload):
    return struct.pack(">i", len(payload)) + payload


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def _recv_frame(s):
    (size,) = struct.unpack(">i", _recv_exact(s, 4))
    assert 0 < size < 1 << 20, size
    return _recv_exact(s, size)


def _parse_api_versions_v0_layout(body):
    corr, err, n = struct.unpack_from(">ihi", body, 0)
    off = 10
    apis = {}
    for _ in range(n):
        k, lo, hi = struct.unpack_from(">hhh", body, off)
        off += 6
        apis[k] = (lo, hi)
    return corr, err, apis, off


def test_api_versions_v0(broker):
    with _connect(broker) as s:
        s.sendall(_frame(_header_v1(API_VERSIONS, 0, 7)))
        corr, err, apis, end = _parse_api_versions_v0_layout(_recv_frame(s))
    assert (corr, err) == (7, 0)
    for key in (0, 1, 2, 3, 18, 19, 20):  # Produce Fetch ListOffsets Metadata ApiVersions Create/DeleteTopics
        assert key in apis, f"API {key} not advertised: {sorted(apis)}"
        assert apis[key][0] <= apis[key][1]
    assert apis[API_VERSIONS][1] >= 3
    assert apis[0][0] <= 3 <= apis[0][1], "Produce v3 (record batch v2) must be supported"


def _uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _compact_str(b):
    return _uvarint(len(b) + 1) + b


def test_api_versions_v3_flexible(broker):
    req = (_header_v1(API_VERSIONS, 3, 11) + b"\x00"  # header v2: empty tagged fields
           + _compact_str(b"interop") + _compact_str(b"1.0") + b"\x00")
    with _connect(broker) as s:
        s.sendall(_frame(req))
        body = _recv_frame(s)
    # response header is v0 even for v3 (KIP-511): correlation id, then error_code directly
    corr, err = struct.unpack_from(">ih", body, 0)
    assert (corr, err) == (11, 0)
    n = body[6] - 1  # compact array length (fits one byte for < 127 APIs)
    assert 7 <= n < 127
    off = 7
    keys = []
    for _ in range(n):
        k, lo, hi = struct.unpack_from(">hhh", body, off)
        assert body[off + 6] == 0, "per-API tagged fields expected empty"
        keys.append(k)
        off += 7
    assert API_VERSIONS in keys
    off += 4  # throttle_time_ms
    # the top-level tagged-field section: count, then (tag, size, bytes) each; nothing after it
    n_tags, off = _read_uvarint(body, off)
    tags = []
    for _ in range(n_tags):
        tag, off = _read_uvarint(body, off)
        size, off = _read_uvarint(body, off)
        tags.append(tag)
        off += size
    assert off == len(body), f"v3 response has {len(body) - off} bytes after its tagged fields {tags}"


def _read_uvarint(buf, off):
    n = shift = 0
    while True:
        b = buf[off]
        off += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, off


def test_api_versions_unsupported_version_answers_v0_layout(broker):
    req = (_header_v1(API_VERSIONS, 127, 99) + b"\x00"
           + _compact_str(b"interop") + _compact_str(b"1.0") + b"\x00")
    with _connect(broker) as s:
        s.sendall(_frame(req))
        corr, err, apis, end = _parse_api_versions_v0_layout(_recv_frame(s))
    assert corr == 99
    assert err == 35, "UNSUPPORTED_VERSION"
    assert API_VERSIONS in apis and apis[API_VERSIONS][1] >= 3


def test_pipelined_requests_answered_in_order(broker):
    with _connect(broker) as s:
        s.sendall(b"".join(_frame(_header_v1(API_VERSIONS, v, corr))
                           for corr, v in [(1, 0), (2, 1), (3, 2), (4, 0)]))
        corrs = [struct.unpack_from(">i", _recv_frame(s))[0] for _ in range(4)]
    assert corrs == [1, 2, 3, 4]


# ---- garbage -----------------------------------------------------------------------------------

def _garbage_cases():
    rng = random.Random(1234)
    random_body = bytearray(rng.randbytes(64))
    random_body[0:2] = b"\x7f\xf0"  # no such API key
    return {
        # a well-framed request whose header names no API
        "random_payload": (_frame(bytes(random_body)), True),
        # 4 KiB of noise without framing (first int32 decides what the broker waits for)
        "random_stream": (rng.randbytes(4096), True),
        # a size far beyond socket.request.max.bytes: must close without waiting for the body
        "huge_length": (struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16, False),
        "negative_length": (struct.pack(">i", -5) + b"\x00" * 16, False),
        # a frame cut short, then the client half-closes
        "truncated_frame": (struct.pack(">i", 100) + _header_v1(3, 9, 1)[:6], True),
        # a known API (Metadata v9, flexible) whose body is nonsense
        "bad_body": (_frame(_header_v1(3, 9, 5) + b"\x00" + b"\xff" * 40), True),
        # ApiVersions with a non-compact (garbage) client software name length
        "bad_api_versions": (_frame(_header_v1(API_VERSIONS, 3, 6) + b"\x00" + b"\xff\xff\xff\xff\x0f"),
                             True),
    }


GARBAGE = _garbage_cases()


def _assert_closed_by_broker(s, timeout=10.0):
    """The broker closes the connection (EOF or reset) within `timeout`. An error response
    before the close is tolerated; a connection left open is not."""
    s.settimeout(timeout)
    received = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return received
            received += chunk
            if len(received) > 1 << 20:
                raise AssertionError("broker keeps sending data in answer to garbage")
    except (ConnectionResetError, BrokenPipeError):
        return received
    except socket.timeout:
        raise AssertionError(f"broker kept the connection open {timeout}s after garbage "
                             f"(received {len(received)} bytes)") from None


@pytest.fixture
def busy_producer(broker):
    """A confluent producer, connected and producing before the garbage arrives."""
    t = create_topic(broker.bootstrap, unique_topic("garbage"), 1)
    p = Producer(ck_conf(broker.bootstrap, **{"linger.ms": 1, "message.timeout.ms": 10000}))
    log = DeliveryLog()
    for i in range(10):
        p.produce(t, value=b"before-%d" % i, on_delivery=log)
    assert p.flush(OP_TIMEOUT) == 0 and len(log.acked) == 10 and not log.errors, log.errors
    return t, p, log


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_garbage_closes_only_that_connection(broker, busy_producer, case):
    t, p, log = busy_producer
    data, half_close = GARBAGE[case]
    # keep producing on the established connection while the garbage is sent
    stop = threading.Event()

    def keep_producing():
        i = 0
        while not stop.is_set():
            try:
                p.produce(t, value=b"during-%d" % i, on_delivery=log)
                i += 1
            except BufferError:
                pass
            p.poll(0.005)

    th = threading.Thread(target=keep_producing, daemon=True)
    th.start()
    try:
        with _connect(broker) as s:
            try:
                s.sendall(data)
                if half_close:
                    s.shutdown(socket.SHUT_WR)
            except (ConnectionResetError, BrokenPipeError):
                pass  # already closed by the broker: fine
            _assert_closed_by_broker(s)
    finally:
        stop.set()
        th.join(10)
    n_before = len(log.acked)
    for i in range(20):
        p.produce(t, value=b"after-%d" % i, on_delivery=log)
    assert p.flush(OP_TIMEOUT) == 0
    assert not log.errors, f"the producer's records failed: {log.errors[:3]}"
    assert len(log.acked) >= n_before + 20
    assert broker.alive()
    # a brand-new client still gets served
    wait_until(lambda: kcat("-b", broker.bootstrap, "-L", "-t", t, timeout=10).returncode == 0, 10,
               desc="kcat -L after garbage")
