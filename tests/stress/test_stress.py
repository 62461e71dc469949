"""Torture suite driver: each tests/stress program runs without the agent and
then under it (with frequent sampling, so that the agent's slow path runs
often), and both runs must print exactly the same on stdout and stderr and
exit the same way.  Every run has a timeout: a deadlock is a failure, never
a hang.  While the agent run goes on, a concurrent ymtop reads the process's
segment as soon as it exists; whatever the timing, it must end normally
(status 0, or 1 with one line when the process exited first), never crash.

Sizes are chosen so that the whole suite takes about a minute on two cores;
`make soak` is the place for long runs."""
import os
import re
import subprocess
import sys
import threading
import time

from ymlib import AGENT, BUILD, YMTOP, run_tests, seg_path

S = os.path.join(BUILD, "stress")
PLUGIN = os.path.join(BUILD, "progs", "libplugin.so")
TIMEOUT = 120          # seconds per run: far beyond any normal run
AGENT_ENV = {"YM_SAMPLE_RATE": "4096"}


def clean_env(extra=None):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("YM_") and k != "YM_BUILD" or k == "LD_PRELOAD":
            del e[k]
    e.update(extra or {})
    return e


class Reader(threading.Thread):
    """ymtop in batch mode against pid, started as soon as its segment
    appears, reporting every 50 ms until the process exits."""

    def __init__(self, pid, done):
        super().__init__(daemon=True)
        self.pid, self.done = pid, done
        self.results = []

    def run(self):
        path = seg_path(self.pid)
        while not self.done.is_set():
            if os.path.exists(path):
                r = subprocess.run([YMTOP, "-b", "-i", "0.05", "-f", "json",
                                    "-p", str(self.pid)], capture_output=True,
                                   text=True, timeout=TIMEOUT)
                self.results.append(r)
                return
            time.sleep(0.005)


def check_reader(rd):
    for r in rd.results:
        # 1 only for a process gone before ymtop opened its segment.
        assert r.returncode in (0, 1), \
            "ymtop ended with %d: %s" % (r.returncode, r.stderr[-500:])
        if r.returncode == 1:
            assert r.stderr.count("\n") == 1, r.stderr[-500:]
        else:
            assert r.stdout.startswith("{"), r.stdout[:200]


def session_stacks(sid):
    """Every thread's stack of every process in session sid (gdb, when
    installed): what a hung run was waiting for."""
    import shutil
    if not shutil.which("gdb"):
        return "(no gdb: no stacks)"
    out = []
    pids = subprocess.run(["pgrep", "-s", str(sid)], capture_output=True,
                          text=True).stdout.split()
    for q in pids[:8]:
        r = subprocess.run(["gdb", "-p", q, "-batch", "-nx", "-ex",
                            "thread apply all bt 24"], capture_output=True,
                           text=True, timeout=60)
        out.append("== pid %s\n%s" % (q, "\n".join(
            l for l in r.stdout.splitlines()
            if l.startswith(("#", "Thread")))[-6000:]))
    return "\n".join(out)


def run(argv, env, stdin=None, shell=False):
    # A session of its own: a deadlocked run is killed with all its
    # children (a child stuck after fork outlives its parent otherwise).
    p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         shell=shell, start_new_session=True)
    done = threading.Event()
    rd = None
    if "LD_PRELOAD" in env:
        rd = Reader(p.pid, done)
        rd.start()
    try:
        out, err = p.communicate(stdin, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        stacks = session_stacks(p.pid)
        os.killpg(p.pid, 9)
        p.communicate()
        raise AssertionError("%s did not finish within %d s (deadlock?)\n%s" %
                             (argv, TIMEOUT, stacks))
    finally:
        done.set()
    if rd:
        rd.join(TIMEOUT)
        assert not rd.is_alive(), "ymtop did not end after the target exited"
        check_reader(rd)
    return p.returncode, out, err


def stray_segments():
    """Segments in /dev/shm of processes that no longer exist, written by a
    stress program (the agent removes its segment at every exit path)."""
    found = set()
    for n in os.listdir("/dev/shm"):
        m = re.fullmatch(r"ymtop-(\d+)", n)
        if not m or os.path.exists("/proc/" + m.group(1)):
            continue
        try:
            with open("/dev/shm/" + n, "rb") as f:
                head = f.read(4096)
        except OSError:
            continue
        if S.encode() in head:
            found.add(n)
    return found


def same(argv, shell=False, env=None, rate=None):
    """argv without and with the agent: identical stdout, stderr, status."""
    before = stray_segments()
    base = clean_env(env)
    a = run(argv, base, shell=shell)
    agent_env = dict(AGENT_ENV)
    if rate:
        agent_env["YM_SAMPLE_RATE"] = str(rate)
    b = run(argv, dict(base, LD_PRELOAD=AGENT, **agent_env), shell=shell)
    assert a[0] == b[0], "exit status %d without the agent, %d with" % (a[0], b[0])
    assert a[1] == b[1], "stdout differs:\n%s\n---\n%s" % (a[1][-600:], b[1][-600:])
    assert a[2] == b[2], "stderr differs:\n%s\n---\n%s" % (a[2][-600:], b[2][-600:])
    assert a[0] == 0 or argv[0].endswith("sh"), "%s failed (%d): %s" % (argv, a[0], a[2])
    assert a[1], "no output from %s" % argv
    left = stray_segments() - before
    assert not left, "segments left behind: %s" % sorted(left)
    return a


def p(name):
    return os.path.join(S, name)


# ---- threads ----

def test_thread_waves_with_cross_thread_free():
    same([p("stress_threads"), "waves", "20", "100"])


def test_detached_threads_by_thousands():
    same([p("stress_threads"), "detached", "2000"])


def test_thread_storm_with_reader_attached():
    """The reader attaches for certain here: the program runs thread waves
    until its stdin closes, which happens after ymtop has written three
    reports while threads were being created and destroyed."""
    env = dict(clean_env(), LD_PRELOAD=AGENT, **AGENT_ENV)
    t = subprocess.Popen([p("stress_threads"), "storm"], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert t.stdout.readline() == "ready\n"
        r = subprocess.run([YMTOP, "-b", "-i", "0.1", "-n", "3", "-f", "json",
                            "-p", str(t.pid)], capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        reports = [line for line in r.stdout.splitlines() if line]
        assert len(reports) == 3, len(reports)
        out, err = t.communicate("", timeout=TIMEOUT)
    finally:
        if t.poll() is None:
            t.kill()
            t.wait()
    assert t.returncode == 0 and out == "done\n" and err == "", (out, err)


# ---- processes ----

def test_fork_storm():
    same([p("stress_fork"), "storm", "200"])


def test_fork_while_threads_allocate():
    """Sampling every 512 bytes, so that forks often happen while another
    thread unwinds or holds a table lock: the child must not deadlock
    on a lock its parent's thread held at the fork."""
    same([p("stress_fork"), "threads", "100"], rate=512)


def test_fork_while_threads_allocate_under_a_cost_budget():
    """The budget's window judged by whichever thread samples, the rate
    changed under the others, forks in between: the program sees
    nothing."""
    same([p("stress_fork"), "threads", "100"], rate=512,
         env={"YM_MAX_OVERHEAD": "0.5"})


def test_thread_waves_under_a_cost_budget():
    same([p("stress_threads"), "waves", "20", "100"], rate=512,
         env={"YM_MAX_OVERHEAD": "0.1"})


def test_fork_without_exec_nested():
    same([p("stress_fork"), "nested", "8"])


def test_vfork_exec():
    same([p("stress_fork"), "vfork", "100"])


def test_posix_spawn_while_threads_allocate():
    same([p("stress_fork"), "spawn", "60"])


def test_exec_chain_through_sh():
    same([p("stress_fork"), "chain", "10"])


def test_exec_chain_sh_c_exec():
    """sh -c 'exec ...' at the top: the shell's image is replaced by the
    program, which replaces itself again down the chain."""
    same(["sh", "-c", "exec %s chain 4" % p("stress_fork")])


def test_dlopen_dlclose_loops():
    same([p("stress_dlopen"), PLUGIN, "50"])


# ---- signals, exceptions, jumps ----

def test_signals_interrupt_allocation():
    same([p("stress_signal"), "timer", "2000"])


def test_pthread_kill_allocating_threads():
    same([p("stress_signal"), "kill", "300"])


def test_handler_allocates_outside_allocator():
    same([p("stress_signal"), "outside", "2000"])


def test_siglongjmp_out_of_handler():
    same([p("stress_signal"), "jump", "1000"])


def test_cxx_exceptions_through_allocating_frames():
    same([p("stress_cxx"), "500"])


def test_setjmp_longjmp_out_of_recursion():
    same([p("stress_misc"), "longjmp", "1000"])


# ---- the allocator's edges, life outside main, out of memory ----

def test_edges_malloc0_sizemax_realloc_memalign():
    out = same([p("stress_misc"), "edges"])[1].decode()
    # The cases the issue names are really in the output compared.
    for what in ("malloc(0)", "malloc(SIZE_MAX)", "realloc(NULL,0)",
                 "realloc(p,0)", "memalign(3,100)", "posix_memalign(7,100)",
                 "aligned_alloc(0,0)", "calloc(SIZE_MAX/2,3) overflow"):
        assert what in out, what


def test_constructors_destructors_atexit():
    out = same([p("stress_misc"), "lifecycle"])[1].decode()
    assert "constructor" in out and "atexit" in out and "destructor" in out, out


def test_out_of_memory_under_ulimit():
    out = same(["sh", "-c", "ulimit -v 400000; exec %s" % p("stress_oom")])[1]
    assert b"errno=ENOMEM" in out and b"after release: 100/100" in out, out


def test_address_space_too_small_for_the_segment():
    """With 200 MB of address space the agent cannot map a segment for
    four million stacks: it stays passive with one warning on stderr and
    the program runs on unchanged (stdout, status)."""
    cmd = "ulimit -v 200000; exec %s edges" % p("stress_misc")
    base = clean_env()
    a = run(["sh", "-c", cmd], base)
    b = run(["sh", "-c", cmd], dict(base, LD_PRELOAD=AGENT,
                                    YM_MAX_STACKS="4194303"))
    assert a[0] == b[0] == 0 and a[1] == b[1], (a[0], b[0])
    assert a[2] == b"", a[2]
    assert b[2].count(b"\n") == 1 and b[2].startswith(b"ymagent: cannot create"), b[2]


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
