"""The estimator under each allocator that Debian packages: glibc's,
jemalloc (libjemalloc2), tcmalloc (libtcmalloc-minimal4) and mimalloc
(libmimalloc2.0), preloaded after the agent (LD_PRELOAD="agent allocator":
the agent interposes and forwards with RTLD_NEXT to the allocator; the C++
check also with the allocator first).  Each check runs tests/progs/allocs
(tests/progs/cxxallocs for C++) and compares ymtop's JSON with the truth.

Tolerances come from the sampling variance: a block of s bytes is sampled
with probability p >= 1 - exp(-s/R) and then weighs s/p, so the estimate
of n such blocks has a standard deviation of at most
s sqrt(n (1 - p)/p); a check allows Z of those.  YM_SEED is fixed, so a
run is reproducible.  A missing allocator prints "skip NAME: reason"."""
import math
import os
import subprocess
import sys

from ymlib import (AGENT, BUILD, Plain, Target, attach, functions, report,
                   run_tests)

ALLOCS = os.path.join(BUILD, "progs", "allocs")
Z = 4.5   # standard deviations: ~7e-6 two-sided per check if unbiased

# name, soname, Debian package
ALLOCATORS = [
    ("glibc", None, None),
    ("jemalloc", "libjemalloc.so.2", "libjemalloc2"),
    ("tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    ("mimalloc", "libmimalloc.so.2", "libmimalloc2.0"),
]


def find_lib(soname):
    """The path of a shared library known to the loader, or None."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True,
                             text=True, timeout=30).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        parts = line.split(" => ")
        if (len(parts) == 2 and parts[0].split()[0] == soname and
                os.path.exists(parts[1].strip())):
            return parts[1].strip()
    for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
              "/usr/lib64", "/usr/lib"):
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return p
    return None


def site_stacks(rep, name):
    """Stacks whose innermost frame is function `name` (the site itself,
    not the bookkeeping it calls)."""
    return [s for s in rep["stacks"]
            if s["frames"] and functions(s)[0] == name]


def retained(rep, name):
    return sum(s["retained_bytes"] for s in site_stacks(rep, name))


def objects(rep, name):
    return sum(s["retained_objects"] for s in site_stacks(rep, name))


def bound(rate, blocks):
    """Z standard deviations of the estimate of blocks [(size, count)]."""
    var = 0.0
    for size, count in blocks:
        if rate > 1 and size > 0:
            p = -math.expm1(-size / rate)
            var += count * size * size * (1 - p) / p
    return Z * math.sqrt(var)


def near(value, truth, tol, what):
    if abs(value - truth) > tol:
        raise AssertionError("%s: %.0f, truth %.0f (%.3f of it), allowed "
                             "+-%.0f" % (what, value, truth,
                                         value / truth if truth else 0, tol))


class Run:
    """allocs with its steps under the agent and one allocator."""

    def __init__(self, lib, steps, rate, seed=4242):
        preload = AGENT + (" " + lib if lib else "")
        self.t = Target([ALLOCS] + steps, env={
            "LD_PRELOAD": preload, "YM_SAMPLE_RATE": str(rate),
            "YM_SEED": str(seed)})
        if lib:   # the allocator really serves this process
            real = os.path.realpath(lib)
            with open("/proc/%d/maps" % self.t.pid) as f:
                maps = f.read()
            if real not in maps and lib not in maps:
                self.t.kill()
                raise AssertionError("%s not mapped in the target" % lib)

    def report(self):
        return report(self.t.pid)

    def free_all(self):
        """Frees every block the steps hold; the next report sees it."""
        self.t.p.stdin.write("free\n")
        self.t.p.stdin.flush()
        self.t.wait_for("ready")

    def finish(self):
        rc, lines, err = self.t.finish()
        assert rc == 0, "allocs exited %d: %s" % (rc, err)
        odd = [ln for ln in lines if "unexpected" in ln]
        assert not odd, odd

    def kill(self):
        self.t.kill()


def run_checks(lib, steps, rate, check, after_free=()):
    """Runs steps, calls check(report), frees everything, and then checks
    that the sites in after_free retain exactly nothing."""
    r = Run(lib, steps, rate)
    try:
        check(r.report())
        if after_free:
            r.free_all()
            rep = r.report()
            for name in after_free:
                got = retained(rep, name)
                assert got == 0, "%s retains %d after free" % (name, got)
                assert objects(rep, name) == 0, (name, site_stacks(rep, name))
        r.finish()
    finally:
        r.kill()


# ---- the checks, each under one allocator ----

GROW_N, GROW_TO, GROW_STEP = 6000, 8192, 256


def check_grow(lib, step, site):
    """Issue 16: 6000 blocks grown to 8 KiB in 256-byte steps.  Charging
    the growth as new request - old usable size gave 0.57 (jemalloc,
    mimalloc) and 0.45 (tcmalloc) of the truth here."""
    rate = 16384
    truth = GROW_N * GROW_TO

    def check(rep):
        near(retained(rep, site), truth, bound(rate, [(GROW_TO, GROW_N)]),
             site + " retained")
    run_checks(lib, ["%s:%d:%d:%d" % (step, GROW_N, GROW_TO, GROW_STEP)],
               rate, check, after_free=[site])


def check_malloc_sizes(lib):
    """Plain malloc of sizes in and between the allocators' classes."""
    rate = 4096
    for size, n in ((40, 200000), (1000, 16000), (5000, 3000), (70000, 200)):
        def check(rep, size=size, n=n):
            near(retained(rep, "malloc_site"), size * n,
                 bound(rate, [(size, n)]), "malloc_site %d B" % size)
        run_checks(lib, ["malloc:%d:%d" % (n, size)], rate, check,
                   after_free=["malloc_site"])


def check_calloc_aligned(lib):
    """calloc, posix_memalign, aligned_alloc, memalign, valloc (pvalloc is
    not in jemalloc: glibc's would serve it, and jemalloc free it)."""
    rate = 4096

    def check(rep):
        near(retained(rep, "calloc_site"), 2000 * 8192,
             bound(rate, [(8192, 2000)]), "calloc_site")
        assert len(site_stacks(rep, "aligned_site")) == 4, \
            [functions(s)[:2] for s in rep["stacks"]]
        near(retained(rep, "aligned_site"), 4 * 500 * 8192,
             bound(rate, [(8192, 2000)]), "aligned_site")
    run_checks(lib, ["calloc:2000:8192", "aligned:500:8192"], rate, check,
               after_free=["calloc_site", "aligned_site"])


def check_shrink(lib):
    """8000 blocks of 8 KiB shrunk to 2000 bytes in 512-byte steps: a
    sampled block that kept its sample through every shrink would be
    counted at 2.2 times its share."""
    rate = 4096

    def check(rep):
        near(retained(rep, "shrink_site"), 8000 * 2000,
             bound(rate, [(2000, 8000)]), "shrink_site")
    run_checks(lib, ["shrink:8000:8192:2000:512"], rate, check,
               after_free=["shrink_site"])


def check_realloc_edges(lib):
    """reallocarray (one overflowing: fails, p kept), realloc(p, 0) (glibc,
    jemalloc and tcmalloc free p; mimalloc returns a 0-byte block) and a
    realloc that fails (p is kept and stays counted)."""
    rate = 4096

    def check(rep):
        near(retained(rep, "array_site"), 2000 * 8192,
             bound(rate, [(8192, 2000)]), "array_site")
        assert retained(rep, "zero_site") == 0, site_stacks(rep, "zero_site")
        near(retained(rep, "fail_site"), 300 * 8192,
             bound(rate, [(8192, 300)]), "fail_site")
    run_checks(lib, ["array:2000:8192", "zero:2000:8192", "fail:300:8192"],
               rate, check,
               after_free=["array_site", "zero_site", "fail_site"])


EXACT_STEPS = [
    ("grow:600:8192:256", "grow_site", 600 * 8192, 600),
    ("growseq:300:4096:100", "growseq_site", 300 * 4000, 300),
    ("shrink:800:8192:2000:512", "shrink_site", 800 * 2000, 800),
    ("malloc:1000:1000", "malloc_site", 1000 * 1000, 1000),
    ("calloc:200:8192", "calloc_site", 200 * 8192, 200),
    ("aligned:50:8192", "aligned_site", 4 * 50 * 8192, 200),
    ("array:200:8192", "array_site", 200 * 8192, 200),
    ("zero:200:100", "zero_site", 0, None),
    ("fail:20:8192", "fail_site", 20 * 8192, 20),
]


def check_exact_mode(lib):
    """YM_SAMPLE_RATE=1 counts every block exactly, through every path."""
    def check(rep):
        for _, site, truth, n in EXACT_STEPS:
            assert retained(rep, site) == truth, \
                (site, retained(rep, site), truth)
            if n is not None:
                assert objects(rep, site) == n, (site, objects(rep, site), n)
    run_checks(lib, [s[0] for s in EXACT_STEPS], 1, check,
               after_free=[s[1] for s in EXACT_STEPS])


def check_exact_totals(lib):
    """The totals count every call exactly at any rate, exact mode
    included: a run with 100 more realloc chains (32 calls each, the first
    realloc(NULL)) and 1000 more malloc(100) differs by exactly that, and
    after freeing, by as many frees, of the same usable bytes in exact
    mode (sampling counts freed objects and requested bytes only)."""
    def totals(k, rate):
        r = Run(lib, ["grow:%d:8192:256" % (100 * k),
                      "malloc:%d:100" % (1000 * k)], rate)
        try:
            held = r.report()["totals"]
            r.free_all()
            freed = r.report()["totals"]
            r.finish()
        finally:
            r.kill()
        return held, freed

    def diff(x, y, key):
        return y[key] - x[key]
    calls = 100 * 32 + 1000
    for rate in (65536, 1):
        (a, fa), (b, fb) = totals(1, rate), totals(2, rate)
        what = (rate, a, b)
        assert diff(a, b, "allocated_objects") == calls, what
        assert diff(a, b, "requested_bytes") == \
            100 * sum(range(256, 8193, 256)) + 1000 * 100, what
        assert diff(a, b, "freed_objects") == 100 * 31, what
        assert diff(fa, fb, "freed_objects") == calls, (rate, fa, fb)
        if rate == 1:
            assert diff(fa, fb, "freed_bytes") == \
                diff(fa, fb, "allocated_bytes"), (rate, fa, fb)
        else:   # sampling: frees count objects, not bytes (man/ymagent.7)
            assert "freed_bytes" not in fb, fb
            # nor allocations usable bytes: requested bytes are counted,
            # and the stable key carries them
            assert fb["allocated_bytes_kind"] == "requested", fb
            assert diff(fa, fb, "allocated_bytes") == \
                diff(fa, fb, "requested_bytes"), (rate, fa, fb)


CXXALLOCS = os.path.join(BUILD, "progs", "cxxallocs")
CXX_SITES = ["new_site", "array_site", "aligned_site", "aligned_array_site",
             "nothrow_site"]


def cxx_stacks(rep, name):
    """Stacks through the C++ function `name` (the allocator's operator
    new may be innermost: Debian's jemalloc's aligned new reaches the
    agent through aligned_alloc)."""
    return [s for s in rep["stacks"]
            if any(f == name or f.startswith(name + "(")
                   for f in functions(s))]


def cxx_run(lib, n, rate, before=False):
    """cxxallocs N 4096 under the agent and lib (before the agent in
    LD_PRELOAD when before): its report with the blocks held, then the
    one after "free"."""
    preload = (lib + " " + AGENT) if before else \
        (AGENT + (" " + lib if lib else ""))
    t = Target([CXXALLOCS, str(n), "4096"], env={
        "LD_PRELOAD": preload, "YM_SAMPLE_RATE": str(rate),
        "YM_SEED": "4242"})
    try:
        held = report(t.pid)
        t.p.stdin.write("free\n")
        t.p.stdin.flush()
        t.wait_for("ready")
        freed = report(t.pid)
        rc, _, err = t.finish()
        assert rc == 0, (rc, err)
    finally:
        t.kill()
    return held, freed


def check_cxx_forms(lib):
    """Every form of operator new and its sized and aligned delete: each
    site's estimate within its error, exact in exact mode, nothing after
    the deletes, and the totals count each call once.  Debian's jemalloc's
    aligned new calls aligned_alloc and its deletes free through the PLT:
    counted there and in the operator's hook as well, the aligned sites
    came to 1.37 times the truth at a rate of the blocks' size, and the
    totals to 7 calls for 5."""
    orders = [False, True] if lib else [False]
    for before in orders:
        rate = 4096
        held, freed = cxx_run(lib, 300, rate, before)
        for name in CXX_SITES:
            near(sum(s["retained_bytes"] for s in cxx_stacks(held, name)),
                 300 * 4096, bound(rate, [(4096, 300)]),
                 "%s (before %s)" % (name, before))
            assert not any(s["retained_bytes"] or s["retained_objects"]
                           for s in cxx_stacks(freed, name)), (name, before)
        totals = {}
        for n in (100, 200):
            held, freed = cxx_run(lib, n, 1, before)
            for name in CXX_SITES:
                st = cxx_stacks(held, name)
                got = (sum(s["retained_bytes"] for s in st),
                       sum(s["retained_objects"] for s in st))
                assert got == (n * 4096, n), (name, before, got)
            totals[n] = (held["totals"], freed["totals"])
        (a, fa), (b, fb) = totals[100], totals[200]
        calls = 100 * len(CXX_SITES)
        what = (before, a, b, fa, fb)
        assert b["allocated_objects"] - a["allocated_objects"] == calls, what
        assert b["freed_objects"] - a["freed_objects"] == 0, what
        assert fb["freed_objects"] - fa["freed_objects"] == calls, what
        assert fb["freed_bytes"] - fa["freed_bytes"] == \
            fb["allocated_bytes"] - fa["allocated_bytes"], what


def check_libc_big(lib):
    """Blocks libc allocates itself (strdup, asprintf, getline's buffer,
    grown by realloc inside libc) and blocks the allocator maps (256 KiB:
    malloc, calloc and a realloc grown to it), at a small rate and
    exactly; pvalloc too, but under jemalloc, which has none (glibc's
    would serve it and jemalloc free it)."""
    steps = ["libc:300:4096", "big:50:262144"]
    if not (lib and "jemalloc" in lib):
        steps.append("pvalloc:200:8192")

    def truth(r):
        cap = [int(ln.split()[1]) for ln in r.t.lines
               if ln.startswith("getline ")]
        assert len(cap) == 1, r.t.lines
        # stdout's buffer, made by the printf of "getline CAP" in libc_site
        return {"libc_site": (600 * 4096 + 300 * cap[0] + 4096, 901),
                "big_site": (150 * 262144, 150),
                "pvalloc_site": (200 * 8192, 200)}
    for rate in (4096, 1):
        r = Run(lib, steps, rate)
        try:
            rep = r.report()
            for site, (tb, tn) in truth(r).items():
                if site == "pvalloc_site" and "pvalloc:200:8192" not in steps:
                    continue
                st = cxx_stacks(rep, site)   # libc's frames innermost
                got = (sum(s["retained_bytes"] for s in st),
                       sum(s["retained_objects"] for s in st))
                if rate == 1:
                    assert got == (tb, tn), (site, got, tb, tn)
                else:
                    size = 262144 if site == "big_site" else 4096
                    near(got[0], tb, bound(rate, [(size, tn)]), site)
            r.finish()
        finally:
            r.kill()


INJECT_STEPS = [
    ("libc:300:4096", "libc_site", 900 * 4096, 900),
    ("big:50:262144", "big_site", 150 * 262144, 150),
    ("grow:600:8192:256", "grow_site", 600 * 8192, 600),
    ("calloc:200:8192", "calloc_site", 200 * 8192, 200),
    ("aligned:50:8192", "aligned_site", 4 * 50 * 8192, 200),
    ("array:200:8192", "array_site", 200 * 8192, 200),
    ("pvalloc:200:8192", "pvalloc_site", 200 * 8192, 200),
]


def check_injected_exact(lib):
    """ymtop -p loads the agent into a process already running under the
    allocator (exact mode from the target's environment); the steps run
    again after the attach are counted exactly, libc's own blocks and
    mapped ones included, and nothing stays after the frees (of blocks
    from before the attach as well, which the agent never saw)."""
    steps = [s for s in INJECT_STEPS
             if not (lib and "jemalloc" in lib and s[1] == "pvalloc_site")]
    env = {"YM_SAMPLE_RATE": "1"}
    if lib:
        env["LD_PRELOAD"] = lib
    t = Plain([ALLOCS] + [s[0] for s in steps], env=env)
    try:
        attach(t.pid)
        for cmd in ("again", "free"):
            t.p.stdin.write(cmd + "\n")
            t.p.stdin.flush()
            t.wait_for("ready")
            rep = report(t.pid)
            for _, site, tb, tn in steps:
                st = [s for s in rep["stacks"] if site in functions(s)]
                got = (sum(s["retained_bytes"] for s in st),
                       sum(s["retained_objects"] for s in st))
                want = (tb, tn) if cmd == "again" else (0, 0)
                assert got == want, (cmd, site, got, want)
        rc, _, err = t.finish()
        assert rc == 0, (rc, err)
    finally:
        t.kill()


def check_usable_covers_requested(lib):
    """In exact mode the allocated and in-use bytes are usable sizes, never
    below the requests.  tcmalloc's malloc_usable_size says 0 until its
    constructor has run: libstdc++'s exception pool (72704 bytes, made by
    an earlier constructor) counted nothing: in use came to 4 KiB
    below the 75 KiB requested (15 KiB for 85 KiB here)."""
    r = Run(lib, ["malloc:100:100"], 1)
    try:
        t = r.report()["totals"]
        r.finish()
    finally:
        r.kill()
    assert t["allocated_bytes"] >= t["requested_bytes"], t
    assert t["in_use_bytes"] >= t["retained_bytes"], t


def check_new_before_constructor(lib):
    """Blocks made by operator new[] and grown by realloc before tcmalloc's
    constructor has run (a library preloaded after it: its constructor
    runs first), when tcmalloc's usable size says 0: the agent charged 0
    bytes to the countdown for them, so 8 MiB of 1 MiB blocks of each were
    never sampled (0 retained), and exact mode counted them as 0 usable
    bytes; and their frees (of 16 MiB made there, freed at once) count
    what their allocations did, or in use would be 16 MiB too high."""
    if not lib or "tcmalloc" not in lib:
        return
    early = os.path.join(BUILD, "progs", "libcxxearly.so")
    for rate in (65536, 1):
        t = Target([ALLOCS, "malloc:1:100"], env={
            "LD_PRELOAD": AGENT + " " + lib + " " + early,
            "YM_SAMPLE_RATE": str(rate), "YM_SEED": "4242"})
        try:
            rep = report(t.pid)
            t.finish()
        finally:
            t.kill()
        for site in ("early_site", "early_realloc_site"):
            got = sum(s["retained_bytes"] for s in cxx_stacks(rep, site))
            near(got, 8 << 20, bound(rate, [(1 << 20, 8)]),
                 "%s at %d" % (site, rate))
        if rate == 1:
            tot = rep["totals"]
            assert tot["allocated_bytes"] >= tot["requested_bytes"], tot
            # what is in use is what is retained, give or take the
            # blocks' rounding to their size classes
            assert 0 <= tot["in_use_bytes"] - tot["retained_bytes"] < \
                64 << 10, tot


CHECKS = [
    ("new_before_constructor", check_new_before_constructor),
    ("usable_covers_requested", check_usable_covers_requested),
    ("injected_exact", check_injected_exact),
    ("cxx_forms", check_cxx_forms),
    ("libc_big", check_libc_big),
    ("grow_interleaved", lambda lib: check_grow(lib, "grow", "grow_site")),
    ("grow_sequential",
     lambda lib: check_grow(lib, "growseq", "growseq_site")),
    ("malloc_sizes", check_malloc_sizes),
    ("calloc_aligned", check_calloc_aligned),
    ("shrink", check_shrink),
    ("realloc_edges", check_realloc_edges),
    ("exact_mode", check_exact_mode),
    ("exact_totals", check_exact_totals),
]


def make_tests():
    tests = {}
    for name, soname, pkg in ALLOCATORS:
        lib = None
        if soname:
            lib = find_lib(soname)
            if lib is None:
                print("skip %s: %s not found (apt-get install %s)" %
                      (name, soname, pkg), flush=True)
                continue
        for cname, fn in CHECKS:
            tests["test_%s_%s" % (name, cname)] = \
                (lambda fn=fn, lib=lib: fn(lib))
    return tests


if __name__ == "__main__":
    sys.exit(run_tests(make_tests()))
