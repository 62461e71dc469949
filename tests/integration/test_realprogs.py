"""Real programs under the agent: each runs without it and with it (sampling
often, so that the agent's slow path runs), and stdout, stderr, the exit
status and the files it wrote must be identical.  Then a multi-threaded
server (redis-server, whose Debian build takes malloc from jemalloc) under
load from redis-benchmark keeps answering correctly while ymtop watches it
and writes reports."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from ymlib import AGENT, YMTOP, run_tests, seg_path

TIMEOUT = 120


def env_for(agent, extra=None):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("YM_") and k != "LD_PRELOAD"}
    e.update({"LC_ALL": "C", "TZ": "UTC", "HOME": "/nonexistent"})
    if agent:
        e.update(LD_PRELOAD=AGENT, YM_SAMPLE_RATE="8192")
    e.update(extra or {})
    return e


def tree(d):
    """Every file under d with its bytes (what a program wrote)."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = fh.read()
    return out


def same(setup, argv, stdin=None, extra=None, files=True):
    """Runs argv in a fresh directory prepared by setup(dir), without and
    with the agent; everything observable must match."""
    results = []
    for agent in (False, True):
        d = tempfile.mkdtemp(prefix="ym-real-")
        try:
            if setup:
                setup(d)
            r = subprocess.run(argv, cwd=d, input=stdin, capture_output=True,
                               env=env_for(agent, extra), timeout=TIMEOUT)
            results.append((r.returncode, r.stdout, r.stderr,
                            tree(d) if files else None))
        finally:
            shutil.rmtree(d)
    a, b = results
    assert a[0] == b[0], "exit status %d without the agent, %d with" % (a[0], b[0])
    assert a[1] == b[1], "stdout differs:\n%r\n---\n%r" % (a[1][-400:], b[1][-400:])
    assert a[2] == b[2], "stderr differs:\n%r\n---\n%r" % (a[2][-400:], b[2][-400:])
    assert a[3] == b[3], "files differ: %s" % sorted(
        k for k in set(a[3]) | set(b[3]) if a[3].get(k) != b[3].get(k))
    assert a[0] == 0, "%s failed (%d): %r" % (argv, a[0], a[2][-400:])
    return a


BASH_SCRIPT = r"""
set -e
declare -A seen
words=()
for i in $(seq 1 3000); do
    w=$(( (i * 7919) % 1013 ))
    words+=("w$w")
    seen[w$w]=$(( ${seen[w$w]:-0} + 1 ))
done
big=$(printf '%s,' "${words[@]}")
echo "words ${#words[@]} distinct ${#seen[@]} chars ${#big}"
f() { local x="$1"; echo "${x^^}" | tr A-Z a-z | rev; }
for k in $(printf '%s\n' "${!seen[@]}" | sort | head -5); do f "$k"; done
( cd / && pwd ) | sed 's|/|root|'
cat <<EOF | sort -r | head -2
alpha
beta
gamma
EOF
exit 0
"""


def test_bash_script():
    def setup(d):
        with open(os.path.join(d, "s.sh"), "w") as f:
            f.write(BASH_SCRIPT)
    out = same(setup, ["bash", "s.sh"])[1]
    assert out.startswith(b"words 3000 distinct"), out


def test_git_init_add_commit_log():
    def setup(d):
        for i in range(40):
            with open(os.path.join(d, "f%02d.txt" % i), "w") as f:
                f.write("line %d\n" % i * (i + 1))
    fixed = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example",
             "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
             "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
             "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    script = ("git init -q -b main . && git add . && git commit -q -m first && "
              "echo more >> f01.txt && git commit -q -am second && "
              "git log --stat --format='%H %s' && git rev-list --count HEAD")
    # .git holds an index with file timestamps: compare the output only.
    out = same(setup, ["sh", "-c", script], extra=fixed, files=False)[1]
    assert out.count(b"\n") > 40 and out.strip().endswith(b"2"), out[-200:]


def test_python3():
    out = same(None, ["python3", "-c",
                      "import collections, json, re, threading\n"
                      "d = {str(i): list(range(i % 50)) for i in range(30000)}\n"
                      "r = []\n"
                      "def w(k):\n"
                      "    r.append(sum(len(json.dumps(d[str(j)])) for j in range(k, 30000, 4)))\n"
                      "ts = [threading.Thread(target=w, args=(k,)) for k in range(4)]\n"
                      "[t.start() for t in ts]; [t.join() for t in ts]\n"
                      "print(sorted(r))\n"
                      "print(collections.Counter(re.findall(r'\\d', json.dumps(d))).most_common(3))\n"])[1]
    assert out.startswith(b"["), out


def test_sqlite3():
    sql = b"""
create table t(id integer primary key, k text, v real);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 20000)
insert into t(k, v) select 'key' || (i % 997), i * 0.5 from n;
create index tk on t(k);
select k, count(*), sum(v) from t group by k order by sum(v) desc limit 5;
select count(distinct k), max(length(k)) from t;
"""
    out = same(None, ["sqlite3", "db.sqlite"], stdin=sql, files=False)[1]
    assert b"997|" in out, out


def test_gcc_compiles_a_file():
    src = r"""
#include <stdio.h>
#include <stdlib.h>
struct node { struct node *next; int v; };
static int sum(const struct node *n) { return n ? n->v + sum(n->next) : 0; }
int main(int argc, char **argv)
{
    struct node *h = NULL;
    for (int i = 0; i < argc * 100; i++) {
        struct node *n = malloc(sizeof *n);
        if (!n) return 1;
        n->v = i; n->next = h; h = n;
    }
    printf("%d %s\n", sum(h), argv[0]);
    int unused;
    return 0;
}
"""

    def setup(d):
        with open(os.path.join(d, "a.c"), "w") as f:
            f.write(src)
    # The object file must be identical too (cc1 and as run under the
    # agent: gcc's driver passes LD_PRELOAD on).
    r = same(setup, ["gcc", "-O2", "-g0", "-Wall", "-c", "a.c", "-o", "a.o"])
    assert b"unused variable" in r[2], r[2]
    assert r[3]["a.o"][:4] == b"\x7fELF"


def test_sort():
    data = b"".join(b"%08x %d\n" % ((i * 2654435761) % 2**32, i)
                    for i in range(100000))
    same(None, ["sort", "-k1,1", "-S", "1M", "-T", "."], stdin=data)


# ---- a multi-threaded server under load, watched by ymtop ----

def wait_socket(path, p, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if p.poll() is not None:
            raise AssertionError("redis-server exited: %s" % p.stderr.read())
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            s.close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("redis-server did not listen on " + path)


def cli(sock, *args):
    r = subprocess.run(["redis-cli", "-s", sock] + list(args),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_redis_under_load_while_ymtop_watches():
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        raise AssertionError("redis-server/redis-benchmark missing: make deps")
    d = tempfile.mkdtemp(prefix="ym-redis-")
    sock = os.path.join(d, "redis.sock")
    srv = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
         "--appendonly", "no", "--dir", d, "--io-threads", "2",
         "--io-threads-do-reads", "yes", "--daemonize", "no"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env_for(True, {"YM_SAMPLE_RATE": "65536"}))
    watch = None
    try:
        wait_socket(sock, srv)
        assert os.path.exists(seg_path(srv.pid)), "no segment"
        out = os.path.join(d, "r-%n.json")
        watch = subprocess.Popen([YMTOP, "-b", "-i", "0.3", "-f", "json",
                                  "-o", out, "-p", str(srv.pid)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        # Known values in, then load from 20 clients, then read them back.
        for i in range(50):
            cli(sock, "SET", "known:%d" % i, "v%d" % (i * i))
        bench = subprocess.run(
            ["redis-benchmark", "-s", sock, "-n", "10000", "-c", "20", "-r",
             "10000", "-d", "200", "-t", "set,get,lpush,lpop,incr,sadd",
             "-q", "--csv"], capture_output=True, text=True, timeout=TIMEOUT)
        assert bench.returncode == 0, bench.stderr
        rows = [line for line in bench.stdout.splitlines()
                if line and not line.startswith('"test"')]
        assert len(rows) >= 6, bench.stdout
        for i in range(50):
            assert cli(sock, "GET", "known:%d" % i) == "v%d" % (i * i)
        cli(sock, "DEL", "cnt")
        for _ in range(100):
            cli(sock, "INCR", "cnt")
        assert cli(sock, "GET", "cnt") == "100"
        assert cli(sock, "PING") == "PONG"
        cli(sock, "SHUTDOWN", "NOSAVE")
        srv.wait(timeout=TIMEOUT)
        assert srv.returncode == 0, srv.returncode
        watch.wait(timeout=TIMEOUT)
        assert watch.returncode == 0, watch.stderr.read()
        reps = sorted((f for f in os.listdir(d) if f.endswith(".json")),
                      key=lambda f: int(f[2:-5]))
        assert len(reps) >= 2, reps
        first = json.load(open(os.path.join(d, reps[0])))
        last = json.load(open(os.path.join(d, reps[-1])))
        assert last["state"] == "exited", last["state"]
        assert (last["totals"]["allocated_objects"] >
                first["totals"]["allocated_objects"] > 0)
        assert last["stacks"], "no stacks reported"
    finally:
        for p in (srv, watch):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
