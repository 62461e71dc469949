"""What exact mode (YM_SAMPLE_RATE=1) pays per event, in counts that do not
depend on the machine's load: system calls.

Each page of the segment is populated (MADV_POPULATE_WRITE) before the
agent writes there.  Exact mode appends a stack record at nearly every
new stack and takes a live entry (64 bytes) for every block a program
holds.  The stack records are backed 64 KiB a call (backing_get_ahead);
the live entries a page a call (a page holds entries of 8 stripes, most
of them unused by a single thread).  So a program that holds N blocks
makes about N * 64 / 4096 calls for its entries and a call per 64 KiB of
stack records; a page a call for both was half as many again."""
import os
import re
import shutil
import subprocess
import tempfile

from ymlib import AGENT, Skip, run_tests

PY = "/usr/bin/python3"
HELD = 200000   # blocks python3 holds at once (PYTHONMALLOC=malloc)


def madvise_calls(env_extra):
    """{length: calls} of MADV_POPULATE_WRITE in the process under strace."""
    if not shutil.which("strace"):
        raise Skip("no strace")
    if not os.path.exists(PY):
        raise Skip("no Debian python3")
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "st")
        env = dict(os.environ, LD_PRELOAD=AGENT, PYTHONMALLOC="malloc", **env_extra)
        env.pop("YM_KEEP_SEGMENT", None)
        subprocess.run(["strace", "-e", "trace=madvise", "-o", log, PY, "-c",
                        "x = [str(i) for i in range(%d)]\nprint(len(x))" % HELD],
                       env=env, check=True, stdout=subprocess.DEVNULL, timeout=300)
        calls = {}
        for line in open(log):
            m = re.search(r"madvise\(0x[0-9a-f]+, (\d+), MADV_POPULATE_WRITE\)", line)
            if m:
                calls[int(m.group(1))] = calls.get(int(m.group(1)), 0) + 1
        return calls


def test_exact_mode_backs_its_stack_records_64k_a_system_call():
    calls = madvise_calls({"YM_SAMPLE_RATE": "1"})
    pages = HELD * 64 // 4096   # the live entries' pages: 3125
    # Debian's python3.11 here: 3,329 single pages (the entries, and the
    # other tables' first pages) and 127 calls of 64 KiB (8 MiB of stack
    # records); with a page a call for the records, 5,357 single pages.
    assert calls.get(4096, 0) < pages * 5 // 4, calls
    assert sum(n for size, n in calls.items() if size >= 65536) > 0, calls


def test_sampling_backs_a_page_at_a_time():
    """When sampling, records and entries are few: a page each, nothing
    ahead (a process holds what its samples use)."""
    calls = madvise_calls({"YM_SAMPLE_RATE": "524288"})
    assert all(size < 65536 for size in calls), calls


if __name__ == "__main__":
    run_tests(globals())
