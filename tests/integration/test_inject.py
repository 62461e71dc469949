"""ymtop -p into processes started without the agent (issue 5): the agent is
loaded through ptrace, hooks the malloc family by GOT patching, and the
program's output and exit status stay what they would have been."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from ymlib import (AGENT, BUILD, MiB, YMTOP, Skip, Target, functions, readable,
                   report, run_tests, site, within, ymtop, seg_path)

PROGS = os.path.join(BUILD, "progs")
PLUGIN = os.path.join(PROGS, "libplugin.so")
# Nearly every 64 KiB block is sampled: estimates close to the truth.
RATE = {"YM_SAMPLE_RATE": "4096"}


class Plain(Target):
    """A program started without the agent: no segment to wait for."""

    def __init__(self, argv, env=None, ready=True):
        super().__init__(argv, env=env, preload=False, ready=ready)

    def wait_segment(self, timeout=10):
        pass

    def send(self, text):
        self.p.stdin.write(text)
        self.p.stdin.flush()

    def expect(self, want):
        """The next line of output must be `want` (never waits for more)."""
        line = self.p.stdout.readline().rstrip("\n")
        self.lines.append(line)
        assert line == want, (line, self.lines)

    def agent_maps(self):
        with open("/proc/%d/maps" % self.pid) as f:
            return {l.split()[-1] for l in f if "libymagent" in l}


def prog(name):
    return os.path.join(PROGS, name)


def inject(t, verbose=True):
    """First ymtop -p: loads the agent; returns (report, pause_ms, wall_s)."""
    env = dict(os.environ)
    if verbose:
        env["YM_INJECT_VERBOSE"] = "1"
    t0 = time.time()
    # -i 0.05: the first report after an injection waits one interval
    # (3 s without -i), which these tests and inject_timing do not measure.
    r = subprocess.run([YMTOP, "-b", "-n", "1", "-i", "0.05", "-f", "json", "-p",
                        str(t.pid)], capture_output=True, text=True, timeout=60,
                       env=env)
    wall = time.time() - t0
    if r.returncode != 0:
        raise AssertionError("ymtop -p failed (%d): %s" % (r.returncode, r.stderr))
    m = re.search(r"paused ([0-9.]+) ms", r.stderr)
    assert m, "no injection line: %r" % r.stderr
    import json
    rep = json.loads(r.stdout)
    assert rep["attached"] is True, rep
    return rep, float(m.group(1)), wall


def test_read_on_pipe_resumes_and_is_profiled():
    t = Plain([prog("inject_read")], env=RATE)
    try:
        inject(t)
        # The path visible in the target: dlopen'ed by its path, no memfd.
        assert t.agent_maps() == {os.path.realpath(AGENT)}, t.agent_maps()
        t.send("hello\n")
        t.expect("got hello")
        t.expect("early ok")
        within(site(report(t.pid), "read_site")["retained_bytes"], 8 * MiB,
               0.10, "read_site retained")
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 3, (rc, err)
    assert lines == ["ready", "got hello", "early ok"], lines
    assert "ymagent" not in err, err


def test_sigwait_resumes_and_is_profiled():
    t = Plain([prog("inject_sigwait")], env=RATE)
    try:
        inject(t)
        time.sleep(0.05)
        os.kill(t.pid, signal.SIGUSR1)
        t.expect("signal %d" % signal.SIGUSR1)
        within(site(report(t.pid), "sigwait_site")["retained_bytes"], 4 * MiB,
               0.10, "sigwait_site retained")
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 4, (rc, err)
    assert lines == ["ready", "signal %d" % signal.SIGUSR1], lines


def injected_thread(t):
    env = dict(os.environ, YM_INJECT_VERBOSE="1")
    r = subprocess.run([YMTOP, "-b", "-n", "1", "-p", str(t.pid)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    m = re.search(r"thread (\d+) paused", r.stderr)
    assert m, r.stderr
    return int(m.group(1))


def test_blocking_calls_resume_with_their_timeout():
    """nanosleep, epoll_wait, poll and a futex wait of 1.5 s, interrupted by
    the injection, return as they would have: no EINTR, full time."""
    for mode in ("sleep", "epoll", "poll", "futex"):
        t = Plain([prog("inject_block"), mode], env=RATE)
        try:
            time.sleep(0.2)
            assert injected_thread(t) == t.pid
            t.expect("%s ok" % mode)
            within(site(report(t.pid), "block_site")["retained_bytes"],
                   4 * MiB, 0.10, "block_site retained")
            rc, lines, err = t.finish()
        finally:
            t.kill()
        assert rc == 0 and lines == ["ready", "%s ok" % mode], (rc, lines, err)


def test_full_register_state_restored():
    """The main thread spins in user code with all vector registers set;
    dlopen clobbers them; the injector must put them back (xsave state)."""
    t = Plain([prog("inject_spin")])
    try:
        time.sleep(0.1)
        assert injected_thread(t) == t.pid
        os.kill(t.pid, signal.SIGUSR1)
        t.expect("registers ok")
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 0 and lines == ["ready", "registers ok"], (rc, lines, err)


def test_eight_allocating_threads():
    t = Plain([prog("inject_threads")])
    try:
        inject(t)
        time.sleep(0.3)
        rep = report(t.pid)
        s = site(rep, "thread_site")
        assert s["allocated_objects"] > 0, s
        assert rep["totals"]["allocated_objects"] > 1000, rep["totals"]
        assert len(rep["threads"]) >= 8, rep["threads"]
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 0, (rc, lines, err)
    assert lines == ["ready", "checked ok"], lines


def test_cxx_new_delete():
    t = Plain([prog("inject_cxx")], env=RATE)
    try:
        inject(t)
        t.send("go\n")
        t.expect("allocated")
        rep = report(t.pid)
        # Demangled: "cxx_site()".
        found = [s for s in rep["stacks"]
                 if any(f.startswith("cxx_site") for f in functions(s))]
        assert found, [functions(s) for s in rep["stacks"]]
        s = max(found, key=lambda x: x["retained_bytes"])
        within(sum(x["retained_bytes"] for x in found), 8 * MiB, 0.10,
               "cxx_site retained")
        assert any("operator new" in f for f in functions(s)), functions(s)
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 0, (rc, err)
    assert lines == ["ready", "allocated"], lines


PY = r"""
import sys
print("ready", flush=True)
sys.stdin.readline()
held = [bytearray(65536) for _ in range(128)]
print("allocated %d" % len(held), flush=True)
sys.stdin.readline()
sys.exit(5)
"""


def test_python_script():
    py = sys.executable if os.path.exists(sys.executable) else "python3"
    t = Plain([py, "-c", PY], env=RATE)
    try:
        before = inject(t)[0]["totals"]["requested_bytes"]
        t.send("go\n")
        t.expect("allocated 128")
        after = report(t.pid)["totals"]["requested_bytes"]
        assert after - before >= 8 * MiB, (before, after)
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 5, (rc, err)
    assert lines == ["ready", "allocated 128"], lines


def test_non_pie_program_that_takes_mallocs_address_is_counted():
    """An executable built without PIE whose code takes malloc's and free's
    addresses exports its own PLT stubs as them (canonical PLT entries),
    and dlsym(RTLD_DEFAULT, "malloc") answers the stub.  The agent took
    that stub for the real malloc: it rewrote none of the slots bound to
    libc's, counted nothing the program allocated and found no allocator
    statistics (0 calls, heap null).  Both the direct calls and the calls
    through the address taken must count."""
    rep = held_after_attach([prog("inject_nopie")])
    within(site(rep, "direct_site")["retained_bytes"], 32 * MiB, 0.1,
           "direct_site")
    within(site(rep, "pointer_site")["retained_bytes"], 32 * MiB, 0.1,
           "pointer_site")
    assert rep["totals"]["allocated_objects"] >= 1024, rep["totals"]
    assert rep["heap"] and rep["heap"]["allocator"] == "glibc", rep["heap"]


def held_after_attach(argv):
    """argv started without the agent prints "ready"; ymtop -p loads the
    agent; a line makes it allocate and print "held"; the report then,
    before another line lets it exit 0."""
    t = Plain(argv, env=RATE)
    try:
        inject(t)
        t.send("go\n")
        t.expect("held")
        rep = report(t.pid)
        t.send("x\n")
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 0, (rc, err)
    assert lines == ["ready", "held"], lines
    return rep


PY_HELD = r"""
import sys
print("ready", flush=True)
sys.stdin.readline()
held = [bytearray(1 << 20) for _ in range(50)]
print("held", flush=True)
sys.stdin.readline()
"""


def non_pie(path):
    """An ELF executable of type ET_EXEC (not position-independent)."""
    with open(path, "rb") as f:
        head = f.read(18)
    return head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 2


def test_debian_python3_attached_counts_its_allocations():
    """Debian's /usr/bin/python3.11 is built without PIE and takes malloc's
    and free's addresses: attached, it showed 65 calls and 1.6 MiB
    retained while it held 50 MiB more, and no heap figures."""
    py = os.path.realpath("/usr/bin/python3")
    if not os.path.exists(py) or not non_pie(py):
        raise Skip("no non-PIE /usr/bin/python3 here")
    rep = held_after_attach([py, "-c", PY_HELD])
    held = sum(s["retained_bytes"] for s in rep["stacks"]
               if s["retained_bytes"] >= 8 * MiB)
    within(held, 50 * MiB, 0.15, "python3's 50 bytearrays")
    assert rep["heap"] and rep["heap"]["allocator"] == "glibc", rep["heap"]


PY_FREES_OLDER = r"""
import sys
held = [bytearray(1 << 20) for _ in range(40)]
print("ready", flush=True)
sys.stdin.readline()
del held
print("held", flush=True)
sys.stdin.readline()
"""


def test_frees_of_blocks_from_before_the_attach_are_no_negative_in_use():
    """Exact mode after ymtop -p: Debian's python3 frees 40 MiB it held
    before the attach.  Those frees are counted, their allocations never
    were: allocated minus freed came out as in use -40 MiB in the report,
    the JSON totals and the screen.  It is a net change since the attach,
    labelled so; the allocator's statistics say what is in use."""
    py = os.path.realpath("/usr/bin/python3")
    if not os.path.exists(py):
        raise Skip("no /usr/bin/python3 here")
    t = Plain([py, "-c", PY_FREES_OLDER], env={"YM_SAMPLE_RATE": "1"})
    try:
        inject(t)
        t.send("go\n")
        t.expect("held")
        rep = report(t.pid)
        text = ymtop("-b", "-n", "1", "-f", "text", "-p", t.pid).stdout
        d = tempfile.mkdtemp()
        try:
            db = os.path.join(d, "heap.db")
            ymtop("-b", "-n", "1", "-f", "sqlite", "-o", db, "-p", t.pid)
            meta = subprocess.run(["sqlite3", db, "SELECT in_use_bytes IS NULL, "
                                   "freed_bytes > allocated_bytes FROM meta"],
                                  capture_output=True, text=True, timeout=60)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        t.send("x\n")
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 0, (rc, err)
    assert rep["sample_rate"] == 1 and rep["attached"] is True, rep["sample_rate"]
    tot = rep["totals"]
    assert "in_use_bytes" not in tot, tot
    assert tot["net_change_bytes"] <= -30 * MiB, tot
    assert tot["net_change_bytes"] == tot["allocated_bytes"] - tot["freed_bytes"], tot
    x = rep["rss_explained"]
    assert x["counted_in_use_bytes"] is None, x
    assert x["counted_net_change_bytes"] == tot["net_change_bytes"], x
    # The allocator's own statistics are the in use after an attach.
    assert rep["heap"]["in_use_bytes"] > 0, rep["heap"]
    exact = [l for l in text.splitlines() if l.startswith("exact totals")]
    assert len(exact) == 1 and "net change -" in exact[0], exact
    assert not re.search(r"in use *-[0-9]", text), text
    assert re.search(r"counted net change +-", text), text
    assert meta.returncode == 0 and meta.stdout.strip() == "1|1", meta


def test_dlopen_after_attach_is_hooked():
    t = Plain([prog("inject_dlopen"), PLUGIN], env=RATE)
    try:
        inject(t)
        t.send("go\n")
        t.expect("loaded ok")
        s = site(report(t.pid), "plugin_site")
        within(s["retained_bytes"], 8 * MiB, 0.10, "plugin_site retained")
        assert "plugin_alloc" in functions(s), functions(s)
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 0, (rc, err)
    assert lines == ["ready", "loaded ok"], lines


def test_fork_handler_of_the_program_allocates_in_its_child():
    """An injected agent's fork handlers are registered after the
    program's, and glibc runs child handlers in that order: a handler of
    the program's that allocates in the child ran while the agent still
    wrote into the parent's segment (8 MiB at atfork_site shown as the
    parent's).  They are the child's: in its own segment, none in the
    parent's."""
    t = Plain([prog("atforkalloc")], env=RATE)
    try:
        inject(t)
        t.send("fork\n")
        line = t.p.stdout.readline().split()
        assert line[:1] == ["child"], line
        child = int(line[1])
        parent = report(t.pid)
        assert not [s for s in parent["stacks"]
                    if "atfork_site" in functions(s)], "the child's in the parent"
        kid = report(child)
        assert kid["pid"] == child, kid["pid"]
        within(site(kid, "atfork_site")["retained_bytes"], 8 * MiB, 0.10,
               "atfork_site in the child")
        within(site(kid, "child_site")["retained_bytes"], 1 * MiB, 0.25,
               "child_site in the child")
        # The exact counters too: the handler's call is the child's first.
        assert kid["totals"]["allocated_objects"] >= 2, kid["totals"]
        t.finish()
    finally:
        t.kill()


def test_second_ymtop_attaches_without_injecting():
    t = Plain([prog("inject_read")])
    try:
        inject(t)
        env = dict(os.environ, YM_INJECT_VERBOSE="1")
        r = subprocess.run([YMTOP, "-b", "-n", "1", "-p", str(t.pid)],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        assert "loaded" not in r.stderr, r.stderr
        assert "attached (data starts at the attach)" in r.stdout, r.stdout
        assert len(t.agent_maps()) == 1, t.agent_maps()
        t.send("x\n")
        t.expect("got x")
        rc, _, _ = t.finish()
    finally:
        t.kill()
    assert rc == 3


def test_idle_thread_with_stale_malloc_words_is_attached():
    """Issue 16, item 5: the only thread sleeps in pause() with stale
    words into malloc's text above its stack pointer (dead slots); its call
    chain is clear of the allocator, so it is a safe moment.  The old stack
    scan refused it for good."""
    t = Plain([prog("inject_stale")], env=RATE)
    try:
        inject(t)
        os.kill(t.pid, signal.SIGUSR1)
        t.expect("woke")
        within(site(report(t.pid), "stale_site")["retained_bytes"], 4 * MiB,
               0.10, "stale_site retained")
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 6, (rc, err)
    assert lines == ["ready", "woke"], lines


def test_process_caught_inside_the_loader_is_waited_for():
    """ymtop -p on a process caught just after its exec (a supervisor's
    exec chain): ld.so is mapped, libc not yet.  ymtop called it
    "statically linked" and gave up; it now waits for the loader (held
    here 0.8 s by an LD_AUDIT library) and injects once libc is there."""
    env = dict(RATE, LD_AUDIT=os.path.join(PROGS, "libslowload.so"))
    t = Plain([os.path.join(PROGS, "workload"), "small"], env=env,
              ready=False)
    try:
        time.sleep(0.3)
        with open("/proc/%d/maps" % t.pid) as f:
            maps = f.read()
        assert "ld-linux" in maps and "/libc.so" not in maps, \
            "not caught inside the loader: %s" % maps
        rep, _, _ = inject(t)
        assert rep["pid"] == t.pid, rep
        t.wait_for("ready")
        t.send("\n")
        rc, _, err = t.finish()
    finally:
        t.kill()
    assert rc == 0, (rc, err)


def child_named(pid, comm):
    """A child of pid whose name is comm, or None."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return None
    for k in kids:
        try:
            with open("/proc/%d/comm" % k) as f:
                if f.read().strip() == comm:
                    return k
        except OSError:
            pass
    return None


def test_idle_bash_waiting_for_a_child_is_attached():
    """Issue 16, item 5: bash after a command substitution, waiting for
    its child in wait4, keeps a stale _int_malloc return address at
    sp+0xa0 (bash 5.2).  ("; echo done": bash would exec a last simple
    command in place of itself.)  The wait resumes after the attach."""
    bash = shutil.which("bash")
    if not bash:
        print("skip: no bash")
        return
    t = Plain([bash, "-c", "x=$(seq 1 2000); sleep 60; echo done"],
              ready=False)
    try:
        end = time.time() + 10
        kid = None
        while kid is None and time.time() < end:
            time.sleep(0.02)
            kid = child_named(t.pid, "sleep")
        assert kid, "bash started no sleep"
        time.sleep(0.1)   # bash in wait4
        inject(t)
        assert len(t.agent_maps()) == 1, t.agent_maps()
        os.kill(kid, signal.SIGTERM)
        t.expect("done")
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 0 and lines == ["done"], (rc, lines, err)


def test_thread_inside_malloc_refused_until_it_leaves():
    """The only thread blocks inside malloc_stats() with the main arena
    locked (its stderr pipe is full).  dlopen there may deadlock: it must
    be refused, the target untouched; once the thread has left, the attach
    succeeds.  (The old scan of 256 bytes let it through: fprintf's frame
    is larger.)"""
    import threading
    t = Plain([prog("inject_inmalloc")])
    drained = []
    try:
        r = subprocess.run([YMTOP, "-b", "-n", "1", "-p", str(t.pid)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "left the allocator" in r.stderr, r.stderr
        assert not t.agent_maps(), t.agent_maps()
        th = threading.Thread(target=lambda: drained.append(t.p.stderr.read()))
        th.start()
        t.expect("left")
        inject(t)
        assert len(t.agent_maps()) == 1, t.agent_maps()
        t.send("x\n")
        rc = t.p.wait(timeout=30)
        th.join(timeout=30)
    finally:
        t.kill()
    assert rc == 7, rc
    assert "Arena 0:" in drained[0], drained[0][-200:]


THREADED_PY = r"""
import sys, threading
e = threading.Event()
threading.Thread(target=e.wait, daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
"""


def test_thread_id_names_its_process():
    """Issue 16, item 7: ymtop -p TID said "disabled (YM_DISABLE)"."""
    py = sys.executable if os.path.exists(sys.executable) else "python3"
    for preload in (True, False):
        t = Target([py, "-c", THREADED_PY], preload=preload) if preload \
            else Plain([py, "-c", THREADED_PY])
        try:
            tids = [int(x) for x in os.listdir("/proc/%d/task" % t.pid)
                    if int(x) != t.pid]
            assert tids, "no second thread"
            line = one_line_failure(["-b", "-n", "1", "-p", tids[0]],
                                    "is the id of a thread")
            assert "of process %d" % t.pid in line, line
            assert "watch it with -p %d" % t.pid in line, line
            assert "YM_DISABLE" not in line, line
            if not preload:
                assert not t.agent_maps()
        finally:
            t.kill()


def tracer(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"TracerPid:\s+(\d+)", f.read()).group(1))


def test_two_ymtops_at_once_second_waits_for_the_first():
    """Issue 16, item 7: the second of two ymtop -p on a fresh target found
    the first tracing it and blamed "a debugger or strace".  The first is
    held 1.5 s with the thread stopped (test hook), so that the second
    surely starts meanwhile; it must wait and attach to the segment that
    the first creates."""
    t = Plain([prog("inject_read")])
    first = None
    try:
        env = dict(os.environ, YM_TEST_FAULT="inject-hold",
                   YM_INJECT_VERBOSE="1")
        first = subprocess.Popen([YMTOP, "-b", "-n", "1", "-p", str(t.pid)],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env)
        end = time.time() + 10
        while tracer(t.pid) != first.pid and time.time() < end:
            time.sleep(0.01)
        assert tracer(t.pid) == first.pid, "the first ymtop never traced"
        env = dict(os.environ, YM_INJECT_VERBOSE="1")
        r = subprocess.run([YMTOP, "-b", "-n", "1", "-f", "json", "-p",
                            str(t.pid)], capture_output=True, text=True,
                           timeout=60, env=env)
        out1, err1 = first.communicate(timeout=60)
        assert first.returncode == 0, err1
        assert "paused" in err1, err1
        assert r.returncode == 0, r.stderr
        assert "debugger" not in r.stderr, r.stderr
        assert "another ymtop loaded the agent" in r.stderr, r.stderr
        assert len(t.agent_maps()) == 1, t.agent_maps()
        t.send("x\n")
        t.expect("got x")
        rc, _, _ = t.finish()
    finally:
        if first and first.poll() is None:
            first.kill()
        t.kill()
    assert rc == 3


def test_agent_unreadable_by_the_target_user_says_so():
    """Issue 16, item 7: the agent in a private directory (a 0700 home),
    the target running as another user: dlopen fails with EACCES; the one
    line must say so and name the remedy."""
    pre = as_nobody()
    if pre is None:
        return
    private = tempfile.mkdtemp()            # mode 0700, root's
    public = tempfile.mkdtemp()
    try:
        os.chmod(public, 0o755)
        agent = os.path.join(private, "libymagent.so")
        shutil.copy(os.path.join(BUILD, "libymagent.so"), agent)
        exe = os.path.join(public, "inject_read")
        shutil.copy(prog("inject_read"), exe)
        os.chmod(exe, 0o755)
        t = Plain(pre + [exe])
        try:
            env = dict(os.environ, YM_AGENT=agent)
            r = subprocess.run([YMTOP, "-b", "-n", "1", "-p", str(t.pid)],
                               capture_output=True, text=True, timeout=60,
                               env=env)
            assert r.returncode == 1, (r.returncode, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1, r.stderr
            assert "may not read the agent" in lines[0], lines[0]
            assert "YM_AGENT" in lines[0] and "make install" in lines[0], lines
            assert not t.agent_maps()
            t.send("x\n")
            t.expect("got x")
            rc, _, _ = t.finish()
            assert rc == 3
        finally:
            t.kill()
    finally:
        shutil.rmtree(private)
        shutil.rmtree(public)


LIBDIR = "/lib/x86_64-linux-gnu"


def minimal_root():
    """A root holding only the test program, ld.so and the libc6
    package's libc, libdl and libpthread (the agent needs the last two
    where glibc is older than 2.34): a minimal container image.  Returns
    its path."""
    root = tempfile.mkdtemp()
    os.chmod(root, 0o755)
    for d in ("lib/x86_64-linux-gnu", "lib64", "proc", "dev/shm"):
        os.makedirs(os.path.join(root, d))
    shutil.copy(prog("inject_read"), os.path.join(root, "prog"))
    for lib in ("libc.so.6", "libdl.so.2", "libpthread.so.0"):
        shutil.copy(os.path.join(LIBDIR, lib), os.path.join(root, "lib/x86_64-linux-gnu"))
    shutil.copy("/lib64/ld-linux-x86-64.so.2", os.path.join(root, "lib64"))
    return root


def files_under(root):
    out = set()
    for d, _, fs in os.walk(root):
        for f in fs:
            st = os.stat(os.path.join(d, f))
            out.add((os.path.join(d, f), st.st_size, st.st_mtime_ns))
    return out


def unshare_permitted():
    unshare = shutil.which("unshare")
    if os.getuid() != 0 or not unshare:
        print("skip: needs root and unshare(1)")
        return None
    r = subprocess.run([unshare, "--mount", "--pid", "--fork", "true"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("skip: unshare --mount --pid not permitted here: " + r.stderr.strip())
        return None
    return unshare


class Contained(Plain):
    """inject_read in new pid and mount namespaces, chrooted into root,
    with its own /dev/shm (and /proc when proc is set)."""

    def __init__(self, unshare, root, proc=True, env=None):
        mounts = "mount -t tmpfs tmpfs %s/dev/shm && " % root
        if proc:
            mounts += "mount -t proc proc %s/proc && " % root
        super().__init__([unshare, "--mount", "--pid", "--fork", "sh", "-c",
                          mounts + "exec chroot %s /prog" % root], env=env)
        self.outer = self.pid
        with open("/proc/%d/task/%d/children" % (self.outer, self.outer)) as f:
            self.pid = int(f.read().split()[0])   # the program, on the host
        with open("/proc/%d/status" % self.pid) as f:
            assert re.search(r"NSpid:\s+%d\s+1\n" % self.pid, f.read())


def test_container_without_the_agent_gets_it_through_a_memfd():
    """Issue 16, containers: the target's root has no libymagent.so (a
    minimal image).  ymtop brings the agent in through a memfd that the
    target creates (nothing written to its filesystem) and the target
    dlopens /proc/self/fd/N; the agent then creates its segment in the
    container's own /dev/shm.  Main died with "copy libymagent.so into
    it"."""
    unshare = unshare_permitted()
    if unshare is None:
        return
    root = minimal_root()
    try:
        before = files_under(root)
        # 4 KiB mean sampling: each 64 KiB block of read_site's sampled
        # with probability 1 - e^-16, so its 8 MiB reads 8 MiB.  At the
        # default 512 KiB a block is sampled with p = 0.12: 15 samples
        # expected of 128, and fewer than 8 (under 4 MiB) in 3% of runs.
        t = Contained(unshare, root, env=RATE)
        try:
            env = dict(os.environ, YM_INJECT_VERBOSE="1")
            r = subprocess.run([YMTOP, "-b", "-n", "1", "-f", "json", "-p",
                                str(t.pid)], capture_output=True, text=True,
                               timeout=60, env=env)
            # The segment is in the container's /dev/shm, named after the
            # pid inside and the pid namespace; reports show both pids and
            # symbolize the program through /proc/PID/root.
            assert r.returncode == 0, r.stderr
            rep = json.loads(r.stdout)
            assert rep["pid"] == t.pid and rep["ns_pid"] == 1, (rep["pid"], rep.get("ns_pid"))
            with open("/proc/%d/maps" % t.pid) as f:
                maps = {l.split(None, 5)[-1].strip() for l in f
                        if "libymagent" in l}
            assert maps == {"/memfd:libymagent.so (deleted)"}, maps
            ns = os.stat("/proc/%d/ns/pid" % t.pid).st_ino
            assert os.path.exists("/proc/%d/root/dev/shm/ymtop-1.%d" % (t.pid, ns))
            fds = os.listdir("/proc/%d/fd" % t.pid)
            assert not any("memfd:" in os.readlink("/proc/%d/fd/%s" % (t.pid, fd))
                           for fd in fds), "the memfd was left open"
            t.send("x\n")
            t.expect("got x")
            t.expect("early ok")
            # 8 MiB from read_site, symbolized from the container's /prog.
            rep = json.loads(subprocess.run(
                [YMTOP, "-b", "-n", "1", "-f", "json", "-p", str(t.pid)],
                capture_output=True, text=True, timeout=60, check=True).stdout)
            held = sum(st["retained_bytes"] for st in rep["stacks"]
                       if "read_site" in [f["function"] for f in st["frames"]])
            assert 4 << 20 < held < 16 << 20, held
        finally:
            t.kill()
        assert files_under(root) == before, "the container's files changed"
    finally:
        shutil.rmtree(root)


def test_container_without_proc_says_so():
    unshare = unshare_permitted()
    if unshare is None:
        return
    root = minimal_root()
    try:
        t = Contained(unshare, root, proc=False)
        try:
            line = one_line_failure(["-b", "-n", "1", "-p", t.pid],
                                    "no /proc is mounted")
            assert "YM_AGENT" in line, line
            assert not t.agent_maps()
            t.send("x\n")
            t.expect("got x")
        finally:
            t.kill()
    finally:
        shutil.rmtree(root)


def one_line_failure(args, want):
    r = ymtop(*args, check=False)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and want in lines[0], r.stderr
    return lines[0]


def test_no_such_process():
    p = subprocess.Popen(["true"])
    p.wait()   # a pid that surely is gone
    one_line_failure(["-b", "-n", "1", "-p", p.pid], "no process")


def test_statically_linked_target_refused():
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc or not os.path.exists("/usr/lib/x86_64-linux-gnu/libc.a"):
        print("skip: no cc or no libc.a (libc6-dev)")
        return
    d = tempfile.mkdtemp()
    try:
        src, exe = os.path.join(d, "s.c"), os.path.join(d, "static_prog")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\nint main(void){char b[8];'
                    'puts("ready");fflush(stdout);'
                    'return fgets(b,8,stdin)?6:7;}\n')
        subprocess.run([cc, "-static", "-O1", "-o", exe, src], check=True)
        t = Plain([exe])
        try:
            one_line_failure(["-b", "-n", "1", "-p", t.pid],
                             "statically linked: it loads no shared library, "
                             "so the agent can be neither preloaded "
                             "(LD_PRELOAD) nor injected (ymtop -p)")
            rc, lines, _ = t.finish()
        finally:
            t.kill()
        assert rc == 6 and lines == ["ready"], (rc, lines)
    finally:
        shutil.rmtree(d)


def test_seccomp_filter_forbidding_open_fails_cleanly():
    t = Plain([prog("inject_seccomp")])
    try:
        line = one_line_failure(["-b", "-n", "1", "-p", t.pid], "seccomp")
        assert "Operation not permitted" in line, line
        assert not t.agent_maps()
        assert not os.path.exists(seg_path(t.pid))
        t.send("after\n")
        t.expect("got after")
        rc, lines, err = t.finish()
    finally:
        t.kill()
    assert rc == 5 and lines == ["ready", "got after"], (rc, lines, err)
    assert err == "", err


def nobody_ymtop():
    """ymtop (and the agent beside it) where nobody can run it: the build
    tree may be a private directory."""
    readable(AGENT)
    return readable(YMTOP)


def as_nobody():
    """argv prefix running a command as user nobody, or None (not root)."""
    setpriv = shutil.which("setpriv")
    if os.getuid() != 0 or not setpriv:
        print("skip: needs root and setpriv to change user")
        return None
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def test_another_users_process_refused():
    pre = as_nobody()
    if pre is None:
        return
    t = Plain([prog("inject_read")])   # root's
    try:
        r = subprocess.run(pre + [nobody_ymtop(), "-b", "-n", "1", "-p", str(t.pid)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert r.stderr.count("\n") == 1 and "another user" in r.stderr, r.stderr
        assert not t.agent_maps()
        t.send("x\n")
        t.expect("got x")
    finally:
        t.kill()


def test_ptrace_refused_for_a_non_dumpable_process():
    # Same user, but the process made itself non-dumpable: without
    # CAP_SYS_PTRACE the kernel refuses ptrace and /proc/PID/root.
    pre = as_nobody()
    if pre is None:
        return
    code = ("import ctypes, sys\n"
            "ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n"   # PR_SET_DUMPABLE
            "print('ready', flush=True)\n"
            "print('got ' + sys.stdin.readline().strip(), flush=True)\n")
    t = Plain(pre + ["/usr/bin/python3", "-c", code])
    try:
        r = subprocess.run(pre + [nobody_ymtop(), "-b", "-n", "1", "-p", str(t.pid)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert r.stderr.count("\n") == 1, r.stderr
        assert "ptrace of process %d refused" % t.pid in r.stderr, r.stderr
        assert "CAP_SYS_PTRACE" in r.stderr, r.stderr
        t.send("y\n")
        t.expect("got y")
        rc, _, _ = t.finish()
        assert rc == 0
    finally:
        t.kill()


def test_already_traced_target_refused():
    strace = shutil.which("strace")
    if not strace:
        print("skip: no strace")
        return
    t = Plain([prog("inject_read")])
    s = subprocess.Popen([strace, "-p", str(t.pid), "-o", os.devnull],
                         stderr=subprocess.DEVNULL)
    try:
        end = time.time() + 10
        while time.time() < end:
            with open("/proc/%d/status" % t.pid) as f:
                if re.search(r"TracerPid:\s+[1-9]", f.read()):
                    break
            time.sleep(0.02)
        one_line_failure(["-b", "-n", "1", "-p", t.pid], "already traced")
        assert not t.agent_maps()
    finally:
        s.send_signal(signal.SIGINT)
        s.wait()
    try:
        t.send("after\n")
        t.expect("got after")
        rc, _, _ = t.finish()
    finally:
        t.kill()
    assert rc == 3


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
