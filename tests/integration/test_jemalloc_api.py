"""jemalloc's own API (issue 20): a program linked against libjemalloc
(libjemalloc-dev) that allocates with mallocx and rallocx and frees with
sdallocx and dallocx is estimated within tolerance, preloaded and under
ymtop -p (GOT patching).  And C++ operator new and sized delete, which
jemalloc, tcmalloc and mimalloc define themselves (they never reach
malloc's slot): counted under each.  Tolerances as
tests/integration/test_allocators.py (Z standard deviations of the
sampling estimate)."""
import math
import os

from ymlib import (AGENT, BUILD, Plain, Skip, Target, attach, functions,
                   report, run_tests)

PROG = os.path.join(BUILD, "progs", "jeapi")
RATE = 65536
KiB = 1024
MiB = 1024 * KiB
Z = 4.5
SITE = 400 * 64 * KiB


def bound(blocks):
    var = 0.0
    for size, count in blocks:
        p = -math.expm1(-size / RATE)
        var += count * size * size * (1 - p) / p
    return Z * math.sqrt(var)


TOL_MALLOCX = bound([(64 * KiB, 400)])
# rallocx: 4 KiB blocks grown in 4 KiB steps, each step charged on its own.
TOL_RALLOCX = bound([(64 * KiB, 400)]) + bound([(4 * KiB, 400 * 16)])


def retained(rep, name):
    return sum(s["retained_bytes"] for s in rep["stacks"]
               if s["frames"] and name in functions(s))


def command(t, line):
    t.p.stdin.write(line + "\n")
    t.p.stdin.flush()
    t.wait_for("ready")


def check(t, rep_fn):
    command(t, "alloc")
    rep = rep_fn()
    m, r, c = (retained(rep, n) for n in
               ("mallocx_site", "rallocx_site", "churn_site"))
    assert abs(m - SITE) <= TOL_MALLOCX, (m, SITE, TOL_MALLOCX)
    assert abs(r - SITE) <= TOL_RALLOCX, (r, SITE, TOL_RALLOCX)
    assert abs(c) < 1, c     # every sampled block was sdallocx'ed
    # The exact totals saw the calls: 50 MiB asked for, at least (when
    # sampling, frees count objects, not bytes: ymagent(7)).
    before = rep["totals"]
    assert before["requested_bytes"] >= 2 * SITE - 1 * MiB, before
    command(t, "free")
    rep = rep_fn()
    for n in ("mallocx_site", "rallocx_site"):
        assert abs(retained(rep, n)) < 1, (n, retained(rep, n))
    after = rep["totals"]
    assert live_objects(after) < live_objects(before), (before, after)


def live_objects(totals):
    return totals["allocated_objects"] - totals["freed_objects"]


def need_prog():
    if not os.path.exists(PROG):
        raise Skip("%s not built (libjemalloc-dev missing?)" % PROG)


def test_linked_program_preloaded():
    need_prog()
    t = Target([PROG], env={"YM_SAMPLE_RATE": str(RATE), "YM_SEED": "3"})
    try:
        check(t, lambda: report(t.pid))
    finally:
        t.kill()


def test_linked_program_injected():
    need_prog()
    t = Plain([PROG], env={"YM_SAMPLE_RATE": str(RATE), "YM_SEED": "5"})
    try:
        attach(t.pid)
        check(t, lambda: report(t.pid))
    finally:
        t.kill()


def test_threads_beyond_the_slots_are_counted():
    """More threads than YM_MAX_THREADS has slots share slot 0: their
    mallocx, sdallocx and dallocx are counted there, exactly, and the
    sampled blocks they free leave the live table (they once passed
    through: uncounted, and the blocks they freed stayed retained)."""
    need_prog()
    t = Target([PROG], env={"YM_SAMPLE_RATE": "1", "YM_MAX_THREADS": "16"})
    try:
        before = report(t.pid)["totals"]
        command(t, "threads")
        rep = report(t.pid)
    finally:
        t.kill()
    assert rep["table"]["dropped_threads"] > 0, rep["table"]   # the case at hand
    for n in ("handed_site", "thread_site"):
        assert retained(rep, n) == 0, (n, retained(rep, n))
    after = rep["totals"]
    for k in ("allocated_objects", "freed_objects"):
        assert after[k] - before[k] >= 4800, (k, before, after)


CXX = os.path.join(BUILD, "progs", "cxxnew")
LIBS = {
    "glibc": None,
    "jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "mimalloc": "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2",
}


def check_cxx(name):
    lib = LIBS[name]
    if lib and not os.path.exists(lib):
        raise Skip("no " + lib)
    env = {"YM_SAMPLE_RATE": str(RATE), "YM_SEED": "9",
           "LD_PRELOAD": AGENT + (" " + lib if lib else "")}
    t = Target([CXX], env=env)
    try:
        command(t, "alloc")
        rep = report(t.pid)
        got = retained(rep, "new_site()")
        assert abs(got - SITE) <= TOL_MALLOCX, (name, got, SITE, TOL_MALLOCX)
        before = rep["totals"]
        assert before["requested_bytes"] >= SITE, (name, before)
        command(t, "free")
        rep = report(t.pid)
        assert abs(retained(rep, "new_site()")) < 1, (name, rep["stacks"][:2])
        after = rep["totals"]
        assert live_objects(after) < live_objects(before), (name, before, after)
    finally:
        t.kill()


def test_cxx_new_and_sized_delete_jemalloc_injected():
    """ymtop -p into a C++ program under jemalloc: its operator new slots
    are rewritten to the agent's (got.c)."""
    lib = LIBS["jemalloc"]
    if not os.path.exists(lib):
        raise Skip("no " + lib)
    t = Plain([CXX], env={"YM_SAMPLE_RATE": str(RATE), "YM_SEED": "9",
                          "LD_PRELOAD": lib})
    try:
        attach(t.pid)
        command(t, "alloc")
        got = retained(report(t.pid), "new_site()")
        assert abs(got - SITE) <= TOL_MALLOCX, (got, SITE, TOL_MALLOCX)
        command(t, "free")
        assert abs(retained(report(t.pid), "new_site()")) < 1
    finally:
        t.kill()


def test_cxx_new_and_sized_delete_glibc():
    check_cxx("glibc")


def test_cxx_new_and_sized_delete_jemalloc():
    check_cxx("jemalloc")


def test_cxx_new_and_sized_delete_tcmalloc():
    check_cxx("tcmalloc")


def test_cxx_new_and_sized_delete_mimalloc():
    check_cxx("mimalloc")


# ---- Plugins loaded RTLD_LOCAL ----
# A C host (Python, PAM, NSS) dlopens a plugin RTLD_LOCAL: its libstdc++
# or libjemalloc is in its local scope, never in the global one where
# RTLD_NEXT looks.  The agent must find the definition the plugin would
# have bound to, not stand in for it: the output (alignment, bad_alloc
# and the new_handler, nothrow NULLs; jemalloc's sallocx on every block)
# is the same with and without it.
DLHOST = os.path.join(BUILD, "progs", "dlhost")
# Debian's libjemalloc has initial-exec TLS: dlopen'ed, it needs room.
TLS = {"GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=262144"}


def host_output(plugin, preload):
    import subprocess
    env = dict(os.environ, **TLS)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = " ".join(preload)
    r = subprocess.run([DLHOST, os.path.join(BUILD, "progs", plugin)],
                       env=env, capture_output=True, text=True, timeout=20)
    return r.returncode, r.stdout


def check_plugin(plugin, extra=()):
    extra = [lib for lib in extra if lib]
    for lib in extra:
        if not os.path.exists(lib):
            raise Skip("no " + lib)
    want = host_output(plugin, extra)
    assert want[0] == 0, want
    got = host_output(plugin, [AGENT] + extra)
    assert got == want, (plugin, extra, want, got)
    return got[1]


def test_cxx_plugin_rtld_local_glibc():
    out = check_plugin("libcxxplug.so")
    assert "0 of 2000 misaligned" in out, out
    assert "new: bad_alloc, new_handler called 1 times" in out, out


def test_cxx_plugin_rtld_local_jemalloc():
    check_plugin("libcxxplug.so", [LIBS["jemalloc"]])


def test_jemalloc_plugin_rtld_local():
    """Before: mallocx emulated with glibc's malloc, then jemalloc's own
    sallocx on that block: SIGSEGV."""
    if not os.path.exists(os.path.join(BUILD, "progs", "libjeplug.so")):
        raise Skip("libjeplug.so not built (libjemalloc-dev missing?)")
    out = check_plugin("libjeplug.so")
    assert "0 of 1000 wrong" in out, out


def test_emulated_api_huge_sizes():
    """Without jemalloc the agent carries mallocx and rallocx out with the
    malloc family: a size whose rounding to the alignment wraps must give
    NULL as jemalloc does, errno untouched (before: a small block, and
    MALLOCX_ZERO then wrote past it: SIGSEGV)."""
    import subprocess
    prog = os.path.join(BUILD, "progs", "jeweak")
    lib = LIBS["jemalloc"]
    if not os.path.exists(lib):
        raise Skip("no " + lib)

    def out(preload):
        env = dict(os.environ, LD_PRELOAD=preload)
        r = subprocess.run([prog], env=env, capture_output=True, text=True,
                           timeout=60)
        return r.returncode, r.stdout

    want = out(lib)
    assert want[0] == 0 and "NULL errno=0" in want[1], want
    assert out(AGENT) == want, (out(AGENT), want)
    assert out(AGENT + " " + lib) == want


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
