"""The agent takes over the allocator's slots in any order, and the data
words that hold an allocator function.

- An allocator earlier in LD_PRELOAD than the agent ("libjemalloc.so.2
  libymagent.so"): every call binds to the allocator, none to the agent's
  exported malloc.  The agent rewrites the slots as when injected and
  forwards to what they held (jemalloc's, never glibc's); an agent that
  did not would read 0 everywhere.
- Libraries that keep malloc's and free's addresses in their own data
  (R_X86_64_64: libxml2's xmlMalloc, libcurl's Curl_cmalloc):
  tests/progs/lib/dataptr.c does so, in writable data and in RELRO.
  After `ymtop -p` the agent rewrites those words too: otherwise their
  calls reach libc unseen, and a block allocated through a rewritten slot
  and freed through such a word stays retained.
- An executable that defines malloc itself calls it directly: the agent
  cannot see those calls, and every output says so in one line.

Tolerances as in test_allocators.py (sampling variance, Z deviations;
YM_SEED fixed)."""
import os
import sys

from ymlib import (AGENT, BUILD, MiB, Plain, Skip, Target, attach, report,
                   run_tests, site_total, ymtop)
import test_allocators as ta

DATAPTR = os.path.join(BUILD, "progs", "dataptr")
LIBDATAPTR = os.path.join(BUILD, "progs", "libdataptr.so")
OWNMALLOC = os.path.join(BUILD, "progs", "ownmalloc")
BLOCK = 1 << 20


def allocator(soname):
    lib = ta.find_lib(soname)
    if lib is None:
        raise Skip("%s not found" % soname)
    return lib


def held_and_freed(preload, rate):
    """allocs under LD_PRELOAD=preload: 1000 blocks of 10 000 bytes,
    2000 of 8 KiB by calloc, 4 x 50 aligned ones: retained as the truth
    says, then nothing once freed."""
    t = Target([ta.ALLOCS, "malloc:1000:10000", "calloc:2000:8192",
                "aligned:50:8192"],
               env={"LD_PRELOAD": preload, "YM_SAMPLE_RATE": str(rate),
                    "YM_SEED": "4242"})
    try:
        rep = report(t.pid)
        ta.near(site_total(rep, "malloc_site"), 1000 * 10000,
                ta.bound(rate, [(10000, 1000)]), "malloc_site")
        ta.near(site_total(rep, "calloc_site"), 2000 * 8192,
                ta.bound(rate, [(8192, 2000)]), "calloc_site")
        ta.near(site_total(rep, "aligned_site"), 200 * 8192,
                ta.bound(rate, [(8192, 200)]), "aligned_site")
        assert rep["totals"]["allocated_objects"] >= 3200, rep["totals"]
        assert rep["unseen"] is None, rep["unseen"]
        t.p.stdin.write("free\n")
        t.p.stdin.flush()
        t.wait_for("ready")
        rep = report(t.pid)
        for s in ("malloc_site", "calloc_site", "aligned_site"):
            assert site_total(rep, s) == 0, (s, site_total(rep, s))
        rc, _, err = t.finish()
        assert rc == 0, (rc, err)
        return rep
    finally:
        t.kill()


def allocator_first(soname, rate):
    lib = allocator(soname)
    rep = held_and_freed(lib + " " + AGENT, rate)
    if "jemalloc" in soname or "tcmalloc" in soname:
        # its own statistics: the agent forwards to it, not to glibc
        assert rep["heap"] is None or rep["heap"]["allocator"] in (
            "jemalloc", "tcmalloc"), rep["heap"]


def test_jemalloc_before_the_agent_sampled():
    allocator_first("libjemalloc.so.2", 4096)


def test_jemalloc_before_the_agent_exact():
    allocator_first("libjemalloc.so.2", 1)


def test_tcmalloc_before_the_agent_sampled():
    allocator_first("libtcmalloc_minimal.so.4", 4096)


def test_tcmalloc_before_the_agent_exact():
    allocator_first("libtcmalloc_minimal.so.4", 1)


def test_mimalloc_before_the_agent_sampled():
    allocator_first("libmimalloc.so.2", 4096)


def test_mimalloc_before_the_agent_exact():
    allocator_first("libmimalloc.so.2", 1)


def test_ym_disable_behind_jemalloc_runs_without_a_segment():
    """YM_DISABLE=1 behind jemalloc: the agent rewrites no slot and makes
    no segment; the program runs as under jemalloc alone."""
    import subprocess
    lib = allocator("libjemalloc.so.2")
    env = dict(os.environ, LD_PRELOAD=lib + " " + AGENT, YM_DISABLE="1",
               YM_EARLY_SEGMENT="1")
    t = subprocess.Popen([ta.ALLOCS, "malloc:100:1000"], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert t.stdout.readline().strip() == "ready"
        seg = "/dev/shm/ymtop-%d" % t.pid
        assert not os.path.exists(seg), seg
        out, _ = t.communicate("", timeout=60)
        assert t.returncode == 0, t.returncode
    finally:
        if t.poll() is None:
            t.kill()
            t.wait()


def test_jemalloc_after_the_agent_still_counts():
    """The other order, as before: the agent interposes."""
    held_and_freed(AGENT + " " + allocator("libjemalloc.so.2"), 4096)


def test_wrapper_that_forwards_to_the_agent_is_left_in_front():
    """A malloc wrapper preloaded first that forwards with RTLD_NEXT (to
    the agent): every call reaches the agent through it already.  Slots
    rewritten to forward to the wrapper would come back for ever."""
    held_and_freed(os.path.join(BUILD, "progs", "libnextwrap.so") + " " +
                   AGENT, 4096)


def cxx_behind(name):
    """C++ new and sized delete with the allocator first: its own
    operators (jemalloc's, tcmalloc's, mimalloc's) are taken over too."""
    import test_jemalloc_api as ja
    lib = ja.LIBS[name]
    if not os.path.exists(lib):
        raise Skip("no " + lib)
    t = Target([ja.CXX], env={"YM_SAMPLE_RATE": str(ja.RATE), "YM_SEED": "9",
                              "LD_PRELOAD": lib + " " + AGENT})
    try:
        ja.command(t, "alloc")
        got = ja.retained(report(t.pid), "new_site()")
        assert abs(got - ja.SITE) <= ja.TOL_MALLOCX, \
            (name, got, ja.SITE, ja.TOL_MALLOCX)
        ja.command(t, "free")
        assert abs(ja.retained(report(t.pid), "new_site()")) < 1
    finally:
        t.kill()


def test_cxx_behind_jemalloc():
    cxx_behind("jemalloc")


def test_cxx_behind_tcmalloc():
    cxx_behind("tcmalloc")


def test_cxx_behind_mimalloc():
    cxx_behind("mimalloc")


def test_blocks_from_before_the_attach_are_freed_by_jemalloc():
    """Under jemalloc, blocks allocated before ymtop -p and freed after it
    go to jemalloc's free (glibc's would abort on them), and realloc'ed
    ones to jemalloc's realloc."""
    lib = allocator("libjemalloc.so.2")
    t = Plain([ta.ALLOCS, "malloc:2000:10000", "grow:200:8192:4096"],
              env={"LD_PRELOAD": lib, "YM_SAMPLE_RATE": "4096"})
    try:
        attach(t.pid)
        t.p.stdin.write("free\n")
        t.p.stdin.flush()
        t.wait_for("ready")
        rep = report(t.pid)
        assert rep["totals"]["freed_objects"] >= 2200, rep["totals"]
        assert rep["heap"]["allocator"] == "jemalloc", rep["heap"]
        rc, _, err = t.finish()
        assert rc == 0, (rc, err)
    finally:
        t.kill()


PY_HELD = """
import sys
print("ready", flush=True)
sys.stdin.readline()
held = [bytearray(1 << 20) for _ in range(100)]
print("ready", flush=True)
sys.stdin.readline()
"""


def test_debian_python3_behind_tcmalloc():
    """LD_PRELOAD="libtcmalloc_minimal.so.4 libymagent.so" python3 holding
    100 MiB of bytearrays: Debian's python3.11 is built without PIE and
    takes malloc's address (its PLT entry stands for malloc)."""
    lib = allocator("libtcmalloc_minimal.so.4")
    py = os.path.realpath("/usr/bin/python3")
    if not os.path.exists(py):
        raise Skip("no /usr/bin/python3")
    t = Target([py, "-c", PY_HELD],
               env={"LD_PRELOAD": lib + " " + AGENT,
                    "YM_SAMPLE_RATE": "65536", "YM_SEED": "4242"})
    try:
        with open("/proc/%d/maps" % t.pid) as f:
            assert "tcmalloc" in f.read()
        t.p.stdin.write("\n")
        t.p.stdin.flush()
        t.wait_for("ready")
        rep = report(t.pid)
        held = sum(s["retained_bytes"] for s in rep["stacks"]
                   if s["retained_bytes"] >= 8 * MiB)
        ta.near(held, 100 * MiB, ta.bound(65536, [(BLOCK, 100)]) + MiB,
                "python3's 100 bytearrays")
        assert rep["heap"] is None or rep["heap"]["allocator"] == "tcmalloc", \
            rep["heap"]
        rc, _, err = t.finish()
        assert rc == 0, (rc, err)
    finally:
        t.kill()


def test_debian_redis_with_its_jemalloc_preloaded_first():
    """Debian's redis-server binds malloc to libjemalloc.so.2 itself; with
    that library first in LD_PRELOAD, 100 000 values of 1000 bytes
    (DEBUG POPULATE) are retained as jemalloc's own statistics say."""
    import shutil
    import subprocess
    import tempfile
    import time
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        raise Skip("redis-server or redis-cli missing (make deps)")
    lib = allocator("libjemalloc.so.2")
    d = tempfile.mkdtemp(prefix="ymtop-redis-")
    sock = os.path.join(d, "r.sock")
    env = dict(os.environ, LD_PRELOAD=lib + " " + AGENT,
               YM_SAMPLE_RATE="65536", YM_SEED="4242", YM_EARLY_SEGMENT="1")
    p = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock,
                          "--save", "", "--appendonly", "no", "--dir", d,
                          "--enable-debug-command", "yes"],
                         env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        end = time.time() + 20
        while not os.path.exists(sock):
            assert p.poll() is None and time.time() < end, "no redis-server"
            time.sleep(0.05)

        def cli(*args):
            r = subprocess.run(["redis-cli", "-s", sock] + list(args),
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            return r.stdout.strip()
        base = report(p.pid)
        assert cli("DEBUG", "POPULATE", "100000", "key", "1000") == "OK"
        assert cli("DBSIZE") == "100000"
        # jemalloc's figures are taken at the process's next allocator
        # call after a reader asks: a command makes one.
        for _ in range(20):
            rep = report(p.pid)
            heap = rep["heap"]
            if heap and heap["in_use_bytes"] >= 100000 * 1000:
                break
            cli("PING")
        grown = rep["totals"]["retained_bytes"] - \
            base["totals"]["retained_bytes"]
        assert grown >= 100000 * 1000, (grown, rep["totals"])
        assert heap and heap["allocator"] == "jemalloc", heap
        # The estimate against jemalloc's own figure (its size classes
        # and redis's dict entries included).
        ta.near(rep["totals"]["retained_bytes"], heap["in_use_bytes"],
                0.1 * heap["in_use_bytes"], "retained against stats.allocated")
        cli("SHUTDOWN", "NOSAVE")
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(d, True)


# ---- the torture programs, the agent behind jemalloc ----

def same_behind(argv, rate=4096):
    """argv under jemalloc alone and under jemalloc then the agent:
    identical stdout, stderr and status (tests/stress/test_stress.py's
    rule, with its concurrent reader)."""
    sys.path.insert(0, os.path.join(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))), "stress"))
    import test_stress as st
    lib = allocator("libjemalloc.so.2")
    before = st.stray_segments()
    base = st.clean_env({"LD_PRELOAD": lib})
    a = st.run(argv, base)
    b = st.run(argv, dict(base, LD_PRELOAD=lib + " " + AGENT,
                          YM_SAMPLE_RATE=str(rate)))
    assert a == b, "without the agent %r, with it %r" % (
        (a[0], a[1][-300:], a[2][-300:]), (b[0], b[1][-300:], b[2][-300:]))
    assert a[0] == 0 and a[1], a
    left = st.stray_segments() - before
    assert not left, "segments left behind: %s" % sorted(left)


def stress(name):
    return os.path.join(BUILD, "stress", name)


def test_behind_jemalloc_threads_fork_dlopen_signals():
    same_behind([stress("stress_threads"), "waves", "10", "100"])
    same_behind([stress("stress_fork"), "threads", "30"], rate=512)
    same_behind([stress("stress_dlopen"),
                 os.path.join(BUILD, "progs", "libplugin.so"), "20"])
    same_behind([stress("stress_signal"), "timer", "500"])
    same_behind([stress("stress_cxx"), "200"])


# ---- allocator functions in libraries' data ----

class DataPtr:
    """tests/progs/dataptr with libdataptr.so, preloaded (env) or plain."""

    def __init__(self, env=None, preload=True):
        if preload:
            self.t = Target([DATAPTR, LIBDATAPTR], env=env)
        else:
            self.t = Plain([DATAPTR, LIBDATAPTR], env=env)

    def do(self, cmd):
        self.t.p.stdin.write(cmd + "\n")
        self.t.p.stdin.flush()
        self.t.wait_for("ready")

    def check_held_then_mixfree(self, rate):
        """100 blocks of 1 MiB through the library's data word, 100 through
        malloc; then each freed through the other's free."""
        self.do("dp 100 %d" % BLOCK)
        self.do("plain 100 %d" % BLOCK)
        rep = report(self.t.pid)
        tol = ta.bound(rate, [(BLOCK, 100)])
        ta.near(site_total(rep, "dp_site"), 100 * BLOCK, tol, "dp_site")
        ta.near(site_total(rep, "plain_site"), 100 * BLOCK, tol,
                "plain_site")
        assert rep["unseen"] is None, rep["unseen"]
        self.do("mixfree")
        rep = report(self.t.pid)
        for s in ("dp_site", "plain_site"):
            assert site_total(rep, s) == 0, (s, site_total(rep, s))
        rc, lines, err = self.t.finish()
        assert rc == 0, (rc, err)
        assert not [ln for ln in lines if "unexpected" in ln], lines

    def kill(self):
        self.t.kill()


def data_pointers(env, preload, rate, load_after_attach=False):
    env = dict(env, YM_SAMPLE_RATE=str(rate), YM_SEED="4242")
    d = DataPtr(env, preload)
    try:
        if not load_after_attach:
            d.do("load")
        if not preload:
            attach(d.t.pid)
        if load_after_attach:
            d.do("load")
        d.check_held_then_mixfree(rate)
    finally:
        d.kill()


def test_data_pointers_preloaded():
    data_pointers({}, True, 1)


def test_data_pointers_after_attach_exact():
    """Attached: 100 MiB kept through the data word count (an agent that
    left the word would show 0 there), and the malloc'ed blocks freed
    through the data word are freed (it would keep them retained)."""
    data_pointers({}, False, 1)


def test_data_pointers_after_attach_sampled():
    data_pointers({}, False, 65536)


def test_data_pointers_of_a_library_loaded_after_attach():
    data_pointers({}, False, 1, load_after_attach=True)


def test_data_pointers_behind_jemalloc():
    lib = allocator("libjemalloc.so.2")
    data_pointers({"LD_PRELOAD": lib + " " + AGENT}, True, 65536)


PY_XML = """
import ctypes, sys
xml = ctypes.CDLL("libxml2.so.2")
xml.xmlStrndup.restype = ctypes.c_void_p
xml.xmlStrndup.argtypes = [ctypes.c_char_p, ctypes.c_int]
src = b"x" * (1 << 20)
print("ready", flush=True)
sys.stdin.readline()
held = [xml.xmlStrndup(src, len(src) - 1) for _ in range(100)]
plain = [bytearray(1 << 20) for _ in range(100)]
print("ready", flush=True)
sys.stdin.readline()
"""


def test_libxml2_strings_after_attach():
    """Debian's libxml2 keeps malloc in xmlMalloc and xmlMallocAtomic
    (R_X86_64_64): python3 holding 100 MiB through xmlStrndup and 100 MiB
    of bytearrays shows both after ymtop -p, not the bytearrays alone."""
    if not ta.find_lib("libxml2.so.2"):
        raise Skip("libxml2.so.2 not installed (apt-get install libxml2)")
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else \
        "python3"
    t = Plain([py, "-c", PY_XML],
              env={"YM_SAMPLE_RATE": "65536", "YM_SEED": "4242"})
    try:
        attach(t.pid)
        t.p.stdin.write("\n")
        t.p.stdin.flush()
        t.wait_for("ready")
        rep = report(t.pid)
        tol = ta.bound(65536, [(BLOCK, 100)]) + MiB
        ta.near(site_total(rep, "xmlStrndup"), 100 * MiB, tol, "xmlStrndup")
        held = sum(s["retained_bytes"] for s in rep["stacks"]
                   if s["retained_bytes"] >= 8 * MiB)
        ta.near(held, 200 * MiB, 2 * tol, "all held")
    finally:
        t.kill()


# ---- what the agent cannot see ----

def test_data_pointer_in_a_page_the_program_protected_is_left():
    """The program made the library's data page read-only (mprotect): the
    word is left as it is (a store there would kill the program), and the
    library is named."""
    t = Plain([DATAPTR, LIBDATAPTR], env={"YM_SAMPLE_RATE": "1"})
    try:
        for cmd in ("load", "protect"):
            t.p.stdin.write(cmd + "\n")
            t.p.stdin.flush()
            t.wait_for("ready")
        attach(t.pid)
        t.p.stdin.write("dp 10 %d\nplain 10 %d\n" % (BLOCK, BLOCK))
        t.p.stdin.flush()
        t.wait_for("ready")
        t.wait_for("ready")
        rep = report(t.pid)
        u = rep["unseen"]
        assert u and u["reason"] == "read_only", u
        assert u["object"] == "libdataptr.so", u
        assert site_total(rep, "plain_site") == 10 * BLOCK, rep["stacks"]
        rc, lines, err = t.finish()
        assert rc == 0, (rc, err)
    finally:
        t.kill()


def test_read_only_data_pointers_are_named():
    """A library whose allocator pointers are in a read-only segment
    (a text relocation): the agent leaves them, and says which library
    its calls through them come from."""
    lib = os.path.join(BUILD, "progs", "libdataptrro.so")
    t = Plain([DATAPTR, lib], env={"YM_SAMPLE_RATE": "1"})
    try:
        t.p.stdin.write("load\n")
        t.p.stdin.flush()
        t.wait_for("ready")
        attach(t.pid)
        t.p.stdin.write("dp 10 %d\nplain 10 %d\n" % (BLOCK, BLOCK))
        t.p.stdin.flush()
        t.wait_for("ready")
        t.wait_for("ready")
        rep = report(t.pid)
        u = rep["unseen"]
        assert u and u["reason"] == "read_only", u
        assert u["object"] == "libdataptrro.so", u
        assert site_total(rep, "plain_site") == 10 * BLOCK, rep["stacks"]
        text = ymtop("-b", "-n", "1", "-f", "text", "-p", t.pid).stdout
        assert [ln for ln in text.splitlines() if ln.startswith(
            "unseen: libdataptrro.so keeps an allocator function")], text
    finally:
        t.kill()


def test_executable_defining_malloc_is_named_everywhere():
    """Its own calls are direct: the libraries' are counted (strdup
    through libc's slot), the executable's are not, and every output
    says so."""
    own_malloc(True)


def test_executable_defining_malloc_is_named_after_attach():
    own_malloc(False)


def own_malloc(preload):
    if preload:
        t = Target([OWNMALLOC], env={"YM_SAMPLE_RATE": "1"})
    else:
        t = Plain([OWNMALLOC], env={"YM_SAMPLE_RATE": "1"})
    try:
        if not preload:
            attach(t.pid)
        t.p.stdin.write("own 50 %d\nlib 50 100000\n" % BLOCK)
        t.p.stdin.flush()
        t.wait_for("ready")
        t.wait_for("ready")
        rep = report(t.pid)
        u = rep["unseen"]
        assert u and u["reason"] == "own_calls", u
        assert u["object"].endswith("/ownmalloc"), u
        strdup = sum(s["retained_bytes"] for s in rep["stacks"]
                     if any(f["function"] and "strdup" in f["function"]
                            for f in s["frames"]))
        assert strdup == 50 * 100000, strdup
        text = ymtop("-b", "-n", "1", "-f", "text", "-p", t.pid).stdout
        lines = [ln for ln in text.splitlines() if ln.startswith("unseen: ")]
        assert len(lines) == 1 and "ownmalloc defines malloc" in lines[0], \
            text
        prom = ymtop("-b", "-n", "1", "-f", "prometheus", "-p", t.pid).stdout
        got = [ln for ln in prom.splitlines()
               if ln.startswith("ymtop_process_unseen_calls{")]
        assert len(got) == 1 and 'reason="own_calls"' in got[0] and \
            got[0].endswith(" 1"), prom
        rc, _, err = t.finish()
        assert rc == 0, (rc, err)
    finally:
        t.kill()


def test_no_unseen_line_when_every_call_is_seen():
    t = Target([DATAPTR, LIBDATAPTR])
    try:
        rep = report(t.pid)
        assert rep["unseen"] is None, rep["unseen"]
        text = ymtop("-b", "-n", "1", "-f", "text", "-p", t.pid).stdout
        assert "unseen" not in text, text
        prom = ymtop("-b", "-n", "1", "-f", "prometheus", "-p", t.pid).stdout
        assert "ymtop_process_unseen_calls{" not in prom, prom
        t.finish()
    finally:
        t.kill()


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
