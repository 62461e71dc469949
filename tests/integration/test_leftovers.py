"""Segments left behind (man/ymagent.7): the commands of a shell that
ymtop -p injected, and processes that exec a program without the agent,
leave no segment in /dev/shm.  Each test counts the segments of a /dev/shm
of its own (rerun_isolated: other agents run beside the tests)."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ymlib import (AGENT, BUILD, MiB, Plain, Skip, Target, attach, functions,
                   remove_segment, rerun_isolated, report, run_tests, seg_path,
                   sweep_started)

EXECER = os.path.join(BUILD, "progs", "execer")
WORKLOAD = os.path.join(BUILD, "progs", "workload")
PYTHON3 = "/usr/bin/python3"

# Commands as a shell runs them: fork and exec (ls, cat, true), a
# command substitution, a pipeline, a subshell; and children that sample
# before they exec (a 4 MB string: a sample at the default rate in all
# but e^-8 of runs).
COMMANDS = ("ls / >/dev/null; x=$(date); /bin/true; echo hi | cat >/dev/null; "
            "(echo sub) >/dev/null\n") * 20 + \
           ("(s=$(head -c 4000000 /dev/zero | tr '\\0' a); exec /bin/true)\n") * 3


def segments():
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith("ymtop-"))


def test_commands_of_an_injected_shell_leave_no_segment():
    if rerun_isolated(__file__, "test_commands_of_an_injected_shell_leave_no_segment"):
        return
    bash = shutil.which("bash")
    if not bash:
        raise Skip("no bash")
    assert not segments() or os.environ.get("YM_PRIVATE_SHM") != "1"
    before = set(segments())
    t = Plain([bash, "--norc", "--noprofile", "-i"], ready=False)
    try:
        attach(t.pid)
        own = os.path.basename(seg_path(t.pid))
        t.p.stdin.write(COMMANDS + "echo done-$((6*7))\n")
        t.p.stdin.flush()
        t.wait_for("done-42")
        left = sorted(set(segments()) - before)
        assert left == [own], "left behind: %s (the shell's is %s)" % (left, own)
        t.p.stdin.write("exit\n")
        t.p.stdin.flush()
        t.p.wait(timeout=30)
        left = sorted(set(segments()) - before)
        assert left == [], "left behind after the shell exited: %s" % left
    finally:
        t.kill()


def test_exec_removes_the_name_and_a_failed_exec_keeps_the_segment():
    """A failed exec (execvp's search, execl) leaves the process with its
    segment under its name, still written; one that succeeds into a
    program without the agent leaves nothing."""
    t = Target([EXECER], env={"YM_SAMPLE_RATE": "65536"})
    path = seg_path(t.pid)
    try:
        for cmd in ("bad", "badl"):
            t.p.stdin.write(cmd + "\n")
            t.p.stdin.flush()
            t.wait_for("failed")
            assert os.path.exists(path), "a failed exec took the segment"
        t.p.stdin.write("alloc\n")
        t.p.stdin.flush()
        t.wait_for("ready")
        rep = report(t.pid)
        held = sum(s["retained_bytes"] for s in rep["stacks"]
                   if "hold_site" in functions(s))
        assert abs(held - 8 * MiB) < 0.5 * MiB, held
        t.p.stdin.write("exec\n")
        t.p.stdin.flush()
        exe = ""
        for _ in range(1000):
            exe = os.readlink("/proc/%d/exe" % t.pid)
            if exe.endswith("/sleep"):
                break
            time.sleep(0.01)
        assert exe.endswith("/sleep"), exe
        assert not os.path.exists(path), "an exec'd process left its segment"
    finally:
        t.kill()


def test_a_killed_process_leaves_a_report_not_a_segment():
    """A SIGKILLed process (an OOM kill) cannot remove its segment, the
    only record of what it held.  ymtop never shows it as live; when it
    looks for agents it writes the segment's final report into the state
    directory, removes the segment and says both in one line."""
    if rerun_isolated(__file__, "test_a_killed_process_leaves_a_report_not_a_segment",
                      pid_ns=True):
        return
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    seg = seg_path(t.pid)
    t.kill()
    assert os.path.exists(seg), "the killed process's segment is gone"
    with tempfile.TemporaryDirectory() as state:
        env = dict(os.environ, XDG_STATE_HOME=state)
        r = subprocess.run([os.path.join(BUILD, "ymtop"), "-b", "-n", "1"],
                           capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 1 and "no running process" in r.stderr, r.stderr
        lines = [l for l in r.stderr.splitlines() if "removed its segment" in l]
        assert len(lines) == 1 and "process %d " % t.pid in lines[0], r.stderr
        assert "without exiting" in lines[0], lines[0]
        assert not os.path.exists(seg)
        files = os.listdir(os.path.join(state, "ymtop"))
        assert len(files) == 1 and files[0].endswith("-%d-" % t.pid +
                                                     files[0].split("-")[-1]), files
        path = os.path.join(state, "ymtop", files[0])
        assert path in lines[0], lines[0]
        text = open(path).read()
        assert "hold_big" in text, text[:2000]


def test_a_gone_container_leaves_a_report_not_a_segment():
    """A container sharing our /dev/shm (no /dev/shm of its own) is killed
    with its agent process: no process is in its pid namespace any more,
    so a root ymtop keeps the segment's report and removes it."""
    if rerun_isolated(__file__, "test_a_gone_container_leaves_a_report_not_a_segment",
                      pid_ns=True):
        return
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise Skip("needs root and unshare")
    c = subprocess.Popen(
        ["unshare", "--pid", "--mount", "--fork", "--propagation", "private",
         "sh", "-c", 'mount -t proc proc /proc; exec env LD_PRELOAD="$0" '
         'YM_EARLY_SEGMENT=1 YM_SAMPLE_RATE=65536 "$1" big', AGENT, WORKLOAD],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    assert c.stdout.readline().strip() == "ready", c.stderr.read()
    names = [n for n in segments() if "." in n]
    assert len(names) == 1, segments()
    inner = subprocess.run(["pgrep", "-P", str(c.pid)], capture_output=True,
                           text=True).stdout.split()
    assert len(inner) == 1, inner
    os.kill(int(inner[0]), 9)     # its pid 1: the namespace goes with it
    c.wait()
    with tempfile.TemporaryDirectory() as state:
        env = dict(os.environ, XDG_STATE_HOME=state)
        for _ in range(500):      # the namespace's pid 1 dies after unshare
            r = subprocess.run([os.path.join(BUILD, "ymtop"), "-b", "-n", "1"],
                               capture_output=True, text=True, env=env, timeout=60)
            if "removed its segment" in r.stderr:
                break
            time.sleep(0.02)
        lines = [l for l in r.stderr.splitlines() if "removed its segment" in l]
        assert len(lines) == 1 and "pid namespace" in lines[0], r.stderr
        assert names[0] not in segments()
        files = os.listdir(os.path.join(state, "ymtop"))
        text = open(os.path.join(state, "ymtop", files[0])).read()
        assert "hold_big" in text, text[:2000]



def test_an_unreadable_file_under_the_pid_is_stale_when_not_mapped():
    """pids wrap: a process may meet, under its name, a file it never
    mapped (a dead process's segment of a layout this ymtop cannot read, or
    not a segment at all).  ymtop -p says it is stale, removes it and
    loads the agent."""
    workload = os.path.join(BUILD, "progs", "workload")
    import struct
    junk = os.urandom(8192)
    # "MTOPSEG1", then ABI 99 that only an ABI-99 reader reads.
    future = struct.pack("<QHH", 0x31474553504f544d, 99, 99) + bytes(8192)
    for content, said in ((junk, "bad magic"), (future, "ABI version 99")):
        t = Plain([workload])
        try:
            path = seg_path(t.pid)
            with open(path, "wb") as f:
                f.write(content)
            os.chmod(path, 0o600)
            r = subprocess.run([os.path.join(BUILD, "ymtop"), "-b", "-n", "1",
                                "-i", "0.05", "-f", "json", "-p", str(t.pid)],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            assert ("the segment ymtop-%d is stale (its process does not map "
                    "it: " % t.pid) in r.stderr and said in r.stderr and \
                "removed it" in r.stderr, r.stderr
            assert '"pid":%d' % t.pid in r.stdout.replace(" ", ""), r.stdout[:300]
            with open(path, "rb") as f:
                assert f.read(8) == struct.pack("<Q", 0x31474553504f544d)
        finally:
            t.kill()


def start_us(pid):
    """pid's start, microseconds after boot (/proc/PID/stat field 22)."""
    with open("/proc/%d/stat" % pid) as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    return ticks * 1000000 // os.sysconf("SC_CLK_TCK")


def sweep_line(pid, kmsg):
    """Kill a fresh agent process, then let ymtop find its segment with
    YM_KMSG=kmsg(start) (the kernel log's text, or a path when a str):
    the line ymtop says about it."""
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    start = start_us(t.pid)
    t.kill()
    with tempfile.TemporaryDirectory() as state:
        log = kmsg(t.pid, start)
        if isinstance(log, bytes):
            path = os.path.join(state, "kmsg")
            with open(path, "wb") as f:
                f.write(log)
            log = path
        env = dict(os.environ, XDG_STATE_HOME=state, YM_KMSG=log)
        r = subprocess.run([os.path.join(BUILD, "ymtop"), "-b", "-n", "1"],
                           capture_output=True, text=True, env=env, timeout=60)
        lines = [l for l in r.stderr.splitlines() if "removed its segment" in l]
        assert len(lines) == 1 and "process %d " % t.pid in lines[0], r.stderr
        assert os.listdir(os.path.join(state, "ymtop")), "no final report"
        return lines[0]


def test_an_oom_kill_is_named_from_the_kernel_log():
    """A process killed without exiting, found later: the kernel log's
    records (here a file in /dev/kmsg's format, YM_KMSG) say whether the
    OOM killer took it, else the line says it is not known and why."""
    if os.readlink("/proc/self/ns/pid") != "pid:[4026531836]":
        raise Skip("not in the initial pid namespace: the kernel log's pids are not ours")
    if rerun_isolated(__file__, "test_an_oom_kill_is_named_from_the_kernel_log"):
        return

    def record(seq, us, text):
        return ("6,%d,%d,-;%s\n" % (seq, us, text)).encode()

    def killed(pid, start):
        return (record(1, 0, "Linux version 6.1") +
                record(2, start + 500000, "workload invoked oom-killer: gfp_mask=0xcc0") +
                b" SUBSYSTEM=memory\n" +
                record(3, start + 600000, "oom-kill:constraint=CONSTRAINT_MEMCG,"
                       "task=workload,pid=%d,uid=0" % pid) +
                record(4, start + 600001, "Memory cgroup out of memory: Killed process "
                       "%d (workload) total-vm:10000kB" % pid))
    line = sweep_line(0, killed)
    assert "killed by the OOM killer" in line, line

    def other(pid, start):   # another pid's kill, and one of this pid before it started
        return (record(1, 0, "Linux version 6.1") +
                record(2, max(start - 2000000, 1), "Out of memory: Killed process %d (old)" % pid) +
                record(3, start + 1000, "Out of memory: Killed process %d (x)" % (pid + 1)) +
                record(4, start + 2000, "oom-kill:constraint=CONSTRAINT_NONE,pid=%d1,uid=0" % pid))
    line = sweep_line(0, other)
    assert "not the OOM killer" in line and "without exiting" in line, line

    line = sweep_line(0, lambda pid, start: "/nonexistent/kmsg")
    assert "not known" in line and "kernel log is unreadable" in line, line

    line = sweep_line(0, lambda pid, start: record(9, start + 5000000, "later"))
    assert "not known" in line and "kernel log starts" in line, line


def test_a_real_oom_kill_in_a_memory_cgroup():
    """python3 under the agent in a memory cgroup of 64 MiB allocates
    until the OOM killer takes it; a later ymtop says so (from
    /dev/kmsg).  Needs root, a writable memory cgroup and a readable
    kernel log."""
    if os.geteuid() != 0 or os.readlink("/proc/self/ns/pid") != "pid:[4026531836]":
        raise Skip("needs root in the initial pid namespace")
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        try:
            os.read(fd, 8192)
        except BlockingIOError:
            pass
        finally:
            os.close(fd)
    except OSError as e:
        raise Skip("the kernel log is unreadable: %s" % e)
    if not os.access(PYTHON3, os.X_OK):
        raise Skip("%s is not installed" % PYTHON3)
    if rerun_isolated(__file__, "test_a_real_oom_kill_in_a_memory_cgroup"):
        return
    v1 = "/sys/fs/cgroup/memory"
    name = "ymtop-test-oom-%d" % os.getpid()
    if os.path.isdir(v1):
        cg, limit = os.path.join(v1, name), "memory.limit_in_bytes"
    elif os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        cg, limit = os.path.join("/sys/fs/cgroup", name), "memory.max"
    else:
        raise Skip("no memory cgroup")
    try:
        os.mkdir(cg)
        with open(os.path.join(cg, limit), "w") as f:
            f.write(str(64 << 20))
    except OSError as e:
        raise Skip("cannot make a memory cgroup: %s" % e)
    try:
        prog = ("import os\n"
                "open('%s/cgroup.procs', 'w').write(str(os.getpid()))\n"
                "print('ready', flush=True)\n"
                "held = []\n"
                "while True:\n"
                "    held.append(bytearray(1 << 20))\n") % cg
        # Debian's interpreter by path: a python3 earlier in PATH may be a
        # shim (pyenv: a shell script) whose shells and helpers would run
        # under the agent and in the cgroup too.
        p = subprocess.Popen([PYTHON3, "-c", prog],
                             env=dict(os.environ, LD_PRELOAD=AGENT, YM_SAMPLE_RATE="65536"),
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        p.wait(timeout=120)
        assert p.returncode == -9, p.returncode
        assert os.path.exists(seg_path(p.pid)), "the killed process's segment is gone"
        with tempfile.TemporaryDirectory() as state:
            env = {k: v for k, v in os.environ.items() if k != "YM_KMSG"}
            env["XDG_STATE_HOME"] = state
            r = subprocess.run([os.path.join(BUILD, "ymtop"), "-b", "-n", "1"],
                               capture_output=True, text=True, env=env, timeout=60)
            lines = [l for l in r.stderr.splitlines() if "removed its segment" in l]
            assert len(lines) == 1 and "process %d " % p.pid in lines[0], r.stderr
            assert "killed by the OOM killer" in lines[0], lines[0]
    finally:
        for _ in range(100):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.05)


# A test file run by hand (PYTHONPATH=tests/lib python3 tests/integration/
# test_x.py) shares the host's /dev/shm: the segment of every target a
# test killed must go with the test (ymlib.sweep_started).
KILLER = """
import os, sys
from ymlib import Target, run_tests
def test_kill():
    t = Target([os.environ["YM_KILLER_PROG"]])
    print("pid %d" % t.pid, flush=True)
    t.kill()
sys.exit(run_tests(globals()))
"""


def test_a_target_a_test_killed_leaves_no_segment():
    """A test that starts a target through ymlib and kills it (SIGKILL:
    the agent cannot remove its segment) leaves no segment of that pid
    once the test is over."""
    with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
        f.write(KILLER)
        f.flush()
        r = subprocess.run([sys.executable, f.name], capture_output=True,
                           text=True, timeout=120,
                           env=dict(os.environ, YM_KILLER_PROG=WORKLOAD))
    assert "ok test_kill" in r.stdout, r.stdout + r.stderr
    pid = int(r.stdout.split("pid ")[1].split()[0])
    assert not os.path.exists(seg_path(pid)), "segment of killed %d left" % pid


def test_the_sweep_removes_only_the_killed_targets_own_segment():
    """The sweep removes a segment by the pid and start time in its
    header: one under the same pid with another start (the pid reused
    by a later process) stays, and so does a running target's."""
    live = Target([WORKLOAD])
    t = Target([WORKLOAD])
    seg = seg_path(t.pid)
    try:
        t.kill()
        assert os.path.exists(seg), "the killed process's segment is gone"
        with open(seg, "r+b") as f:           # header.start_ticks + 1
            f.seek(32)
            ticks = int.from_bytes(f.read(8), "little")
            f.seek(32)
            f.write((ticks + 1).to_bytes(8, "little"))
        sweep_started()
        assert os.path.exists(seg), "another process's segment was removed"
        assert os.path.exists(seg_path(live.pid)), "a running target's went"
        with open(seg, "r+b") as f:
            f.seek(32)
            f.write(ticks.to_bytes(8, "little"))
        assert remove_segment(t.pid, ticks) and not os.path.exists(seg)
    finally:
        live.kill()
        t.kill()
        for p in (seg, seg_path(live.pid)):
            if os.path.exists(p):
                os.unlink(p)


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
