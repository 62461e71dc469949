"""The segment ABI across builds (include/ymtop/segment.h, "Versions and
sizes").  build/abi-newer/libymagent.so is the agent built as a newer
writer that only adds (-DYM_TEST_ABI_NEWER: abi_version one higher, the
same compat_version, an 8 KiB header whose fields past this ymtop's are
not zero, longer stack and alarm records): this ymtop must read it with
the same figures.  A segment whose compat_version is above this ymtop's
version is refused with one line and exit status 1."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ymlib import (BUILD, MiB, WORKLOAD, Target, functions,  # noqa: E402
                   report, run_tests, seg_path, site, within, ymtop)

NEWER = os.path.join(BUILD, "abi-newer", "libymagent.so")
# struct ym_header: abi_version (u16), compat_version (u16), header_size (u32)
OFF_VERSIONS = 8
OFF_SECTIONS = 8 + 4 + 4 + 8 + 4 + 4 + 8 + 8 + 8 + 8 + 8 + 4 + 4 + 4 + 4 + 512
SEC_STACKS = 2


def header(path):
    with open(path, "rb") as f:
        return f.read(4096)


def versions(h):
    return struct.unpack_from("<HHI", h, OFF_VERSIONS)


def stack_stride(h):
    _, _, stride = struct.unpack_from("<QII", h, OFF_SECTIONS + 16 * SEC_STACKS)
    return stride


def need_newer():
    if not os.path.exists(NEWER):
        raise AssertionError("no %s: make %s" % (NEWER, NEWER))


def run(agent, steps, env):
    e = {"LD_PRELOAD": agent, "YM_GIANT_BYTES": "1048576"}
    e.update(env)
    t = Target([WORKLOAD] + steps, env=e)
    try:
        h = header(seg_path(t.pid))
        rep = report(t.pid)
    finally:
        rc, lines, err = t.finish()
    assert rc == 0, (rc, err)
    return h, rep


def test_current_ymtop_reads_a_newer_compatible_agent():
    need_newer()
    cur, _ = run(os.path.join(BUILD, "libymagent.so"), [], {})
    h, rep = run(NEWER, ["big", "threads:4", "giant:2097152"],
                 {"YM_SAMPLE_RATE": "65536"})
    abi, compat, hsize = versions(h)
    cabi, ccompat, chsize = versions(cur)
    # A newer writer, compatible with this reader, longer everywhere.
    assert abi == cabi + 1 and compat == ccompat, (abi, compat, cabi, ccompat)
    assert hsize > chsize, (hsize, chsize)
    assert stack_stride(h) > stack_stride(cur), (stack_stride(h), stack_stride(cur))
    within(site(rep, "hold_big")["retained_bytes"], 64 * MiB, 0.25, "hold_big")
    within(site(rep, "thread_site")["retained_bytes"], 4 * MiB, 0.5, "threads")
    assert rep["table"]["dropped_stacks"] == 0, rep["table"]
    assert len(rep["alarms"]) == 1 and "giant_site" in functions(rep["alarms"][0]), \
        rep["alarms"]
    names = [th.get("name") for th in rep["threads"]]
    assert "workload" in names, rep["threads"]


def test_exact_figures_equal_across_builds():
    """Exact mode: every allocation of the site is counted by either
    build, so the two reports agree to the byte."""
    need_newer()
    got = []
    for agent in (os.path.join(BUILD, "libymagent.so"), NEWER):
        _, rep = run(agent, ["count:1000:48", "small"], {"YM_SAMPLE_RATE": "1"})
        got.append((site(rep, "count_site")["allocated_bytes"],
                    site(rep, "hold_small")["retained_bytes"]))
    assert got[0] == got[1], got


def test_segment_for_a_newer_reader_refused():
    """compat_version above this ymtop's version: one line, exit 1."""
    t = Target([WORKLOAD])
    try:
        path = seg_path(t.pid)
        abi, compat, _ = versions(header(path))
        with open(path, "r+b") as f:
            f.seek(OFF_VERSIONS)
            f.write(struct.pack("<HH", abi + 1, abi + 1))
        r = ymtop("-b", "-n", "1", "-f", "json", "-p", t.pid, check=False)
        assert r.returncode == 1, (r.returncode, r.stdout[:200], r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("ymtop: "), r.stderr
        assert "needs a ymtop that reads ABI %d" % (abi + 1) in r.stderr, r.stderr
        assert not r.stdout, r.stdout[:200]
    finally:
        t.finish()


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
