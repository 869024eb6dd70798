"""Fixtures: a shared broker for the cheap tests, and a factory for brokers with their own data
directory and `--override k=v` settings (restart / kill -9 tests).

When a test fails, the tail of the log of every broker it used is added to the report, and a
broker that died during a test (without the test stopping it) is reported as an error.
"""

from __future__ import annotations

import atexit

import pytest

from harness import RUNNEL_BIN, Broker

atexit.register(Broker.kill_all_leftovers)

_USED = pytest.StashKey[list]()


def _use(request, broker):
    request.node.stash.setdefault(_USED, []).append(broker)


def pytest_report_header(config):
    import confluent_kafka
    import kafka
    from clients import KCAT
    return [
        f"runnel binary: {RUNNEL_BIN}",
        f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]}), "
        f"kafka-python {kafka.__version__}, kcat: {KCAT}",
    ]


@pytest.fixture(scope="session")
def _shared_broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared-broker")
    b = Broker(root / "data", root / "broker.log", name="shared-broker")
    yield b
    b.stop()


@pytest.fixture
def broker(_shared_broker, request, tmp_path_factory):
    """The session's default-config broker. If an earlier test killed it, a fresh one replaces
    it (on a new data dir) so one crash does not cascade into every later test."""
    b = _shared_broker
    if not b.alive():
        if b.starts > 0:
            root = tmp_path_factory.mktemp("shared-broker")
            b.data_dir, b.log_path = root / "data", root / "broker.log"
        b.start()
    _use(request, b)
    return b


@pytest.fixture
def broker_factory(tmp_path, request):
    """make(overrides={...}, data_dir=None, extra_args=(), start=True) -> a Broker with its own
    data dir, started unless start=False."""
    made = []

    def make(overrides=None, data_dir=None, name=None, extra_args=(), start=True):
        i = len(made)
        b = Broker(data_dir or tmp_path / f"data{i}", tmp_path / f"broker{i}.log",
                   overrides=overrides, name=name or f"broker{i}", extra_args=extra_args)
        made.append(b)
        _use(request, b)
        return b.start() if start else b

    yield make
    for b in made:
        b.stop()


@pytest.fixture(autouse=True)
def _broker_must_survive(request):
    yield
    dead = [b for b in request.node.stash.get(_USED, []) if not b.expected_down and not b.alive()]
    for b in dead:
        b.expected_down = True
        b.last_returncode = b.proc.returncode
    if dead:
        pytest.fail("broker died during the test:\n" + "\n".join(
            f"{b.describe()}\n--- log tail ---\n{b.log_tail(80)}" for b in dead), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for b in item.stash.get(_USED, []):
            rep.sections.append((f"runnel log: {b.describe()}", b.log_tail(80)))
