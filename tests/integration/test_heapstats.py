"""The allocator's own statistics (segment.h, struct ym_heapstats; issue
18): what a process allocated before `ymtop -p` is in the first report's
`heap` object, under glibc (mallinfo2), jemalloc (libjemalloc2: mallctl)
and tcmalloc (libtcmalloc-minimal4: MallocExtension), each preloaded into
a process the agent is then injected into.  The exact totals start at the
attach (0 here): only the allocator's statistics can say 100 MiB.  A
missing allocator prints "skip NAME: reason"."""
import json
import os
import subprocess
import sys
import time

from ymlib import BUILD, YMTOP, Skip, ymtop, report, run_tests

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
    its next allocation, whatever its sampling countdown.  (YM_NO_BORROW:
    ymtop borrows none of its threads to take them.)"""
    from ymlib import AGENT
    p = start(AGENT, ["malloc:1600:65536"])
    no_borrow = dict(os.environ, YM_NO_BORROW="1")
    try:
        first = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", p.pid,
                                 env=no_borrow).stdout)["heap"]
        assert first is None, first     # asked now; nobody answered yet
        p.stdin.write("tick\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "ready"
        heap = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", p.pid,
                                env=no_borrow).stdout)["heap"]
        assert heap is not None and heap["allocator"] == "glibc", heap
        assert 100 * MiB <= heap["in_use_bytes"] <= 103 * MiB, heap
        # Taken at the tick's malloc, before its free: one call since.
        assert heap["current"] is False and heap["age_s"] > 0, heap
    finally:
        stop(p)


def check_idle_first_report_current(name, soname, pkg):
    """A preloaded process that went idle before anyone asked: the first
    report of `ymtop -b -n 1` has its allocator's figures, marked current
    (a thread borrowed at a safe moment took them), and a second report
    says current again without borrowing (no call since: the call count
    the figures carry is the process's)."""
    from ymlib import AGENT
    lib = lib_for(soname, pkg)
    p = start(AGENT + (" " + lib if lib else ""), ["malloc:1600:65536"])
    try:
        for env in (None, dict(os.environ, YM_NO_BORROW="1")):
            rep = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", p.pid,
                                   env=env).stdout)
            heap = rep["heap"]
            assert heap is not None, "not available"
            assert heap["allocator"] == name, heap
            assert heap["current"] is True and heap["age_s"] == 0, heap
            assert 100 * MiB <= heap["in_use_bytes"] <= 103 * MiB, heap
        text = ymtop("-b", "-n", "1", "-p", p.pid).stdout
        assert ("heap (%s's statistics, current)" % name) in text, text
        assert "not available" not in text, text
    finally:
        stop(p)


def test_injected_process_idle_after_a_call_is_current():
    """An agent that ymtop -p loaded (private to its process: dlsym by name
    cannot find it) in a process that made a call after the attach, then
    went idle: the next report's figures are current (a borrowed thread
    called ymagent_heapstats at the address its file gives)."""
    p = start(None, ["malloc:1600:65536"])
    try:
        first = report(p.pid)["heap"]            # injects; taken at start
        assert first and first["current"], first
        p.stdin.write("tick\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "ready"
        heap = report(p.pid)["heap"]
        assert heap and heap["current"] and heap["age_s"] == 0, heap
        assert 100 * MiB <= heap["in_use_bytes"] <= 103 * MiB, heap
    finally:
        stop(p)


def test_debian_python3_idle_after_growing_is_current():
    """python3 (Debian's, preloaded) that built 150 MiB of bytearrays and
    waits on stdin: its first report's in use is the allocator's, current,
    not "not available" nor a figure from before it grew."""
    from ymlib import AGENT
    e = dict(os.environ, LD_PRELOAD=AGENT)
    p = subprocess.Popen(
        ["/usr/bin/python3", "-c",
         "import sys\n"
         "x = [bytearray(1 << 20) for _ in range(150)]\n"
         "print('ready', flush=True)\n"
         "sys.stdin.readline()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=e)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        heap = report(p.pid)["heap"]
        assert heap and heap["current"] and heap["age_s"] == 0, heap
        assert 150 * MiB <= heap["in_use_bytes"] <= 170 * MiB, heap
    finally:
        stop(p)


TRACER = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(0x4206, int(sys.argv[1]), None, None) != 0:   # PTRACE_SEIZE
    sys.exit("seize: %d" % ctypes.get_errno())
print("seized", flush=True)
sys.stdin.readline()
"""


def test_old_figures_say_why_when_no_thread_can_be_borrowed():
    """A process that made a call since its last figures and is traced by
    another tracer (a debugger): no thread can be borrowed, so the figures
    are shown old, with the reason, never as current."""
    from ymlib import AGENT
    p = start(AGENT, ["malloc:1600:65536"])
    tracer = None
    try:
        assert report(p.pid)["heap"]["current"]          # borrowed
        p.stdin.write("tick\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "ready"
        tracer = subprocess.Popen([sys.executable, "-c", TRACER, str(p.pid)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        assert tracer.stdout.readline().strip() == "seized"
        heap = report(p.pid)["heap"]
        assert heap["current"] is False and heap["age_s"] > 0, heap
        assert "traced by pid %d" % tracer.pid in heap["why_old"], heap
        text = ymtop("-b", "-n", "1", "-p", p.pid).stdout
        line = [ln for ln in text.splitlines() if ln.startswith("heap (")]
        assert line and " s old: no allocator call since" in line[0], text
    finally:
        if tracer:
            tracer.communicate("\n", timeout=30)
        stop(p)


PEAKS = os.path.join(BUILD, "progs", "peaks")


def hold(p, mib):
    p.stdin.write("hold %d\n" % mib)
    p.stdin.flush()
    assert p.stdout.readline().strip() == "ready"


def start_peaks():
    from ymlib import AGENT
    e = dict(os.environ, LD_PRELOAD=AGENT, YM_EARLY_SEGMENT="1")
    p = subprocess.Popen([PEAKS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=e)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_batch_interval_2_report_has_the_growth_before_it():
    """`-b -i 2`: the second report's in use includes what the process
    allocated between the two reports (asked at each refresh, not one
    interval before), marked current."""
    p = start_peaks()
    y = None
    try:
        hold(p, 20)
        y = subprocess.Popen([YMTOP, "-b", "-i", "2", "-n", "2", "-f", "json",
                              "-p", str(p.pid)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        first = json.loads(y.stdout.readline())["heap"]
        assert first and first["current"], first
        assert 20 * MiB <= first["in_use_bytes"] < 22 * MiB, first
        hold(p, 50)                      # while ymtop waits its interval
        second = json.loads(y.stdout.readline())["heap"]
        assert second and second["current"], second
        assert 70 * MiB <= second["in_use_bytes"] < 72 * MiB, second
        assert y.wait(timeout=60) == 0, y.stderr.read()
    finally:
        if y and y.poll() is None:
            y.kill()
            y.wait()
        stop(p)


def metric(body, name):
    for line in body.decode().splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_serve_scrapes_see_the_growth_in_between():
    """--serve asks at every scrape: a process that grew 50 MiB between
    two scrapes two seconds apart (ymtop borrows an idle process's thread
    at most every second) shows it at the second, with heap age 0 beside
    it; and a process nobody asked before it went idle has its series at
    the first scrape."""
    from test_fleet import Server
    p = start_peaks()
    sv = None
    try:
        hold(p, 10)
        sv = Server("-p", str(p.pid))
        status, body, _ = sv.get("/metrics")
        assert status == 200, status
        a = metric(body, "ymtop_process_in_use_bytes")
        assert a is not None and 10 * MiB <= a < 12 * MiB, body.decode()[:2000]
        assert metric(body, "ymtop_process_heap_age_seconds") == 0, body
        hold(p, 50)
        time.sleep(2)
        status, body, _ = sv.get("/metrics")
        b = metric(body, "ymtop_process_in_use_bytes")
        assert b is not None and 60 * MiB <= b < 62 * MiB, (a, b)
        assert metric(body, "ymtop_process_heap_age_seconds") == 0, body
    finally:
        if sv:
            sv.stop()
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
        tests["test_%s_idle_preloaded_first_report_is_current" % name] = \
            (lambda n=name, s=soname, k=pkg:
             check_idle_first_report_current(n, s, k))
    return tests


if __name__ == "__main__":
    ns = dict(globals())
    ns.update(make_tests())
    sys.exit(run_tests(ns))
