"""Display frames on real programs that allocate through wrappers: the
display frame (JSON display_frame, what the Functions view, go tool pprof
-top and GROUP BY function show) must be the first frame a user can
recognize, named and past the allocator and its wrappers.

- redis-server (Debian's, jemalloc underneath) under redis-benchmark: the
  top stacks start in zmalloc, zmalloc_usable, zrealloc_usable, zcalloc,
  many through sds (_sdsnewlen, sdsMakeRoomFor); their display frame is
  the wrappers' caller.
- python3 with PYTHONMALLOC=malloc (Debian's python3.11 is stripped but for
  its dynamic symbols): display frames are named and past PyMem/PyObject.
- a PostgreSQL backend under pgbench (Debian's postgres is stripped: its
  static AllocSetAlloc reads [postgres+0x5c7860]): display frames are named
  and past palloc/MemoryContextAlloc/AllocSetAlloc.  The cluster is private
  (initdb in a temporary directory, unix socket there, no TCP) and runs as
  nobody, with a copy of the agent that nobody can read.
- memcached (Debian's, stripped) storing large items: libevent's
  event_base_loop runs the callbacks that allocate the slabs; the display
  frame is memcached's own unnamed frame, never libevent's.

A program that is missing prints `skip NAME: reason` (make check-deps
installs them: redis-server, redis-tools, postgresql, memcached)."""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from ymlib import (AGENT, Skip, readable, report, run_tests, seg_path,
                   ymtop)

TIMEOUT = 120
TOP = 10


def env_for(agent, extra=None):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("YM_") and k != "LD_PRELOAD"}
    e.update({"LC_ALL": "C", "TZ": "UTC", "LD_PRELOAD": agent,
              "YM_SAMPLE_RATE": "8192"})
    e.update(extra or {})
    return e


def need(*progs):
    for p in progs:
        if not (shutil.which(p) or os.path.exists(p)):
            raise Skip("%s is not installed (make check-deps)" % p)


def name(f):
    return f["function"] or "[%s+%s]" % (os.path.basename(f["module"] or "?"),
                                         f["address"])


def named(f):
    """Has a name: JSON prints an unnamed frame's function as
    "[module+0xoffset]"."""
    return bool(f["function"]) and not f["function"].startswith("[")


def top_stacks(rep, n=TOP):
    st = sorted(rep["stacks"], key=lambda s: -s["allocated_bytes"])
    return [s for s in st if s["frames"]][:n]


def show(s):
    d = s["display_frame"]
    return " ; ".join(("=>" if i == d else "") + name(f)
                      for i, f in enumerate(s["frames"][:d + 3]))


def wait_unix(path, proc, what, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise AssertionError("%s exited: %s" % (what, proc.stderr.read()))
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            s.close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("%s did not listen on %s" % (what, path))


# ---- redis-server: zmalloc's callers ----

ZMALLOC = re.compile(r"^(zmalloc|zcalloc|zrealloc|ztry(malloc|calloc|realloc)|"
                     r"zstrdup)")
# redis's string library, which allocates for its callers.
SDS = re.compile(r"^(_?sdsnew|sdstrynew|sdsempty|sdsdup|_?sdsMakeRoomFor|sdscat|"
                 r"sdscpy|sdsgrowzero|sdsResize|sdsRemoveFreeSpace|"
                 r"sdsfromlonglong|sdssplitlen|sdsjoin)")


def redis_under_load(d):
    """redis-server under the agent in directory d, after redis-benchmark
    ran 20000 requests of 4 commands: the server's Popen."""
    need("redis-server", "redis-benchmark")
    sock = os.path.join(d, "redis.sock")
    srv = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
         "--appendonly", "no", "--dir", d, "--daemonize", "no"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env_for(AGENT))
    try:
        wait_unix(sock, srv, "redis-server")
        bench = subprocess.run(
            ["redis-benchmark", "-s", sock, "-n", "20000", "-c", "10", "-r",
             "10000", "-d", "200", "-t", "set,lpush,sadd,hset", "-q"],
            capture_output=True, text=True, timeout=TIMEOUT)
        assert bench.returncode == 0, bench.stderr
    except BaseException:
        srv.kill()
        srv.wait()
        raise
    return srv


def test_redis_display_frames_are_zmalloc_callers():
    d = tempfile.mkdtemp(prefix="ym-wrap-redis-")
    srv = None
    try:
        srv = redis_under_load(d)
        rep = report(srv.pid)
        through = sds = 0
        for s in top_stacks(rep):
            fr, d = s["frames"], s["display_frame"]
            assert named(fr[d]), "unnamed display frame: " + show(s)
            assert not ZMALLOC.match(fr[d]["function"]), \
                "display frame in zmalloc: " + show(s)
            assert not SDS.match(fr[d]["function"]), \
                "display frame in sds: " + show(s)
            if fr[0]["function"] and ZMALLOC.match(fr[0]["function"]):
                through += 1
                # The wrappers' caller, whatever else sits between.
                assert all(ZMALLOC.match(f["function"] or "") or
                           SDS.match(f["function"] or "")
                           for f in fr[:d]), "not zmalloc's caller: " + show(s)
                sds += any(SDS.match(f["function"] or "") for f in fr[:d])
        assert through >= TOP // 2, "top stacks not through zmalloc: %s" % (
            [show(s) for s in top_stacks(rep)])
        assert sds >= 1, "no top stack through sds: %s" % (
            [show(s) for s in top_stacks(rep)])
    finally:
        if srv and srv.poll() is None:
            srv.kill()
            srv.wait()
        shutil.rmtree(d, ignore_errors=True)


def test_redis_pprof_top_starts_at_zmalloc_callers():
    """The pprof profile names the allocator tier of the display-frame
    rules in drop_frames: go tool pprof -top lists the wrappers' callers
    (createStringObject, ...), never zmalloc_usable or _sdsnewlen."""
    if shutil.which("go") is None:
        raise Skip("go is not installed: go tool pprof not run")
    d = tempfile.mkdtemp(prefix="ym-wrap-redis-pprof-")
    srv = None
    try:
        srv = redis_under_load(d)
        path = os.path.join(d, "heap.pb.gz")
        ymtop("-b", "-n", "1", "-f", "pprof", "-o", path, "-p", srv.pid)
        env = dict(os.environ, HOME=d, PPROF_TMPDIR=d)
        r = subprocess.run(["go", "tool", "pprof", "-top",
                            "-sample_index=alloc_space", path],
                           capture_output=True, text=True, timeout=300,
                           env=env)
        assert r.returncode == 0, r.stderr
        rows = [line.split() for line in r.stdout.splitlines()
                if re.match(r"^\s*[0-9.]+[kMG]?B\s", line)]
        flat = [row[5] for row in rows if float(row[1].rstrip("%")) > 0]
        assert len(flat) >= 3, r.stdout
        for fn in flat:
            assert not (ZMALLOC.match(fn) or SDS.match(fn)), \
                "%s among pprof's flat entries:\n%s" % (fn, r.stdout)
        # SET's values: zmalloc_usable under _sdsnewlen under it.
        assert not flat[0].startswith("[") and \
            "createStringObject" in flat, r.stdout
    finally:
        if srv and srv.poll() is None:
            srv.kill()
            srv.wait()
        shutil.rmtree(d, ignore_errors=True)


# ---- python3: past PyMem / PyObject ----

PY_SCRIPT = r"""
import sys
keep = []
for i in range(150000):
    keep.append({"k%d" % i: [i, str(i) * 3, (i, i + 1)], "v": bytearray(40)})
print("ready", flush=True)
sys.stdin.readline()
"""

PYWRAP = re.compile(r"^(_?PyMem_|_?PyObject_(Malloc|Calloc|Realloc|New|GC_)|"
                    r"pymalloc_|PyType_GenericAlloc|_PyType_AllocNoTrack)")


def test_python3_display_frames_past_pymem():
    py = "/usr/bin/python3"
    need(py)
    d = tempfile.mkdtemp(prefix="ym-wrap-py-")
    script = os.path.join(d, "alloc.py")
    with open(script, "w") as f:
        f.write(PY_SCRIPT)
    p = subprocess.Popen([py, script], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True,
                         env=env_for(AGENT, {"PYTHONMALLOC": "malloc"}))
    try:
        line = p.stdout.readline()
        assert line.strip() == "ready", (line, p.stderr.read())
        rep = report(p.pid)
        wrapped = 0
        for s in top_stacks(rep):
            fr, d = s["frames"], s["display_frame"]
            fn = fr[d]["function"]
            assert named(fr[d]), "unnamed display frame: " + show(s)
            assert not PYWRAP.match(fn), "display frame in PyMem/PyObject: " + show(s)
            if any(PYWRAP.match(f["function"] or "") for f in fr[:d]):
                wrapped += 1
        assert wrapped >= 1, "no top stack through PyMem/PyObject: %s" % (
            [show(s) for s in top_stacks(rep)])
        p.communicate("\n", timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)


# ---- PostgreSQL under pgbench, stripped: past palloc and AllocSetAlloc ----

PGWRAP = re.compile(r"^(palloc|repalloc|MemoryContextAlloc|AllocSet|"
                    r"GenerationAlloc|SlabAlloc|pstrdup|pnstrdup|psprintf)")


def pg_bindir():
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                  key=lambda p: int(p.split("/")[-2]) if
                  p.split("/")[-2].isdigit() else 0)
    for b in reversed(dirs):
        if all(os.path.exists(os.path.join(b, x))
               for x in ("initdb", "postgres", "pgbench", "pg_ctl",
                         "pg_isready")):
            return b
    raise Skip("postgresql (initdb, postgres, pgbench) is not installed "
               "(make check-deps)")


def as_nobody(argv):
    return ["setpriv", "--reuid=nobody", "--regid=nogroup",
            "--clear-groups"] + argv


def backends(postmaster):
    """Pids of the client backends of postmaster."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == postmaster and cmd.startswith("postgres: postgres "):
            out.append(int(d))
    return out


def test_postgres_backend_display_frames_past_palloc():
    b = pg_bindir()
    need("setpriv")
    if os.geteuid() != 0:
        raise Skip("postgres must run as another user: needs root")
    d = tempfile.mkdtemp(prefix="ym-wrap-pg-")
    os.chmod(d, 0o755)
    agent = readable(AGENT)
    data, sock = os.path.join(d, "data"), os.path.join(d, "sock")
    for x in (data, sock):
        os.mkdir(x, 0o700)
        shutil.chown(x, "nobody", "nogroup")
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("YM_", "PG")) and k != "LD_PRELOAD"}
    clean.update(LC_ALL="C", TZ="UTC", HOME=d)
    pm = bench = None
    try:
        r = subprocess.run(as_nobody([os.path.join(b, "initdb"), "-D", data,
                                      "-A", "trust", "-U", "postgres", "-N"]),
                           capture_output=True, text=True, timeout=TIMEOUT,
                           env=clean, cwd=d)
        assert r.returncode == 0, r.stderr[-500:]
        # The agent goes into postgres only: preloaded into setpriv it would
        # make a root-owned segment that postgres, exec'd as nobody under
        # the same pid, cannot replace.
        pm = subprocess.Popen(
            as_nobody(["env", "LD_PRELOAD=" + agent, "YM_SAMPLE_RATE=8192",
                       os.path.join(b, "postgres"), "-D", data, "-k", sock,
                       "-c", "listen_addresses=", "-c", "fsync=off"]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=clean, cwd=d)
        wait_unix(os.path.join(sock, ".s.PGSQL.5432"), pm, "postgres")
        end = time.time() + 60
        while subprocess.run([os.path.join(b, "pg_isready"), "-q", "-h", sock],
                             env=clean, timeout=TIMEOUT).returncode != 0:
            assert pm.poll() is None and time.time() < end, \
                "postgres not ready: " + pm.stderr.read()[-500:]
            time.sleep(0.1)
        pgb = as_nobody([os.path.join(b, "pgbench"), "-h", sock, "-U",
                         "postgres"])
        r = subprocess.run(pgb + ["-i", "-s", "1", "postgres"],
                           capture_output=True, text=True, timeout=TIMEOUT,
                           env=clean, cwd=d)
        assert r.returncode == 0, r.stderr[-500:]
        # One client for a fixed number of transactions; the report is
        # taken while it runs (the backend lives as long as pgbench).
        bench = subprocess.Popen(pgb + ["-c", "1", "-t", "1000000",
                                        "postgres"],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=clean,
                                 cwd=d)
        end = time.time() + 30
        pids = []
        while not pids and time.time() < end:
            assert bench.poll() is None, bench.stderr.read()
            pids = [p for p in backends(pm.pid)
                    if os.path.exists(seg_path(p))]
            time.sleep(0.1)
        assert pids, "no backend of pgbench with a segment"
        # Enough transactions for the executor and planner stacks; then the
        # backend of pgbench -i has surely exited, and the one left is the
        # benchmark's.
        time.sleep(3)
        pids = [p for p in backends(pm.pid)
                if os.path.exists(seg_path(p))]
        assert len(pids) == 1, "backends: %s" % pids
        rep = report(pids[0])
        unnamed_then_wrapper = 0
        for s in top_stacks(rep):
            fr, dsp = s["frames"], s["display_frame"]
            fn = fr[dsp]["function"]
            assert named(fr[dsp]), "unnamed display frame: " + show(s)
            assert not PGWRAP.match(fn), "display frame in palloc: " + show(s)
            if (not named(fr[0]) and len(fr) > 1 and
                    PGWRAP.match(fr[1]["function"] or "")):
                unnamed_then_wrapper += 1
        assert unnamed_then_wrapper >= 1, \
            "no top stack [postgres+0x...] ; palloc: %s" % (
                [show(s) for s in top_stacks(rep)])
    finally:
        if bench and bench.poll() is None:
            bench.kill()
            bench.wait()
        if pm and pm.poll() is None:
            subprocess.run(as_nobody([os.path.join(b, "pg_ctl"), "-D", data,
                                      "stop", "-m", "immediate"]),
                           capture_output=True, timeout=TIMEOUT, env=clean,
                           cwd=d)
            try:
                pm.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pm.kill()
                pm.wait()
        shutil.rmtree(d, ignore_errors=True)


# ---- memcached (stripped) under libevent: its own frame, not the loop ----

def test_memcached_display_frame_is_its_own_frame_not_libevents():
    need("memcached")
    d = tempfile.mkdtemp(prefix="ym-wrap-mc-")
    sock = os.path.join(d, "mc.sock")
    # Names from debuginfod would hide what this tests: frames without any.
    env = {k: v for k, v in env_for(AGENT).items() if k != "DEBUGINFOD_URLS"}
    srv = subprocess.Popen(
        ["memcached", "-s", sock, "-m", "256", "-t", "2"] +
        (["-u", "root"] if os.geteuid() == 0 else []),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_unix(sock, srv, "memcached")
        c = socket.socket(socket.AF_UNIX)
        c.connect(sock)
        f = c.makefile("rb")
        val = b"x" * 100000
        # 30 MB of items: memcached's slab pages, 1 MiB each, allocated in
        # the worker thread's callback under event_base_loop.
        for i in range(300):
            c.sendall(b"set k%d 0 0 %d\r\n%s\r\n" % (i, len(val), val))
            assert f.readline() == b"STORED\r\n"
        clean = {k: v for k, v in os.environ.items()
                 if k != "DEBUGINFOD_URLS"}
        rep = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", srv.pid,
                               env=clean).stdout)
        c.close()

        def base(fr):
            return os.path.basename(fr["module"] or "")

        called = 0
        for s in top_stacks(rep):
            fr, dsp = s["frames"], s["display_frame"]
            loop = [i for i, x in enumerate(fr)
                    if base(x).startswith("libevent") and named(x)]
            if not loop or not any(base(x) == "memcached"
                                   for x in fr[:loop[0]]):
                continue
            called += 1
            assert base(fr[dsp]) == "memcached" and dsp < loop[0], \
                "display frame not memcached's own: " + show(s)
        assert called >= 1, "no top stack through libevent: %s" % (
            [show(s) for s in top_stacks(rep)])
        top = max(rep["stacks"], key=lambda s: s["retained_bytes"])
        assert top["retained_bytes"] >= 20 * 2**20, show(top)
        assert base(top["frames"][top["display_frame"]]) == "memcached", \
            show(top)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
