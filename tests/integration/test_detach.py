"""ymtop -p PID --detach and --duration (man/ymtop.1, the unload rule in
man/ymagent.7): the agent leaves a running process, which goes on at its
own speed, frees the blocks sampled before, has no segment, can be
attached again, and exits normally; a preloaded agent goes dormant."""
import os
import subprocess
import time

from ymlib import (AGENT, BUILD, Plain, Target, attach, functions, report,
                   run_tests, seg_path, ymtop)

CHURN = os.path.join(BUILD, "progs", "churn")
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
# make check runs a few cycles; tests/bench/detach.sh runs 100.
CYCLES = int(os.environ.get("YM_DETACH_CYCLES", "4"))
RATE = {"YM_SAMPLE_RATE": "4096"}   # many samples live at the detach


class Churn(Target):
    """churn THREADS, started without the agent (or preloaded)."""

    def __init__(self, threads, env=None, preload=False):
        super().__init__([CHURN, str(threads)], env=env, preload=preload)

    def wait_segment(self, timeout=10):
        pass   # preloaded: the test waits (Target.wait_segment)

    def quit(self):
        out, err = self.p.communicate("quit\n", timeout=60)
        return self.p.returncode, out, err

    def maps(self):
        with open("/proc/%d/maps" % self.pid) as f:
            return f.read().splitlines()

    def agent_mapped(self):
        return any("libymagent" in l for l in self.maps())

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))


def extent(pid, path):
    lo, hi = None, 0
    with open("/proc/%d/maps" % pid) as f:
        for l in f:
            parts = l.split()
            if len(parts) >= 6 and parts[5] == path:
                a, b = (int(x, 16) for x in parts[0].split("-"))
                lo = a if lo is None else min(lo, a)
                hi = max(hi, b)
    return lo, hi


def same_calls(pid, before, after):
    """Each slot holds what it held before the attach, or, where it held
    its own object's lazy-binding stub, the function that stub binds."""
    for k, w in before.items():
        if after[k] == w:
            continue
        lo, hi = extent(pid, k[0])
        stub = int.from_bytes(w, "little")
        assert lo <= stub < hi, (k, w.hex(), after[k].hex())


def slots(pid):
    """The words of the executable's and libc's GOT slots for the malloc
    family, by relocation (readelf), read from /proc/PID/mem."""
    bases = {}
    with open("/proc/%d/maps" % pid) as f:
        for l in f:
            parts = l.split()
            if len(parts) >= 6 and parts[2] == "00000000":
                path = parts[5]
                if path.endswith("/churn") or "/libc.so" in path:
                    bases.setdefault(path, int(parts[0].split("-")[0], 16))
    words = {}
    with open("/proc/%d/mem" % pid, "rb") as mem:
        for path, base in bases.items():
            out = subprocess.run(["readelf", "-rW", path], capture_output=True,
                                 text=True).stdout
            for l in out.splitlines():
                f = l.split()
                if (len(f) >= 5 and f[2] in ("R_X86_64_JUMP_SLOT",
                                             "R_X86_64_GLOB_DAT") and
                        f[4].split("@")[0] in ("malloc", "free", "calloc",
                                               "realloc")):
                    mem.seek(base + int(f[0], 16))
                    words[(path, f[0])] = mem.read(8)
    assert len(words) >= 4, words
    return words


def detach(pid, env=None):
    r = ymtop("-p", pid, "--detach",
              env=dict(os.environ, **env) if env else None)
    assert r.stdout == "", r.stdout
    line = r.stderr.strip()
    assert "\n" not in line, line
    return line


def sampled_live(rep):
    return sum(s.get("retained_objects", 0) for s in rep["stacks"])


def check_detached(t, line):
    assert "agent detached" in line, line
    assert not os.path.exists(seg_path(t.pid)), "segment left"
    if "unloaded" in line:
        assert not t.agent_mapped(), "agent mapped after unload: " + line
    else:
        assert "dormant: " in line, line


def run_detach(threads, env=None):
    t = Churn(threads, env=dict(RATE, **(env or {})))
    try:
        before = slots(t.pid)
        attach(t.pid)
        assert slots(t.pid) != before, "the agent patched no slot"
        time.sleep(0.3)
        rep = report(t.pid)
        assert sampled_live(rep) > 0, "nothing sampled before the detach"
        line = detach(t.pid)
        check_detached(t, line)
        assert "unloaded" in line, line
        # Every call goes where it went before the attach.
        same_calls(t.pid, before, slots(t.pid))
        # The blocks sampled before are freed by the allocator alone.
        time.sleep(0.3)
        rc, out, err = t.quit()
        assert rc == 0 and "checked ok" in out, (rc, out, err)
    finally:
        t.kill()


def test_detach_unloads_and_the_process_runs_on():
    run_detach(4)


def test_detach_under_jemalloc():
    if not os.path.exists(JEMALLOC):
        from ymlib import Skip
        raise Skip("libjemalloc2 is not installed")
    run_detach(4, {"LD_PRELOAD": JEMALLOC})


def test_detach_while_32_threads_allocate():
    run_detach(32)


def test_attach_detach_cycles_leak_nothing():
    t = Churn(2, env=RATE)
    try:
        attach(t.pid)
        check_detached(t, detach(t.pid))
        # After the first cycle the trampoline page is there for good.
        maps0, fds0 = len(t.maps()), t.fds()
        unloaded = 0
        for _ in range(CYCLES):
            rep = attach(t.pid)
            assert rep["pid"] == t.pid
            line = detach(t.pid)
            check_detached(t, line)
            unloaded += "unloaded" in line
        assert unloaded == CYCLES, "%d of %d unloaded" % (unloaded, CYCLES)
        assert len(t.maps()) == maps0, "\n".join(t.maps())
        assert t.fds() == fds0
        assert sum("ymagent-trampoline" in l for l in t.maps()) <= 2
        rc, out, err = t.quit()
        assert rc == 0 and "checked ok" in out, (rc, out, err)
    finally:
        t.kill()


def test_duration_detaches_at_the_end():
    t = Churn(2, env=RATE)
    try:
        r = ymtop("-p", t.pid, "-b", "-i", "0.3", "-f", "json", "--duration",
                  "1.5", timeout=60)
        assert '"report_version"' in r.stdout, r.stdout[:200]
        check_detached(t, r.stderr.strip().splitlines()[-1])
        rc, out, err = t.quit()
        assert rc == 0 and "checked ok" in out, (rc, out, err)
    finally:
        t.kill()


def test_duration_detaches_when_stopped():
    t = Churn(2, env=RATE)
    try:
        y = subprocess.Popen([os.path.join(BUILD, "ymtop"), "-p", str(t.pid),
                              "-b", "-i", "0.2", "--duration", "600"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        end = time.time() + 30
        while not os.path.exists(seg_path(t.pid)) and time.time() < end:
            time.sleep(0.05)
        time.sleep(0.5)
        y.terminate()
        out, err = y.communicate(timeout=60)
        check_detached(t, err.strip().splitlines()[-1])
        rc, out, err = t.quit()
        assert rc == 0 and "checked ok" in out, (rc, out, err)
    finally:
        t.kill()


def test_duration_leaves_a_preloaded_agent_sampling():
    """--duration undoes what ymtop -p did: an agent the process was
    started with (LD_PRELOAD) is left sampling, not made dormant for the
    rest of the process's life; one line says so."""
    t = Churn(2, env=RATE, preload=True)
    try:
        Target.wait_segment(t)
        r = ymtop("-p", t.pid, "-b", "-i", "0.3", "-f", "json", "--duration",
                  "1", timeout=60)
        line = r.stderr.strip().splitlines()[-1]
        assert "preloaded" in line and "left as it was" in line, line
        assert os.path.exists(seg_path(t.pid)), "segment removed"
        rep = report(t.pid)
        assert rep["state"] == "sampling", rep["state"]
        rc, out, err = t.quit()
        assert rc == 0 and "checked ok" in out, (rc, out, err)
    finally:
        t.kill()


def test_duration_ends_quietly_when_the_process_exits():
    """The process exits before the time is up: nothing is left to
    detach, which is no error (status 0, one line)."""
    t = Churn(2, env=RATE)
    try:
        y = subprocess.Popen([os.path.join(BUILD, "ymtop"), "-p", str(t.pid),
                              "-b", "-i", "0.2", "-f", "json", "--duration",
                              "600"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        end = time.time() + 30
        while not os.path.exists(seg_path(t.pid)) and time.time() < end:
            time.sleep(0.05)
        time.sleep(0.3)
        rc, out, err = t.quit()
        assert rc == 0 and "checked ok" in out, (rc, out, err)
        out, err = y.communicate(timeout=60)
        line = err.strip().splitlines()[-1]
        assert y.returncode == 0, (y.returncode, err)
        assert "has exited: nothing to detach" in line, line
    finally:
        t.kill()


def test_detach_names_the_children_that_keep_the_agent():
    """A process forked while the agent was in its parent keeps it: the
    parent's detach does not reach it, and says so with its pid; its own
    --detach takes it out."""
    t = Churn(1, env=RATE)
    child = 0
    try:
        attach(t.pid)
        t.p.stdin.write("fork\n")
        t.p.stdin.flush()
        child = int(t.p.stdout.readline().split()[1])
        line = detach(t.pid)
        check_detached(t, line)
        assert "1 process forked from it still maps the agent (%d)" % child in line, line
        line = detach(child)
        assert "agent detached" in line and "forked from it" not in line, line
        rc, out, err = t.quit()
        assert rc == 0 and "checked ok" in out, (rc, out, err)
    finally:
        if child:
            os.kill(child, 9)
        t.kill()


def test_preloaded_behind_jemalloc_goes_dormant_and_its_threads_exit():
    """LD_PRELOAD=jemalloc:agent: the agent hooks jemalloc through the
    slots.  A report's heap statistics make it look up a function jemalloc
    lacks, whose dlerror buffer (per thread, freed at the thread's exit)
    it lends from its bootstrap buffer; the detach keeps the slots, so
    that the free at the thread's exit reaches the agent's and not
    jemalloc's (which crashed on it)."""
    if not os.path.exists(JEMALLOC):
        from ymlib import Skip
        raise Skip("libjemalloc2 is not installed")
    t = Churn(2, env=dict(RATE, LD_PRELOAD=JEMALLOC + ":" + AGENT),
              preload=True)
    try:
        Target.wait_segment(t)
        rep = report(t.pid)
        assert rep["heap"]["allocator"] == "jemalloc", rep["heap"]
        line = detach(t.pid)
        check_detached(t, line)
        assert "dormant: it was preloaded" in line, line
        time.sleep(0.3)
        rc, out, err = t.quit()
        assert rc == 0 and "checked ok" in out, (rc, out, err)
    finally:
        t.kill()


def test_preloaded_goes_dormant():
    t = Churn(2, env=RATE, preload=True)
    try:
        Target.wait_segment(t)
        line = detach(t.pid)
        check_detached(t, line)
        assert "dormant: it was preloaded" in line, line
        assert t.agent_mapped()
        # Attaching again says why it cannot, in one line.
        r = ymtop("-p", t.pid, "-b", "-n", "1", check=False)
        assert r.returncode == 1 and "dormant" in r.stderr, r.stderr
        assert not os.path.exists(seg_path(t.pid))
        time.sleep(0.3)
        rc, out, err = t.quit()
        assert rc == 0 and "checked ok" in out, (rc, out, err)
    finally:
        t.kill()


INSIDE = os.path.join(BUILD, "progs", "inside")
BLOCKCTOR = os.path.join(BUILD, "progs", "libblockctor.so")


class Inside(Plain):
    """tests/progs/inside.c, started without the agent."""

    def __init__(self, env=None):
        super().__init__([INSIDE], env=dict(RATE, **(env or {})))

    def say(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()


def unloaded_then_exits(t, env=None):
    """A second --detach, the thread held inside gone: the agent unloaded
    (no mapping of it left); the program's allocations still check and it
    exits 0 (t: a program of tests/progs taking "alloc" and "quit")."""
    second = detach(t.pid, env)
    assert "agent detached and unloaded" in second, second
    with open("/proc/%d/maps" % t.pid) as f:
        assert "libymagent" not in f.read(), "agent mapped after unload"
    t.p.stdin.write("alloc\nquit\n")
    t.p.stdin.flush()
    out, err = t.p.communicate(timeout=60)
    assert t.p.returncode == 0 and out.strip() == "alloc ok", (out, err)


def test_a_thread_inside_the_agent_leaves_it_dormant_then_unloaded():
    """The unload rule's other branch, made certain: a thread of
    tests/progs/inside.c dlopens a library whose constructor blocks, so
    that it waits inside the agent's dlopen hook (its return address on
    the thread's stack).  --detach restores every slot and removes the
    segment but leaves the agent loaded and dormant, naming that thread;
    the process allocates and frees correctly meanwhile; once the thread
    has left, dlopen ends without patching anything again and a second
    --detach unloads the agent."""
    t = Inside()
    try:
        attach(t.pid)
        line = t.say("block " + BLOCKCTOR).split()
        assert line[:1] == ["inside"], line
        tid = int(line[1])
        first = detach(t.pid)
        assert "agent detached" in first and "dormant: " in first, first
        assert "thread %d " % tid in first, first
        assert not os.path.exists(seg_path(t.pid)), "segment left"
        with open("/proc/%d/maps" % t.pid) as f:
            assert "libymagent" in f.read(), "unloaded with a thread inside"
        for _ in range(3):
            assert t.say("alloc") == "alloc ok"
        assert t.say("release") == "released"
        unloaded_then_exits(t)
    finally:
        t.kill()


HELDMALLOC = os.path.join(BUILD, "progs", "heldmalloc")


def held_in_a_handler(env=None):
    """The unload rule sees past a signal frame: a thread of
    tests/progs/heldmalloc.c is inside the agent's malloc hook (strdup
    through libc's patched slot, the hook calling the program's own
    malloc), and there a signal handler running on an alternate stack (a
    mapping of its own) blocks.  Its PC, registers, stack pointer and
    every word above it lie outside the agent; the return address into
    the agent is on the stack the signal interrupted.  Unloading then
    would return the thread into unmapped code once released: --detach
    must leave the agent dormant, naming the thread, and the process must
    end normally.  env: ymtop's (YM_TEST_QUIESCE_SCAN=1 scans every
    stack, as for code without CFI)."""
    t = Plain([HELDMALLOC], env=RATE)
    try:
        attach(t.pid)
        t.p.stdin.write("hold\n")
        t.p.stdin.flush()
        line = t.p.stdout.readline().split()
        assert line[:1] == ["held"], line
        tid = int(line[1])
        first = detach(t.pid, env)
        assert "agent detached" in first and "dormant: " in first, first
        assert "thread %d " % tid in first, first
        with open("/proc/%d/maps" % t.pid) as f:
            assert "libymagent" in f.read(), "unloaded with a thread inside"
        t.p.stdin.write("alloc\nrelease\n")
        t.p.stdin.flush()
        assert t.p.stdout.readline().strip() == "alloc ok"
        assert t.p.stdout.readline().strip() == "released"
        unloaded_then_exits(t, env)
    finally:
        t.kill()
    return first


def test_a_thread_in_a_handler_on_its_alternate_stack_keeps_it_loaded():
    held_in_a_handler()


def test_the_stack_scan_reads_the_stack_a_signal_interrupted():
    """As above with the call chain not unwound (every stack scanned
    word by word): the scan finds the interrupted stack through the
    signal frame's saved stack pointer and reads it too."""
    first = held_in_a_handler({"YM_TEST_QUIESCE_SCAN": "1"})
    assert "the stack a signal interrupted" in first, first


def run_reattach(env=None):
    """A dormant injected agent attaches again: detached with a thread held
    inside it (dormant), ymtop -p says in one line why it cannot load the
    agent afresh while the thread is there and what to do; once the
    thread has left, ymtop -p unloads the dormant agent and loads a fresh
    one (slots patched again, a new segment whose samples flow), and
    --detach then unloads it; the process exits normally."""
    t = Inside(env)
    try:
        attach(t.pid)
        line = t.say("block " + BLOCKCTOR).split()
        assert line[:1] == ["inside"], line
        first = detach(t.pid)
        assert "dormant: " in first, first
        # Still held: no fresh agent, one line saying why and what to do.
        r = ymtop("-p", t.pid, "-b", "-n", "1", check=False)
        err = r.stderr.strip()
        assert r.returncode == 1 and "\n" not in err, err
        assert "left loaded and dormant" in err and "thread %s " % line[1] \
            in err and "run ymtop -p again once that has passed" in err, err
        assert not os.path.exists(seg_path(t.pid)), "segment made while held"
        assert t.say("release") == "released"
        rep = attach(t.pid)
        assert rep["pid"] == t.pid, rep
        assert os.path.exists(seg_path(t.pid)), "no new segment"
        for _ in range(3):
            assert t.say("alloc") == "alloc ok"
        rep = report(t.pid)
        assert sampled_live(rep) > 0, "no samples in the new segment"
        assert any("churn" in functions(s) for s in rep["stacks"]), \
            [functions(s) for s in rep["stacks"]]
        unloaded_then_exits(t)
    finally:
        t.kill()


def test_a_dormant_agent_attaches_again():
    run_reattach()


def test_a_dormant_agent_attaches_again_under_jemalloc():
    if not os.path.exists(JEMALLOC):
        from ymlib import Skip
        raise Skip("libjemalloc2 is not installed")
    run_reattach({"LD_PRELOAD": JEMALLOC})


def test_detach_does_not_wait_for_the_loader_lock():
    """A thread inside dlopen, outside the agent (tests/progs/inside.c's
    rawblock: libc's dlopen looked up before the attach, a constructor
    that blocks), holds the dynamic loader's lock, which dlclose takes:
    --detach looks at the lock instead of waiting for it, leaves the agent
    dormant and names the thread in one line; ymtop -p meanwhile says the
    same and to try again; once the thread is out ymtop -p attaches
    again, and --detach unloads the agent."""
    t = Inside()
    try:
        attach(t.pid)
        line = t.say("rawblock " + BLOCKCTOR).split()
        assert line[:1] == ["inside"], line
        lock = "thread %s holds the dynamic loader's lock" % line[1]
        first = detach(t.pid)
        assert "dormant: " + lock in first, first
        assert "--detach again unloads it" in first, first
        assert not os.path.exists(seg_path(t.pid)), "segment left"
        assert t.say("alloc") == "alloc ok"
        r = ymtop("-p", t.pid, "-b", "-n", "1", check=False)
        err = r.stderr.strip()
        assert r.returncode == 1 and "\n" not in err, err
        assert lock in err and "run ymtop -p again" in err, err
        assert t.say("release") == "released"
        attach(t.pid)
        assert t.say("alloc") == "alloc ok"
        unloaded_then_exits(t)
    finally:
        t.kill()


def test_attach_does_not_wait_for_the_loader_lock():
    """The same lock held when ymtop -p would load the agent (dlopen takes
    it): one line naming the thread, nothing changed; once it is out the
    attach goes through."""
    t = Inside()
    try:
        line = t.say("rawblock " + BLOCKCTOR).split()
        assert line[:1] == ["inside"], line
        r = ymtop("-p", t.pid, "-b", "-n", "1", check=False)
        err = r.stderr.strip()
        assert r.returncode == 1 and "\n" not in err, err
        assert "thread %s of process %d holds the dynamic loader's lock" % (
            line[1], t.pid) in err and "nothing was changed" in err, err
        with open("/proc/%d/maps" % t.pid) as f:
            assert "libymagent" not in f.read(), "loaded while the lock was held"
        assert t.say("release") == "released"
        attach(t.pid)
        assert "agent detached and unloaded" in detach(t.pid)
        t.p.stdin.write("quit\n")
        t.p.stdin.flush()
        t.p.communicate(timeout=60)
        assert t.p.returncode == 0
    finally:
        t.kill()


KEEPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "py",
                      "keeper.py")
PYTHON = "/usr/bin/python3.11"


def test_a_dormant_agent_in_python_attaches_again_with_its_wrapper():
    """Debian's python3, its pymalloc wrapped by the agent ymtop -p loaded:
    --detach leaves the agent dormant until the interpreter's main thread
    puts its allocator tables back (it is blocked reading stdin); ymtop -p
    meanwhile says so and to try again; once it has, ymtop -p loads a
    fresh agent, which wraps pymalloc again and samples keeper.py's
    allocations; the agent then leaves as before and python3 exits 0."""
    if not os.path.exists(PYTHON):
        from ymlib import Skip
        raise Skip("%s is not installed" % PYTHON)

    def run(t, cmd):
        t.p.stdin.write(cmd + "\n")
        t.p.stdin.flush()
        t.wait_for("done")

    def kept(rep):
        return sum(s["retained_bytes"] for s in rep["stacks"]
                   if any(f.get("function") == "keep_small" and
                          f.get("file") == KEEPER for f in s["frames"]))

    t = Plain([PYTHON, KEEPER], env={"YM_SAMPLE_RATE": "8192"})
    try:
        attach(t.pid)
        run(t, "small 60000")
        assert report(t.pid)["python"]["pymalloc"] == "installed"
        first = detach(t.pid)
        assert "dormant: the Python interpreter still calls" in first, first
        r = ymtop("-p", t.pid, "-b", "-n", "1", check=False)
        err = r.stderr.strip()
        assert r.returncode == 1 and "\n" not in err, err
        assert "the Python interpreter still calls" in err and \
            "run ymtop -p again once that has passed" in err, err
        run(t, "small 1000")   # the pending call runs: tables put back
        attach(t.pid)
        run(t, "small 60000")
        rep = report(t.pid)
        assert rep["python"]["pymalloc"] == "installed", rep["python"]
        assert kept(rep) > 0, "keeper.py's allocations not sampled again"
        assert "dormant: the Python interpreter" in detach(t.pid)
        run(t, "small 1000")
        assert "agent detached and unloaded" in detach(t.pid)
        with open("/proc/%d/maps" % t.pid) as f:
            assert "libymagent" not in f.read()
        run(t, "free")
        rc, _, err = t.finish()
        assert rc == 0, err
    finally:
        t.kill()


def test_debian_bash_forking_is_detached():
    """The field trial's mistake: the agent injected into a shell.  bash
    forks and execs without pause (fork handlers, exec hooks) while it is
    attached, detached, and after; then exits 0."""
    import tempfile
    d = tempfile.mkdtemp(prefix="ymtop-detach-")
    stop = os.path.join(d, "stop")
    sh = subprocess.Popen(["/bin/bash", "-c",
                           'echo ready; n=0; while [ ! -e "$1" ]; do '
                           '/bin/true; x=$(echo $n); n=$((n+1)); done; '
                           'echo forks $n; exit 0', "bash", stop],
                          stdout=subprocess.PIPE, text=True)
    try:
        assert sh.stdout.readline().strip() == "ready"
        attach(sh.pid)
        line = detach(sh.pid)
        assert "agent detached" in line, line
        assert not os.path.exists(seg_path(sh.pid))
        if "unloaded" in line:
            with open("/proc/%d/maps" % sh.pid) as f:
                assert "libymagent" not in f.read()
        time.sleep(0.5)
        open(stop, "w").close()
        out, _ = sh.communicate(timeout=60)
        assert sh.returncode == 0 and out.startswith("forks "), out
    finally:
        if sh.poll() is None:
            sh.kill()
        subprocess.run(["rm", "-rf", d])


def test_detach_after_the_agent_file_was_replaced():
    """ymtop upgraded while the agent runs: the file the process mapped
    is replaced (maps reads "libymagent.so (deleted)"); --detach still
    finds the agent (its code read through /proc/PID/map_files) and
    unloads it, rather than saying there is none."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="ymtop-upgrade-")
    lib = os.path.join(d, "libymagent.so")
    shutil.copy2(AGENT, lib)
    env = {"YM_AGENT": lib}
    t = Churn(2, env=RATE)
    try:
        ymtop("-b", "-n", "1", "-i", "0.05", "-f", "json", "-p", t.pid,
              env=dict(os.environ, **env))
        shutil.copy2(AGENT, lib + ".new")
        os.replace(lib + ".new", lib)
        assert any("libymagent.so (deleted)" in l for l in t.maps())
        line = detach(t.pid, env)
        check_detached(t, line)
        assert "unloaded" in line, line
        rc, out, err = t.quit()
        assert rc == 0 and "checked ok" in out, (rc, out, err)
    finally:
        t.kill()
        shutil.rmtree(d, True)


def test_detach_needs_pid_and_runs_alone():
    assert ymtop("--detach", check=False).returncode == 2
    assert ymtop("-p", "1", "--detach", "-b", check=False).returncode == 2
    assert ymtop("--duration", "5", check=False).returncode == 2
    t = Churn(1)
    try:
        r = ymtop("-p", t.pid, "--detach", check=False)
        assert r.returncode == 1 and "has no agent to detach" in r.stderr, r.stderr
        assert t.quit()[0] == 0
    finally:
        t.kill()


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
