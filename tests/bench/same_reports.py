#!/usr/bin/env python3
"""Reports byte for byte: the ymtop of a base commit and this tree's read the
same kept segments and must write the same reports in every format.

    tests/bench/same_reports.py [BASE_COMMIT]     (default: merge-base HEAD main)

Both ymtops are built (the base from `git archive` of its commit into
$TMPDIR, so that no worktree of the repository changes), so are agents of
older ABI versions (OLD_ABI, commits: default v5 and v6 writers) and this
tree's test-only newer writer (build/abi-newer).  Each agent writes a
segment kept after its process exits (YM_KEEP_SEGMENT=1) with the test
workload; each ymtop then writes every format of each segment (text,
json, folded, pprof, sqlite, svg, prometheus, with --sort and --weight
variants).  Only what differs from run to run is normalised: the
snapshot's wall-clock time and the ages measured to it, the output path.
Exit status 0 when every report is the same."""
import gzip
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OLD_ABI = os.environ.get("OLD_ABI", "11d7317^ aea889d^").split()
JOBS = os.environ.get("JOBS", "2")


def sh(cmd, cwd=None, **kw):
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True,
                          text=True, **kw).stdout


def tree_of(commit, tmp):
    """A build directory of commit's tree (kept between runs)."""
    rev = sh(["git", "rev-parse", commit], cwd=ROOT).strip()
    d = os.path.join(tmp, "ymtop-tree-" + rev[:12])
    if not os.path.isdir(d):
        os.makedirs(d + ".part", exist_ok=True)
        subprocess.run("git archive %s | tar -x -C %s" % (rev, d + ".part"),
                       shell=True, check=True, cwd=ROOT)
        os.rename(d + ".part", d)
    return d


def make(tree, *targets):
    r = subprocess.run(["make", "-j" + JOBS] + list(targets), cwd=tree,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("make in %s failed:\n%s" % (tree, r.stderr[-3000:]))
    return [os.path.join(tree, t) for t in targets]


def kept_segment(agent, workload, steps, env):
    """Run the workload under agent until it exits; its pid (the segment
    stays in /dev/shm)."""
    e = dict(os.environ, LD_PRELOAD=agent, YM_KEEP_SEGMENT="1",
             YM_GIANT_BYTES="1048576")
    e.update(env)
    p = subprocess.Popen([workload] + steps + ["nowait"], env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=120)
    if p.returncode != 0:
        sys.exit("workload under %s: exit %d: %s" % (agent, p.returncode, err))
    return p.pid


FORMATS = [
    ("text", [], False), ("text", ["--sort", "peak", "--top", "5"], False),
    ("json", [], False), ("json", ["--sort", "allocated"], False),
    ("folded", [], False), ("folded", ["--weight", "objects"], False),
    ("folded", ["--weight", "allocated"], False),
    ("pprof", [], True), ("sqlite", [], True), ("svg", [], True),
    ("svg", ["--weight", "allocated"], True), ("prometheus", [], False),
]


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << s
        s += 7
        if c < 0x80:
            return v, i


def pprof_norm(data):
    """The profile's fields in order, time_nanos (9) left out."""
    b = gzip.decompress(data)
    out, i = [], 0
    while i < len(b):
        start = i
        key, i = varint(b, i)
        f, wire = key >> 3, key & 7
        if wire == 0:
            _, i = varint(b, i)
        elif wire == 2:
            n, i = varint(b, i)
            i += n
        else:
            raise ValueError("wire type %d" % wire)
        if f != 9:
            out.append(b[start:i])
    return b"".join(out)


def sqlite_norm(path):
    db = sqlite3.connect(path)
    lines = [l for l in db.iterdump()]
    db.close()
    # meta's third column is the snapshot's wall-clock time
    return "\n".join(re.sub(r"^(INSERT INTO \"meta\" VALUES\([^,]*,[^,]*,)[^,]*",
                            r"\1T", l) for l in lines).encode()


AGO = re.compile(rb"\d+(\.\d+)?(ms|s|m|h|d) ago")


def text_norm(fmt, b):
    if fmt == "text":
        b = re.sub(rb"(heap report: .*, )\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}",
                   rb"\1DATE", b)
        b = AGO.sub(b"AGO", b)
    if fmt == "json":
        b = re.sub(rb"\"time\":\d+\.\d+", b"\"time\":T", b, count=1)
    return b


def report(ymtop, pid, fmt, extra, needs_file, out_dir):
    out = os.path.join(out_dir, "out." + fmt)
    cmd = [ymtop, "-b", "-n", "1", "-p", str(pid), "-f", fmt] + extra
    if needs_file:
        cmd += ["-o", out]
    r = subprocess.run(cmd, capture_output=True, env=dict(os.environ, NO_COLOR="1"))
    res = [b"exit %d" % r.returncode, r.stderr.replace(out.encode(), b"OUT")]
    if needs_file and os.path.exists(out):
        if fmt == "pprof":
            res.append(pprof_norm(open(out, "rb").read()))
        elif fmt == "sqlite":
            res.append(sqlite_norm(out))
        else:
            res.append(open(out, "rb").read())
        os.unlink(out)
    else:
        res.append(text_norm(fmt, r.stdout))
    return b"\n--\n".join(res)


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else \
        sh(["git", "merge-base", "HEAD", "main"], cwd=ROOT).strip()
    tmp = os.environ.get("TMPDIR", "/tmp")
    print("base %s, this tree %s" % (sh(["git", "rev-parse", "--short", base], cwd=ROOT).strip(),
                                     ROOT), flush=True)
    ours = make(ROOT, "build/ymtop", "build/libymagent.so",
                "build/abi-newer/libymagent.so", "build/progs/workload")
    theirs = make(tree_of(base, tmp), "build/ymtop")[0]
    workload = ours[3]
    agents = [("current", ours[1]), ("newer", ours[2])]
    for c in OLD_ABI:
        t = tree_of(c, tmp)
        agents.append(("old " + c, make(t, "build/libymagent.so")[0]))
    cases = [
        (["big", "small", "threads:4", "giant:2097152", "count:5000:48",
          "realloc", "calloc", "aligned", "fork"], {"YM_SAMPLE_RATE": "65536"}),
        (["small", "count:20000:100", "threads:2"], {"YM_SAMPLE_RATE": "1"}),
    ]
    out_dir = tempfile.mkdtemp(prefix="same-reports-")
    diffs = same = 0
    try:
        for label, agent in agents:
            for steps, env in cases:
                pid = kept_segment(agent, workload, steps, env)
                for fmt, extra, needs_file in FORMATS:
                    a = report(theirs, pid, fmt, extra, needs_file, out_dir)
                    b = report(ours[0], pid, fmt, extra, needs_file, out_dir)
                    what = "%s agent, rate %s, %s %s" % (label, env["YM_SAMPLE_RATE"],
                                                        fmt, " ".join(extra))
                    if a == b:
                        same += 1
                        if not a.startswith(b"exit 0\n"):
                            print("same, but no report (%s): %s" % (what, a[:200]))
                    else:
                        diffs += 1
                        pa, pb = (os.path.join(out_dir, "%d.%s" % (diffs, s))
                                  for s in ("base", "ours"))
                        open(pa, "wb").write(a)
                        open(pb, "wb").write(b)
                        print("DIFFERENT %s: diff %s %s" % (what, pa, pb), flush=True)
                for p in os.listdir("/dev/shm"):
                    if re.fullmatch(r"ymtop-%d(\.\d+)?" % pid, p):
                        os.unlink(os.path.join("/dev/shm", p))
    finally:
        if not diffs:
            shutil.rmtree(out_dir, ignore_errors=True)
    print("%d reports the same, %d different" % (same, diffs))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
