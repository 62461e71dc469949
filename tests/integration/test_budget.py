"""The cost budget (YM_MAX_OVERHEAD, ymtop --max-overhead; man/ymagent.7):
the agent lengthens the sampling rate when its sampled paths cost more than
the budget, JSON says so in its sampling object, and the estimates stay
within their sampling error while the rate changes.  The workload's
budget:N step (tests/progs/workload.c) holds N MiB in 64 KiB blocks at
hold_budget between rounds of 200000 malloc(256)/free pairs: at
YM_SAMPLE_RATE=4096 those cost the agent far more than a few percent of
the process's CPU time, over several of the budget's windows (100 ms of
wall time and 10 ms of CPU time each), whatever the machine's load."""
import math
import subprocess

from ymlib import (MiB, WORKLOAD, YMTOP, Plain, Target, report, run_tests,
                   site, within, ymtop)

SEEDED = {"YM_SEED": "4242", "YM_SAMPLE_RATE": "4096"}


def run(steps, env):
    e = dict(SEEDED)
    e.update(env)
    t = Target([WORKLOAD] + steps, env=e)
    try:
        rep = report(t.pid)
    finally:
        rc, _, err = t.finish()
    assert rc == 0, "workload exited %d: %s" % (rc, err)
    return rep, err


def sigma(size, rate, n):
    """The relative standard deviation of the retained estimate of n
    blocks of `size` bytes each sampled at `rate` (sample.h: a block's
    variance is s^2 (1 - p)/p): at the longest rate in force, an upper
    bound for blocks drawn at several rates."""
    p = -math.expm1(-size / rate)
    return math.sqrt((1 - p) / (p * n))


def test_a_tiny_budget_lengthens_the_rate_and_json_says_so():
    rep, _ = run(["budget:64"], {"YM_MAX_OVERHEAD": "0.01"})
    s = rep["sampling"]
    assert s["requested_rate"] == 4096, s
    assert s["budget_percent"] == 0.01, s
    assert s["effective_rate"] > 4096, s
    assert s["effective_rate"] == rep["sample_rate"], (s, rep["sample_rate"])
    assert s["longest_rate"] >= s["effective_rate"], s
    assert s["adjustments"] >= 1, s
    assert s["window_ms"] == 100, s
    assert 0 < s["spent_ns"] and 0 < s["cpu_ns"], s


def test_no_budget_no_change():
    rep, _ = run(["budget:4"], {})
    s = rep["sampling"]
    assert s == {"effective_rate": 4096, "requested_rate": 4096,
                 "longest_rate": 4096, "budget_percent": None}, s


def test_retained_estimate_within_its_error_while_the_budget_changes_the_rate():
    """Blocks held before, during and after the budget's changes of the
    rate, each weighed at the rate it was drawn at: the sum is within 4
    standard deviations at the longest rate of the truth, 64 MiB in 1024
    blocks, though the rate changed while they were
    allocated."""
    rep, _ = run(["budget:64"], {"YM_MAX_OVERHEAD": "5"})
    s = rep["sampling"]
    assert s["adjustments"] >= 1 and s["longest_rate"] > 4096, s
    tol = 4 * sigma(65536, s["longest_rate"], 1024)
    st = site(rep, "hold_budget")
    within(st["retained_bytes"], 64 * MiB, tol, "hold_budget retained (tolerance %.2f)" % tol)
    within(st["retained_objects"], 1024, tol, "hold_budget objects")


def budget_by_ymtop(cls, *args):
    """The workload paused before its budget:64 step (cls: Target, with
    the agent preloaded, or Plain, without); ymtop -p PID ARGS
    --max-overhead 0.01 from a script (no screen, one line on stderr);
    the step run, then its report.  The agent takes the budget at its next
    sample."""
    t = cls([WORKLOAD, "pause", "budget:64"], env=dict(SEEDED), ready=False)
    try:
        t.wait_for("paused")
        r = ymtop("-p", t.pid, *args, "--max-overhead", "0.01")
        assert "cost budget 0.01% of its CPU time asked" in r.stderr, r.stderr
        t.p.stdin.write("\n")
        t.p.stdin.flush()
        t.wait_for("ready")
        rep = report(t.pid)
    finally:
        rc, _, _ = t.finish()
    assert rc == 0
    s = rep["sampling"]
    assert s["budget_percent"] == 0.01 and s["requested_rate"] == 4096, s
    assert s["effective_rate"] > 4096 and s["adjustments"] >= 1, s
    return rep


def test_max_overhead_reaches_a_running_agent():
    """ymtop -p PID --max-overhead writes a running agent's control
    block."""
    budget_by_ymtop(Target)


def test_max_overhead_with_the_injection():
    """ymtop -p PID --max-overhead into a process without the agent: the
    agent is injected, then the budget written to its control block, and
    it acts on what the process allocates afterwards."""
    rep = budget_by_ymtop(Plain, "--rate", "4096")
    assert rep["attached"] is True, rep["attached"]


def test_exact_mode_keeps_every_call():
    """YM_SAMPLE_RATE=1 records every allocation: a budget cannot apply;
    the agent says so in one line and runs without one, and ymtop's
    --max-overhead is refused with the reason."""
    t = Target([WORKLOAD, "count:1000:64"],
               env={"YM_SAMPLE_RATE": "1", "YM_MAX_OVERHEAD": "1"})
    try:
        r = ymtop("-p", t.pid, "--max-overhead", "1", check=False)
        assert r.returncode == 1 and "samples every allocation" in r.stderr, r.stderr
        rep = report(t.pid)
    finally:
        rc, _, err = t.finish()
    assert rc == 0
    assert err.count("ymagent: YM_MAX_OVERHEAD has no effect") == 1, err
    assert rep["sampling"]["budget_percent"] is None, rep["sampling"]


def test_bad_budgets_are_refused():
    for bad in ("0", "-1", "101", "abc", "", "1e9", "5 %", "0.00001"):
        r = subprocess.run([YMTOP, "-p", "1", "--max-overhead", bad],
                           capture_output=True, text=True)
        assert r.returncode == 2 and "--max-overhead must be" in r.stderr, (bad, r.stderr)
    t = Target([WORKLOAD, "count:10:64"], env={"YM_MAX_OVERHEAD": "five"})
    try:
        rep = report(t.pid)
    finally:
        rc, _, err = t.finish()
    assert "ymagent: YM_MAX_OVERHEAD must be a percentage" in err, err
    assert rep["sampling"]["budget_percent"] is None


if __name__ == "__main__":
    run_tests(globals())
