"""Shared helpers for the integration tests: real programs under the agent,
real ymtop runs, and a tiny runner that prints one line per test."""
import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback

BUILD = os.path.abspath(os.environ.get("YM_BUILD", "build"))
AGENT = os.path.join(BUILD, "libymagent.so")
YMTOP = os.path.join(BUILD, "ymtop")
WORKLOAD = os.path.join(BUILD, "progs", "workload")

MiB = 1024 * 1024

# ymtop writes the final reports of gone processes' segments it sweeps
# into $XDG_STATE_HOME/ymtop (man/ymtop.1): a directory of this run's,
# not the user's.
if "YM_TEST_STATE" not in os.environ:
    os.environ["YM_TEST_STATE"] = tempfile.mkdtemp(prefix="ymtop-state-")
    os.environ["XDG_STATE_HOME"] = os.environ["YM_TEST_STATE"]
    atexit.register(shutil.rmtree, os.environ["YM_TEST_STATE"], True)


def _own_pidns():
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


PIDNS_INIT = 0xEFFFFFFC


def seg_path(pid):
    """The segment of pid, a process of our pid namespace: /dev/shm/ymtop-PID,
    with the namespace's inode after a dot outside the initial one (tests
    run inside a container)."""
    ns = _own_pidns()
    if ns in (0, PIDNS_INIT):
        return "/dev/shm/ymtop-%d" % pid
    return "/dev/shm/ymtop-%d.%d" % (pid, ns)


YM_MAGIC = 0x31474553504f544d      # segment.h: header.magic ("MTOPSEG1")


def start_ticks(pid):
    """/proc/PID/stat field 22, the process's start time in clock ticks:
    with the pid it names one process (a pid is reused only after the
    whole pid space went round, ticks later)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def remove_segment(pid, ticks):
    """Remove the segment named for pid when its header says it is the one
    of process (pid, ticks) (segment.h: header.pid, header.start_ticks):
    a later process under the same pid keeps its own.  True when removed."""
    path = seg_path(pid)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        head = os.read(fd, 40)
    finally:
        os.close(fd)
    if len(head) < 40 or ticks is None:
        return False
    magic = int.from_bytes(head[0:8], "little")
    hpid = int.from_bytes(head[24:28], "little")
    hticks = int.from_bytes(head[32:40], "little")
    if magic != YM_MAGIC or hpid != pid or hticks != ticks:
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


# Every Target started and not yet known gone: its Popen and start time.
_started = []


def sweep_started():
    """The teardown after each test (run_tests) and at exit: a process a
    test started through Target and killed (SIGKILL, or any signal that
    ends it without exiting) cannot remove its segment, which would stay
    in the host's /dev/shm when the test runs by hand, outside the private
    /dev/shm tests/run.sh gives each file.  Remove those of the processes
    that are gone, only theirs (remove_segment); leave running ones be.
    Tests that look at a killed process's segment do so before they end."""
    keep = []
    for p, pid, ticks in _started:
        if p.poll() is None:
            keep.append((p, pid, ticks))
        else:
            remove_segment(pid, ticks)
    _started[:] = keep


atexit.register(sweep_started)


class Target:
    """A program started under the agent that prints 'ready' and waits for a
    line on stdin before exiting.  Its segment, if it is killed, is removed
    after the test (sweep_started)."""

    def __init__(self, argv, env=None, preload=True, ready=True, early=True):
        e = dict(os.environ)
        e.pop("LD_PRELOAD", None)
        if preload:
            e["LD_PRELOAD"] = AGENT
            # The segment at the first call, not the first sample: the
            # tests below read it whatever the workload allocated first
            # (test_lazy.py tests the default).
            if early:
                e["YM_EARLY_SEGMENT"] = "1"
        e.update(env or {})
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=e, text=True)
        self.pid = self.p.pid
        # Read before the child is reaped (poll, wait): till then the pid
        # is this process's.
        _started.append((self.p, self.pid, start_ticks(self.pid)))
        self.lines = []
        if ready:
            self.wait_for("ready")
        self.wait_segment()

    def wait_for(self, word, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            line = self.p.stdout.readline()
            if not line:
                raise AssertionError("target exited before '%s': %s" %
                                     (word, self.p.stderr.read()))
            self.lines.append(line.rstrip("\n"))
            if line.strip() == word:
                return
        raise AssertionError("timeout waiting for " + word)

    def wait_segment(self, timeout=10):
        path = seg_path(self.pid)
        end = time.time() + timeout
        while not os.path.exists(path):
            if time.time() > end:
                raise AssertionError("no segment " + path)
            time.sleep(0.02)

    def finish(self, timeout=30):
        out, err = self.p.communicate("\n", timeout=timeout)
        self.lines += out.splitlines()
        return self.p.returncode, self.lines, err

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


_readable = {}


def readable(path):
    """A copy of path that every user can read and run: the build tree may
    be in a private (0700) directory, which a test running a program as
    another user (nobody) cannot enter.  One copy per file per test run,
    in a 0755 directory under /tmp removed at exit."""
    if path not in _readable:
        if "dir" not in _readable:
            d = tempfile.mkdtemp(prefix="ymtop-readable-")
            os.chmod(d, 0o755)
            atexit.register(shutil.rmtree, d, True)
            _readable["dir"] = d
        dst = os.path.join(_readable["dir"], os.path.basename(path))
        shutil.copy2(path, dst)
        os.chmod(dst, 0o755)
        _readable[path] = dst
    return _readable[path]


def ymtop(*args, check=True, timeout=60, env=None):
    r = subprocess.run([YMTOP] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout, env=env)
    if check and r.returncode != 0:
        raise AssertionError("ymtop %s failed (%d): %s" %
                             (" ".join(map(str, args)), r.returncode, r.stderr))
    return r


class Plain(Target):
    """A program started without the agent (ymtop -p loads it): no
    segment to wait for."""

    def __init__(self, argv, env=None, ready=True):
        super().__init__(argv, env=env, preload=False, ready=ready)

    def wait_segment(self, timeout=10):
        pass


def attach(pid):
    """ymtop -p PID once (-i 0.05: the first report after an injection
    waits one interval): loads the agent; returns its JSON report."""
    r = ymtop("-b", "-n", "1", "-i", "0.05", "-f", "json", "-p", pid)
    return json.loads(r.stdout)


def report(pid, *extra):
    r = ymtop("-b", "-n", "1", "-f", "json", "-p", pid, *extra)
    return json.loads(r.stdout)


def functions(stack):
    return [f["function"] for f in stack["frames"]]


def site(rep, name):
    """The stack whose frames include function `name` (the largest)."""
    found = [s for s in rep["stacks"] if name in functions(s)]
    if not found:
        raise AssertionError("no stack through %s in %s" %
                             (name, [functions(s)[:3] for s in rep["stacks"]]))
    return max(found, key=lambda s: s["retained_bytes"])


def site_total(rep, name):
    """Retained bytes of every stack through function `name`."""
    return sum(s["retained_bytes"] for s in rep["stacks"]
               if name in functions(s))


def within(value, truth, tolerance, what):
    if abs(value - truth) > tolerance * truth:
        raise AssertionError("%s: %.0f is not within %.0f%% of %.0f" %
                             (what, value, tolerance * 100, truth))


def rerun_isolated(path, name, pid_ns=False, timeout=120):
    """Run test `name` of the file at `path` again in a mount namespace of
    its own whose /dev/shm is empty (and in a pid namespace of its own with
    pid_ns), so that no other process under the agent is found; needs root.
    True when it ran there and passed; False inside that run, or without
    root: the caller runs the test itself."""
    if os.environ.get("YM_PRIVATE_SHM") == "1" or os.geteuid() != 0:
        return False
    ns = ["unshare", "-m"] + (["-p", "-f", "--mount-proc"] if pid_ns else [])
    r = subprocess.run(
        ns + ["sh", "-c", 'mount -t tmpfs tmpfs /dev/shm && exec "$0" "$1" "$2"',
              sys.executable, os.path.abspath(path), name],
        env=dict(os.environ, YM_PRIVATE_SHM="1"), capture_output=True,
        text=True, timeout=timeout)
    assert r.returncode == 0 and "ok " + name in r.stdout, r.stdout + r.stderr
    return True


class Skip(Exception):
    """Raised by a test that cannot run here (a program is missing): the
    runner prints `skip NAME: reason` instead of passing silently."""


def run_tests(namespace):
    tests = sorted((n, f) for n, f in namespace.items()
                   if n.startswith("test_") and callable(f))
    only = sys.argv[1:]
    failed = 0
    for name, fn in tests:
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            fn()
            print("ok %s (%.1fs)" % (name, time.time() - t0), flush=True)
        except Skip as e:
            print("skip %s: %s" % (name, e), flush=True)
        except Exception as e:  # noqa: BLE001 - report every failure
            failed += 1
            print("FAIL %s: %s" % (name, e), flush=True)
            traceback.print_exc(limit=3, file=sys.stdout)
        finally:
            sweep_started()
    return 1 if failed else 0


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
