"""Temporary allocations: per stack, the share of its allocations freed
within short_lived_threshold_ns (from the lifetimes of its sampled
blocks), their bytes and the rate of those bytes; in JSON, in the text
report's section, and the screen's sort key S (tests/unit/test_view.c)."""
import os

from ymlib import BUILD, Target, functions, report, run_tests, ymtop

PROG = os.path.join(BUILD, "progs", "peaks")


def command(t, line):
    t.p.stdin.write(line + "\n")
    t.p.stdin.flush()
    t.wait_for("ready")


def named(rep, fn):
    return [s for s in rep["stacks"] if fn in functions(s)]


def test_churn_site_near_one_retained_site_near_zero():
    t = Target([PROG], env={"YM_SAMPLE_RATE": "4096", "YM_SEED": "3"})
    try:
        command(t, "churn 200000")
        command(t, "hold 16")
        rep = report(t.pid)
        text = ymtop("-b", "-n", "1", "-p", t.pid).stdout
    finally:
        t.finish()
    assert rep["short_lived_threshold_ns"] == 10000000, rep["short_lived_threshold_ns"]
    churn, hold = named(rep, "churn_site"), named(rep, "hold_site")
    assert churn and hold, [functions(s)[:3] for s in rep["stacks"]]
    # Every sampled block of the churn was freed at once: the estimate is
    # the ratio of two sums over the same samples.
    c = max(churn, key=lambda s: s["allocated_objects"])
    assert c["samples"] >= 100, c
    assert c["short_lived_fraction"] >= 0.95, c
    assert c["short_lived_bytes"] >= 0.9 * c["allocated_bytes"], c
    for s in hold:
        assert s["short_lived_fraction"] == 0, s
        assert s["short_lived_bytes"] == 0, s
    # The text section lists the churn first.
    lines = text.splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith("Short-lived allocations"))
    assert "freed within 10.0ms" in lines[i] or "freed within 10ms" in lines[i], lines[i]
    assert "churn_site" in lines[i + 1], lines[i:i + 3]
    assert not any("hold_site" in l for l in lines[i + 1:i + 11]
                   if l.startswith("  ")), lines[i:i + 11]


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
