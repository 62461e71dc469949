"""Trends (issue 33): the agent keeps a point a slot of its largest stacks'
retained estimates (segment.h, Trend), so a ymtop started late sees the
past; ymtop's verdict per stack (tui/model/trend.c) says growing only for
steady growth that stands above the sampling noise.

Slots of 500 ms (YM_TREND_SLOT_MS) instead of 10 s, so that 60 slots take
30 s: the verdicts see as many points as at the default in 10 minutes."""
import json
import os
import time

from ymlib import BUILD, Target, functions, report, run_tests, site, ymtop, within

PROG = os.path.join(BUILD, "progs", "trendprog")
PEAKS = os.path.join(BUILD, "progs", "peaks")
LEAK_KIB_S = 2048
SLOT_MS = 500
# The rates below are read within 25 %.  A leak's estimate is a Poisson
# count of samples, each standing for s/p bytes; a least-squares slope
# over a counting process of N expected samples in the window has a
# relative standard deviation of sqrt(6/5 x (1 - p) / N), where p = 1 -
# e^(-s/R) is a block's chance to be sampled (the 6/5: the slope of a
# random walk fitted by least squares).  Each test's rate is chosen so
# that 25 % is 5 of those or more.


def verdict(rep, name):
    return site(rep, name)["trend"]


def test_late_ymtop_sees_the_leak_growing_and_nothing_else():
    # leak 2 MiB/s; a 40 MiB cache filled in 3 s, then entries replaced;
    # churn around 5 MiB.  The cache fills in the first tenth of the
    # window: a fill over a fifth (6 s) fits a line with an R^2 of 0.41
    # before noise, close enough to the rule's 0.6 that the sampling noise
    # of a loaded run can carry it over (a plateau read as growing).
    #
    # R = 64 KiB: the leak's 16 KiB blocks are sampled with p = 0.221,
    # 3840 blocks in 30 s give N = 849 samples (708 in the 25 s the
    # window has at least), so the rate's sigma is 3.3 % (3.6 %) and 25 %
    # is 7.5 (6.9) sigma.  At the default 512 KiB, N = 118: sigma 9.9 %,
    # and 25 % was 2.5 sigma (a run in about 80 missed it).  The other
    # verdicts keep their margins: the cache is growing only with an R^2
    # of 0.6 (0.22 before noise, and less noise keeps it nearer that)
    # and no stop in the last third, which its noise at 64 KiB shows the
    # more clearly; the churn's fluctuations and the noise the rule
    # allows both scale as sqrt(R), so its flat verdict keeps the margin
    # it had at any rate.
    t = Target([PROG, str(LEAK_KIB_S), "40", "3", "5"],
               env={"YM_TREND_SLOT_MS": str(SLOT_MS), "YM_SEED": "5",
                    "YM_SAMPLE_RATE": "65536"})
    try:
        time.sleep(60 * SLOT_MS / 1000)   # 60 slots before ymtop starts
        rep = report(t.pid)
        assert rep["trend"]["source"] == "agent", rep["trend"]
        leak = verdict(rep, "leak_site")
        cache = verdict(rep, "cache_site")
        churn = verdict(rep, "churn_site")
        print("leak", leak, "cache", cache, "churn", churn)
        # The past is the agent's: a ymtop started now sees the window.
        assert leak["window_s"] >= 50 * SLOT_MS / 1000, leak
        assert leak["verdict"] == "growing", leak
        within(leak["bytes_per_s"], LEAK_KIB_S * 1024, 0.25, "leak rate")
        assert cache["verdict"] in ("plateau", "flat"), cache
        assert churn["verdict"] == "flat", churn
        growing = [s for s in rep["stacks"] if s["trend"]["verdict"] == "growing"]
        assert [functions(s)[0] for s in growing] == ["leak_site"], \
            [functions(s)[:2] for s in growing]
        assert rep["trend"]["growing_stacks"] == 1, rep["trend"]
        # Text: the growing stacks first, under their own heading.
        text = ymtop("-b", "-n", "1", "-p", t.pid).stdout
        head = text.index("Growing stacks: 1")
        assert head < text.index("Top "), text
        assert "leak_site" in text[head:text.index("Top ")], text
    finally:
        t.kill()


def test_a_quiet_stack_is_unchanged_not_gone():
    """A process that stops allocating writes no more points: its stacks
    keep their last estimate (not 0, not unknown) up to now."""
    t = Target([PEAKS], env={"YM_TREND_SLOT_MS": "200", "YM_SAMPLE_RATE": "65536"})
    try:
        for _ in range(20):
            t.p.stdin.write("keep 512\n")
            t.p.stdin.flush()
            t.wait_for("ready")
            time.sleep(0.2)
        held = site(report(t.pid), "keep_site")
        time.sleep(6)   # 30 slots without a sample
        rep = report(t.pid)
        st = site(rep, "keep_site")
        assert st["retained_bytes"] == held["retained_bytes"], (st, held)
        tr = st["trend"]
        assert tr["verdict"] == "plateau", tr
        assert tr["window_s"] >= 9, tr
    finally:
        t.kill()


def test_agent_without_trend_ymtop_keeps_its_own():
    """YM_TREND_SLOT_MS=0 (as an agent before ABI v8): ymtop's own
    snapshots, unknown until it has enough of them."""
    t = Target([PROG, str(LEAK_KIB_S), "4", "1", "1"],
               env={"YM_TREND_SLOT_MS": "0"})
    try:
        time.sleep(1)
        rep = report(t.pid)
        assert rep["trend"]["source"] == "ymtop", rep["trend"]
        assert all(s["trend"]["verdict"] == "unknown" for s in rep["stacks"]), \
            [s["trend"] for s in rep["stacks"]]
    finally:
        t.kill()


def test_a_small_leak_among_many_larger_stacks_is_followed():
    """More stacks larger than the leak than a slot keeps largest (100
    of 4 MiB, the trend's 48): the leak is kept among the rising stacks
    (its peak rises with its samples), so it has points and grows.

    R = 8 KiB: 120 blocks of 16 KiB in 15 s, each sampled with p =
    0.865, N = 104: the rate's sigma is 4.0 % and 25 % is 6.3 sigma (at
    16 KiB, N = 76 with p = 0.632: sigma 7.6 %, 25 % was 3.3 sigma).  The
    held stacks' 64 KiB blocks are sampled at either rate (p > 0.98)."""
    t = Target([PROG, "128", "0", "0", "0", "0", "100"],
               env={"YM_TREND_SLOT_MS": "250", "YM_SAMPLE_RATE": "8192",
                    "YM_SEED": "3"})
    try:
        time.sleep(60 * 0.25)
        rep = report(t.pid)
        held = [s for s in rep["stacks"] if "held_site" in functions(s)]
        leak = site(rep, "leak_site")
        print("leak", leak["retained_bytes"], leak["trend"], "held", len(held))
        assert len(held) >= 64, len(held)
        assert all(s["retained_bytes"] > leak["retained_bytes"] for s in held), leak
        assert leak["trend"]["verdict"] == "growing", leak["trend"]
        within(leak["trend"]["bytes_per_s"], 128 * 1024, 0.25, "leak rate")
    finally:
        t.kill()


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
