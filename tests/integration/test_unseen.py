"""Allocators the agent cannot see (tui/unseen.h): a program whose
allocator is linked into it allocates without calling malloc.  ymtop says
so in one line (text, JSON, /metrics) when the executable defines an
allocator's entry points (a bundled jemalloc's je_malloc, Rust's
tikv-jemallocator's _rjem_malloc), or when anonymous memory grows while
the agent's exact call count stays flat; and says nothing for Debian's
redis-server, whose jemalloc is a shared library reached through malloc."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from ymlib import BUILD, YMTOP, Skip, Target, ymtop, run_tests

sys.path.insert(0, os.path.dirname(__file__))
from test_wrappers import need, wait_unix, env_for  # noqa: E402

PROGS = os.path.join(BUILD, "progs")


def grow(t):
    t.p.stdin.write("grow\n")
    t.p.stdin.flush()
    t.wait_for("ready")


def two_reports(t, grown=r"grew 32\.0 MiB"):
    """Two JSON reports, the program holding 32 MiB more at the second: the
    first before it grew, the second the first report written after it
    said ready whose line matches the pattern `grown` (ymtop's interval
    runs on its own clock, so a report may fall while the program is still
    touching its pages; the next ones must then say it)."""
    y = subprocess.Popen([YMTOP, "-b", "-i", "0.5", "-n", "40", "-f", "json",
                          "-p", str(t.pid)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(y.stdout.readline())
        grow(t)
        seen = []
        for line in y.stdout:
            second = json.loads(line)
            u = second["unseen_allocator"]
            seen.append(u and u["line"])
            if u and re.search(grown, u["line"]):
                return first, second
        raise AssertionError("no report says %r: %s" % (grown, seen[-3:]))
    finally:
        if y.poll() is None:
            y.kill()
            y.wait()


def check_linked_in(prog, symbol):
    t = Target([prog])
    try:
        rep = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p",
                               t.pid).stdout)
        u = rep["unseen_allocator"]
        assert u is not None, "not detected"
        assert u["allocator"] == "jemalloc", u
        assert symbol in u["line"] and "never calls malloc" in u["line"], u
        text = ymtop("-b", "-n", "1", "-p", t.pid).stdout
        lines = [ln for ln in text.splitlines()
                 if ln.startswith("ymtop cannot see: ")]
        assert len(lines) == 1 and symbol in lines[0], text[:2000]
        prom = ymtop("-b", "-n", "1", "-f", "prometheus", "-p", t.pid).stdout
        assert ('ymtop_process_unseen_allocator{pid="%d",' % t.pid) in prom \
            and 'allocator="jemalloc"} 1' in prom, prom[:3000]
        # The 32 MiB and what the linked-in allocator touches for them
        # (its own metadata: 32.5 MiB seen under tikv-jemallocator).
        first, second = two_reports(
            t, r"grew 3[23]\.\d MiB with no allocator call")
    finally:
        t.kill()


def test_c_program_with_a_bundled_jemalloc_is_told():
    """ownalloc defines je_malloc (raw mmap underneath), as the official
    redis image's bundled jemalloc does."""
    check_linked_in(os.path.join(PROGS, "ownalloc"), "je_malloc")


def test_rust_global_allocator_linked_in_is_told():
    """A Rust #[global_allocator] whose entry points are tikv-jemallocator's
    (_rjem_malloc): Rust's allocations never reach malloc."""
    prog = os.path.join(PROGS, "rust-v0-ownalloc")
    if not os.path.exists(prog):
        raise Skip("no rustc (%s not built)" % prog)
    check_linked_in(prog, "_rjem_malloc")


def test_memory_growing_with_no_allocator_call_is_told():
    """rawmap has no allocator entry point by any known name: its first
    report says nothing, the one after 32 MiB more with a flat call count
    says what ymtop cannot see."""
    t = Target([os.path.join(PROGS, "rawmap")])
    try:
        first, second = two_reports(t)
        assert first["unseen_allocator"] is None, first["unseen_allocator"]
        u = second["unseen_allocator"]
        assert u is not None and u["allocator"] == "unknown", u
        assert u["line"].startswith("anonymous memory grew 32.0 MiB with no "
                                    "allocator call"), u
    finally:
        t.kill()


def test_debian_redis_server_jemalloc_is_not_unseen():
    """Debian's redis-server takes malloc from libjemalloc.so.2, which the
    agent reaches: nothing is said, also after it grew."""
    need("redis-server", "redis-cli")
    d = tempfile.mkdtemp(prefix="ym-unseen-redis-")
    sock = os.path.join(d, "redis.sock")
    srv = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
         "--appendonly", "no", "--dir", d, "--daemonize", "no",
         "--enable-debug-command", "local"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env_for(os.path.join(BUILD, "libymagent.so")))
    try:
        wait_unix(sock, srv, "redis-server")
        first = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p",
                                 srv.pid).stdout)
        r = subprocess.run(["redis-cli", "-s", sock, "DEBUG", "POPULATE",
                            "200000", "k", "200"], capture_output=True,
                           text=True, timeout=60)
        assert r.stdout.strip() == "OK", (r.stdout, r.stderr)
        second = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p",
                                  srv.pid).stdout)
        for rep in (first, second):
            assert rep["unseen_allocator"] is None, rep["unseen_allocator"]
        heap = second["heap"]
        assert heap["allocator"] == "jemalloc" and heap["current"], heap
        # 200 000 keys of 200 bytes: the growth is the allocator's.
        assert heap["in_use_bytes"] - first["heap"]["in_use_bytes"] > 40e6, \
            (first["heap"], heap)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
