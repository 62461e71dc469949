"""The PEAK column on the live screen (issue 20): sort key P, the agent's
peak of a site that gave everything back, and after m the peak since the
mark (the site's retained at the mark, raised when the agent's peak moves
past its value at the mark)."""
import os
import re
import sys

from ymlib import BUILD, Target
from test_screen import Screen, main, rows_of, say

PROG = os.path.join(BUILD, "progs", "peaks")


def row_of(text, name):
    for r in rows_of(text):
        if name in r:
            return r
    return None


def peak_cell(row):
    # RETAINED % GROWTH PEAK ...: the fourth figure.
    m = re.match(r"^\s*(\S+ \S+)\s+(\S+)\s+(-|\S+ \S+)\s+(\S+ \S+)", row)
    assert m, row
    return m.group(4)


def mib(cell):
    v, unit = cell.split()
    return float(v) * {"B": 1 / 1048576, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[unit]


def wait_row(s, name, pred, timeout=10):
    import time
    end = time.time() + timeout
    while time.time() < end:
        r = row_of(s.text(), name)
        if r and pred(r):
            return r
        time.sleep(0.1)
    raise AssertionError("no matching %s row:\n%s" % (name, s.text()))


def test_peak_column_sort_and_mark():
    t = Target([PROG], env={"YM_SAMPLE_RATE": "65536", "YM_SEED": "5"})
    s = Screen(t.pid, cols=130, rows=30)
    try:
        say(t, "hold 2", "ready")
        say(t, "grow 40", "ready")
        s.wait(r"PEAK")
        s.keys("P")
        s.wait(r"grow_site")
        # Sorted by peak: grow_site first, nothing retained (once a
        # refresh after the growth came), ~40 MiB peak.
        r = wait_row(s, "grow_site", lambda r: mib(peak_cell(r)) > 30 and
                     mib(" ".join(r.split()[:2])) < 1)
        assert "grow_site" in rows_of(s.text())[0], s.text()
        assert 30 < mib(peak_cell(r)) < 50, r
        # The mark: peaks since now, grow_site's is its retained (0).
        s.keys("m")
        s.wait(r"mark set")
        wait_row(s, "grow_site", lambda r: mib(peak_cell(r)) < 1)
        # A growth past the agent's peak is seen, between refreshes or not.
        say(t, "grow 60", "ready")
        r = wait_row(s, "grow_site", lambda r: mib(peak_cell(r)) > 45)
        assert mib(peak_cell(r)) < 75, r
    finally:
        s.close()
        t.finish()


def test_one_sample_peak_marked_and_ranked_below():
    """A churn of 64-byte blocks never has more than one live sample: its
    PEAK (one sample's weight, about the rate) is marked ? and sorts below
    the site that grew 8 MiB, which is not marked; its stack view says
    how many samples carry the peak and its error."""
    t = Target([PROG], env={"YM_SAMPLE_RATE": "65536", "YM_SEED": "3"})
    s = Screen(t.pid, cols=130, rows=30)
    try:
        say(t, "churn 200000", "ready")
        say(t, "grow 8", "ready")
        s.wait(r"PEAK")
        s.keys("P")
        r = wait_row(s, "churn_site", lambda r: peak_cell(r).startswith("?"))
        assert 60 <= mib(peak_cell(r)[1:]) * 1024 < 66, r
        g = row_of(s.text(), "grow_site")
        # (the TREND column may show "?": not known yet)
        assert g and not peak_cell(g).startswith("?") and "?" not in g.split()[0], s.text()
        names = [("grow" if "grow_site" in x else "churn" if "churn_site" in x
                  else "") for x in rows_of(s.text())]
        assert names.index("grow") < names.index("churn"), s.text()
        s.keys("/", "churn_site", "Enter")
        s.wait(r"filter: churn_site")
        s.keys("Enter")
        text = s.wait(r"peak \S+ KiB in 1 samples; standard error: retained 0%, peak (9\d|100)%")
        assert "samples" in text, text
    finally:
        s.close()
        t.finish()


if __name__ == "__main__":
    sys.exit(main(globals()))
