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
variants).  Only what differs from run to run is normalised: the base
ymtop writes each report twice, and a time field (TIMED below: the
snapshot's wall-clock time, ages and times measured to it) is masked only
where its two runs differ; the output path.  With tmux, the screen too:
each view (the Memory picture last) of ymtop -p PID, captured with its
attributes.  As root it runs in a private /dev/shm.  Exit status 0 when
every report is the same."""
import gzip
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

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
        drop_segment(p.pid)
        sys.exit("workload under %s: exit %d: %s" % (agent, p.returncode, err))
    return p.pid


def drop_segment(pid):
    """Remove the segment kept_segment's workload left (YM_KEEP_SEGMENT)."""
    for p in os.listdir("/dev/shm"):
        if re.fullmatch(r"ymtop-%d(\.\d+)?" % pid, p):
            os.unlink(os.path.join("/dev/shm", p))


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
    """The profile's fields in order, time_nanos (9: the snapshot's wall
    clock) left out."""
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
    lines = list(db.iterdump())
    db.close()
    return "\n".join(lines).encode()


# Times that depend on when the report was written (a dead process's
# segment read now): the regex's group 1 is the value; ALWAYS: the
# snapshot's own wall-clock time, masked in every run; the others (ages
# and times measured to the snapshot) only where the base's two runs
# differ.
ALWAYS, MOVED = 1, 0
DURX = rb"\d+(?:\.\d+)?(?:ms|s|m|h|d)(?:\d+(?:\.\d+)?(?:ms|s|m|h))*"
DUR = rb"(" + DURX + rb")"
TIMED = {
    "text": [(rb"heap report: .*, (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4})", ALWAYS),
             (DUR + rb" ago", MOVED),
             (rb"(\d+(?:\.\d+)?) s old", MOVED)],
    "json": [(rb"^\{\"pid\":.*?\"time\":(\d+(?:\.\d+)?)", ALWAYS),
             (rb"\"(?:[a-z_]*_)?time\":(-?\d+(?:\.\d+)?)", MOVED),
             (rb"\"(?:[a-z_]*_)?age_s\":(-?\d+(?:\.\d+)?)", MOVED)],
    # (a column's padding goes with its width)
    "screen": [(rb"(?<![\w.])( *" + DURX + rb")(?!\w)", MOVED),
               (rb"(\d+(?:\.\d+)?) s old", MOVED)],
    "sqlite": [(rb"INSERT INTO \"meta\" VALUES\((?:[^,]*,){2}([^,]*),", ALWAYS),
               (rb"INSERT INTO \"stacks\" VALUES\((?:[^,]*,){11}([^,]*),", MOVED),
               (rb"INSERT INTO \"allocations\" VALUES\((?:[^,]*,){4}([^,]*),", MOVED)],
}


def mask(fmt, outs):
    """outs: [base run 1, base run 2, ours]; the TIMED values masked in
    all three: ALWAYS ones, and the others where the base runs differ."""
    for pat, always in TIMED.get(fmt, []):
        rx = re.compile(pat, re.M)
        found = [list(rx.finditer(o)) for o in outs]
        if len(set(len(f) for f in found)) != 1:
            continue   # not the same shape: left to the comparison
        moved = {k for k, (x, y) in enumerate(zip(found[0], found[1]))
                 if always or x.group(1) != y.group(1)}
        for i, o in enumerate(outs):
            parts, last = [], 0
            for k, mt in enumerate(found[i]):
                if k in moved:
                    parts += [o[last:mt.start(1)], b"T"]
                    last = mt.end(1)
            outs[i] = b"".join(parts) + o[last:]
    return outs


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
        res.append(r.stdout)
    return b"\n--\n".join(res)


SOCK = "same-reports-%d" % os.getpid()


def tmux(*args):
    return subprocess.run(["tmux", "-L", SOCK] + list(args), capture_output=True,
                          text=True).stdout


def screen(ymtop, pid):
    """The screen of a kept segment (ymtop -p PID in tmux, 160x50, with
    colors' escapes): the Stacks view, then each view Tab leads to, the
    Memory picture last."""
    name = "s%d" % pid
    tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "50",
         "env TERM=xterm-256color %s -p %d -d 600; sleep 600" % (ymtop, pid))
    views = []
    try:
        for tab in range(6):
            if tab:
                tmux("send-keys", "-t", name, "Tab")
            end, last, same = time.time() + 30, None, 0
            while time.time() < end:   # until the pane is still
                time.sleep(0.3)
                cur = tmux("capture-pane", "-p", "-e", "-t", name)
                same = same + 1 if cur == last and "ymtop - pid" in cur else 0
                last = cur
                if same >= 3:
                    break
            # the status line's expiry is timed: not compared
            views.append("\n".join(last.split("\n")[:-2]))
    finally:
        tmux("kill-session", "-t", name)
    return "\n====\n".join(views).encode()


def private_shm():
    """As root, run again in a mount namespace of our own whose /dev/shm
    is empty: no other ymtop's sweep removes our kept segments (ymtop
    without -p reports and removes those of gone processes)."""
    if os.geteuid() != 0 or os.environ.get("SAME_REPORTS_PRIVATE") == "1":
        return
    r = subprocess.run(["unshare", "-m", "sh", "-c",
                        'mount -t tmpfs tmpfs /dev/shm && exec "$0" "$@"',
                        sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                       env=dict(os.environ, SAME_REPORTS_PRIVATE="1"))
    sys.exit(r.returncode)


def main():
    private_shm()
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
    pid = None
    try:
        for label, agent in agents:
            for steps, env in cases:
                pid = kept_segment(agent, workload, steps, env)
                for fmt, extra, needs_file in FORMATS:
                    a = report(theirs, pid, fmt, extra, needs_file, out_dir)
                    a2 = report(theirs, pid, fmt, extra, needs_file, out_dir)
                    b = report(ours[0], pid, fmt, extra, needs_file, out_dir)
                    a, a2, b = mask(fmt, [a, a2, b])
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
                if shutil.which("tmux"):
                    outs = [screen(theirs, pid), screen(theirs, pid), screen(ours[0], pid)]
                    a, a2, b = mask("screen", outs)
                    what = "%s agent, rate %s, the screen's views" % (label, env["YM_SAMPLE_RATE"])
                    if a == b:
                        same += 1
                        if a.count(b"ymtop - pid") != 6:
                            print("same, but not every view shown (%s): %s" % (what, a[:200]))
                    else:
                        diffs += 1
                        pa, pb = (os.path.join(out_dir, "%d.%s" % (diffs, s))
                                  for s in ("base", "ours"))
                        open(pa, "wb").write(a)
                        open(pb, "wb").write(b)
                        print("DIFFERENT %s: diff %s %s" % (what, pa, pb), flush=True)
                drop_segment(pid)
                pid = None
    finally:
        if pid:   # an error or Ctrl-C between kept_segment and its drop
            drop_segment(pid)
        if not diffs:
            shutil.rmtree(out_dir, ignore_errors=True)
    print("%d reports the same, %d different" % (same, diffs))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
