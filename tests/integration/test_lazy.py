"""The segment when first needed (man/ymagent.7): a preloaded process
counts from its first call and makes its segment at its first sample, a
giant request, a second thread's first call or ymtop -p; what it counted
before moves into the segment exactly.  Every other test file starts its
targets with YM_EARLY_SEGMENT=1 (ymlib.Target); these do not."""
import json
import os
import subprocess
import sys
import time

from ymlib import (AGENT, MiB, WORKLOAD, Target, report, rerun_isolated,
                   run_tests, seg_path, ymtop)

NEVER = str(1 << 40)   # a mean gap of 1 TiB: no sample in these programs


def lazy_env(**extra):
    e = {k: v for k, v in os.environ.items()
         if k != "LD_PRELOAD" and not k.startswith("YM_")}
    e["LD_PRELOAD"] = AGENT
    e.update(extra)
    return e


class Lazy(Target):
    """A target without YM_EARLY_SEGMENT: no segment to wait for."""

    def __init__(self, argv, env=None):
        super().__init__(argv, env=env, early=False)

    def wait_segment(self, timeout=10):
        pass


def totals(steps, early, rate=NEVER):
    """The totals and threads of the workload running `steps`, read once
    it is ready: with the segment made at its first call, or made by
    ymtop -p (ymagent_start) after everything was counted before it."""
    env = {"YM_SAMPLE_RATE": rate}
    if early:
        t = Target([WORKLOAD] + steps, env=env)
    else:
        t = Lazy([WORKLOAD] + steps, env=env)
        threaded = any(s.startswith("threads:") for s in steps)
        assert os.path.exists(seg_path(t.pid)) == threaded, \
            "a segment before any sample, or none after a second thread"
    try:
        rep = report(t.pid)
    finally:
        rc, _, _ = t.finish()
    assert rc == 0
    return rep["totals"], rep["threads"]


def test_a_short_process_that_samples_nothing_makes_no_segment():
    r = subprocess.run(["/bin/sh", "-c", 'echo $$; ls /dev/shm'],
                       capture_output=True, text=True, env=lazy_env(), timeout=30)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    pid, names = r.stdout.split("\n", 1)
    assert os.path.basename(seg_path(int(pid))) not in names.split(), r.stdout


def test_the_first_sample_makes_the_segment():
    t = Lazy([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        assert os.path.exists(seg_path(t.pid))
        rep = report(t.pid)
    finally:
        t.finish()
    big = [s for s in rep["stacks"] if "hold_big" in
           [f["function"] for f in s["frames"]]]
    assert big and abs(sum(s["retained_bytes"] for s in big) - 64 * MiB) < 7 * MiB


def test_counts_before_the_segment_move_into_it_exactly():
    """The same program, counted from its first call into its segment, or
    into the agent's pre-slot and moved into the segment ymtop -p started:
    the same totals to the object and the byte."""
    for steps in (["count:1000:100"], ["count:3000:24", "small"]):
        a, _ = totals(steps, early=True)
        b, _ = totals(steps, early=False)
        for k in ("allocated_objects", "freed_objects", "requested_bytes"):
            assert a[k] == b[k], (steps, k, a, b)


def test_a_second_thread_makes_the_segment_and_each_thread_keeps_its_count():
    """The main thread counts 1000 calls, then starts 4 threads (the first
    of them makes the segment; the others come while it is made) and waits
    for them without allocating: its slot and theirs hold what each
    counted, as when the segment was made at the first call."""
    a, ta = totals(["count:1000:100", "threads:4"], early=True)
    b, tb = totals(["count:1000:100", "threads:4"], early=False)
    for k in ("allocated_objects", "freed_objects", "requested_bytes"):
        assert a[k] == b[k], (k, a, b)

    def per_thread(ts):
        main = [t for t in ts if t["state"] == "live"]
        done = sorted(t["allocated_objects"] for t in ts if t["state"] == "exited")
        return main[0]["allocated_objects"], done
    ma, da = per_thread(ta)
    mb, db = per_thread(tb)
    assert ma == mb and ma >= 1000, (ta, tb)
    assert da == db and len(db) == 4 and db[0] >= 256, (ta, tb)


def test_a_giant_request_makes_the_segment():
    t = Lazy([WORKLOAD, "giant:2097152"],
             env={"YM_SAMPLE_RATE": NEVER, "YM_GIANT_BYTES": "1048576"})
    try:
        assert os.path.exists(seg_path(t.pid))
        rep = report(t.pid)
    finally:
        t.finish()
    assert len(rep["alarms"]) == 1 and rep["alarms"][0]["size"] == 2097152, rep["alarms"]


def test_fork_child_before_the_segment_counts_its_own():
    """A child forked before the parent made its segment counts from zero
    and makes its own at its first sample (child_site, 4 MiB)."""
    t = Lazy([WORKLOAD, "fork"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        rep = report(t.pid)
    finally:
        t.finish()
    names = [f["function"] for s in rep["stacks"] for f in s["frames"]]
    assert "child_site" not in names


def test_a_sample_under_the_exit_handler_lock_makes_the_segment():
    """atexit allocates its next block of handlers with glibc's lock on
    them held; that calloc is the program's first sample here.  The agent
    once registered its own exit handler as it made the segment there,
    and the program hung (gcc's cc1 did, a few runs in a hundred)."""
    prog = os.path.join(os.path.dirname(WORKLOAD), "atexits")
    suffix = seg_path(0)[len("/dev/shm/ymtop-0"):]   # the namespace's
    r = subprocess.run([prog, suffix], env=lazy_env(YM_SAMPLE_RATE="1"),
                       capture_output=True, timeout=10)
    # 3: the segment was there after the calls (4: no sample made it,
    # and the test saw nothing).
    assert r.returncode == 3 and r.stderr == b"", (r.returncode, r.stderr)


def test_ymtop_without_pid_finds_and_starts_an_unstarted_process():
    """In a pid and mount namespace of its own (so that no other process
    under the agent is found): the only agent process has no segment;
    ymtop without -p lists it, starts it and reports it."""
    if rerun_isolated(__file__,
                      "test_ymtop_without_pid_finds_and_starts_an_unstarted_process",
                      pid_ns=True):
        return
    if os.geteuid() != 0:
        print("  (needs root for a private pid namespace: ran in ours)")
    found_without_pid(Lazy([WORKLOAD, "count:100:100"],
                           env={"YM_SAMPLE_RATE": NEVER}))


def found_without_pid(t, check=lambda t: None):
    """t, under the agent, has sampled nothing (no segment); check(t) on
    it; then ymtop without -p must find it, start it and report it."""
    try:
        time.sleep(0.1)
        assert not os.path.exists(seg_path(t.pid))
        check(t)
        r = ymtop("-b", "-n", "1", "-i", "0.05", "-f", "json")
        rep = json.loads(r.stdout)
        assert rep["pid"] == t.pid
        assert rep["totals"]["allocated_objects"] >= 100, rep["totals"]
    finally:
        t.finish()



def test_ymtop_without_pid_finds_an_unstarted_process_behind_its_title():
    """As above, but the process wrote its title over its environment, as
    an idle nginx master or PostgreSQL postmaster does: /proc/PID/environ
    no longer names the agent, its maps do.  ymtop found no process then
    ("no running process has the agent loaded")."""
    if rerun_isolated(__file__,
                      "test_ymtop_without_pid_finds_an_unstarted_process_behind_its_title",
                      pid_ns=True):
        return

    def environ_written_over(t):
        with open("/proc/%d/environ" % t.pid, "rb") as f:
            assert b"LD_PRELOAD" not in f.read()
    found_without_pid(Lazy([WORKLOAD, "count:100:100", "title"],
                           env={"YM_SAMPLE_RATE": NEVER}), environ_written_over)


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
