"""Peaks (issue 20): the agent keeps each stack's and the process's highest
retained estimate on its sampled paths, so a site that grows to 50 MiB and
gives it all back between two reports still shows its peak; a reset
(control.reset_seq) starts the peaks again.

Tolerance as tests/integration/test_allocators.py: a block of s bytes is
sampled with probability p = 1 - exp(-s/R) and weighs s/p; the peak is the
estimate of the whole grown set (the last sampled block of the growth
raises it to the sum of every sampled block), so Z standard deviations of
that estimate bound it."""
import math
import os
import re
import shutil
import subprocess
import tempfile
import time

from ymlib import AGENT, BUILD, Target, functions, report, run_tests, site, ymtop
from test_wrappers import env_for, need, wait_unix

PROG = os.path.join(BUILD, "progs", "peaks")
RATE = 65536
BLOCK = 32 * 1024
MiB = 1024 * 1024
Z = 4.5


def bound(mib):
    n = mib * MiB // BLOCK
    p = -math.expm1(-BLOCK / RATE)
    return Z * BLOCK * math.sqrt(n * (1 - p) / p)


def grow_stacks(rep, name="grow_site"):
    return [s for s in rep["stacks"] if s["frames"] and name in functions(s)]


def command(t, line):
    t.p.stdin.write(line + "\n")
    t.p.stdin.flush()
    t.wait_for("ready")


def control_reset(pid):
    """A reader's reset request (segment.h, Control), made by
    shm_control_reset (tests/progs/ctl/ymcontrol.c): reset_seq bumped; the
    agent carries it out on its next sample."""
    subprocess.run([os.path.join(BUILD, "progs", "ymcontrol"), "reset",
                    "/dev/shm/ymtop-%d" % pid, str(pid)], check=True)


def test_peak_of_a_site_that_gave_it_back():
    t = Target([PROG], env={"YM_SAMPLE_RATE": str(RATE), "YM_SEED": "7"})
    try:
        t0 = time.time()
        command(t, "grow 50")
        rep = report(t.pid)
        st = grow_stacks(rep)
        assert st, [functions(s)[:3] for s in rep["stacks"]]
        peak = max(s["peak_retained_bytes"] for s in st)
        kept = sum(s["retained_bytes"] for s in st)
        assert abs(peak - 50 * MiB) <= bound(50), (peak, bound(50))
        assert abs(kept) < 1, kept   # every sampled block was freed
        assert all(s["kind"] == "malloc" for s in st)
        best = max(st, key=lambda s: s["peak_retained_bytes"])
        assert t0 - 1 <= best["peak_time"] <= time.time() + 1, best["peak_time"]
        tot = rep["totals"]
        # The process's own peak: at least the site's, and not far above
        # it (the program holds little else).
        assert tot["peak_retained_bytes"] >= peak - 1, (tot, peak)
        assert tot["peak_retained_bytes"] <= peak + 2 * MiB, (tot, peak)
        assert abs(tot["retained_bytes"]) < 2 * MiB, tot
        assert t0 - 1 <= tot["peak_time"] <= time.time() + 1, tot
        # Peaks only rise: a smaller growth leaves them.
        command(t, "grow 5")
        rep2 = report(t.pid)
        assert max(s["peak_retained_bytes"] for s in grow_stacks(rep2)) >= peak
        assert rep2["totals"]["peak_retained_bytes"] >= tot["peak_retained_bytes"]
    finally:
        t.kill()


def test_exact_mode_peak_within_a_step():
    """Exact mode (every allocation a sample) raises peaks by steps of
    64 KiB (table.c, PEAK_STEP): within a step of the truth."""
    t = Target([PROG], env={"YM_SAMPLE_RATE": "1"})
    try:
        command(t, "grow 50")
        rep = report(t.pid)
        peak = max(s["peak_retained_bytes"] for s in grow_stacks(rep))
        assert 50 * MiB - 64 * 1024 <= peak <= 50 * MiB, peak
        tot = rep["totals"]["peak_retained_bytes"]
        assert 50 * MiB - 64 * 1024 <= tot <= 50 * MiB + 2 * MiB, tot
        assert sum(s["retained_bytes"] for s in grow_stacks(rep)) == 0
    finally:
        t.kill()


def test_reset_restarts_peaks():
    t = Target([PROG], env={"YM_SAMPLE_RATE": str(RATE), "YM_SEED": "11"})
    try:
        command(t, "grow 40")
        control_reset(t.pid)
        # A sample a millisecond or more after the thread's last look at
        # the control block (sampling.c): the agent sees the reset.
        time.sleep(0.01)
        command(t, "hold 1")
        command(t, "grow 8")
        rep = report(t.pid)
        st = grow_stacks(rep)
        peak = max(s["peak_retained_bytes"] for s in st)
        assert abs(peak - 8 * MiB) <= bound(8), (peak, bound(8))
        tot = rep["totals"]["peak_retained_bytes"]
        assert tot < 20 * MiB, tot
        assert tot >= peak - 1, (tot, peak)
    finally:
        t.kill()


def peaks_never_below_retained(rep):
    for s in rep["stacks"]:
        assert s["peak_retained_bytes"] >= s["retained_bytes"], s
    tot = rep["totals"]
    assert tot["peak_retained_bytes"] >= tot["retained_bytes"], tot


def marked(text):
    """The figures the text report marks as carried by few samples."""
    return re.findall(r"(retained|peak) \?", text)


def test_exact_mode_peaks_of_small_stacks_are_exact():
    """Exact mode: stacks that allocated less than a step (64 KiB) in all
    have their exact peak (not 0 B beside their retained bytes), with the
    samples behind it; sorted by peak, the churn of 64-byte blocks comes
    below them; nothing is marked (no estimate)."""
    t = Target([PROG], env={"YM_SAMPLE_RATE": "1"})
    try:
        command(t, "churn 100000")
        command(t, "little 32")
        command(t, "keep 4")
        rep = report(t.pid, "--sort", "peak")
        little = site(rep, "little_site")
        keep = site(rep, "keep_site")
        churn = site(rep, "churn_site")
        assert little["retained_bytes"] == 0, little
        assert little["peak_retained_bytes"] == little["allocated_bytes"] >= 32 * 1024, little
        assert little["peak_samples"] == 512, little
        assert keep["peak_retained_bytes"] == keep["retained_bytes"] == \
            keep["allocated_bytes"] >= 4096, keep
        assert keep["peak_samples"] == keep["live_samples"] == 64, keep
        assert 64 <= churn["peak_retained_bytes"] <= 128, churn
        assert churn["peak_samples"] == 1, churn
        ids = [s["id"] for s in rep["stacks"]]
        assert ids.index(little["id"]) < ids.index(keep["id"]) < ids.index(churn["id"]), ids
        peaks_never_below_retained(rep)
        text = ymtop("-b", "-n", "1", "-f", "text", "-p", t.pid).stdout
        assert not marked(text), text
    finally:
        t.kill()


def test_small_rate_peak_of_a_held_stack():
    """Samples lighter than a step (YM_SAMPLE_RATE=4096): a stack that
    holds 32 KiB of 64-byte blocks has its peak, the samples behind it."""
    t = Target([PROG], env={"YM_SAMPLE_RATE": "4096", "YM_SEED": "5"})
    try:
        command(t, "keep 32")
        rep = report(t.pid)
        keep = site(rep, "keep_site")
        assert keep["retained_bytes"] > 0, keep
        assert keep["peak_retained_bytes"] == keep["retained_bytes"], keep
        assert keep["peak_samples"] == keep["live_samples"] >= 1, keep
        peaks_never_below_retained(rep)
    finally:
        t.kill()


def test_churn_peak_of_one_sample_is_marked_and_ranked_below():
    """Sampling: a stack that churns 64-byte blocks has at most one live
    sample, so its peak is one sample's weight (about the rate): JSON says
    1 sample, the text report marks it, and sorted by peak it comes below
    a site that grew 8 MiB (many samples, not marked)."""
    t = Target([PROG], env={"YM_SAMPLE_RATE": str(RATE), "YM_SEED": "3"})
    try:
        command(t, "churn 200000")
        command(t, "grow 8")
        rep = report(t.pid, "--sort", "peak")
        churn = site(rep, "churn_site")
        grow = max(grow_stacks(rep), key=lambda s: s["peak_retained_bytes"])
        assert churn["peak_samples"] == 1, churn
        assert churn["live_samples"] == 0, churn
        assert RATE <= churn["peak_retained_bytes"] < RATE + 1024, churn
        assert grow["peak_samples"] >= 3, grow
        ids = [s["id"] for s in rep["stacks"]]
        assert ids.index(grow["id"]) < ids.index(churn["id"]), ids
        peaks_never_below_retained(rep)
        text = ymtop("-b", "-n", "1", "-f", "text", "--sort", "peak",
                     "-p", t.pid).stdout
        lines = [l for l in text.split("\n") if l.startswith("#")]
        # Each stack's line is followed by its frames: find the churn's.
        blocks = text.split("\n#")
        churn_block = [b for b in blocks if "churn_site" in b]
        grow_block = [b for b in blocks if "grow_site" in b]
        assert churn_block and grow_block, lines
        assert "; peak ?64" in churn_block[0].split("\n")[0], churn_block[0]
        assert "?" not in grow_block[0].split("\n")[0], grow_block[0]
        assert "\n?: an estimate carried by one or two samples" in text, text
    finally:
        t.kill()


def rel_error(rate, nbytes, n):
    """man ymtop, ESTIMATES: sqrt((1 - p) / n), p solved from the mean
    weight of the n samples (tui/model/model.c does the same)."""
    if rate <= 1 or nbytes <= 0:
        return 0.0
    if n <= 0:
        return 1.0
    x = nbytes / n / rate
    q = 1.0
    if x > 1:
        y = min(x, 2 * (x - 1))
        for _ in range(60):
            e = math.exp(-y)
            g, d = y - x * (1 - e), 1 - x * e
            if g <= 1e-12 * y or d <= 0:
                break
            y -= g / d
        q = math.exp(-y)
    return math.sqrt(q / n)


def test_redis_peaks_carry_their_samples_and_sort_by_them():
    """redis-server (Debian's, jemalloc underneath) under redis-benchmark
    at the default rate, where most stacks hold one sample or none: every
    peak is at least its retained bytes and says how many samples carry
    it; sorted by peak, a figure of one or two samples (marked ? in text)
    never comes before an unmarked one above 3/4 of it."""
    need("redis-server", "redis-benchmark")
    d = tempfile.mkdtemp(prefix="ym-peaks-redis-")
    sock = os.path.join(d, "redis.sock")
    srv = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
         "--appendonly", "no", "--dir", d, "--daemonize", "no"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env_for(AGENT,
                    {"YM_SAMPLE_RATE": "524288", "YM_SEED": "9"}))
    try:
        wait_unix(sock, srv, "redis-server")
        subprocess.run(["redis-benchmark", "-s", sock, "-n", "20000", "-c", "10",
                        "-r", "10000", "-d", "200", "-t", "set,lpush,get", "-q"],
                       capture_output=True, text=True, timeout=120, check=True)
        rep = report(srv.pid, "--sort", "peak")
        rate = rep["sample_rate"]
        peaks_never_below_retained(rep)
        st = rep["stacks"]
        assert st, rep
        for s in st:
            assert isinstance(s["peak_samples"], int) and s["peak_samples"] >= 0, s
            assert s["live_samples"] >= 0, s
            if s["retained_bytes"] > 0:
                assert s["live_samples"] >= 1, s
        few = [s["peak_samples"] < 3 and
               rel_error(rate, s["peak_retained_bytes"], s["peak_samples"]) >= 0.25
               for s in st]
        assert any(few), [(s["peak_retained_bytes"], s["peak_samples"]) for s in st]
        for i, a in enumerate(st):
            for b, fb in zip(st[i + 1:], few[i + 1:]):
                if few[i] and not fb:
                    assert b["peak_retained_bytes"] <= 0.75 * a["peak_retained_bytes"] + 1, (a, b)
        text = ymtop("-b", "-n", "1", "-f", "text", "-p", srv.pid).stdout
        assert marked(text), text
        assert "\n?: an estimate carried by one or two samples" in text, text
    finally:
        srv.terminate()
        srv.wait(timeout=30)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
