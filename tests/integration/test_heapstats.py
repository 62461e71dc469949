"""The allocator's own statistics (segment.h, struct ym_heapstats; issue
18): what a process allocated before `ymtop -p` is in the first report's
`heap` object, under glibc (mallinfo2), jemalloc (libjemalloc2: mallctl)
and tcmalloc (libtcmalloc-minimal4: MallocExtension), each preloaded into
a process the agent is then injected into.  The exact totals start at the
attach (0 here): only the allocator's statistics can say 100 MiB.  A
missing allocator prints "skip NAME: reason"."""
import os
import subprocess
import sys

from ymlib import BUILD, Skip, ymtop, report, run_tests

sys.path.insert(0, os.path.dirname(__file__))
from test_allocators import find_lib  # noqa: E402

ALLOCS = os.path.join(BUILD, "progs", "allocs")
MiB = 1 << 20

ALLOCATORS = [
    ("glibc", None, None),
    ("jemalloc", "libjemalloc.so.2", "libjemalloc2"),
    ("tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
]


def start(lib, steps, env=None):
    """allocs with `steps` done, no agent, `lib` (or glibc) as allocator."""
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    if lib:
        e["LD_PRELOAD"] = lib
    e.update(env or {})
    p = subprocess.Popen([ALLOCS] + steps, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=e)
    line = p.stdout.readline()
    assert line.strip() == "ready", (line, p.stderr.read())
    return p


def stop(p):
    if p.poll() is None:
        p.kill()
    p.communicate()


def lib_for(soname, pkg):
    if not soname:
        return None
    lib = find_lib(soname)
    if lib is None:
        raise Skip("%s not found (apt-get install %s)" % (soname, pkg))
    return lib


def check_injected_first_report(name, soname, pkg):
    """100 MiB in 64 KiB blocks, allocated before the attach: the first
    report's heap says about 100 MiB in use (allocator overhead: at most
    3 MiB more), taken at the attach, from the right allocator."""
    lib = lib_for(soname, pkg)
    p = start(lib, ["malloc:1600:65536"])
    try:
        rep = report(p.pid)
        heap = rep["heap"]
        assert rep["attached"] is True, rep["attached"]
        assert heap is not None, "no heap statistics"
        assert heap["allocator"] == name, heap
        assert 100 * MiB <= heap["in_use_bytes"] <= 103 * MiB, heap
        assert heap["age_s"] >= 0, heap
        # The exact counters start at the attach: they cannot say it.
        assert rep["totals"]["requested_bytes"] < MiB, rep["totals"]
        for key in ("free_bytes", "mapped_bytes"):
            assert key in heap, (key, heap)
        if name == "jemalloc":
            assert "resident_bytes" in heap, heap
        else:
            assert "resident_bytes" not in heap, heap
        if name != "tcmalloc":
            assert heap["arenas"] >= 1, heap
        text = ymtop("-b", "-n", "1", "-p", p.pid).stdout
        line = [ln for ln in text.splitlines() if ln.startswith("heap (")]
        assert line and ("%s's statistics" % name) in line[0], text
    finally:
        stop(p)


def test_freed_bytes_absent_when_sampling_present_when_exact():
    """Sampling: frees count objects, not bytes; exact mode: both."""
    from ymlib import AGENT
    for rate, present in (("65536", False), ("1", True)):
        p = start(AGENT, ["malloc:100:1000"], {"YM_SAMPLE_RATE": rate})
        try:
            rep = report(p.pid)
            t = rep["totals"]
            assert ("freed_bytes" in t) == present, (rate, t)
            assert ("in_use_bytes" in t) == present, (rate, t)
            for th in rep["threads"]:
                assert ("freed_bytes" in th) == present, (rate, th)
        finally:
            stop(p)


def test_preloaded_quiet_process_answers_at_its_next_call():
    """Preloaded, the agent takes no statistics by itself: a reader asks
    (control.heap_request and fast_limit), and a quiet process answers at
    its next allocation, whatever its sampling countdown."""
    from ymlib import AGENT
    p = start(AGENT, ["malloc:1600:65536"])
    try:
        first = report(p.pid)["heap"]   # asked now; nobody answered yet
        assert first is None, first
        p.stdin.write("tick\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "ready"
        heap = report(p.pid)["heap"]
        assert heap is not None and heap["allocator"] == "glibc", heap
        assert 100 * MiB <= heap["in_use_bytes"] <= 103 * MiB, heap
        assert heap["age_s"] < 30, heap
    finally:
        stop(p)


def test_glibc_arenas_counted():
    """glibc: the main arena, and one more for each arena its threads
    made (counted from the arenas' first heaps, allocation-free)."""
    p = start(None, ["malloc:10:1000"])
    try:
        heap = report(p.pid)["heap"]
        assert heap["arenas"] == 1, heap
    finally:
        stop(p)
    workload = os.path.join(BUILD, "progs", "workload")
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    p = subprocess.Popen([workload, "threads:4"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=e)
    try:
        assert p.stdout.readline().strip() == "ready"
        heap = report(p.pid)["heap"]
        assert 2 <= heap["arenas"] <= 5, heap
    finally:
        stop(p)


def test_arena_count_survives_heaps_unmapped_meanwhile():
    """Counting glibc's arenas looks at each 64 MiB-aligned anonymous
    page of /proc/self/maps; another thread may unmap it in between (as
    heap_trim does).  A reader asking for statistics every 50 ms while a
    thread churns 2000 such pages must never kill the host (it did, with
    a plain load: SIGSEGV in 2 runs of 10)."""
    prog = os.path.join(BUILD, "progs", "arena_churn")
    e = dict(os.environ)
    e["LD_PRELOAD"] = os.path.join(BUILD, "libymagent.so")
    e["YM_SAMPLE_RATE"] = "4096"
    for _ in range(2):
        p = subprocess.Popen([prog, "4"], stdout=subprocess.PIPE, text=True,
                             env=e)
        try:
            assert p.stdout.readline().strip() == "ready"
            ymtop("-b", "-i", "0.05", "-n", "60", "-f", "json", "-p", p.pid,
                  check=False)
            out, _ = p.communicate(timeout=60)
            assert p.returncode == 0 and "survived" in out, (p.returncode, out)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


def make_tests():
    tests = {}
    for name, soname, pkg in ALLOCATORS:
        tests["test_%s_injected_first_report" % name] = \
            (lambda n=name, s=soname, k=pkg:
             check_injected_first_report(n, s, k))
    return tests


if __name__ == "__main__":
    ns = dict(globals())
    ns.update(make_tests())
    sys.exit(run_tests(ns))
