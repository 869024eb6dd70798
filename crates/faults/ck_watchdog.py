"""A deadline for the blocking librdkafka calls of the consume-transform-produce processor.

librdkafka's transactional calls take a timeout, but one can outlive it for good: known case 9
of docs/faults.md. `send_offsets_to_transaction` waits without a deadline for its
TxnOffsetCommit (confluentinc/librdkafka#5456: the coordinator request's timeout is never
checked), and that request waits for the cached group coordinator to come up; when a Metadata
answer leaves that broker out (it is fenced, as Kafka's `getAliveBrokerNodes` leaves fenced
brokers out), librdkafka decommissions its handle but keeps it cached as coordinator, so it
never comes up and nothing asks for a new coordinator (confluentinc/librdkafka#5511). A
process stuck there never commits, never fails and never exits.

`Watchdog.call(name, timeout_s, fn)` runs `fn()`; if it has not returned `grace` seconds after
its own timeout, `on_stuck(name)` runs once, from the watchdog's thread, with the watchdog's
lock held (so nothing the caller does under `Watchdog.lock` interleaves with it). The
processor reports the stuck transaction and exits there; the harness starts a new process,
whose `init_transactions` fences this one.
"""

import threading
import time


class Watchdog:
    def __init__(self, on_stuck, grace=15.0, tick=0.2):
        self._on_stuck = on_stuck
        self._grace = grace
        self.lock = threading.Lock()
        self._armed = None  # (name, monotonic deadline) of the call in progress
        self._fired = False
        threading.Thread(target=self._watch, args=(tick,), daemon=True).start()

    def call(self, name, timeout_s, fn):
        with self.lock:
            self._armed = (name, time.monotonic() + timeout_s + self._grace)
        try:
            return fn()
        finally:
            with self.lock:
                self._armed = None

    def fired(self):
        with self.lock:
            return self._fired

    def _watch(self, tick):
        while True:
            time.sleep(tick)
            with self.lock:
                armed = self._armed
                if self._fired or armed is None or time.monotonic() < armed[1]:
                    continue
                self._fired = True
                self._on_stuck(armed[0])
            return
