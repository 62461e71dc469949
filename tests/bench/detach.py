"""make bench: the throughput of a process after ymtop -p --detach against
before the attach (issue 31's acceptance: within 2 %), and 100 attach/detach
cycles (tests/integration/test_detach.py with YM_DETACH_CYCLES=100).

tests/progs/churn.c reports its own malloc/free pairs per second of CPU
time (the process's, so other load on the machine shifts it less than wall
time).  Each round starts a fresh churn with one thread and a
never-attached twin beside it (two threads on the machine's two cores),
measures both alternately (twin, subject, ...) before the attach and after
the detach, and prints the subject's after/before ratio, the twin's own
drift over the same time, and the subject's ratio over the twin's: what
the machine did to both (frequency, the other's cache) cancels there.
The figure is the median over rounds of that last ratio.

    YM_BUILD=build python3 tests/bench/detach.py [ROUNDS] [SAMPLES]
"""
import atexit
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from ymlib import remove_segment, start_ticks  # noqa: E402

B = os.environ.get("YM_BUILD", "build")
CHURN = os.path.join(B, "progs", "churn")
YMTOP = os.path.join(B, "ymtop")


# Every churn started: a round cut short (an error, Ctrl-C) leaves one
# attached, whose segment stays when it is killed.
churns = []


@atexit.register
def end_churns():
    for p, ticks in churns:
        if p.poll() is None:
            p.kill()
            p.wait()
        remove_segment(p.pid, ticks)


class Churn:
    def __init__(self):
        self.p = subprocess.Popen([CHURN, "1"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        churns.append((self.p, start_ticks(self.p.pid)))
        assert self.p.stdout.readline().strip() == "ready"

    def rate(self):
        self.p.stdin.write("rate\n")
        self.p.stdin.flush()
        return float(self.p.stdout.readline().split()[1])

    def quit(self):
        out, _ = self.p.communicate("quit\n", timeout=60)
        assert "checked ok" in out and self.p.returncode == 0, out


def phase(subject, twin, samples):
    s, t = [], []
    for _ in range(samples):
        t.append(twin.rate())
        s.append(subject.rate())
    return statistics.median(s), statistics.median(t)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    samples = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    env = dict(os.environ, YM_AGENT=os.path.join(B, "libymagent.so"))
    ratios, drifts, norms, unloaded = [], [], [], 0
    for r in range(rounds):
        subject, twin = Churn(), Churn()
        before, twin0 = phase(subject, twin, samples)
        subprocess.run([YMTOP, "-b", "-n", "1", "-i", "0.05", "-p",
                        str(subject.p.pid)], env=env, check=True,
                       capture_output=True, timeout=120)
        attached, _ = phase(subject, twin, 2)
        d = subprocess.run([YMTOP, "-p", str(subject.p.pid), "--detach"],
                           env=env, capture_output=True, text=True, timeout=120)
        unloaded += "unloaded" in d.stderr
        after, twin1 = phase(subject, twin, samples)
        subject.quit()
        twin.quit()
        ratios.append(after / before)
        drifts.append(twin1 / twin0)
        norms.append(ratios[-1] / drifts[-1])
        print("round %d: before %.0f/s, attached %.0f/s, after %.0f/s: "
              "after/before %.4f (never-attached twin %.4f; over the twin's "
              "%.4f)%s" %
              (r + 1, before, attached, after, after / before, twin1 / twin0,
               norms[-1],
               "" if "unloaded" in d.stderr else "  [" + d.stderr.strip() + "]"),
              flush=True)
    print("detach: after/before median %.4f (twin %.4f; over the twin's "
          "%.4f), %d of %d unloaded; load average %s" % (
              statistics.median(ratios), statistics.median(drifts),
              statistics.median(norms), unloaded, rounds,
                               open("/proc/loadavg").read().split()[0]))
    r = subprocess.run([sys.executable, "tests/integration/test_detach.py",
                        "test_attach_detach_cycles_leak_nothing"],
                       env=dict(env, YM_DETACH_CYCLES="100",
                                PYTHONPATH="tests/lib", YM_BUILD=B),
                       capture_output=True, text=True, timeout=3600)
    print("100 attach/detach cycles: " + (r.stdout.strip() or r.stderr[-300:]))


if __name__ == "__main__":
    main()
