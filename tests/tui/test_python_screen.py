"""Python frames on the live screen (ymtop(1), PYTHON): a Stacks row is the
Python function with its directory, file and line; the Functions view
has one row a Python function, whatever lines of it allocated."""
import os
import sys

from ymlib import Target, run_tests
from test_screen import Screen, rows_of, say

KEEPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "integration", "py", "keeper.py")
KEEPER = os.path.normpath(KEEPER)
DEBIAN = "/usr/bin/python3.11"


def line_of(text):
    return [i + 1 for i, l in enumerate(open(KEEPER).read().splitlines())
            if text in l][0]


def test_python_rows_and_one_function_row():
    t = Target([DEBIAN, KEEPER], env={"YM_SAMPLE_RATE": "8192",
                                      "PYTHONMALLOC": "malloc"})
    s = Screen(t.pid, cols=130, rows=40)
    try:
        say(t, "small 60000", "done")
        ln = line_of("out[i] = (i, str(i) * 3)")
        text = s.wait(r"keep_small \(py/keeper\.py:%d\)" % ln, timeout=20)
        # keep_small allocates at two lines (the tuple and string at one,
        # the range's ints at its for): two stack rows, one function row.
        s.keys("Tab")
        text = s.wait(r"keep_small \(py/keeper\.py\)", timeout=20)
        rows = [r for r in rows_of(text) if "keep_small" in r]
        assert len(rows) == 1, text
    finally:
        s.close()
        t.finish()


def test_attach_says_pymalloc_hook_pending_until_it_runs():
    # Started without the agent; its main thread waits in a read of
    # stdin (GIL released), so the wrapper's installer stays queued.
    from ymlib import Plain, attach, rerun_isolated
    if rerun_isolated(__file__, "test_attach_says_pymalloc_hook_pending_until_it_runs"):
        return
    t = Plain([DEBIAN, KEEPER], env={"YM_SAMPLE_RATE": "8192"})
    s = None
    try:
        attach(t.pid)
        s = Screen(t.pid, cols=170, rows=40)
        s.wait(r"pymalloc hook pending", timeout=20)
        say(t, "small 60000", "done")
        ln = line_of("out[i] = (i, str(i) * 3)")
        text = s.wait(r"keep_small \(py/keeper\.py:%d\)" % ln, timeout=20)
        assert "pymalloc hook pending" not in text, text
    finally:
        if s:
            s.close()
        t.finish()


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
