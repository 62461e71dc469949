"""The agent loads into any glibc from 2.17 on (injector/agent/compat.h).

The build check (tests/check_glibc_versions.sh) on the agents and on a
library that asks for newer versions; and the agent built as on a glibc
without _dl_find_object and strerrordesc_np (build/old-glibc/, built with
-DYM_TEST_OLD_GLIBC: compat.c finds neither), whose fallbacks then do all
the work: the object holding each return address by a walk of the
objects, the errno texts from its own table."""
import os
import shutil
import subprocess
import sys
import tempfile

import ymlib
from ymlib import (AGENT, BUILD, MiB, WORKLOAD, Skip, Target, functions,
                   report, run_tests, site, ymtop)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "tests", "check_glibc_versions.sh")
OLD = os.path.join(BUILD, "old-glibc", "libymagent.so")
NEWER = os.path.join(BUILD, "abi-newer", "libymagent.so")


def check(lib):
    return subprocess.run([CHECK, lib], capture_output=True, text=True)


def test_agents_ask_for_glibc_2_17_at_most():
    for lib in (AGENT, OLD, NEWER):
        r = check(lib)
        assert r.returncode == 0, r.stderr
    out = subprocess.run(["readelf", "-W", "-d", AGENT], capture_output=True,
                         text=True, check=True).stdout
    needed = sorted(l.split("[")[1].rstrip("]") for l in out.splitlines()
                    if "(NEEDED)" in l)
    assert needed == ["libc.so.6", "libdl.so.2", "libpthread.so.0"], needed


def test_check_refuses_newer_versions_and_other_objects():
    """What the agent was before compat.h: dlsym@GLIBC_2.34, stat@2.33,
    _dl_find_object@2.35; and an object besides glibc's (libz.so.1); each
    is named."""
    src = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
int f(void *pc)
{
	struct dl_find_object o;
	struct stat st;
	return dlsym(RTLD_DEFAULT, "x") != 0 && stat("/", &st) == 0 &&
	       _dl_find_object(pc, &o) == 0;
}
"""
    with tempfile.TemporaryDirectory() as d:
        c = os.path.join(d, "new.c")
        lib = os.path.join(d, "libnew.so")
        with open(c, "w") as f:
            f.write(src)
        subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, c,
                        "-Wl,--no-as-needed", "-l:libz.so.1"], check=True)
        r = check(lib)
    assert r.returncode == 1, r.stdout + r.stderr
    for want in ("GLIBC_2.34", "dlsym", "GLIBC_2.33", "stat", "GLIBC_2.35",
                 "_dl_find_object", "needs libz.so.1"):
        assert want in r.stderr, (want, r.stderr)


def test_check_refuses_libdl_functions_asked_of_libc():
    """dlsym@GLIBC_2.2.5 is the right version, but glibc before 2.30
    looks for it only in the file its version need names: libdl.so.2
    (the agent links against stand-ins for it: glibc-stubs/), not
    libc.so.6, where a link against today's glibc finds it."""
    src = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver pthread_key_create,pthread_key_create@GLIBC_2.2.5");
void *f(void)
{
	pthread_key_t k;
	pthread_key_create(&k, 0);
	return dlsym(RTLD_DEFAULT, "x");
}
"""
    with tempfile.TemporaryDirectory() as d:
        c = os.path.join(d, "pinned.c")
        lib = os.path.join(d, "libpinned.so")
        with open(c, "w") as f:
            f.write(src)
        subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, c], check=True)
        r = check(lib)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "dlsym is asked of libc.so.6" in r.stderr, r.stderr
    assert "pthread_key_create is asked of libc.so.6" in r.stderr, r.stderr
    assert "GLIBC_2.3" not in r.stderr, r.stderr   # the versions are right


def test_agent_asks_libdl_and_libpthread_for_their_functions():
    out = subprocess.run(["readelf", "-W", "-V", AGENT], capture_output=True,
                         text=True, check=True).stdout
    files = [l.split("File:")[1].split()[0] for l in out.splitlines()
             if "File:" in l]
    assert sorted(files) == ["libc.so.6", "libdl.so.2", "libpthread.so.0"], files


def held_old(steps, rate):
    e = {"LD_PRELOAD": OLD, "YM_SAMPLE_RATE": str(rate), "YM_SEED": "12345"}
    t = Target([WORKLOAD] + steps, env=e)
    try:
        rep = report(t.pid)
    finally:
        rc, _, _ = t.finish()
    assert rc == 0, "workload exited %d" % rc
    return rep


def test_without_dl_find_object_exact_mode_counts_and_unwinds():
    """Every return address's object found by the walk of the objects:
    exact counts, and the stacks go through the program's own frames and
    libc's start."""
    rep = held_old(["big", "count:5000:48"], 1)
    s = site(rep, "hold_big")
    assert s["retained_bytes"] == 64 * MiB, s["retained_bytes"]
    assert s["retained_objects"] == 1024
    assert "main" in functions(s), functions(s)
    assert any(f.startswith("__libc_start") for f in functions(s)), functions(s)
    c = site(rep, "count_site")
    assert c["allocated_objects"] == 5000 and c["retained_bytes"] == 0, c


def test_without_dl_find_object_fork_child_and_threads():
    rep = held_old(["fork", "big", "threads:4"], 1)
    names = [f for s in rep["stacks"] for f in functions(s)]
    assert "child_site" not in names, "child wrote into the parent's segment"
    s = site(rep, "thread_site")
    assert s["allocated_objects"] == 4 * 256, s


def test_without_dl_find_object_python_unchanged():
    """Debian's python3 (non-PIE: the agent goes through its slots) under
    the fallbacks: the same output as without the agent."""
    cmd = ["python3", "-c",
           "import json,collections\n"
           "d={str(i):[i]*50 for i in range(20000)}\n"
           "c=collections.Counter(k[-1] for k in d)\n"
           "print(json.dumps(sorted(c.items()))); print(len(json.dumps(d)))"]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    a = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    env["LD_PRELOAD"] = OLD
    b = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr), \
        b.stderr[:300]


def test_without_mallinfo2_reports_say_why_there_are_no_heap_figures():
    """glibc before 2.33 has no mallinfo2 (the old agent finds none): where
    the allocator's figures would be, the text report says so in one
    line, the RSS explanation too, and JSON names the reason."""
    e = {"LD_PRELOAD": OLD, "YM_SEED": "12345"}
    t = Target([WORKLOAD, "big"], env=e)
    try:
        text = ymtop("-b", "-n", "1", "-p", t.pid).stdout
        rep = report(t.pid)
    finally:
        rc, _, _ = t.finish()
    assert rc == 0, "workload exited %d" % rc
    why = "glibc before 2.33 has no mallinfo2"
    lines = [l for l in text.splitlines() if why in l]
    assert len(lines) == 2, text
    assert lines[0].startswith("heap: no allocator statistics: "), lines
    assert "allocator in use" in lines[1], lines
    assert rep["heap"] is None, rep["heap"]
    assert rep["heap_missing"]["reason"] == "glibc_before_2_33", rep.get("heap_missing")
    assert why in rep["heap_missing"]["text"], rep["heap_missing"]


def test_without_strerrordesc_np_the_warning_names_the_errno():
    """/dev/shm read-only: the agent says why it cannot profile, the
    errno's text from its own table."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise Skip("needs root and unshare(1)")
    env = dict(os.environ, LD_PRELOAD=OLD, YM_EARLY_SEGMENT="1")
    r = subprocess.run(
        ["unshare", "-m", "sh", "-c",
         'mount -t tmpfs -o ro tmpfs /dev/shm && exec "$0" big nowait',
         WORKLOAD], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and "ready" in r.stdout, (r.returncode, r.stderr)
    want = "cannot create the shared segment in /dev/shm (Read-only file system)"
    assert want in r.stderr, r.stderr


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
