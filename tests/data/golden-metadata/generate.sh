#!/usr/bin/env bash
# Writes a metadata log with a real broker, for tests/data/golden-metadata/<name>/.
#   generate.sh RUNNEL_BIN OUT_DIR [PYTHON]
# (PYTHON: an interpreter with confluent-kafka, default target/interop-venv/bin/python, for the
# idempotent producer whose InitProducerId makes the controller hand out a producer-id block.)
# Runs one node of each metadata backend (the single-node file log; a one-voter Raft quorum),
# performs the same admin history on both (topics with configs, a partition increase, a
# deletion, dynamic broker configs, an idempotent producer's id block), stops them cleanly and
# copies their metadata directories to OUT_DIR/file-log/ and OUT_DIR/raft/. The committed copies
# are what `golden_metadata` tests replay: a later build must keep reading them.
set -euo pipefail
BIN=$1
OUT=$2
PYTHON=${3:-$(dirname "$0")/../../../target/interop-venv/bin/python}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

history() {
  local bs=$1
  "$BIN" topics --bootstrap-server "$bs" --create --topic golden-a --partitions 3 --replication-factor 1 \
    --config cleanup.policy=compact --config retention.ms=3600000
  "$BIN" topics --bootstrap-server "$bs" --create --topic golden-b --partitions 1 --replication-factor 1
  "$BIN" topics --bootstrap-server "$bs" --create --topic golden-gone --partitions 2 --replication-factor 1
  "$BIN" topics --bootstrap-server "$bs" --alter --topic golden-b --partitions 4
  "$BIN" topics --bootstrap-server "$bs" --delete --topic golden-gone
  "$BIN" configs --bootstrap-server "$bs" --alter --entity-type brokers --entity-default \
    --add-config log.retention.ms=7200000
  "$BIN" configs --bootstrap-server "$bs" --alter --entity-type topics --entity-name golden-b \
    --add-config max.message.bytes=2000000
  printf 'k1:v1\nk2:v2\n' | "$BIN" produce --bootstrap-server "$bs" --topic golden-b \
    --property parse.key=true --property key.separator=: >/dev/null
  "$PYTHON" - "$bs" <<'PY'
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "enable.idempotence": True})
p.produce("golden-b", key=b"k3", value=b"v3")
assert p.flush(30) == 0
PY
}

run_node() { # run_node NAME EXTRA_ARGS...
  local name=$1; shift
  local port; port=$(free_port)
  "$BIN" broker --node-id 1 --listen "127.0.0.1:$port" --data-dir "$WORK/$name" "$@" \
    >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local pid=$!
  for _ in $(seq 1 300); do
    grep -q "listening on" "$WORK/$name.out" 2>/dev/null && break
    sleep 0.1
  done
  history "127.0.0.1:$port"
  kill -TERM "$pid"
  wait "$pid" || true
}

run_node file-log
qport=$(free_port)
run_node raft --controller-quorum-voters "1@127.0.0.1:$qport" --controller-listen "127.0.0.1:$qport"

mkdir -p "$OUT/file-log" "$OUT/raft"
cp "$WORK/file-log/metadata/metadata.log" "$OUT/file-log/"
cp -r "$WORK/raft/metadata-quorum/." "$OUT/raft/"
ls -la "$OUT/file-log" "$OUT/raft"
