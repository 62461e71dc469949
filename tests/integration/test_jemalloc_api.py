"""jemalloc's own API (issue 20): a program linked against libjemalloc
(libjemalloc-dev) that allocates with mallocx and rallocx and frees with
sdallocx and dallocx is estimated within tolerance, preloaded and under
ymtop -p (GOT patching).  Tolerances as tests/integration/test_allocators.py
(Z standard deviations of the sampling estimate)."""
import math
import os
import re
import subprocess
import time

from ymlib import BUILD, YMTOP, Skip, Target, functions, report, run_tests

PROG = os.path.join(BUILD, "progs", "jeapi")
RATE = 65536
KiB = 1024
MiB = 1024 * KiB
Z = 4.5
SITE = 400 * 64 * KiB


def bound(blocks):
    var = 0.0
    for size, count in blocks:
        p = -math.expm1(-size / RATE)
        var += count * size * size * (1 - p) / p
    return Z * math.sqrt(var)


TOL_MALLOCX = bound([(64 * KiB, 400)])
# rallocx: 4 KiB blocks grown in 4 KiB steps, each step charged on its own.
TOL_RALLOCX = bound([(64 * KiB, 400)]) + bound([(4 * KiB, 400 * 16)])


def retained(rep, name):
    return sum(s["retained_bytes"] for s in rep["stacks"]
               if s["frames"] and name in functions(s))


def command(t, line):
    t.p.stdin.write(line + "\n")
    t.p.stdin.flush()
    t.wait_for("ready")


def check(t, rep_fn):
    command(t, "alloc")
    rep = rep_fn()
    m, r, c = (retained(rep, n) for n in
               ("mallocx_site", "rallocx_site", "churn_site"))
    assert abs(m - SITE) <= TOL_MALLOCX, (m, SITE, TOL_MALLOCX)
    assert abs(r - SITE) <= TOL_RALLOCX, (r, SITE, TOL_RALLOCX)
    assert abs(c) < 1, c     # every sampled block was sdallocx'ed
    # The exact totals saw the calls: 50 MiB held, at least.
    assert rep["totals"]["in_use_bytes"] >= 2 * SITE - 1 * MiB, rep["totals"]
    command(t, "free")
    rep = rep_fn()
    for n in ("mallocx_site", "rallocx_site"):
        assert abs(retained(rep, n)) < 1, (n, retained(rep, n))
    assert rep["totals"]["in_use_bytes"] < 2 * SITE / 4, rep["totals"]


def need_prog():
    if not os.path.exists(PROG):
        raise Skip("%s not built (libjemalloc-dev missing?)" % PROG)


def test_linked_program_preloaded():
    need_prog()
    t = Target([PROG], env={"YM_SAMPLE_RATE": str(RATE), "YM_SEED": "3"})
    try:
        check(t, lambda: report(t.pid))
    finally:
        t.kill()


class Plain(Target):
    def __init__(self, argv, env=None):
        super().__init__(argv, env=env, preload=False)

    def wait_segment(self, timeout=10):
        pass


def test_linked_program_injected():
    need_prog()
    t = Plain([PROG], env={"YM_SAMPLE_RATE": str(RATE), "YM_SEED": "5"})
    try:
        r = subprocess.run([YMTOP, "-b", "-n", "1", "-i", "0.05", "-f", "json",
                            "-p", str(t.pid)], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        check(t, lambda: report(t.pid))
    finally:
        t.kill()


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
