"""Snapshots when it matters (ymtop -b --snapshot-on): a report when the
process reaches a new peak above a threshold, none while it stays below
its last peak; a report when its cgroup's memory events move, and the
final report of a process the OOM killer took saying so."""
import glob
import json
import os
import select
import subprocess
import tempfile

from test_cgroup import make_child
from ymlib import BUILD, YMTOP, Target, report, run_tests, ymtop

PEAKS = os.path.join(BUILD, "progs", "peaks")
RESIDENT = os.path.join(BUILD, "progs", "resident")
MiB = 1024 * 1024


def command(t, line):
    t.p.stdin.write(line + "\n")
    t.p.stdin.flush()
    t.wait_for("ready")


class Batch:
    """ymtop -b writing JSON reports to a directory; next() waits for the
    next "wrote" line (a bound against a hang, not a timed assertion)."""

    def __init__(self, pid, d, *rule):
        self.p = subprocess.Popen(
            [YMTOP, "-b", "-i", "0.1", "-n", "0", "-f", "json", "-o",
             os.path.join(d, "r-%n.json"), "-p", str(pid)] + list(rule),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.buf = ""

    def next(self, bound=120):
        # Lines read with os.read: a buffered readline would keep lines
        # that select cannot see.
        while True:
            while "\n" not in self.buf:
                r, _, _ = select.select([self.p.stderr], [], [], bound)
                assert r, "no report written"
                data = os.read(self.p.stderr.fileno(), 4096).decode()
                assert data, "ymtop ended: %s" % self.p.wait()
                self.buf += data
            line, self.buf = self.buf.split("\n", 1)
            if line.startswith("ymtop: wrote "):
                with open(line[len("ymtop: wrote "):].strip()) as f:
                    return json.load(f)

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
        self.p.wait()


def test_a_report_at_each_new_peak_above_the_threshold():
    t = Target([PEAKS], env={"YM_SAMPLE_RATE": "65536", "YM_SEED": "3"})
    with tempfile.TemporaryDirectory() as d:
        b = Batch(t.pid, d, "--snapshot-on", "peak:32M")
        try:
            command(t, "grow 16")            # below the threshold: nothing
            command(t, "grow 50")
            p50 = report(t.pid)["totals"]["peak_retained_bytes"]
            first = b.next()
            assert first["totals"]["peak_retained_bytes"] >= 32 * MiB, first["totals"]
            # Reports while it grew, until one within 1 % of the peak:
            # after it none, until a new peak.
            rep = first
            while rep["totals"]["peak_retained_bytes"] * 1.01 < p50:
                rep = b.next()
            last = rep["totals"]["peak_retained_bytes"]
            command(t, "grow 20")            # no new peak
            command(t, "grow 64")
            rep = b.next()
            assert rep["totals"]["peak_retained_bytes"] > 1.01 * last, (rep["totals"], last)
            # The first new peak may be written while it still grows:
            # reports follow until the peak of 16 + 64 MiB.
            while rep["totals"]["peak_retained_bytes"] <= 55 * MiB:
                rep = b.next()
        finally:
            b.stop()
            t.finish()


def test_the_oom_killers_victim_named_in_its_last_report():
    child, v1 = make_child()   # 96 MiB
    t = Target([RESIDENT], env={"YM_SAMPLE_RATE": "65536"})
    try:
        with open(child + "/cgroup.procs", "w") as f:
            f.write(str(t.pid))
        with tempfile.TemporaryDirectory() as d:
            b = Batch(t.pid, d, "--snapshot-on", "pressure")
            try:
                t.p.stdin.write("touch 512\n")
                t.p.stdin.flush()
                # Not reaped until ymtop has read how it ended (a zombie).
                reps = []
                while True:
                    rep = b.next()
                    reps.append(rep)
                    if rep.get("leaked_at_exit"):
                        break
                t.p.wait()
                assert t.p.returncode == -9, t.p.returncode
                last = reps[-1]
                assert last["exit"] == {"how": "signal", "signal": 9, "oom_killed": True}, last["exit"]
                assert last["cgroup"]["events"]["oom_kill"] >= 1, last["cgroup"]
                assert b.p.wait() == 0
                files = sorted(glob.glob(os.path.join(d, "r-*.json")))
                assert len(files) == len(reps), files
            finally:
                b.stop()
    finally:
        t.kill()
        os.rmdir(child)


def test_snapshot_on_usage():
    for args in (["-b", "--snapshot-on", "peak:x"], ["--snapshot-on", "pressure"],
                 ["-b", "--snapshot-on", "soon"],
                 ["-b", "--snapshot-on", "pressure", "--on-change", "5"]):
        r = ymtop(*args, check=False)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (args, r.stderr)


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
