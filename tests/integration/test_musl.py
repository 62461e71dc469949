"""The agent built for musl (build/libymagent-musl.so, Makefile): loads
into a program that musl-gcc linked, needs nothing but musl's libc.so,
and counts every allocation in exact mode, each at its own stack, also
in threads and with a fork child (tests/progs/musl/count.c).  ymtop -p
tells a musl program (and a static one) from a glibc one: into a musl
program it loads libymagent-musl.so (tests/progs/musl/attach.c), also
while every thread allocates hard; a static one is refused in one line,
untouched.  make install installs the musl agent beside libymagent.so."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from ymlib import (BUILD, Plain, Skip, Target, functions, report,
                   rerun_isolated, run_tests, site, site_total, within, ymtop)

MUSL_AGENT = os.path.join(BUILD, "libymagent-musl.so")
# The musl agent as ymtop names it: beside the libymagent.so it found.
MUSL_NAMED = os.path.join(os.path.dirname(os.path.realpath(
    os.path.join(BUILD, "libymagent.so"))), "libymagent-musl.so")
COUNT = os.path.join(BUILD, "musl", "count")
ATTACH = os.path.join(BUILD, "musl", "attach")


def needs_musl():
    if not shutil.which("musl-gcc"):
        raise Skip("musl-gcc is not installed (musl-tools)")
    for f in (MUSL_AGENT, COUNT, ATTACH):
        assert os.path.exists(f), "make check builds " + f


def test_musl_agent_needs_only_musl_libc():
    needs_musl()
    out = subprocess.run(["readelf", "-W", "-d", MUSL_AGENT], capture_output=True,
                         text=True, check=True).stdout
    needed = [l.split("[")[1].rstrip("]") for l in out.splitlines()
              if "(NEEDED)" in l]
    assert needed == ["libc.so"], needed
    out = subprocess.run(["readelf", "-W", "-d", COUNT], capture_output=True,
                         text=True, check=True).stdout
    assert "ld-musl" in subprocess.run(["readelf", "-W", "-l", COUNT],
                                       capture_output=True, text=True).stdout


def test_musl_program_exact_mode_counts_each_allocation():
    needs_musl()
    t = Target([COUNT], env={"LD_PRELOAD": MUSL_AGENT, "YM_SAMPLE_RATE": "1"})
    try:
        rep = report(t.pid)
    finally:
        rc, _, err = t.finish()
    assert rc == 0, (rc, err)
    assert "ymagent" not in err, err
    c = site(rep, "count_site")
    assert c["allocated_objects"] == 5000 and c["retained_objects"] == 0, c
    assert c["allocated_bytes"] == 5000 * 48, c
    h = site(rep, "hold_site")
    assert h["allocated_objects"] == 1000 and h["retained_objects"] == 1000, h
    assert h["retained_bytes"] == 1000 * 4096, h
    assert "main" in functions(h), functions(h)
    s = site(rep, "thread_site")
    assert s["allocated_objects"] == 4 * 256 and s["retained_bytes"] == 4 * 256 * 1024, s
    names = [f for st in rep["stacks"] for f in functions(st)]
    assert "child_site" not in names, "the fork child wrote into its parent's segment"


def test_musl_reports_say_why_there_are_no_heap_figures():
    """musl's allocator keeps no statistics: where the allocator's figures
    would be, the text report says so in one line, the RSS explanation
    too, and JSON names the reason."""
    needs_musl()
    t = Target([COUNT], env={"LD_PRELOAD": MUSL_AGENT})
    try:
        text = ymtop("-b", "-n", "1", "-p", t.pid).stdout
        rep = report(t.pid)
    finally:
        t.finish()
    lines = [l for l in text.splitlines() if "musl's allocator keeps none" in l]
    assert len(lines) == 2, text
    assert lines[0] == "heap: no allocator statistics: musl's allocator keeps none", lines
    assert "allocator in use" in lines[1], lines
    assert rep["heap"] is None and rep["heap_missing"]["reason"] == "musl", \
        (rep["heap"], rep.get("heap_missing"))


def test_musl_program_without_build_id_is_not_called_changed():
    """musl-gcc links no build-id, and musl lists the vDSO with an empty
    name: the agent names it linux-vdso.so.1, not the executable, whose
    file ymtop would otherwise find "changed since the process loaded
    it" (the vDSO's build-id against none)."""
    needs_musl()
    assert "Build ID" not in subprocess.run(
        ["readelf", "-n", COUNT], capture_output=True, text=True).stdout
    t = Target([COUNT], env={"LD_PRELOAD": MUSL_AGENT})
    try:
        text = ymtop("-b", "-n", "1", "-p", t.pid).stdout
    finally:
        t.finish()
    assert "changed since" not in text and "warning" not in text, text
    assert "hold_site" in text, text


def test_musl_program_rebuilt_while_running_is_called_changed():
    """Without a build-id, ymtop tells the file the process mapped from the
    one now at its path by inode, size and modification time: a program
    replaced while it runs (a rebuild: a new file renamed over it) is said
    to have changed, and its names are not taken from the new file."""
    needs_musl()
    d = tempfile.mkdtemp()
    try:
        prog = os.path.join(d, "prog")
        shutil.copy(COUNT, prog)
        t = Target([prog], env={"LD_PRELOAD": MUSL_AGENT})
        try:
            before = ymtop("-b", "-n", "1", "-p", t.pid).stdout
            shutil.copy(ATTACH, prog + ".new")
            os.rename(prog + ".new", prog)
            after = ymtop("-b", "-n", "1", "-p", t.pid).stdout
        finally:
            t.finish()
        assert "changed since" not in before and "hold_site" in before, before
        want = "warning: %s: file changed since the process loaded it " \
            "(another file at its path; it has no build-id)" % prog
        assert want in after.splitlines(), after
        assert "hold_site" not in after, after
    finally:
        shutil.rmtree(d)


def maps_of(pid):
    with open("/proc/%d/maps" % pid) as f:
        return f.read()


def tracer_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return [l.split()[1] for l in f if l.startswith("TracerPid:")][0]


def refused_untouched(argv, want):
    """ymtop -p on the program argv (which prints "ready", waits for a line
    and exits 0) fails with one line containing each of want; the
    program was not stopped, traced or changed: its maps are the same,
    and it reads its line and exits as it would have."""
    t = Plain(argv)
    try:
        before = maps_of(t.pid)
        r = ymtop("-b", "-n", "1", "-p", t.pid, check=False)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1, (r.returncode, r.stderr)
        for w in want:
            assert w in lines[0], (w, lines[0])
        assert maps_of(t.pid) == before, "the target's mappings changed"
        assert tracer_of(t.pid) == "0"
        rc, out, err = t.finish()
    finally:
        t.kill()
    assert rc == 0 and out == ["ready"], (rc, out, err)
    return lines[0]


class Attached(Plain):
    """A musl program started without the agent, then ymtop -p PID: the
    musl agent must be what went in, by its path."""

    def attach(self):
        r = ymtop("-b", "-n", "1", "-i", "0.05", "-f", "json", "-p", self.pid,
                  env=dict(os.environ, YM_INJECT_VERBOSE="1"))
        assert "loaded " + MUSL_NAMED in r.stderr, r.stderr
        assert set(l.split()[-1] for l in maps_of(self.pid).splitlines()
                   if "libymagent" in l) == {MUSL_NAMED}, maps_of(self.pid)
        assert tracer_of(self.pid) == "0"
        return json.loads(r.stdout)

    def send(self, text):
        self.p.stdin.write(text)
        self.p.stdin.flush()


def test_attach_to_a_musl_program_counts_exactly():
    """ymtop -p loads libymagent-musl.so into a running musl program (musl
    accepts its TLS descriptors from dlopen; the GOT slots of the program
    are taken over): in exact mode every allocation after the attach is
    counted at its own stack, the threads' too."""
    needs_musl()
    t = Attached([ATTACH], env={"YM_SAMPLE_RATE": "1"})
    try:
        t.attach()
        t.send("go\n")
        t.wait_for("done")
        rep = report(t.pid)
        rc, out, err = t.finish()
    finally:
        t.kill()
    assert rc == 0 and out == ["ready", "done"], (rc, out, err)
    assert "ymagent" not in err, err
    c = site(rep, "count_site")
    assert c["allocated_objects"] == 5000 and c["retained_objects"] == 0, c
    assert c["allocated_bytes"] == 5000 * 48, c
    h = site(rep, "hold_site")
    assert h["allocated_objects"] == 1000 and h["retained_bytes"] == 1000 * 4096, h
    assert "main" in functions(h), functions(h)
    s = site(rep, "thread_site")
    assert s["allocated_objects"] == 4 * 256 and \
        s["retained_bytes"] == 4 * 256 * 1024, s
    assert rep["totals"]["allocated_objects"] == 5000 + 1000 + 1024, rep["totals"]


def test_attach_to_a_musl_program_sampled_within_tolerance():
    """The same at a sampling rate of 4096 bytes: hold_site's 4000 KiB
    estimated within 10 % (a 4096-byte block is sampled with p = 0.63)."""
    needs_musl()
    t = Attached([ATTACH], env={"YM_SAMPLE_RATE": "4096"})
    try:
        t.attach()
        t.send("go\n")
        t.wait_for("done")
        rep = report(t.pid)
        rc, out, err = t.finish()
    finally:
        t.kill()
    assert rc == 0 and out == ["ready", "done"], (rc, out, err)
    within(site(rep, "hold_site")["retained_bytes"], 1000 * 4096, 0.10,
           "hold_site retained")
    within(site_total(rep, "thread_site"), 4 * 256 * 1024, 0.20,
           "thread_site retained")


def test_preloaded_musl_agent_without_segment_is_started():
    """A musl program under libymagent-musl.so that has not allocated yet
    has no segment (it comes with the first sample): ymtop -p starts the
    agent it already has (ymagent_start), loads nothing more, and the
    program's allocations after are counted."""
    needs_musl()
    t = Attached([ATTACH], env={"LD_PRELOAD": MUSL_AGENT, "YM_SAMPLE_RATE": "1"})
    try:
        assert not os.path.exists("/dev/shm/ymtop-%d" % t.pid)
        t.attach()
        t.send("go\n")
        t.wait_for("done")
        rep = report(t.pid)
        rc, out, err = t.finish()
    finally:
        t.kill()
    assert rc == 0 and out == ["ready", "done"], (rc, out, err)
    h = site(rep, "hold_site")
    assert h["allocated_objects"] == 1000 and h["retained_bytes"] == 1000 * 4096, h


def storm_attach(argv):
    """Attach three times in a row to the storm program argv while its
    threads allocate without pause (a stopped thread is often inside
    musl's malloc, holding its lock): each attach ends, the program's
    blocks stay intact, and what it allocates after the storm is counted
    exactly."""
    t = Attached(argv, env={"YM_SAMPLE_RATE": "1"})
    try:
        first = t.attach()
        assert first["attached"] is True, first
        for _ in range(2):
            rep = report(t.pid)
            assert site(rep, "storm_site")["allocated_objects"] > 0
        t.send("stop\n")
        t.wait_for("storm ok")
        rep = report(t.pid)
        rc, out, err = t.finish()
    finally:
        t.kill()
    assert rc == 0, (rc, out, err)
    a = site(rep, "after_site")
    assert a["allocated_objects"] == 100 and a["retained_bytes"] == 100 * 8192, a


def test_attach_to_musl_threads_that_allocate_hard():
    needs_musl()
    storm_attach([ATTACH, "storm"])


def test_attach_to_a_musl_program_whose_every_thread_allocates():
    """No thread waits in a system call: the one borrowed is stopped
    between two allocations in the program's code."""
    needs_musl()
    storm_attach([ATTACH, "storm", "all"])


def test_a_missing_musl_agent_is_named_and_the_program_untouched():
    """YM_AGENT names a libymagent.so with no libymagent-musl.so beside
    it: one line naming the musl file that is missing, the program
    untouched."""
    needs_musl()
    d = tempfile.mkdtemp()
    try:
        glibc_agent = os.path.join(d, "libymagent.so")
        shutil.copy(os.path.join(BUILD, "libymagent.so"), glibc_agent)
        os.environ["YM_AGENT"] = glibc_agent
        try:
            refused_untouched([COUNT], [
                "pid ", "is a musl program",
                os.path.join(d, "libymagent-musl.so") + ", which is missing",
                "make build/libymagent-musl.so"])
        finally:
            del os.environ["YM_AGENT"]
    finally:
        shutil.rmtree(d)


def musl_root(agent):
    """A minimal musl root, as an Alpine-like image holds it: the program
    (attach.c) as /prog, musl's libc.so as its loader
    /lib/ld-musl-x86_64.so.1, empty /proc and /dev/shm, and with agent the
    musl agent as /ymtop/libymagent-musl.so."""
    root = tempfile.mkdtemp()
    os.chmod(root, 0o755)
    for d in ("lib", "proc", "dev/shm", "ymtop"):
        os.makedirs(os.path.join(root, d))
    shutil.copy(ATTACH, os.path.join(root, "prog"))
    shutil.copy(os.path.realpath("/lib/ld-musl-x86_64.so.1"),
                os.path.join(root, "lib", "ld-musl-x86_64.so.1"))
    if agent:
        shutil.copy(MUSL_AGENT, os.path.join(root, "ymtop", "libymagent-musl.so"))
    return root


class MuslContained(Attached):
    """/prog of root run in new mount and pid namespaces (unshare -m -p),
    chrooted into root, with its own /proc and /dev/shm mounted there."""

    def __init__(self, root):
        unshare = shutil.which("unshare")
        if os.getuid() != 0 or not unshare:
            raise Skip("needs root and unshare(1)")
        r = subprocess.run([unshare, "--mount", "--pid", "--fork", "true"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise Skip("unshare --mount --pid not permitted here: " +
                       r.stderr.strip())
        mounts = ("mount -t tmpfs tmpfs {0}/dev/shm && "
                  "mount -t proc proc {0}/proc && ").format(root)
        super().__init__([unshare, "--mount", "--pid", "--fork", "sh", "-c",
                          mounts + "exec chroot %s /prog" % root],
                         env={"YM_SAMPLE_RATE": "1"})
        self.outer = self.pid
        with open("/proc/%d/task/%d/children" % (self.outer, self.outer)) as f:
            self.pid = int(f.read().split()[0])   # the program, on the host


def contained_counts(root, ymtop_env, want_maps):
    """ymtop -p from the host into /prog of the musl root: the agent goes
    in (its mapping named want_maps), makes its segment in the
    container's /dev/shm, and counts exactly what the program allocates
    next, symbolized through /proc/PID/root; the root's files unchanged."""
    before = {(d, f, os.stat(os.path.join(d, f)).st_mtime_ns)
              for d, _, fs in os.walk(root) for f in fs}
    t = MuslContained(root)
    try:
        r = ymtop("-b", "-n", "1", "-i", "0.05", "-f", "json", "-p", t.pid,
                  env=dict(os.environ, YM_INJECT_VERBOSE="1", **ymtop_env))
        rep = json.loads(r.stdout)
        assert rep["ns_pid"] == 1, rep.get("ns_pid")
        assert {l.split(None, 5)[-1] for l in maps_of(t.pid).splitlines()
                if "libymagent" in l} == {want_maps}, maps_of(t.pid)
        ns = os.stat("/proc/%d/ns/pid" % t.pid).st_ino
        assert os.path.exists("/proc/%d/root/dev/shm/ymtop-1.%d" % (t.pid, ns))
        t.send("go\n")
        t.wait_for("done")
        rep = report(t.pid)
        h = site(rep, "hold_site")
        assert h["allocated_objects"] == 1000 and \
            h["retained_bytes"] == 1000 * 4096, h
        assert "main" in functions(h), functions(h)
        s = site(rep, "thread_site")
        assert s["allocated_objects"] == 4 * 256, s
        rc, out, err = t.finish()
    finally:
        t.kill()
    assert rc == 0 and out == ["ready", "done"], (rc, out, err)
    after = {(d, f, os.stat(os.path.join(d, f)).st_mtime_ns)
             for d, _, fs in os.walk(root) for f in fs}
    assert after == before, "the root's files changed"


def test_musl_root_attached_from_the_host_brings_the_agent_in():
    """The root holds the program and musl only: ymtop on the host brings
    libymagent-musl.so in through a memfd (/proc/self/fd/N)."""
    needs_musl()
    root = musl_root(agent=False)
    try:
        contained_counts(root, {}, "/memfd:libymagent.so (deleted)")
    finally:
        shutil.rmtree(root)


def test_musl_root_with_the_agent_inside_loads_it_by_its_path():
    """YM_AGENT names libymagent.so where the container keeps it: the
    musl agent beside it is dlopen'ed by its path there."""
    needs_musl()
    root = musl_root(agent=True)
    try:
        # maps names it as ymtop sees it: under the root, on the host.
        contained_counts(root, {"YM_AGENT": "/ymtop/libymagent.so"},
                         os.path.join(root, "ymtop", "libymagent-musl.so"))
    finally:
        shutil.rmtree(root)


def test_attaching_to_a_static_musl_program_says_static():
    needs_musl()
    d = tempfile.mkdtemp()
    try:
        src, exe = os.path.join(d, "s.c"), os.path.join(d, "static_musl")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\nint main(void){char b[8];'
                    'puts("ready");fflush(stdout);'
                    'return fgets(b,8,stdin)?0:7;}\n')
        subprocess.run(["musl-gcc", "-static", "-O1", "-o", exe, src], check=True)
        refused_untouched([exe], ["statically linked",
                                  "neither preloaded (LD_PRELOAD) nor injected"])
    finally:
        shutil.rmtree(d)


def test_no_agent_anywhere_names_the_musl_agent_too():
    """ymtop without -p and no process under an agent: the remedy names
    both files, the musl one for a musl program.  In namespaces of its
    own (as root): other programs under the agent would be found."""
    if rerun_isolated(__file__, "test_no_agent_anywhere_names_the_musl_agent_too",
                      pid_ns=True):
        return
    r = ymtop("-b", "-n", "1", check=False)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "a musl program: LD_PRELOAD=" + MUSL_NAMED \
        in r.stderr, r.stderr


def test_install_puts_the_musl_agent_beside_the_glibc_one():
    needs_musl()
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    d = tempfile.mkdtemp()
    try:
        r = subprocess.run(["make", "-s", "-C", root, "install", "DESTDIR=" + d,
                            "PREFIX=/usr", "B=" + os.path.abspath(BUILD)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        lib = os.path.join(d, "usr", "lib", "ymtop")
        assert sorted(os.listdir(lib)) == ["libymagent-musl.so", "libymagent.so"], \
            os.listdir(lib)
        with open(os.path.join(lib, "libymagent-musl.so"), "rb") as a, \
                open(MUSL_AGENT, "rb") as b:
            assert a.read() == b.read()
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
