"""Anonymous mappings (issue 20): memory a program maps itself is tracked
with its stack as kind "mmap", kept apart from the malloc family's totals,
partial unmaps reduce it, mremap keeps its stack, file mappings are left
out, and an allocator's own mappings (jemalloc's, through the PLT) are not
counted twice.  A 64 MiB mapping at rate 65536 is sampled with probability
1 - exp(-1024): its estimate is its length."""
import os

import subprocess
import time

from ymlib import (AGENT, BUILD, Plain, Skip, Target, attach, functions,
                   report, run_tests, seg_path, site_total, ymtop)

PROG = os.path.join(BUILD, "progs", "mapper")
ALLOCS = os.path.join(BUILD, "progs", "allocs")
SIGMAPPER = os.path.join(BUILD, "progs", "sigmapper")
MiB = 1024 * 1024
ENV = {"YM_SAMPLE_RATE": "65536", "YM_SEED": "1"}


def site(rep, name):
    return [s for s in rep["stacks"] if s["frames"] and name in functions(s)]


def command(t, line):
    t.p.stdin.write(line + "\n")
    t.p.stdin.flush()
    t.wait_for("ready")


class Lazy(Target):
    """The agent's default: the segment when first needed (seg.h), not at
    the first call; nothing to wait for."""

    def __init__(self, argv, env=None):
        super().__init__(argv, env=env, early=False)

    def wait_segment(self, timeout=10):
        pass


def test_mappings_made_before_the_segment_are_tracked():
    """A program whose first memory is its own mapping: made before the
    agent's first call (and partly unmapped then), or after it but before
    any sample.  Each is counted at its stack once the segment exists, and
    its sample makes the segment at the next allocation call."""
    t = Lazy([PROG, "first"], env=ENV)
    try:
        assert os.path.exists(seg_path(t.pid)), "no segment after stdio's call"
        st = site(report(t.pid), "map_site")
        assert len(st) == 1 and st[0]["kind"] == "mmap", st
        assert abs(st[0]["retained_bytes"] - 16 * MiB) < 0.01 * MiB, st[0]
    finally:
        t.finish()
    t = Lazy([PROG], env=ENV)
    try:
        command(t, "map")
        assert not os.path.exists(seg_path(t.pid))
        command(t, "alloc")
        assert os.path.exists(seg_path(t.pid)), "the sample made no segment"
        rep = report(t.pid)
        st = site(rep, "map_site")
        assert len(st) == 1, [functions(s)[:3] for s in rep["stacks"]]
        assert abs(st[0]["retained_bytes"] - 64 * MiB) < 0.01 * MiB, st[0]
        assert abs(rep["totals"]["mmap_retained_bytes"] - 64 * MiB) < 0.01 * MiB
        command(t, "unmap")
        s = site(report(t.pid), "map_site")[0]
        assert abs(s["retained_bytes"] - 16 * MiB) < 0.01 * MiB, s
    finally:
        t.finish()
    # A mapping not sampled (64 MiB at a mean gap of 1 TiB: p = 6e-5)
    # asks for no segment: a process that samples nothing makes none.
    t = Lazy([PROG], env={"YM_SAMPLE_RATE": str(1 << 40), "YM_SEED": "1"})
    try:
        command(t, "map")
        command(t, "alloc")
        assert not os.path.exists(seg_path(t.pid)), "a segment for no sample"
    finally:
        t.finish()


def test_map_unmap_remap():
    t = Target([PROG], env=ENV)
    try:
        command(t, "map")
        rep = report(t.pid)
        st = site(rep, "map_site")
        assert len(st) == 1, [functions(s)[:3] for s in rep["stacks"]]
        s = st[0]
        assert s["kind"] == "mmap", s
        assert abs(s["retained_bytes"] - 64 * MiB) < 0.01 * MiB, s
        tot = rep["totals"]
        assert abs(tot["mmap_retained_bytes"] - 64 * MiB) < 0.01 * MiB, tot
        assert tot["retained_bytes"] < 8 * MiB, tot     # the malloc family's
        # A munmap the kernel refuses (misaligned: EINVAL) unmaps
        # nothing: the mapping stays counted whole.
        command(t, "badunmap")
        assert t.lines[-2] == "failed", t.lines
        s = site(report(t.pid), "map_site")[0]
        assert abs(s["retained_bytes"] - 64 * MiB) < 0.01 * MiB, s
        command(t, "unmap")
        s = site(report(t.pid), "map_site")[0]
        assert abs(s["retained_bytes"] - 16 * MiB) < 0.01 * MiB, s
        assert abs(s["peak_retained_bytes"] - 64 * MiB) < 0.01 * MiB, s
        command(t, "grow")
        rep = report(t.pid)
        st = site(rep, "map_site")
        assert len(st) == 1, st
        assert abs(st[0]["retained_bytes"] - 32 * MiB) < 0.01 * MiB, st[0]
        command(t, "file")
        command(t, "shared")
        rep = report(t.pid)
        assert not site(rep, "file_site"), "a file mapping was counted"
        sh = site(rep, "shared_site")
        assert sh and abs(sh[0]["retained_bytes"] - 8 * MiB) < 0.01 * MiB, sh
        assert sh[0]["kind"] == "mmap"
        # MAP_FIXED over the region's first 8 MiB: a new mapping there.
        command(t, "fixed")
        rep = report(t.pid)
        st = site(rep, "map_site")
        assert abs(st[0]["retained_bytes"] - 24 * MiB) < 0.01 * MiB, st[0]
        fx = site(rep, "fixed_site")
        assert fx and abs(fx[0]["retained_bytes"] - 8 * MiB) < 0.01 * MiB, fx
    finally:
        t.kill()


def test_allocator_mappings_not_counted_twice():
    """jemalloc maps its extents through the PLT (our mmap): they are its
    blocks, counted once as malloc."""
    lib = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    if not os.path.exists(lib):
        raise Skip("no libjemalloc2")
    env = dict(ENV)
    env["LD_PRELOAD"] = AGENT + " " + lib
    t = Target([ALLOCS, "malloc:64:1048576"], env=env)
    try:
        rep = report(t.pid)
        tot = rep["totals"]
        assert tot["mmap_retained_bytes"] == 0, tot
        assert not [s for s in rep["stacks"] if s["kind"] == "mmap"], \
            [functions(s)[:4] for s in rep["stacks"] if s["kind"] == "mmap"]
        assert tot["retained_bytes"] > 32 * MiB, tot
    finally:
        t.kill()


def test_injected_map_and_unmap():
    t = Plain([PROG], env=ENV)
    try:
        attach(t.pid)
        command(t, "map")
        st = site(report(t.pid), "map_site")
        assert st and st[0]["kind"] == "mmap", st
        assert abs(st[0]["retained_bytes"] - 64 * MiB) < 0.01 * MiB, st[0]
        command(t, "unmap")
        st = site(report(t.pid), "map_site")
        assert abs(st[0]["retained_bytes"] - 16 * MiB) < 0.01 * MiB, st[0]
    finally:
        t.kill()


def test_reservations_not_counted():
    """PROT_NONE and MAP_NORESERVE mappings reserve address space (V8, the
    JVM, wasm): not memory, not counted."""
    t = Target([PROG], env=ENV)
    try:
        command(t, "reserve")
        rep = report(t.pid)
        assert site_total(rep, "reserve_site") == 0, \
            site_total(rep, "reserve_site")
        assert rep["totals"]["mmap_retained_bytes"] < MiB, rep["totals"]
    finally:
        t.kill()


def test_full_table_counted():
    """More live sampled mappings than the table holds (YM_MAX_LIVE=64):
    the ones left out are counted as dropped, never silently lost."""
    env = dict(ENV)
    env["YM_MAX_LIVE"] = "64"
    t = Target([PROG], env=env)
    try:
        command(t, "many")
        rep = report(t.pid)
        got = site_total(rep, "many_site")
        assert abs(got - 64 * MiB) < 0.01 * MiB, got
        assert rep["table"]["dropped_live"] >= 136, rep["table"]
        # A hole in a tracked mapping with the table full: the right part
        # cannot become an entry of its own and leaves with its weight.
        command(t, "hole")
        rep = report(t.pid)
        got = site_total(rep, "many_site")
        assert abs(got - (64 * MiB - 3 * MiB // 4)) < 0.01 * MiB, got
    finally:
        t.kill()


def test_mremap_part_fixed_and_dontunmap():
    """mremap of a mapping's second half over another mapping
    (MREMAP_FIXED): the first keeps its estimate in two parts, the one
    replaced is gone; MREMAP_DONTUNMAP leaves the old range mapped and
    makes a new one."""
    t = Target([PROG], env=ENV)
    try:
        command(t, "subremap")
        rep = report(t.pid)
        got = site_total(rep, "sub_site")
        assert abs(got - 64 * MiB) < 0.01 * MiB, got
        assert site_total(rep, "place_site") == 0, \
            site_total(rep, "place_site")
        command(t, "subunmap")
        rep = report(t.pid)
        assert site_total(rep, "sub_site") == 0, site_total(rep, "sub_site")
        command(t, "dontunmap")
        got = site_total(report(t.pid), "dont_site")
        assert abs(got - 64 * MiB) < 0.01 * MiB, got
        command(t, "dontfree")
        rep = report(t.pid)
        assert site_total(rep, "dont_site") == 0, site_total(rep, "dont_site")
        assert rep["totals"]["mmap_retained_bytes"] < MiB, rep["totals"]
    finally:
        t.kill()


def test_signal_handler_mmap_inside_malloc():
    """A signal handler maps memory while the interrupted thread is inside
    malloc (holding the arena's lock) and a reader keeps asking for the
    allocator's statistics: the mmap sample must not answer with
    mallinfo2 (it would wait for that lock for ever)."""
    t = Target([SIGMAPPER, "6"], env=ENV)
    try:
        end = time.time() + 5
        while time.time() < end and t.p.poll() is None:
            try:
                ymtop("-b", "-i", "0.05", "-n", "20", "-p", t.pid,
                      check=False, timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            rc = t.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError("sigmapper did not finish")
        out = t.p.stdout.read()
        assert rc == 0 and "stuck" not in out, (rc, out)
    finally:
        t.kill()


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
