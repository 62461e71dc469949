"""What the sampled path calls besides the sample itself.

A sample may call out where a caller holds no lock (the malloc family's
slow path): the loader's object counters (dl_iterate_phdr, which takes the
loader's lock) are read for module changes at most once a millisecond
(modules.c) and for an interpreter's discovery and hook (python_poll) only
when the thread looks at the control block, at most once a millisecond a
thread (sampling.c).  Read at every sample, in a process without an
interpreter they cost about 190 instructions and the lock's line a sample,
a tenth of it."""
import os
import subprocess
import sys
import time

from ymlib import AGENT, BUILD, run_tests

PROGS = os.path.join(BUILD, "progs")


def test_samples_do_not_each_count_the_loaders_objects():
    # 50,000 blocks of 64 bytes at a mean rate of 64 bytes: about 31,600
    # samples (p = 1 - 1/e each), one thread, no interpreter.
    env = dict(os.environ, YM_SAMPLE_RATE="64",
               LD_PRELOAD=os.path.join(PROGS, "libphdrcount.so") + " " + AGENT)
    start = time.monotonic()
    r = subprocess.run([os.path.join(PROGS, "allocs"), "malloc:50000:64"],
                       input="", capture_output=True, text=True, env=env,
                       timeout=120)
    elapsed_ms = (time.monotonic() - start) * 1e3
    assert r.returncode == 0 and "ready" in r.stdout, (r.stdout, r.stderr)
    counted = [l for l in r.stderr.splitlines() if l.startswith("dl_iterate_phdr ")]
    assert counted, r.stderr
    calls = int(counted[-1].split()[1])
    # At most a module check and a look at the control block a
    # millisecond, and a few at the start (the segment, the first look,
    # the interpreter's first discovery): a bound from the run's own
    # length, so a slow machine raises it with the samples' time.
    bound = 2 * int(elapsed_ms) + 50
    print("  %d calls of dl_iterate_phdr in %.0f ms (bound %d)"
          % (calls, elapsed_ms, bound))
    assert calls <= bound, (
        "%d calls of dl_iterate_phdr in %.0f ms of about 31,600 samples: "
        "more than %d, the samples count the loader's objects" % (
            calls, elapsed_ms, bound))


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
