"""Faults: ymtop killed with SIGKILL while it attaches or writes a report,
the target killed while ymtop watches, /dev/shm full when the agent
starts.  Deterministic kill points use ymtop's test hook YM_TEST_FAULT
(ymtop raises SIGKILL on itself at the named point; see TESTING.md)."""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

from ymlib import (AGENT, BUILD, WORKLOAD, YMTOP, Target, report,
                   run_tests, site, seg_path)

INJECT_SPIN = os.path.join(BUILD, "progs", "inject_spin")


def fault_env(stage):
    return dict(os.environ, YM_TEST_FAULT=stage)


# ---- ymtop killed mid-report ----

def test_killed_before_the_report_is_linked_leaves_no_report():
    """SIGKILL after the whole report went into the temporary file and
    before it is linked to its name: no file of that name exists."""
    d = tempfile.mkdtemp()
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        for fmt in ("json", "sqlite"):
            out = os.path.join(d, "r." + fmt)
            r = subprocess.run([YMTOP, "-b", "-n", "1", "-f", fmt, "-o", out,
                                "-p", str(t.pid)], capture_output=True,
                               env=fault_env("report-commit"), timeout=60)
            assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
            assert not os.path.exists(out), "half a report at its name"
        # The target was only read: it runs on and is still reported.
        assert site(report(t.pid), "hold_big")["retained_bytes"] > 0
    finally:
        rc, _, _ = t.finish()
        shutil.rmtree(d)
    assert rc == 0


def test_killed_at_any_moment_every_report_is_whole():
    """ymtop writes SQLite reports as fast as it can and is killed after a
    while, wherever it is: every report that exists opens and holds all
    its tables (SQLite files are the least forgiving of truncation)."""
    d = tempfile.mkdtemp()
    t = Target([WORKLOAD, "big", "small"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        p = subprocess.Popen([YMTOP, "-b", "-i", "0.05", "-n", "100000", "-f",
                              "sqlite", "-o", os.path.join(d, "r-%n.db"),
                              "-p", str(t.pid)], stderr=subprocess.DEVNULL)
        end = time.time() + 30
        while (len([f for f in os.listdir(d) if f.endswith(".db")]) < 5 and
               time.time() < end):
            time.sleep(0.05)
        assert p.poll() is None, "ymtop ended before it was killed"
        p.send_signal(signal.SIGKILL)
        p.wait()
        dbs = [f for f in os.listdir(d) if f.endswith(".db")]
        assert len(dbs) >= 5, os.listdir(d)
        for f in dbs:
            c = sqlite3.connect("file:%s?mode=ro" % os.path.join(d, f), uri=True)
            try:
                assert c.execute("pragma integrity_check").fetchone()[0] == "ok"
                n = c.execute("select count(*) from stacks").fetchone()[0]
                assert n > 0, f
            finally:
                c.close()
    finally:
        t.finish()
        shutil.rmtree(d)


# ---- ymtop killed mid-attach ----

class Plain(Target):
    """A program started without the agent: no segment to wait for."""

    def __init__(self, argv):
        super().__init__(argv, preload=False)

    def wait_segment(self, timeout=10):
        pass


def test_killed_while_choosing_a_thread_leaves_target_untouched():
    """SIGKILL with a thread of the target stopped by ptrace and its
    registers read, before anything was written: the kernel detaches it,
    it runs on unchanged, and a later ymtop -p injects normally."""
    t = Plain([INJECT_SPIN])
    try:
        r = subprocess.run([YMTOP, "-b", "-n", "1", "-p", str(t.pid)],
                           capture_output=True, text=True,
                           env=fault_env("inject-seized"), timeout=60)
        assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
        time.sleep(0.2)
        assert t.p.poll() is None, "the target died"
        assert not os.path.exists(seg_path(t.pid))
        with open("/proc/%d/status" % t.pid) as f:
            st = f.read()
        assert "TracerPid:\t0" in st and "State:\tS" in st or \
            "State:\tR" in st, st
        rep = report(t.pid)        # injects now
        assert rep["pid"] == t.pid
        os.kill(t.pid, signal.SIGUSR1)   # ends the spin, checks registers
        t.wait_for("registers ok")
    finally:
        rc, lines, err = t.finish()
    assert rc == 0, (rc, err)


def test_killed_while_the_target_runs_dlopen_target_resumes_itself():
    """SIGKILL while the borrowed thread runs dlopen, the worst moment: the
    thread finds no tracer when done, returns to its own code by itself
    with every register (vector registers checked by inject_spin), and the
    agent it loaded is active: a later ymtop attaches without injecting."""
    t = Plain([INJECT_SPIN])
    try:
        r = subprocess.run([YMTOP, "-b", "-n", "1", "-p", str(t.pid)],
                           capture_output=True, text=True,
                           env=fault_env("inject-call"), timeout=60)
        assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
        t.wait_segment()
        rep = report(t.pid)
        assert rep["pid"] == t.pid and rep["attached"] is True, rep
        with open("/proc/%d/status" % t.pid) as f:
            assert "TracerPid:\t0\n" in f.read()
        os.kill(t.pid, signal.SIGUSR1)   # ends the spin, checks registers
        t.wait_for("registers ok")
    finally:
        rc, lines, err = t.finish()
    assert rc == 0, (rc, err)


def test_killed_while_the_target_runs_the_detach_target_resumes_itself():
    """SIGKILL while the borrowed thread runs ymagent_detach (any call but
    dlopen's): the thread reaches the stub's mark with no tracer and puts
    itself back with rt_sigreturn, every register as it was (inject_spin
    checks the vector registers), instead of meeting a breakpoint that
    killed the process; a later --detach unloads the agent."""
    t = Plain([INJECT_SPIN])
    try:
        report(t.pid)   # injects
        r = subprocess.run([YMTOP, "-p", str(t.pid), "--detach"],
                           capture_output=True, text=True,
                           env=fault_env("borrow-call"), timeout=60)
        assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
        time.sleep(0.2)
        assert t.p.poll() is None, "the target died: %s" % t.p.returncode
        with open("/proc/%d/status" % t.pid) as f:
            assert "TracerPid:\t0\n" in f.read()
        r = subprocess.run([YMTOP, "-p", str(t.pid), "--detach"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "agent detached" in r.stderr, r.stderr
        os.kill(t.pid, signal.SIGUSR1)   # ends the spin, checks registers
        t.wait_for("registers ok")
    finally:
        rc, lines, err = t.finish()
    assert rc == 0, (rc, err)


def test_killed_during_dlopen_blocked_read_restarts():
    """The same with the thread borrowed out of a blocking read(): the
    call restarts as the kernel would have restarted it, and the line sent
    afterwards is read whole."""
    t = Plain([os.path.join(BUILD, "progs", "inject_read")])
    try:
        r = subprocess.run([YMTOP, "-b", "-n", "1", "-p", str(t.pid)],
                           capture_output=True, text=True,
                           env=fault_env("inject-call"), timeout=60)
        assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
        t.wait_segment()
        t.p.stdin.write("hello\n")
        t.p.stdin.flush()
        t.wait_for("got hello")
        t.wait_for("early ok")
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 3, (rc, err)


# ---- the target killed while ymtop watches ----

def test_target_killed_while_batch_watches_gives_final_report():
    """SIGKILL runs no exit code: the segment is not marked exited.  ymtop
    sees the process gone (also while it is a zombie its parent has not
    reaped yet) and writes a last report marked exited, then ends with 0."""
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    p = subprocess.Popen([YMTOP, "-b", "-i", "0.2", "-f", "json", "-p",
                          str(t.pid)], stdout=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()
        assert json.loads(first)["state"] == "sampling"
        os.kill(t.pid, signal.SIGKILL)     # not reaped: a zombie for now
        out, _ = p.communicate(timeout=30)
        assert p.returncode == 0, p.returncode
        last = json.loads(out.splitlines()[-1])
        assert last["state"] == "exited", last["state"]
        assert site(last, "hold_big")["retained_bytes"] > 0
    finally:
        if p.poll() is None:
            p.kill()
        t.p.wait()
        seg = seg_path(t.pid)
        if os.path.exists(seg):
            os.unlink(seg)   # SIGKILL left it; the next agent would too


# ---- /dev/shm full when the agent starts ----

def in_small_shm(cmd, agent=False, size="8k"):
    """cmd in a private mount namespace whose /dev/shm is a tiny tmpfs
    (by default too small for what a segment writes at start: its header
    and first records take a few pages);
    only cmd runs under the agent (not mount, whose segment would go to
    the real /dev/shm and be hidden by the new mount)."""
    pre = "LD_PRELOAD=%s " % AGENT if agent else ""
    return ["unshare", "-m", "sh", "-c",
            "mount -t tmpfs -o size=%s tmpfs /dev/shm && %sexec %s" %
            (size, pre, cmd)]


def test_dev_shm_full_agent_passive_with_one_warning():
    probe = subprocess.run(in_small_shm("true"), capture_output=True)
    if probe.returncode != 0:
        raise AssertionError("cannot mount a tmpfs in a mount namespace "
                             "(needs root): %r" % probe.stderr)
    prog = os.path.join(BUILD, "stress", "stress_fork") + " threads 10"
    base = {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.startswith("YM_")}
    a = subprocess.run(in_small_shm(prog), capture_output=True, env=base,
                       timeout=120)
    assert a.returncode == 0 and a.stderr == b"", (a.returncode, a.stderr)
    # Ten runs: threads that slow paths send into the creation window while
    # its maker gives up once crashed one run in three (SIGSEGV).
    for _ in range(10):
        b = subprocess.run(in_small_shm(prog, agent=True), capture_output=True,
                           timeout=120, env=base)
        assert b.returncode == 0, (b.returncode, b.stderr)
        assert a.stdout == b.stdout, (a.stdout, b.stdout)
        # One line from the process itself; each forked child (an agent of
        # its own) says it once too, never more.
        lines = b.stderr.decode().splitlines()
        assert lines and all(l.startswith("ymagent: cannot create the shared segment")
                             for l in lines), lines
        assert len(lines) <= 11, len(lines)


def test_dev_shm_full_one_warning_for_a_simple_program():
    base = {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.startswith("YM_")}
    # At the first call (the default waits for a sample, which this
    # program may not take: test_lazy.py).
    r = subprocess.run(in_small_shm("%s count:10000:100 nowait" % WORKLOAD,
                                    agent=True),
                       capture_output=True, text=True, timeout=60,
                       env=dict(base, YM_EARLY_SEGMENT="1"))
    assert r.returncode == 0 and r.stdout == "ready\n", (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and "No space left" in r.stderr, r.stderr


# ---- /dev/shm full later: the segment is sparse ----

FULL_LATER = r"""
import json, subprocess, sys
agent, prog, ymtop = sys.argv[1:4]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs",
                "/dev/shm"], check=True)
env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": agent, "YM_SAMPLE_RATE": "1"}
p = subprocess.Popen([prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, env=env, text=True)
ready = p.stdout.readline()
r = subprocess.run([ymtop, "-b", "-n", "1", "-f", "json", "-p", str(p.pid)],
                   capture_output=True, text=True, env={"PATH": env["PATH"]})
out, err = p.communicate("go\n", timeout=60)
print(json.dumps({"ready": ready, "rc": p.returncode, "stdout": out,
                  "stderr": err, "ymtop_rc": r.returncode,
                  "ymtop_err": r.stderr, "report": r.stdout}))
"""


def test_dev_shm_full_later_drops_data_never_sigbus():
    """The segment is sparse: it starts in a /dev/shm of 512 KiB, then runs
    out of it while 4096 stacks are recorded in exact mode.  The program
    runs on unchanged; the agent says so once; ymtop reads the segment and
    shows the stacks that fit and the drops."""
    probe = subprocess.run(in_small_shm("true"), capture_output=True)
    if probe.returncode != 0:
        raise AssertionError("cannot mount a tmpfs in a mount namespace "
                             "(needs root): %r" % probe.stderr)
    prog = os.path.join(BUILD, "progs", "manysites")
    r = subprocess.run(["unshare", "-m", sys.executable, "-c", FULL_LATER,
                        AGENT, prog, YMTOP],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr)
    res = json.loads(r.stdout)
    assert res["ready"] == "ready\n" and res["rc"] == 0, res
    assert res["stdout"] == "", res
    lines = res["stderr"].splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "ymagent: /dev/shm is full"), lines
    assert res["ymtop_rc"] == 0, res["ymtop_err"]
    rep = json.loads(res["report"])
    table = rep["table"]
    assert table["stacks_used"] > 50, table
    assert table["dropped_stacks"] > 0, table
    # Exact totals are per thread, not per stack: nothing of them is lost.
    assert rep["totals"]["allocated_objects"] >= 4096, rep["totals"]


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
