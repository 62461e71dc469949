"""`ymtop diff OLD NEW`: two JSON reports compared stack by stack, stacks
matched by their symbolized frames (not addresses: two runs of a program
load it at different addresses), growth first; a file that is not a report
ymtop can read gives one line and status 2.

Tolerance as test_peaks.py: a block of s bytes is sampled with probability
p = 1 - exp(-s/R) and weighs s/p, so Z standard deviations of the
estimate of n blocks bound it.  Between two reports of one process the
older samples are in both: the change is the estimate of the new blocks
alone; between two runs the two estimates are independent."""
import json
import math
import os
import tempfile

from ymlib import BUILD, Target, functions, report, run_tests, ymtop

PROG = os.path.join(BUILD, "progs", "peaks")
RATE = 65536
BLOCK = 32 * 1024
MiB = 1024 * 1024
Z = 4.5


def bound(mib):
    n = mib * MiB // BLOCK
    p = -math.expm1(-BLOCK / RATE)
    return Z * BLOCK * math.sqrt(n * (1 - p) / p)


def command(t, line):
    t.p.stdin.write(line + "\n")
    t.p.stdin.flush()
    t.wait_for("ready")


def save(d, name, rep):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump(rep, f)
    return path


def diff(*args, check=True):
    return ymtop("diff", *args, check=check)


def one_line_error(r, code):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("ymtop: diff: "), r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == "", r.stdout


def named(stacks, fn):
    return [s for s in stacks if fn in functions(s)]


def run(commands, seed):
    t = Target([PROG], env={"YM_SAMPLE_RATE": str(RATE), "YM_SEED": str(seed)})
    reps = []
    try:
        for c in commands:
            if c == "report":
                reps.append(report(t.pid))
            else:
                command(t, c)
    finally:
        t.finish()
    return reps


def test_growing_site_first_with_its_growth():
    old, new = run(["hold 8", "report", "hold 40", "churn 20000", "report"], 7)
    with tempfile.TemporaryDirectory() as d:
        po, pn = save(d, "old.json", old), save(d, "new.json", new)
        out = json.loads(diff("-f", "json", po, pn).stdout)
        top = out["stacks"][0]
        assert "hold_site" in functions(top), [functions(s)[:3] for s in out["stacks"]]
        assert top["status"] == "changed", top
        assert abs(top["delta_retained_bytes"] - 40 * MiB) <= bound(40), top
        assert abs(top["delta_allocated_bytes"] - 40 * MiB) <= bound(40), top
        # A site the old report did not have: new, holding nothing.
        churn = named(out["stacks"], "churn_site")
        assert churn and all(s["status"] == "new" for s in churn), churn
        assert all(abs(s["delta_retained_bytes"]) < 1 for s in churn), churn
        # Swapped: the same figures negated, the churn gone, hold_site last.
        back = json.loads(diff("-f", "json", pn, po).stdout)
        assert "hold_site" in functions(back["stacks"][-1]), back["stacks"][-1]
        assert back["stacks"][-1]["delta_retained_bytes"] == -top["delta_retained_bytes"]
        assert all(s["status"] == "gone" for s in named(back["stacks"], "churn_site"))
        # Text: the growing function on the first row, its growth in MiB.
        text = diff(po, pn).stdout.splitlines()
        rows = [l for l in text if "hold_site" in l]
        first = text.index(next(l for l in text if l.lstrip().startswith("RETAINED+-"))) + 1
        assert rows and text[first] == rows[0], text
        num, unit = rows[0].split()[:2]
        assert unit == "MiB" and num.startswith("+"), rows[0]
        assert abs(float(num) * MiB - top["delta_retained_bytes"]) <= 0.1 * MiB, rows[0]
        # A report compared with itself: nothing changed.
        same = json.loads(diff("-f", "json", pn, pn).stdout)
        assert same["stacks"] == [] and same["unchanged_stacks"] > 0, same


def test_two_runs_matched_by_names_not_addresses():
    (old,) = run(["hold 8", "report"], 7)
    (new,) = run(["hold 48", "report"], 11)
    with tempfile.TemporaryDirectory() as d:
        out = json.loads(diff("-f", "json", save(d, "a.json", old),
                              save(d, "b.json", new)).stdout)
    hold = named(out["stacks"], "hold_site")
    assert len(hold) == 1 and hold[0]["status"] == "changed", hold
    tol = math.hypot(bound(8), bound(48))
    assert abs(hold[0]["delta_retained_bytes"] - 40 * MiB) <= tol, hold[0]


def test_bad_truncated_and_newer_reports_one_line_exit_2():
    (rep,) = run(["hold 8", "report"], 7)
    good = json.dumps(rep)
    with tempfile.TemporaryDirectory() as d:
        ok = os.path.join(d, "ok.json")
        with open(ok, "w") as f:
            f.write(good)
        bad = {
            "empty": "",
            "garbage": "\x1b[2Jnot json at all",
            "truncated": good[:len(good) // 2],
            "newer": json.dumps(dict(rep, report_version=99)),
            "version-text": json.dumps(dict(rep, report_version="1")),
            "no-stacks": json.dumps({"report_version": 1, "pid": 1}),
            "array": "[1,2,3]",
            "bad-stack": json.dumps(dict(rep, stacks=[{"frames": 3}])),
            "negative": json.dumps(dict(rep, stacks=[{"frames": [], "retained_bytes": -5,
                                                       "allocated_bytes": 1}])),
            "deep": "[" * 100000,
        }
        for name, text in bad.items():
            path = os.path.join(d, name + ".json")
            with open(path, "w") as f:
                f.write(text)
            r = diff(ok, path, check=False)
            one_line_error(r, 2)
            assert "\x1b" not in r.stderr, r.stderr
            one_line_error(diff(path, ok, check=False), 2)
        r = diff(ok, os.path.join(d, "missing.json"), check=False)
        one_line_error(r, 2)
        one_line_error(diff(ok, d, check=False), 2)
        for args in ([ok], [], ["-f", "xml", ok, ok], ["--top", "x", ok, ok], ["--bogus", ok, ok]):
            one_line_error(diff(*args, check=False), 2)
        assert "newer" in diff(ok, os.path.join(d, "newer.json"), check=False).stderr


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
