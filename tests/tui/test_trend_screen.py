"""The TREND column on the live screen (issue 33): a sparkline and a
verdict per stack, the header's "growing ... in N", D to sort by the
trend's rate, g to show only growing stacks."""
import os
import time

from ymlib import BUILD, Target, run_tests
from test_screen import Screen, rows_of

PROG = os.path.join(BUILD, "progs", "trendprog")


def test_trend_column_sort_and_growing_only():
    # Slots of 200 ms: 60 of them in 12 s.  A leak, a cache, a churn.
    # As in test_trend.py: the cache fills in the first tenth of the
    # window (over a sixth its line has an R^2 of 0.35 before noise, not
    # far enough below the rule's 0.6), and at a mean interval of 64 KiB
    # the leak's 24 MiB are about 340 samples and the cache's 16 MiB
    # about 200 entries sampled (31 at the default 512 KiB), so "in 1"
    # does not hang on a few samples.
    t = Target([os.path.join(PROG), "2048", "16", "1.2", "4"],
               env={"YM_TREND_SLOT_MS": "200", "YM_SEED": "9",
                    "YM_SAMPLE_RATE": "65536"})
    time.sleep(12)
    s = Screen(t.pid, cols=140, rows=30)
    try:
        s.wait(r"TREND")
        s.wait(r"growing \S+ \S+ in 1")   # the header
        s.keys("D")
        s.wait(r"leak_site")
        rows = rows_of(s.text())
        assert "leak_site" in rows[0] and " grow " in rows[0], s.text()
        assert not any(" grow " in r for r in rows[1:]), s.text()
        s.keys("g")
        s.wait(r"only growing stacks")
        end = time.time() + 10
        while time.time() < end:
            rows = [r for r in rows_of(s.text()) if r.strip()]
            if len(rows) == 1:
                break
            time.sleep(0.1)
        assert len(rows) == 1 and "leak_site" in rows[0], s.text()
        s.keys("g")
        s.wait(r"all stacks")
    finally:
        s.close()
        t.kill()


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
