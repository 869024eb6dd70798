"""Unit tests of ck_watchdog.py (run by crates/faults/tests/ck_watchdog.rs): a call that
outlives its timeout is reported once, one that returns in time never."""

import threading
import time
import unittest

from ck_watchdog import Watchdog


class WatchdogTest(unittest.TestCase):
    def test_a_call_that_never_returns_is_reported_once(self):
        reported = []
        fired = threading.Event()

        def on_stuck(name):
            reported.append(name)
            fired.set()

        wd = Watchdog(on_stuck, grace=0.2, tick=0.02)
        never = threading.Event()  # what librdkafka#5511 does: no answer, ever
        threading.Thread(target=lambda: wd.call("send_offsets_to_transaction", 0.1, never.wait),
                         daemon=True).start()
        self.assertTrue(fired.wait(5), "the stuck call was not reported within 5 s")
        time.sleep(0.2)
        self.assertEqual(reported, ["send_offsets_to_transaction"])
        self.assertTrue(wd.fired())
        never.set()

    def test_calls_that_return_in_time_are_never_reported(self):
        reported = []
        wd = Watchdog(reported.append, grace=0.1, tick=0.02)
        for _ in range(5):
            self.assertEqual(wd.call("consume", 0.1, lambda: time.sleep(0.05) or 7), 7)
        time.sleep(0.5)  # well past every deadline, with nothing armed
        self.assertEqual(reported, [])
        self.assertFalse(wd.fired())

    def test_an_exception_disarms_the_call(self):
        reported = []
        wd = Watchdog(reported.append, grace=0.05, tick=0.02)

        def fails():
            raise RuntimeError("abortable")

        with self.assertRaises(RuntimeError):
            wd.call("commit_transaction", 0.05, fails)
        time.sleep(0.3)
        self.assertEqual(reported, [])


if __name__ == "__main__":
    unittest.main()
