"""The agent built for musl (build/libymagent-musl.so, Makefile): loads
into a program that musl-gcc linked, needs nothing but musl's libc.so,
and counts every allocation in exact mode, each at its own stack, also
in threads and with a fork child (tests/progs/musl/count.c)."""
import os
import shutil
import subprocess
import sys

from ymlib import BUILD, Skip, Target, functions, report, run_tests, site

MUSL_AGENT = os.path.join(BUILD, "libymagent-musl.so")
COUNT = os.path.join(BUILD, "musl", "count")


def needs_musl():
    if not shutil.which("musl-gcc"):
        raise Skip("musl-gcc is not installed (musl-tools)")
    assert os.path.exists(MUSL_AGENT) and os.path.exists(COUNT), \
        "make check builds %s and %s" % (MUSL_AGENT, COUNT)


def test_musl_agent_needs_only_musl_libc():
    needs_musl()
    out = subprocess.run(["readelf", "-W", "-d", MUSL_AGENT], capture_output=True,
                         text=True, check=True).stdout
    needed = [l.split("[")[1].rstrip("]") for l in out.splitlines()
              if "(NEEDED)" in l]
    assert needed == ["libc.so"], needed
    out = subprocess.run(["readelf", "-W", "-d", COUNT], capture_output=True,
                         text=True, check=True).stdout
    assert "ld-musl" in subprocess.run(["readelf", "-W", "-l", COUNT],
                                       capture_output=True, text=True).stdout


def test_musl_program_exact_mode_counts_each_allocation():
    needs_musl()
    t = Target([COUNT], env={"LD_PRELOAD": MUSL_AGENT, "YM_SAMPLE_RATE": "1"})
    try:
        rep = report(t.pid)
    finally:
        rc, _, err = t.finish()
    assert rc == 0, (rc, err)
    assert "ymagent" not in err, err
    c = site(rep, "count_site")
    assert c["allocated_objects"] == 5000 and c["retained_objects"] == 0, c
    assert c["allocated_bytes"] == 5000 * 48, c
    h = site(rep, "hold_site")
    assert h["allocated_objects"] == 1000 and h["retained_objects"] == 1000, h
    assert h["retained_bytes"] == 1000 * 4096, h
    assert "main" in functions(h), functions(h)
    s = site(rep, "thread_site")
    assert s["allocated_objects"] == 4 * 256 and s["retained_bytes"] == 4 * 256 * 1024, s
    names = [f for st in rep["stacks"] for f in functions(st)]
    assert "child_site" not in names, "the fork child wrote into its parent's segment"


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
