"""The agent under real programs, checked through ymtop's JSON against known
truth (tests/progs/workload.c documents each site)."""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ymlib import (AGENT, BUILD, MiB, WORKLOAD, Target, functions, report,
                   run_tests, site, site_total, within, ymtop, seg_path)

SEEDED = {"YM_SEED": "12345"}


def usable(size):
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc_usable_size.argtypes = [ctypes.c_void_p]
    p = libc.malloc(size)
    return libc.malloc_usable_size(ctypes.c_void_p(p))


def held(steps, rate, env=None):
    e = {"YM_SAMPLE_RATE": str(rate)}
    e.update(SEEDED)
    e.update(env or {})
    t = Target([WORKLOAD] + steps, env=e)
    try:
        rep = report(t.pid)
    finally:
        rc, _, _ = t.finish()
    assert rc == 0, "workload exited %d" % rc
    return rep


def test_retained_64k_blocks_within_10_percent():
    rep = held(["big"], 65536)
    within(site(rep, "hold_big")["retained_bytes"], 64 * MiB, 0.10,
           "hold_big retained")
    within(site(rep, "hold_big")["retained_objects"], 1024, 0.10,
           "hold_big objects")


def test_retained_1000_byte_blocks_within_20_percent():
    rep = held(["small"], 65536)
    n = 16 * MiB // 1000
    within(site(rep, "hold_small")["retained_bytes"], n * 1000, 0.20,
           "hold_small retained")


def test_exact_totals_count_every_call():
    """Totals are exact: the same program with 1000 more malloc(100)/free
    pairs has exactly 1000 more allocations and frees and 100000 more
    requested bytes; in exact mode 1000 * usable(100) more allocated and
    freed bytes, while sampling usable bytes are not counted (man/ymagent.7:
    a free never reads the freed block, a malloc the block it returns): the
    JSON leaves freed bytes out and gives requested bytes as allocated."""
    for rate in (524288, 1):
        def totals(n):
            return held(["count:%d:100" % n], rate)["totals"]
        a, b = totals(0), totals(1000)
        assert b["allocated_objects"] - a["allocated_objects"] == 1000, (a, b)
        assert b["freed_objects"] - a["freed_objects"] == 1000, (a, b)
        assert b["requested_bytes"] - a["requested_bytes"] == 100000, (a, b)
        if rate == 1:
            assert b["allocated_bytes"] - a["allocated_bytes"] == \
                1000 * usable(100), (usable(100), a, b)
            assert b["freed_bytes"] - a["freed_bytes"] == \
                1000 * usable(100), (usable(100), a, b)
            assert b["in_use_bytes"] == \
                b["allocated_bytes"] - b["freed_bytes"], b
            assert b["allocated_bytes_kind"] == "usable", b
        else:
            assert "freed_bytes" not in b and "in_use_bytes" not in b, b
            # malloc's fast path never reads the block it returns: the
            # stable key carries the requested bytes, and says so
            assert b["allocated_bytes"] == b["requested_bytes"], b
            assert b["allocated_bytes_kind"] == "requested", b


def test_vfork_child_allocating_leaves_the_parent_its_segment():
    """A vfork child that allocates before the parent ever did shares the
    agent's state: it used to make the segment in its own name, mark it
    exited and unlink it at its _exit, and the parent wrote on into a
    segment nobody could find."""
    t = Target([os.path.join(BUILD, "progs", "vforkalloc")],
               env={"YM_SAMPLE_RATE": "65536"})
    try:
        assert os.path.exists(seg_path(t.pid)), "no segment for the parent"
        rep = report(t.pid)
        assert rep["state"] != "exited", rep["state"]
        within(rep["totals"]["retained_bytes"], 4 * MiB, 0.5, "retained")
    finally:
        t.finish()


def test_exact_mode_counts_each_allocation():
    rep = held(["big", "count:5000:48"], 1)
    s = site(rep, "hold_big")
    assert s["retained_bytes"] == 64 * MiB, s["retained_bytes"]
    assert s["retained_objects"] == 1024
    c = site(rep, "count_site")
    assert c["allocated_objects"] == 5000 and c["retained_bytes"] == 0, c


def test_exact_mode_threads_sharing_a_site():
    """12 threads allocate at one site in exact mode: the first eight
    after the main thread count into planes of their own, the rest into
    the stack record with the main thread; the sums are exact."""
    rep = held(["threads:12"], 1)
    s = site(rep, "thread_site")
    assert s["allocated_objects"] == 12 * 256, s
    assert s["retained_objects"] == 12 * 256, s
    assert s["retained_bytes"] == 12 * MiB, s["retained_bytes"]


def test_churn_retains_nothing():
    rep = held(["churn"], 65536)
    s = site(rep, "churn_site")
    assert s["allocated_bytes"] > 0 and s["retained_bytes"] == 0, s
    # Lifetimes were recorded for the freed samples.
    assert sum(b["count"] for b in rep["lifetimes"]) > 0


def test_realloc_chains_keep_one_block():
    rep = held(["realloc"], 65536)
    s = site(rep, "realloc_site")
    within(s["retained_bytes"], 64 * MiB, 0.10, "realloc_site retained")
    within(s["retained_objects"], 64, 0.25, "realloc_site objects")


def test_calloc_and_aligned_families():
    rep = held(["calloc", "aligned"], 4096)
    within(site(rep, "calloc_site")["retained_bytes"], 8 * MiB, 0.10, "calloc")
    # Three call sites (posix_memalign, aligned_alloc, memalign): three stacks.
    assert len([s for s in rep["stacks"] if functions(s)[0] == "aligned_site"]) == 3
    within(site_total(rep, "aligned_site"), 3 * 342 * 8192, 0.10, "aligned")


def test_threads_totals_survive_thread_exit():
    rep = held(["threads:8"], 4096)
    within(site(rep, "thread_site")["retained_bytes"], 8 * MiB, 0.10,
           "thread_site")
    exited = [t for t in rep["threads"] if t["state"] == "exited"]
    assert len(exited) == 8, rep["threads"]
    for t in exited:
        assert t["requested_bytes"] >= MiB, t
    main = [t for t in rep["threads"] if t["state"] == "live"]
    assert main and main[0]["name"] == "workload", rep["threads"]


def test_giant_allocation_refused():
    env = {"YM_GIANT_BYTES": "1M", "YM_GIANT_ACTION": "fail"}
    e = {"YM_SAMPLE_RATE": "524288"}
    e.update(env)
    t = Target([WORKLOAD, "giant:2097152"], env=e)
    rep = report(t.pid)
    rc, lines, _ = t.finish()
    assert rc == 0
    assert "giant failed errno=12" in lines, lines
    assert len(rep["alarms"]) == 1, rep["alarms"]
    a = rep["alarms"][0]
    assert a["size"] == 2097152 and a["failed"] is True, a
    assert "giant_site" in functions(a), functions(a)


def test_giant_allocation_reported():
    t = Target([WORKLOAD, "giant:2097152"], env={"YM_GIANT_BYTES": "1048576"})
    rep = report(t.pid)
    rc, lines, _ = t.finish()
    assert rc == 0 and "giant ok" in lines, lines
    assert rep["alarms"][0]["failed"] is False


def test_fork_child_writes_its_own_segment():
    rep = held(["fork", "big"], 65536)
    names = [f for s in rep["stacks"] for f in functions(s)]
    assert "child_site" not in names, "child wrote into the parent's segment"
    assert "hold_big" in names


def test_fork_child_segment_kept():
    e = {"YM_KEEP_SEGMENT": "1", "YM_SAMPLE_RATE": "4096"}
    start = time.time() - 1
    t = Target([WORKLOAD, "fork"], env=e)
    rc, _, _ = t.finish()
    assert rc == 0
    mine = os.path.basename(seg_path(t.pid))
    kids = [n for n in os.listdir("/dev/shm")
            if n.startswith("ymtop-") and n != mine and
            not os.path.exists("/proc/" + n[6:].split(".")[0]) and
            os.stat("/dev/shm/" + n).st_mtime >= start]
    try:
        assert kids, "the forked child made no segment"
        found = False
        for k in kids:
            r = ymtop("-b", "-n", "1", "-f", "json", "-p", k[6:].split(".")[0],
                      check=False)
            if r.returncode == 0 and "child_site" in r.stdout:
                found = True
        assert found, "no kept child segment shows child_site"
    finally:
        for n in kids + [mine]:
            try:
                os.unlink("/dev/shm/" + n)
            except OSError:
                pass


def test_exec_replaces_image():
    t = Target([WORKLOAD, "exec"], env={})
    rc, lines, err = t.finish()
    assert rc == 0 and lines == ["ready"], (rc, lines, err)


def test_dlopened_module_symbolized_after_dlclose():
    lib = os.path.join(os.path.dirname(WORKLOAD), "libplugin.so")
    rep = held(["plugin:" + lib], 65536)
    s = site(rep, "plugin_site")
    within(s["retained_bytes"], 8 * MiB, 0.10, "plugin_site")
    f = [x for x in s["frames"] if x["function"] == "plugin_site"][0]
    assert f["module"].endswith("libplugin.so") and f["file"].endswith("plugin.c"), f


GLIBC_OBJECTS = ("libc.so.6", "libdl.so.2", "libpthread.so.0")


def test_agent_needs_only_libc_and_the_loader():
    """ldd lists libc (with libdl and libpthread, which hold dlsym and
    pthread_key_create before glibc 2.34 and are empty stubs since), ld.so
    and the vDSO: the agent adds no other shared object to the processes
    it goes into (libunwind.so.8 and liblzma.so.5 did)."""
    out = subprocess.run(["ldd", AGENT], capture_output=True, text=True,
                         check=True).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    extra = [n for n in names if not (n.startswith("linux-vdso.so") or
                                      n in GLIBC_OBJECTS or
                                      os.path.basename(n).startswith("ld-linux"))]
    assert not extra, "the agent needs %s" % extra
    assert "libc.so.6" in names, names


def test_agent_samples_in_a_root_with_only_libc():
    """A root holding only the program, glibc's libc, libdl, libpthread
    and ld.so (and a /dev/shm directory for the segment): the preload
    loads, the agent samples and unwinds, and its kept segment shows the
    stack of the 64 MiB held."""
    libs = [(os.path.realpath("/lib/x86_64-linux-gnu/" + n),
             "lib/x86_64-linux-gnu/" + n) for n in GLIBC_OBJECTS]
    ldso = os.path.realpath("/lib64/ld-linux-x86-64.so.2")
    with tempfile.TemporaryDirectory() as root:
        for src, dst in libs + [(ldso, "lib64/ld-linux-x86-64.so.2"),
                                (WORKLOAD, "prog"),
                                (AGENT, "agent/libymagent.so")]:
            os.makedirs(os.path.join(root, os.path.dirname(dst)), exist_ok=True)
            shutil.copy(src, os.path.join(root, dst))
        os.makedirs(os.path.join(root, "dev/shm"))
        env = {"LD_PRELOAD": "/agent/libymagent.so", "YM_KEEP_SEGMENT": "1",
               "YM_SAMPLE_RATE": "65536"}
        cmd = ["/prog", "big", "nowait"]
        if os.geteuid() == 0:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                               preexec_fn=lambda: os.chroot(root) or os.chdir("/"),
                               timeout=60)
        else:
            r = subprocess.run(["unshare", "-r", "-R", root] + cmd,
                               capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0 and "ready" in r.stdout, (r.returncode, r.stderr)
        assert "ld.so" not in r.stderr and "error" not in r.stderr, r.stderr
        segs = os.listdir(os.path.join(root, "dev/shm"))
        assert len(segs) == 1 and segs[0].startswith("ymtop-"), segs
        pid = int(segs[0].split("-")[1])
        dst = "/dev/shm/" + segs[0]
        assert not os.path.exists(dst), dst
        shutil.copy(os.path.join(root, "dev/shm", segs[0]), dst)
        try:
            rep = report(pid)
        finally:
            os.unlink(dst)
    held = max(rep["stacks"], key=lambda s: s["retained_bytes"])
    within(held["retained_bytes"], 64 * MiB, 0.10, "hold_big")
    # hold_big, main, libc's start and _start: the unwinder walked the
    # program's frames and libc's inside the bare root (the program's
    # own are unnamed: no /proc there, so no path was recorded for it).
    assert len(held["frames"]) >= 4, held["frames"]
    assert any(f["function"].startswith("__libc_start")
               for f in held["frames"]), held["frames"]


def same_output(cmd, stdin=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    a = subprocess.run(cmd, input=stdin, capture_output=True, env=env)
    env["LD_PRELOAD"] = AGENT
    b = subprocess.run(cmd, input=stdin, capture_output=True, env=env)
    assert a.returncode == b.returncode, (a.returncode, b.returncode)
    assert a.stdout == b.stdout, "stdout differs for %s" % cmd
    assert a.stderr == b.stderr, "stderr differs: %r" % b.stderr[:300]


def test_shell_script_unchanged():
    same_output(["sh", "-c", "for i in $(seq 1 200); do echo $i; done | "
                 "tr 0-9 a-j | sort -r | head -5; x=$(printf '%0500d' 7); "
                 "echo ${#x}; exit 3"])


def test_sort_large_file_unchanged():
    data = "".join("%08x line %d\n" % ((i * 2654435761) % 2**32, i)
                   for i in range(200000)).encode()
    same_output(["sort"], stdin=data)


def test_python_unchanged():
    same_output(["python3", "-c",
                 "import json,collections\n"
                 "d={str(i):[i]*50 for i in range(20000)}\n"
                 "c=collections.Counter(k[-1] for k in d)\n"
                 "print(json.dumps(sorted(c.items()))); print(len(json.dumps(d)))"])


def test_renamed_agent_preloaded_into_python():
    """Debian's python3 takes malloc's address from non-PIC code, so its
    executable's PLT entry is what the process calls malloc: the agent
    must still know it was preloaded, whatever its file is called (it
    once took that entry for the next malloc, which then called itself
    for ever)."""
    import shutil
    import tempfile
    py = "/usr/bin/python3"
    d = tempfile.mkdtemp()
    lib = os.path.join(d, "memprof.so")
    shutil.copy(AGENT, lib)
    env = dict(os.environ, LD_PRELOAD=lib, YM_KEEP_SEGMENT="1")
    code = "import json; print(len(json.dumps([list(range(i)) for i in range(300)])))"
    want = subprocess.run([py, "-c", code], capture_output=True, text=True,
                          timeout=60)
    p = subprocess.Popen([py, "-c", code], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("python3 hangs under the renamed agent")
    try:
        assert p.returncode == 0 and out == want.stdout and err == "", (
            p.returncode, out, err)
        rep = report(p.pid)
        assert rep["attached"] is False, rep["attached"]
        assert rep["totals"]["allocated_objects"] > 1000, rep["totals"]
    finally:
        shutil.rmtree(d)
        if os.path.exists(seg_path(p.pid)):
            os.unlink(seg_path(p.pid))


def test_bad_config_warns_and_runs():
    # The environment is read at the first call of the malloc family (a
    # process that makes none, /bin/true, never reads it): sh makes some.
    env = dict(os.environ, LD_PRELOAD=AGENT, YM_SAMPLE_RATE="abc")
    r = subprocess.run(["sh", "-c", "true"], env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0
    assert r.stderr.count("\n") == 1 and "YM_SAMPLE_RATE" in r.stderr, r.stderr
    assert r.stdout == ""


def test_start_leaves_the_host_heap_alone():
    """The agent starts (its segment is there) without a byte of the host's
    malloc heap: a program that allocates nothing before main still has no
    heap at main (opendir's buffer once created one at every start)."""
    def start(env):
        r = subprocess.run([WORKLOAD, "heap", "nowait"], capture_output=True,
                           text=True, env=dict(os.environ, **env), timeout=30)
        assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
        return r.stdout.splitlines()[0]
    assert start({}) == "heap 0"
    p = subprocess.Popen(["sh", "-c", 'exec "$0" heap nowait', WORKLOAD],
                         env=dict(os.environ, LD_PRELOAD=AGENT,
                                  YM_KEEP_SEGMENT="1"),
                         stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate(timeout=30)
    seg = seg_path(p.pid)
    try:
        assert os.path.exists(seg), "the agent did not start"
    finally:
        if os.path.exists(seg):
            os.unlink(seg)
    assert out.splitlines()[0] == "heap 0", out


def test_no_segment_left_after_exit():
    env = dict(os.environ, LD_PRELOAD=AGENT)
    p = subprocess.run(["sh", "-c", "echo $$"], env=env, capture_output=True,
                       text=True)
    assert not os.path.exists("/dev/shm/ymtop-" + p.stdout.strip())


# ---- guest code: what the agent's objects may call ----

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# stdio (buffers, locks, allocation) and formatting.
STDIO = {"printf", "fprintf", "vfprintf", "sprintf", "vsprintf", "snprintf",
         "vsnprintf", "dprintf", "vdprintf", "puts", "fputs", "fputc", "putc",
         "putchar", "fwrite", "fread", "fopen", "fdopen", "fclose", "fflush",
         "fgets", "getline", "getdelim", "perror", "setvbuf", "setbuf",
         "scanf", "sscanf", "fscanf", "open_memstream", "stdin", "stdout",
         "stderr", "__printf_chk", "__fprintf_chk", "__sprintf_chk",
         "__snprintf_chk", "__vsnprintf_chk", "__vfprintf_chk", "__fgets_chk",
         "__isoc99_sscanf", "__isoc99_fscanf", "syslog"}
# The allocator the agent hooks, and what calls it behind the scenes.
MALLOC = {"malloc", "calloc", "realloc", "free", "reallocarray",
          "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
          "malloc_usable_size", "strdup", "strndup", "__strdup", "asprintf",
          "vasprintf", "opendir", "fdopendir", "scandir", "qsort",
          "backtrace", "dlerror", "strerror", "setlocale", "gettext"}


def undefined(path, dynamic=False):
    r = subprocess.run(["nm", "-u"] + (["-D"] if dynamic else []) + [path],
                       capture_output=True, text=True, check=True)
    return {line.split()[-1].split("@")[0] for line in r.stdout.splitlines()}


def test_agent_objects_import_no_stdio_and_no_allocator():
    """Guest code (injector/agent/ and the agent's half of resume) runs
    inside the host's allocator calls: it may use neither stdio nor the
    malloc family (the agent defines malloc; it must never call one).
    Each object of the folder, and the library as a whole (shm/, linked
    in too, is checked through the library)."""
    srcs = [os.path.join("injector", "agent", f[:-2]) for f in
            sorted(os.listdir(os.path.join(ROOT, "injector", "agent")))
            if f.endswith(".c")] + [os.path.join("injector", "resume")]
    bad = {}
    for src in srcs:
        obj = os.path.join(BUILD, "agent", src + ".o")
        assert os.path.exists(obj), obj
        hit = undefined(obj) & (STDIO | MALLOC)
        if hit:
            bad[src] = sorted(hit)
    assert not bad, bad
    hit = undefined(AGENT, dynamic=True) & (STDIO | MALLOC)
    assert not hit, sorted(hit)


def exported(path):
    """The names the library defines with default visibility."""
    out = subprocess.run(["readelf", "-W", "--dyn-syms", path],
                         capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        f = line.split()
        if (len(f) >= 8 and f[0].endswith(":") and f[6] != "UND" and
                f[4] in ("GLOBAL", "WEAK") and f[5] == "DEFAULT"):
            names.add(f[7].split("@")[0])
    return names


def test_agent_binds_none_of_its_own_exports():
    """No dynamic relocation of the agent names a symbol the agent itself
    exports: preloaded, such a reference binds to the agent's own export
    (its mmap hook for its own mappings, LD_DEBUG=bindings shows it), so
    the agent's memory would go through its hook.  The agent maps through
    injector/agent/os.h and calls its hooks by their hidden names."""
    mine = exported(AGENT)
    assert {"malloc", "mmap", "munmap"} <= mine, sorted(mine)
    out = subprocess.run(["readelf", "-W", "-r", AGENT], capture_output=True,
                         text=True, check=True).stdout
    bound = set()
    for line in out.splitlines():
        f = line.split()
        if (len(f) >= 5 and all(c in "0123456789abcdef" for c in f[0]) and
                f[4].split("@")[0] in mine):
            bound.add("%s %s" % (f[2], f[4]))
    assert not bound, sorted(bound)


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
