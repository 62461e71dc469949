"""Resident per stack: how much of each stack's retained memory is in RAM,
from /proc/PID/pagemap at the live samples' addresses, each sample's
share of present pages scaled by its weight.  Blocks of 64 KiB written
whole read resident, blocks of 256 KiB never written (mappings of their
own, one header page of 65) read not resident, each within 5 % of the
stack's retained bytes; the Memory picture then says how much retained
memory was never touched instead of a negative unexplained."""
import os

from ymlib import BUILD, Target, functions, report, run_tests, ymtop

PROG = os.path.join(BUILD, "progs", "resident")
MiB = 1024 * 1024


def command(t, line):
    t.p.stdin.write(line + "\n")
    t.p.stdin.flush()
    t.wait_for("ready")


def one(rep, fn):
    st = [s for s in rep["stacks"] if fn in functions(s)]
    assert len(st) == 1, [functions(s)[:3] for s in rep["stacks"]]
    return st[0]


def test_touched_blocks_resident_untouched_not():
    t = Target([PROG], env={"YM_SAMPLE_RATE": "65536", "YM_SEED": "5"})
    try:
        command(t, "touch 32")
        command(t, "untouched 128")
        rep = report(t.pid)
        text = ymtop("-b", "-n", "1", "-p", t.pid).stdout
    finally:
        t.finish()
    touched, untouched = one(rep, "touch_site"), one(rep, "untouched_site")
    for s in (touched, untouched):
        assert s["retained_bytes"] > 0 and s["swapped_bytes"] == 0, s
    share = touched["resident_bytes"] / touched["retained_bytes"]
    assert 0.95 <= share <= 1.0, (share, touched)
    share = untouched["resident_bytes"] / untouched["retained_bytes"]
    assert share <= 0.05, (share, untouched)
    rx = rep["rss_explained"]
    assert rx["resident_why"] is None, rx
    # The untouched 128 MiB (within the sampling error) are named as such
    # and kept out of the anonymous RSS the heap is compared with.
    assert rx["retained_untouched_bytes"] >= 0.9 * untouched["retained_bytes"], rx
    assert rx["retained_untouched_bytes"] >= 100 * MiB, rx
    assert rx["unexplained_anon_bytes"] > -8 * MiB, rx
    assert "never touched" in text, text
    line = next(l for l in text.splitlines() if l.lstrip().startswith("resident "))
    assert "never touched" in line, line


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
