"""The agent built for musl (build/libymagent-musl.so, Makefile): loads
into a program that musl-gcc linked, needs nothing but musl's libc.so,
and counts every allocation in exact mode, each at its own stack, also
in threads and with a fork child (tests/progs/musl/count.c).  ymtop -p
tells a musl program (and a static one) from a glibc one and says in
one line what to do, before touching it; make install installs the
musl agent beside libymagent.so."""
import os
import shutil
import subprocess
import sys
import tempfile

from ymlib import (BUILD, Plain, Skip, Target, functions, report,
                   rerun_isolated, run_tests, site, ymtop)

MUSL_AGENT = os.path.join(BUILD, "libymagent-musl.so")
# The musl agent as ymtop names it: beside the libymagent.so it found.
MUSL_NAMED = os.path.join(os.path.dirname(os.path.realpath(
    os.path.join(BUILD, "libymagent.so"))), "libymagent-musl.so")
COUNT = os.path.join(BUILD, "musl", "count")


def needs_musl():
    if not shutil.which("musl-gcc"):
        raise Skip("musl-gcc is not installed (musl-tools)")
    assert os.path.exists(MUSL_AGENT) and os.path.exists(COUNT), \
        "make check builds %s and %s" % (MUSL_AGENT, COUNT)


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


def test_attaching_to_a_musl_program_names_the_musl_agent():
    """libymagent.so cannot go into a musl program (musl's loader fails on
    glibc's symbols, __register_atfork); ymtop -p says it is a musl program
    and names the file to preload, before it touches the process."""
    needs_musl()
    line = refused_untouched([COUNT], [
        "pid ", "is a musl program", "attaching is not supported yet",
        "LD_PRELOAD=" + MUSL_NAMED])
    assert "__register_atfork" not in line, line


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
