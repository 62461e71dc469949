"""Many processes: -f prometheus and ymtop --serve, read by the programs
that consume them (Debian's prometheus server through PromQL, its
node_exporter's textfile collector, go tool pprof), and --serve under
hostile clients (malformed requests, huge headers, idle connections,
unknown pids): each answered with an error while a normal scrape still
works, and ymtop's memory stays bounded."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from test_reports import go_pprof
from ymlib import (AGENT, BUILD, YMTOP, Skip, Target, free_port,
                   rerun_isolated, run_tests, within, ymtop)

PROG = os.path.join(BUILD, "progs", "reports_prog")
RATE = "65536"
MiB = 1024 * 1024
# reports_prog holds 32 MiB through fill_blocks (inlined into hold_base:
# the display frame) and 4 MiB through hold_pages.
FILL = 32 * MiB
PAGES = 4 * MiB


def start(**kw):
    env = {"YM_SAMPLE_RATE": RATE}
    return Target([PROG], env=env, **kw)


class Dir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="ymtop-fleet-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


class Server:
    """ymtop --serve on a free loopback port (port 0: ymtop says which)."""

    def __init__(self, *extra, prefix=()):
        self.p = subprocess.Popen(list(prefix) + [YMTOP, "--serve", "127.0.0.1:0"] +
                                  list(extra),
                                  stderr=subprocess.PIPE, text=True)
        line = self.p.stderr.readline()
        m = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", line)
        assert m, (line, self.p.stderr.read() if self.p.poll() is not None else "")
        self.port = int(m.group(1))

    def get(self, path, method="GET", timeout=30):
        # As a Prometheus server says its timeout: the answer comes from
        # an update that started after the request whenever that update
        # completes within it (test_serve_deadline.py tests the rest).
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path),
                                     method=method, headers={
                                         "X-Prometheus-Scrape-Timeout-Seconds":
                                         str(min(timeout, 600))})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers

    def rss_kib(self):
        for line in open("/proc/%d/status" % self.p.pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def cpu_s(self):
        f = open("/proc/%d/stat" % self.p.pid).read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


# ---- the exposition, parsed as strictly as Prometheus does ----

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse(text):
    """{name: [(labels, value)]}, checking HELP/TYPE once per family, each
    family's samples grouped, no duplicate series."""
    fams, seen, order = {}, set(), []
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            name = line.split()[2]
            if line.startswith("# TYPE "):
                assert name not in fams, ("family twice", name)
                assert line.split()[3] in ("gauge", "counter"), line
                fams[name] = []
                order.append(name)
            continue
        m = LINE.match(line)
        assert m, ("bad line", line)
        name, body, value = m.groups()
        body = body or ""
        assert name == order[-1], ("family not grouped", name)
        labels, pos = {}, 0
        while pos < len(body):
            lm = LABEL.match(body, pos)
            assert lm, ("bad labels", body)
            labels[lm.group(1)] = lm.group(2)
            pos = lm.end()
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen, ("duplicate series", key)
        seen.add(key)
        fams[name].append((labels, float(value)))
    return fams


def stack_value(fams, pid, function, family="ymtop_stack_retained_bytes"):
    vals = [v for l, v in fams[family]
            if l["pid"] == str(pid) and l["function"] == function]
    assert len(vals) == 1, (function, fams[family])
    return vals[0]


def test_prometheus_format_batch_and_replace():
    t = start()
    try:
        text = ymtop("-b", "-n", "1", "-p", t.pid, "-f", "prometheus").stdout
        fams = parse(text)
        for name in ("ymtop_process_retained_bytes", "ymtop_process_in_use_bytes",
                     "ymtop_process_allocated_bytes_total",
                     "ymtop_process_requested_bytes_total",
                     "ymtop_process_allocations_total", "ymtop_process_alarms_total",
                     "ymtop_process_dropped_total", "ymtop_stack_retained_bytes",
                     "ymtop_stack_allocated_bytes_total"):
            assert name in fams, (name, list(fams))
            assert "# HELP %s " % name in text, name
        (labels, retained), = fams["ymtop_process_retained_bytes"]
        assert labels == {"pid": str(t.pid), "exe": "reports_prog"}, labels
        within(retained, FILL + PAGES, 0.15, "process retained")
        within(stack_value(fams, t.pid, "fill_blocks"), FILL, 0.15, "fill_blocks")
        loc = [l["location"] for l, _ in fams["ymtop_stack_retained_bytes"]
               if l["function"] == "fill_blocks"][0]
        assert re.fullmatch(r".*reports_prog\.c:\d+", loc), loc
        # --top 1: one display frame, the rest summed as (other).
        fams = parse(ymtop("-b", "-n", "1", "-p", t.pid, "-f", "prometheus",
                           "--top", "1").stdout)
        names = [l["function"] for l, _ in fams["ymtop_stack_retained_bytes"]]
        assert names == ["fill_blocks", "(other)"], names
        with Dir() as d:
            path = os.path.join(d, "ymtop.prom")
            ymtop("-b", "-n", "1", "-p", t.pid, "-f", "prometheus", "-o", path)
            ino = os.stat(path).st_ino
            # The one format that replaces its file: a new inode, renamed
            # over the old one.
            ymtop("-b", "-n", "1", "-p", t.pid, "-f", "prometheus", "-o", path)
            assert os.stat(path).st_ino != ino
            assert os.listdir(d) == ["ymtop.prom"], os.listdir(d)
            # Killed before the rename: the old file is whole, and the
            # temporary's name does not end in .prom (the textfile
            # collector reads only *.prom).
            old = open(path).read()
            env = dict(os.environ, YM_TEST_FAULT="report-commit")
            r = ymtop("-b", "-n", "1", "-p", t.pid, "-f", "prometheus", "-o", path,
                      check=False, env=env)
            assert r.returncode == -signal.SIGKILL, r
            assert open(path).read() == old
            left = [n for n in os.listdir(d) if n != "ymtop.prom"]
            assert len(left) == 1 and not left[0].endswith(".prom"), left
    finally:
        t.finish()


# python3 maps 64 MiB itself (mmap.mmap: kind mmap, as are pymalloc's
# arenas) and holds a 32 MiB bytearray (malloc).
PY_KINDS = """
import mmap, sys
m = mmap.mmap(-1, 64 << 20)
m.write(b"x" * (64 << 20))
b = bytearray(32 << 20)
print("ready", flush=True)
sys.stdin.readline()
"""


def test_kinds_apart_and_adding_up_read_by_promtool():
    """Every stack series names its kind; per process and kind the stack
    series add up to no more than the process series (mmap has its own);
    promtool accepts the exposition."""
    t = Target(["python3", "-c", PY_KINDS], env={"YM_SAMPLE_RATE": RATE})
    try:
        for top in ("50", "2"):
            text = ymtop("-b", "-n", "1", "-p", t.pid, "-f", "prometheus",
                         "--top", top).stdout
            fams = parse(text)
            (_, malloc), = fams["ymtop_process_retained_bytes"]
            (_, mapped), = fams["ymtop_process_mmap_retained_bytes"]
            within(mapped, 64 * MiB, 0.15, "python3's mmap")
            assert malloc >= 32 * MiB * 0.85, malloc
            for fam in ("ymtop_stack_retained_bytes",
                        "ymtop_stack_allocated_bytes_total"):
                kinds = {l["kind"] for l, _ in fams[fam]}
                assert kinds == {"malloc", "mmap"}, (fam, kinds)
            sums = {"malloc": 0, "mmap": 0}
            for l, v in fams["ymtop_stack_retained_bytes"]:
                sums[l["kind"]] += v
            assert sums["malloc"] <= malloc, (sums, malloc)
            assert sums["mmap"] <= mapped, (sums, mapped)
            # The whole of each kind is there: the top N plus (other).
            within(sums["malloc"], malloc, 0.001, "malloc stacks")
            within(sums["mmap"], mapped, 0.001, "mmap stacks")
            mm = [l["function"] for l, v in fams["ymtop_stack_retained_bytes"]
                  if l["kind"] == "mmap" and v >= 60 * MiB]
            assert mm == ["new_mmap_object"], mm
            if top == "2":
                # The top 2, an (other) and an (unresolved) per kind.
                assert len(fams["ymtop_stack_retained_bytes"]) <= 6, \
                    fams["ymtop_stack_retained_bytes"]
            r = subprocess.run(["promtool", "check", "metrics"], input=text,
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, (r.stdout, r.stderr)
    finally:
        t.finish()


def test_prometheus_batch_of_several_pids():
    """-b -f prometheus with several -p: one exposition with every
    process's series, labelled pid and exe as --serve's ?per_pid=1 labels
    them (two reports_prog and Debian's python3), read by promtool; the
    same written to -o, whose %p and %e are refused (one file for all);
    other formats take one -p.  The sampling state of each: the rate in
    force and the one asked for, and the cost budget of the one that has
    one (b)."""
    a = start()
    b = Target([PROG], env={"YM_SAMPLE_RATE": RATE, "YM_MAX_OVERHEAD": "50"})
    t = Target(["python3", "-c", PY_KINDS], env={"YM_SAMPLE_RATE": RATE})
    try:
        text = ymtop("-b", "-n", "1", "-p", a.pid, "-p", b.pid, "-p", t.pid,
                     "-f", "prometheus").stdout
        fams = parse(text)
        ret = {int(l["pid"]): (l["exe"], v)
               for l, v in fams["ymtop_process_retained_bytes"]}
        assert set(ret) == {a.pid, b.pid, t.pid}, ret
        assert ret[a.pid][0] == ret[b.pid][0] == "reports_prog", ret
        assert ret[t.pid][0].startswith("python3"), ret
        for p in (a, b):
            within(ret[p.pid][1], FILL + PAGES, 0.15, "retained %d" % p.pid)
            within(stack_value(fams, p.pid, "fill_blocks"), FILL, 0.15,
                   "fill_blocks %d" % p.pid)
        mapped = {int(l["pid"]): v for l, v in
                  fams["ymtop_process_mmap_retained_bytes"]}
        within(mapped[t.pid], 64 * MiB, 0.15, "python3's mmap")
        for fam in ("ymtop_stack_retained_bytes", "ymtop_process_allocations_total",
                    "ymtop_process_sample_rate_bytes",
                    "ymtop_process_requested_sample_rate_bytes"):
            assert {int(l["pid"]) for l, _ in fams[fam]} == set(ret), fam
        for fam in ("ymtop_process_sample_rate_bytes",
                    "ymtop_process_requested_sample_rate_bytes",
                    "ymtop_process_cost_budget_percent"):
            assert "# HELP %s " % fam in text and "# TYPE %s gauge" % fam in text, fam
        asked = {int(l["pid"]): v for l, v in
                 fams["ymtop_process_requested_sample_rate_bytes"]}
        assert set(asked.values()) == {float(RATE)}, asked
        # A budget of 50 % leaves the rate as asked for at this load;
        # whatever it did, the rate in force is never shorter.
        for l, v in fams["ymtop_process_sample_rate_bytes"]:
            assert v >= float(RATE), (l, v)
        budget = {int(l["pid"]): v for l, v in
                  fams["ymtop_process_cost_budget_percent"]}
        assert budget == {b.pid: 50.0}, budget
        r = subprocess.run(["promtool", "check", "metrics"], input=text,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (r.stdout, r.stderr)
        with Dir() as d:
            path = os.path.join(d, "fleet.prom")
            ymtop("-b", "-n", "1", "-p", a.pid, "-p", b.pid, "-f", "prometheus",
                  "-o", path)
            pids = {l["pid"] for l, _ in
                    parse(open(path).read())["ymtop_process_retained_bytes"]}
            assert pids == {str(a.pid), str(b.pid)}, pids
            r = ymtop("-b", "-n", "1", "-p", a.pid, "-p", b.pid, "-f", "prometheus",
                      "-o", os.path.join(d, "x-%p.prom"), check=False)
            assert r.returncode == 2 and "%p and %e" in r.stderr, r
            assert os.listdir(d) == ["fleet.prom"], os.listdir(d)
        r = ymtop("-b", "-n", "1", "-p", a.pid, "-p", b.pid, "-f", "json",
                  check=False)
        assert r.returncode == 2 and "-b -f prometheus only" in r.stderr, r
    finally:
        t.finish()
        a.finish()
        b.finish()


def test_node_exporter_textfile_serves_the_file():
    exe = shutil.which("prometheus-node-exporter")
    if not exe:
        raise Skip("prometheus-node-exporter is not installed")
    t = start()
    with Dir() as d:
        try:
            ymtop("-b", "-n", "1", "-p", t.pid, "-f", "prometheus", "-o",
                  os.path.join(d, "ymtop.prom"))
        finally:
            t.finish()
        port = free_port()
        ne = subprocess.Popen([exe, "--web.listen-address=127.0.0.1:%d" % port,
                               "--collector.disable-defaults", "--collector.textfile",
                               "--collector.textfile.directory=" + d],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            body = None
            for _ in range(100):
                try:
                    body = urllib.request.urlopen(
                        "http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
                    break
                except OSError:
                    time.sleep(0.1)
            assert body, ne.stderr.read() if ne.poll() is not None else "no answer"
            # node_exporter read the file without complaint ...
            err = [l for l in body.splitlines()
                   if l.startswith("node_textfile_scrape_error")]
            assert err == ["node_textfile_scrape_error 0"], err
            # ... and serves its series.
            m = re.search(r'^ymtop_stack_retained_bytes\{exe="reports_prog",'
                          r'function="fill_blocks",kind="malloc",location="[^"]*",'
                          r'pid="%d"\} (\S+)$'
                          % t.pid, body, re.M)
            assert m, [l for l in body.splitlines() if "ymtop_" in l]
            within(float(m.group(1)), FILL, 0.15, "fill_blocks via node_exporter")
        finally:
            ne.terminate()
            ne.wait(timeout=20)


def test_prometheus_server_scrapes_serve():
    """Debian's prometheus scrapes --serve every second (its timeout as
    long): alone in a pid namespace and a /dev/shm of its own, since the
    other agent processes of a shared machine would be served too and
    can make a scrape outlast that second."""
    if rerun_isolated(__file__, "test_prometheus_server_scrapes_serve", pid_ns=True,
                      timeout=300):
        return
    exe = shutil.which("prometheus")
    if not exe:
        raise Skip("prometheus is not installed")
    t = start()
    other = start()
    srv = Server()
    with Dir() as d:
        port = free_port()
        conf = os.path.join(d, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: ymtop\n"
                    "    params:\n      per_pid: ['1']\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % srv.port)
        prom = subprocess.Popen([exe, "--config.file=" + conf,
                                 "--storage.tsdb.path=" + os.path.join(d, "data"),
                                 "--web.listen-address=127.0.0.1:%d" % port],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            q = 'ymtop_stack_retained_bytes{function="fill_blocks",pid="%d"}' % t.pid
            url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (
                port, urllib.parse.quote(q))
            result = []
            end = time.time() + 90
            while time.time() < end and not result:
                time.sleep(1)
                try:
                    ans = json.load(urllib.request.urlopen(url, timeout=10))
                except OSError:
                    continue
                assert ans["status"] == "success", ans
                result = ans["data"]["result"]
            assert result, ("no sample", prom.stderr.read() if prom.poll() is not None
                            else "prometheus has no sample after 90 s")
            assert len(result) == 1, result
            assert result[0]["metric"]["exe"] == "reports_prog", result
            assert result[0]["metric"]["job"] == "ymtop", result
            within(float(result[0]["value"][1]), FILL, 0.15, "fill_blocks via PromQL")
            # Both processes in one scrape.
            q = 'count(ymtop_process_retained_bytes{pid=~"%d|%d"})' % (t.pid, other.pid)
            ans = json.load(urllib.request.urlopen(
                "http://127.0.0.1:%d/api/v1/query?query=%s" % (port, urllib.parse.quote(q)),
                timeout=10))
            assert ans["data"]["result"][0]["value"][1] == "2", ans
        finally:
            prom.terminate()
            prom.wait(timeout=30)
            srv.stop()
            t.finish()
            other.finish()


def test_serve_follows_processes_and_pprof():
    # In pid and mount namespaces of their own: other sessions' agent
    # processes would be served too, and their first update could outlast
    # the scrape's timeout.
    if rerun_isolated(__file__, "test_serve_follows_processes_and_pprof",
                      pid_ns=True, timeout=600):
        return
    a = start()
    srv = Server()
    b = None
    try:
        st, body, hdr = srv.get("/metrics?per_pid=1")
        assert st == 200, st
        assert hdr["Content-Type"].startswith("text/plain; version=0.0.4"), hdr
        pids = {l["pid"] for l, _ in parse(body.decode())["ymtop_process_retained_bytes"]}
        assert str(a.pid) in pids, pids
        # Exactly one process of ours... (others may run the agent: only
        # when there is one in all is the pid optional).
        b = start()
        fams = parse(srv.get("/metrics?per_pid=1")[1].decode())
        pids = {l["pid"] for l, _ in fams["ymtop_process_retained_bytes"]}
        assert {str(a.pid), str(b.pid)} <= pids, pids
        st, body, _ = srv.get("/debug/pprof/heap")
        assert st == 400, st
        assert ("%d reports_prog" % a.pid).encode() in body, body
        st, body, _ = srv.get("/debug/pprof/")
        assert st == 200 and ("%d reports_prog" % b.pid).encode() in body, body
        st, body, hdr = srv.get("/debug/pprof/heap?pid=%d" % a.pid)
        assert st == 200 and body[:2] == b"\x1f\x8b", (st, body[:10])
        a_pid = a.pid
        a.finish()
        a = None
        fams = parse(srv.get("/metrics?per_pid=1")[1].decode())
        pids = {l["pid"] for l, _ in fams["ymtop_process_retained_bytes"]}
        assert str(b.pid) in pids and str(a_pid) not in pids, pids
        assert srv.get("/debug/pprof/heap?pid=%d" % a_pid)[0] == 404
        gone = [l for l, _ in fams["ymtop_stack_retained_bytes"]
                if l["pid"] not in pids]
        assert not gone, gone
    finally:
        srv.stop()
        for t in (a, b):
            if t:
                t.finish()


def test_go_tool_pprof_reads_the_endpoint_and_p_injects():
    if shutil.which("go") is None:
        raise Skip("go is not installed: go tool pprof not run")
    # Started without the agent: --serve -p injects it, as -p does.
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    p = subprocess.Popen([PROG], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=e, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        srv = Server("-p", str(p.pid))
        try:
            st, body, _ = srv.get("/debug/pprof/")
            assert st == 200 and body.startswith(b"%d reports_prog" % p.pid), body
            # Injected after the allocations: the program allocates
            # again on "jump" (64 MiB at jump_site), which the agent sees.
            p.stdin.write("jump\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "jumped"
            out = go_pprof("-top", "-sample_index=inuse_space",
                           "http://127.0.0.1:%d/debug/pprof/heap" % srv.port)
            assert "Type: inuse_space" in out, out
            assert re.search(r"\sjump_site\s*$", out, re.M), out
        finally:
            srv.stop()
    finally:
        p.communicate("quit\n", timeout=30)
    # An agent process from the start: its known sites.
    t = start()
    srv = Server("-p", str(t.pid))
    try:
        out = go_pprof("-top", "-sample_index=inuse_space",
                       "http://127.0.0.1:%d/debug/pprof/heap" % srv.port)
        for name in ("hold_pages", "fill_blocks"):
            assert re.search(r"\s%s( \(inline\))?\s*$" % name, out, re.M), (name, out)
    finally:
        srv.stop()
        t.finish()


def raw(port, data, src="127.0.0.1", timeout=10):
    """Send data, return what comes back until the server closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                 source_address=(src, 0))
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            # The server answered and closed before reading everything
            # (a 413 or 431 to an oversized request): read its answer.
            pass
        out = b""
        while True:
            try:
                c = s.recv(65536)
            except ConnectionResetError:
                break
            if not c:
                break
            out += c
        return out
    finally:
        s.close()


def status(resp):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", resp)
    return int(m.group(1)) if m else None


def test_hostile_clients_get_errors_and_bounded_memory():
    t = start()
    srv = Server("-p", str(t.pid))
    idle = []
    try:
        assert srv.get("/metrics")[0] == 200
        rss0 = srv.rss_kib()
        # Malformed requests: 400 (a request line that is not HTTP at all
        # is closed without an answer: libmicrohttpd cannot tell what
        # protocol it would answer in), an unknown version 505.
        for junk, want in (
                (b"GARBAGE\r\n\r\n", (None,)),
                (b"GET /x y z HTTP/1.1\r\nHost: a\r\n\r\n", (None, 400)),
                (b"GARBAGE / HTTP/1.1\r\n\r\n", (400,)),
                (b"GET /metrics HTTP/1.1\r\n\r\n", (400,)),   # no Host
                (b"GET /metrics HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", (400,)),
                (b"GET /metrics HTTP/9.9\r\nHost: x\r\n\r\n", (505,))):
            st = status(raw(srv.port, junk))
            assert st in want, (junk, st)
        # Other methods: 405 with Allow; unknown paths and pids: 404; bad
        # pids: 400.
        st, _, hdr = srv.get("/metrics", method="POST")
        assert st == 405 and hdr["Allow"] == "GET, HEAD", (st, hdr)
        assert srv.get("/metrics", method="DELETE")[0] == 405
        assert srv.get("/nope")[0] == 404
        assert srv.get("/debug/pprof/heap?pid=4194304")[0] == 404
        assert srv.get("/debug/pprof/heap?pid=%d" % srv.p.pid)[0] == 404
        for bad in ("abc", "-1", "0", "99999999", "1e3", "%00", "1%200"):
            assert srv.get("/debug/pprof/heap?pid=" + bad)[0] == 400, bad
        # Huge headers, many times: 431 (or 413/400), never a crash, and
        # memory stays where it was.
        big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + \
            b"\r\n\r\n"
        for _ in range(20):
            st = status(raw(srv.port, big))
            assert st in (400, 413, 431) or st is None, st
        many = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + \
            b"".join(b"X-%d: y\r\n" % i for i in range(20000)) + b"\r\n"
        st = status(raw(srv.port, many))
        assert st in (400, 413, 431) or st is None, st
        # Binary junk (a TLS hello, NULs) waits for a request line that
        # never ends: closed with the idle ones below, at the timeout.
        junk = socket.create_connection(("127.0.0.1", srv.port))
        junk.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x00\xff")
        idle.append(junk)
        # 200 idle connections from another loopback address: the per-
        # address limit turns most away, and a scrape from 127.0.0.1 is
        # answered meanwhile, promptly.
        for _ in range(200):
            s = socket.socket()
            s.settimeout(5)
            s.bind(("127.0.0.2", 0))
            try:
                s.connect(("127.0.0.1", srv.port))
                s.sendall(b"GET /metrics HTTP/1.1\r\n")   # never finished
                idle.append(s)
            except OSError:
                s.close()
        t0 = time.time()
        st, body, _ = srv.get("/metrics", timeout=10)
        assert st == 200 and b"fill_blocks" in body, st
        assert time.time() - t0 < 5, time.time() - t0
        # A slowloris from our own address does not stall the others.
        slow = socket.create_connection(("127.0.0.1", srv.port))
        slow.sendall(b"GET /met")
        assert srv.get("/metrics", timeout=10)[0] == 200
        slow.close()
        for _ in range(50):
            assert srv.get("/metrics")[0] == 200
        rss1 = srv.rss_kib()
        print("  ymtop VmRSS %d KiB after the first scrape, %d KiB after the "
              "hostile clients" % (rss0, rss1))
        assert rss1 - rss0 < 16 * 1024, (rss0, rss1)
        # The idle connections time out (SERVE_TIMEOUT_S = 10).
        time.sleep(12)
        closed = 0
        for s in idle:
            s.settimeout(5)
            try:
                closed += s.recv(1) == b""
            except OSError:
                closed += 1
        assert closed == len(idle), (closed, len(idle))
        assert srv.p.poll() is None
    finally:
        for s in idle:
            s.close()
        assert srv.stop() == 0
        t.finish()


def test_serve_children_serves_a_prefork_tree():
    other = start()
    t = Target([os.path.join(BUILD, "progs", "prefork"), "3"],
               env={"YM_SAMPLE_RATE": RATE})
    srv = Server("-p", str(t.pid), "--children")
    try:
        fams = parse(srv.get("/metrics?per_pid=1")[1].decode())
        procs = {l["pid"]: v for l, v in fams["ymtop_process_retained_bytes"]}
        assert len(procs) == 4 and str(t.pid) in procs, procs
        assert str(other.pid) not in procs, procs
        assert {l["exe"] for l, _ in fams["ymtop_process_retained_bytes"]} == \
            {"prefork"}, fams["ymtop_process_retained_bytes"]
        # Each worker holds 2 MiB at worker_site, the master none there.
        workers = [v for l, v in fams["ymtop_stack_retained_bytes"]
                   if l["function"] == "worker_site"]
        assert len(workers) == 3, fams["ymtop_stack_retained_bytes"]
        # 192 blocks of 32 KiB at a 64 KiB rate: each sampled with p =
        # 1 - e^-0.5, the estimate's relative standard deviation
        # sqrt((1 - p) / (192 p)) = 9 %; 4 of them (25 % failed one run in
        # a few hundred).
        within(sum(workers), 6 * MiB, 0.36, "worker_site in the 3 workers")
        st, body, _ = srv.get("/debug/pprof/heap")
        assert st == 400 and body.count(b" prefork ") == 4, body
    finally:
        srv.stop()
        t.finish()
        other.finish()


def test_serve_usage_errors():
    for args in (["--serve", "99999"], ["--serve", "nohost:80"], ["--serve", ""],
                 ["--serve", "80", "-b"], ["--serve", "80", "-f", "json"],
                 ["--serve", "80", "--rate", "4k"], ["--serve", "1.2.3:80"],
                 ["--serve", "80", "--children"], ["-b", "-p", "1", "--children"]):
        r = ymtop(*args, check=False)
        assert r.returncode == 2, (args, r)
        assert r.stderr.startswith("ymtop: ") and r.stderr.count("\n") == 1, r.stderr
    r = ymtop("-b", "-f", "prometheus", "-p", "1", "--weight", "allocated", check=False)
    assert r.returncode == 2, r

# ---- a host full of processes ----

ALLOCS = os.path.join(BUILD, "progs", "allocs")


def fleet_of(n):
    """n preloaded processes of one program (three allocation sites
    each), started and ready; two descriptors each on our side."""
    env = dict(os.environ, LD_PRELOAD=AGENT, YM_SAMPLE_RATE="1",
               YM_EARLY_SEGMENT="1")
    procs = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(
                [ALLOCS, "malloc:2:1000", "calloc:2:2000", "fail:2:3000"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env=env, text=True))
        for p in procs:
            assert p.stdout.readline() == "ready\n"
    except BaseException:
        end_fleet(procs)
        raise
    return procs


def end_fleet(procs):
    for p in procs:
        p.stdin.close()
    for p in procs:
        p.wait()


def served(srv):
    fams = parse(srv.get("/metrics?per_pid=1", timeout=600)[1].decode())
    pids = {int(l["pid"]) for l, _ in fams["ymtop_process_retained_bytes"]}
    (labels, skipped), = fams["ymtop_processes_skipped"]
    return fams, pids, int(skipped), labels["reason"]


def test_serve_serves_300_processes():
    """300 processes of one program, all served (once at most 256 were,
    and nothing said so), each with its three sites named; none skipped.
    In pid and mount namespaces of their own: nobody else's count."""
    if rerun_isolated(__file__, "test_serve_serves_300_processes",
                      pid_ns=True, timeout=1200):
        return
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    procs = fleet_of(300)
    srv = None
    try:
        srv = Server()
        fams, pids, skipped, reason = served(srv)
        assert pids == {p.pid for p in procs}, len(pids)
        assert skipped == 0 and reason == "", (skipped, reason)
        for site in ("malloc_site", "calloc_site", "fail_site"):
            named = {l["pid"] for l, _ in fams["ymtop_stack_retained_bytes"]
                     if site in l["function"]}
            assert len(named) == 300, (site, len(named))
    finally:
        if srv:
            srv.stop()
        end_fleet(procs)


def test_serve_copies_only_what_changed():
    """A process whose segment did not change since the last scrape is not
    copied again (ymtop_segment_snapshots_total{stacks="kept"}) and its
    refresh reads the segment 3 times (ymtop_segment_reads_total
    {by="refresh"}: the front, with the header, control block and thread
    slots; the stripes; the modules), and a change of one process's
    figures between two scrapes is seen at the second.  In pid and mount
    namespaces of their own: nobody else's process is served."""
    if rerun_isolated(__file__, "test_serve_copies_only_what_changed",
                      pid_ns=True, timeout=600):
        return
    procs = fleet_of(2)
    srv = None
    try:
        # No borrowed thread: the idle processes make no call at all.
        srv = Server(prefix=["env", "YM_NO_BORROW=1"])

        def scrape():
            fams = parse(srv.get("/metrics?per_pid=1")[1].decode())
            ret = {int(l["pid"]): v for l, v in
                   fams["ymtop_process_retained_bytes"]}
            snaps = {l["stacks"]: v for l, v in
                     fams["ymtop_segment_snapshots_total"]}
            reads = {l["by"]: v for l, v in fams["ymtop_segment_reads_total"]}
            snaps["reads"] = reads["refresh"]
            return ret, snaps
        held = 2 * 1000 + 2 * 2000 + 2 * 3000   # fleet_of's blocks
        ret1, snaps1 = scrape()
        assert set(ret1) == {p.pid for p in procs}, ret1
        assert min(ret1.values()) >= held, ret1
        ret2, snaps2 = scrape()
        assert ret2 == ret1, (ret1, ret2)
        assert snaps2["kept"] - snaps1["kept"] == 2, (snaps1, snaps2)
        assert snaps2["copied"] == snaps1["copied"], (snaps1, snaps2)
        # 5 a process with the second looks at the sequence words and at
        # alarms_written (10 when the header, thread slots, control block
        # and allocator's statistics had reads of their own), and 2 more
        # to check the calls before asking.
        assert snaps2["reads"] - snaps1["reads"] == 2 * 3, (snaps1, snaps2)
        a, b = procs
        a.stdin.write("free\n")
        a.stdin.flush()
        assert a.stdout.readline() == "ready\n"
        ret3, snaps3 = scrape()
        assert ret3 == {a.pid: ret1[a.pid] - held, b.pid: ret1[b.pid]}, ret3
        assert snaps3["copied"] - snaps2["copied"] == 1, (snaps2, snaps3)
        assert snaps3["kept"] - snaps2["kept"] == 1, (snaps2, snaps3)
    finally:
        if srv:
            srv.stop()
        end_fleet(procs)


def test_serve_asks_no_process_whose_figures_are_current():
    """Once every process's allocator figures are current (a borrowed
    thread took them; the processes make no call since), a scrape reads
    each segment 3 times, for its snapshot, and none to ask for them
    (ymtop_segment_reads_total: 7 when the call counts were checked
    before the snapshots, with the snapshots' second looks), and the
    figures stay current, their age 0.  In pid and mount namespaces of
    their own: nobody else's process is served."""
    if rerun_isolated(__file__,
                      "test_serve_asks_no_process_whose_figures_are_current",
                      pid_ns=True, timeout=600):
        return
    procs = fleet_of(2)
    srv = None
    try:
        srv = Server()

        def scrape():
            fams = parse(srv.get("/metrics?per_pid=1")[1].decode())
            age = {int(l["pid"]): v for l, v in
                   fams["ymtop_process_heap_age_seconds"]}
            reads = {l["by"]: v for l, v in fams["ymtop_segment_reads_total"]}
            return age, reads
        # A borrow a process a second at most (SESSION_BORROW_MIN_S).
        for _ in range(40):
            age, reads1 = scrape()
            if len(age) == 2 and max(age.values()) == 0:
                break
            time.sleep(0.5)
        assert len(age) == 2 and max(age.values()) == 0, age
        age, reads2 = scrape()
        assert age == {p.pid: 0 for p in procs}, age
        assert reads2["asking"] == reads1["asking"], (reads1, reads2)
        assert reads2["refresh"] - reads1["refresh"] == 2 * 3, (reads1, reads2)
    finally:
        if srv:
            srv.stop()
        end_fleet(procs)


def test_serve_proc_reads_follow_what_changed():
    """An unchanged process costs its refresh its stat and status, not
    its maps, smaps_rollup, threads' names or the boot clock's file
    (ymtop_proc_reads_total{by="refresh"}); yet a figure that changes is
    current at the next scrape: RSS that grows, and a process that exec'd
    a program without the agent is no longer served.  In pid and mount
    namespaces of their own: nobody else's process is served."""
    if rerun_isolated(__file__, "test_serve_proc_reads_follow_what_changed",
                      pid_ns=True, timeout=600):
        return
    procs = fleet_of(4)
    env = dict(os.environ, LD_PRELOAD=AGENT, YM_SAMPLE_RATE="1",
               YM_EARLY_SEGMENT="1")
    # grow: 16 MiB more, written; exec: /bin/sleep, without the agent.
    script = ("import os, sys\nheld = []\nprint('ready', flush=True)\n"
              "for line in sys.stdin:\n"
              "    if line.startswith('grow'):\n"
              "        held.append(b'\\1' * (16 << 20))\n"
              "        print('ready', flush=True)\n"
              "    elif line.startswith('exec'):\n"
              "        os.execve('/bin/sleep', ['sleep', '60'], {})\n")
    ex = subprocess.Popen([sys.executable, "-c", script],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, env=env, text=True)
    srv = None
    try:
        assert ex.stdout.readline() == "ready\n"
        srv = Server(prefix=["env", "YM_NO_BORROW=1"])

        def scrape():
            fams = parse(srv.get("/metrics?per_pid=1")[1].decode())
            rss = {int(l["pid"]): v for l, v in
                   fams["ymtop_process_rss_bytes"]}
            reads = {l["by"]: v for l, v in fams["ymtop_proc_reads_total"]}
            return rss, reads
        rss1, reads1 = scrape()
        assert set(rss1) == {p.pid for p in procs} | {ex.pid}, rss1
        rss2, reads2 = scrape()
        n = len(rss2)
        per = (reads2["refresh"] - reads1["refresh"]) / n
        # stat and status; the maps when the stat moved or 5 s passed
        # (a scrape may fall there); 7 and more a process read them all.
        assert per <= 3, (reads1, reads2)
        ex.stdin.write("grow\n")
        ex.stdin.flush()
        assert ex.stdout.readline() == "ready\n"
        rss3, _ = scrape()
        assert rss3[ex.pid] >= rss2[ex.pid] + 15 * MiB, (rss2, rss3)
        ex.stdin.write("exec\n")
        ex.stdin.flush()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open("/proc/%d/comm" % ex.pid) as f:
                if f.read().strip() == "sleep":
                    break
            time.sleep(0.05)
        rss4, _ = scrape()
        assert set(rss4) == {p.pid for p in procs}, rss4
    finally:
        if srv:
            srv.stop()
        ex.kill()
        ex.wait()
        end_fleet(procs)


def test_serve_says_what_it_does_not_serve():
    """Above the bound on descriptors (ulimit -n, see fleet.h), the
    processes not served are counted in /metrics with the reason."""
    if rerun_isolated(__file__, "test_serve_says_what_it_does_not_serve",
                      pid_ns=True, timeout=600):
        return
    procs = fleet_of(40)
    srv = None
    try:
        # 150 descriptors leave room for 22 segments (fleet.h: the
        # symbolizer's files and connections are kept free).
        srv = Server(prefix=["prlimit", "--nofile=150:150"])
        _, pids, skipped, reason = served(srv)
        assert 0 < len(pids) < 40, len(pids)
        assert pids <= {p.pid for p in procs}
        assert len(pids) + skipped == 40, (len(pids), skipped)
        assert "ulimit -n 150" in reason, reason
    finally:
        if srv:
            srv.stop()
        end_fleet(procs)


def test_serve_counts_processes_that_have_sampled_nothing():
    """A process under the agent that has sampled nothing has no segment
    (PostgreSQL's checkpointer, walwriter, autovacuum launcher): /metrics
    cannot serve it, and says how many such processes there are, also in
    the aggregate, beside one it serves."""
    if rerun_isolated(__file__, "test_serve_counts_processes_that_have_sampled_nothing",
                      pid_ns=True):
        return
    from test_lazy import NEVER, Lazy
    quiet = Lazy([PROG], env={"YM_SAMPLE_RATE": NEVER})
    busy = start()
    srv = None
    try:
        assert not os.path.exists("/dev/shm/ymtop-%d" % quiet.pid)
        srv = Server()
        for q in ("", "?per_pid=1"):
            fams = parse(srv.get("/metrics" + q)[1].decode())
            (_, n), = fams["ymtop_processes_unstarted"]
            assert n == 1, (q, n)
        assert {int(l["pid"]) for l, _ in
                served(srv)[0]["ymtop_process_retained_bytes"]} == {busy.pid}
    finally:
        if srv:
            srv.stop()
        busy.finish()
        quiet.finish()


def unstarted(srv):
    (_, n), = parse(srv.get("/metrics")[1].decode())["ymtop_processes_unstarted"]
    return n


def test_serve_unstarted_sees_an_exec_and_a_reused_pid():
    """The listing of processes that have sampled nothing remembers which
    processes have no agent in their environment (target.c), so that it
    reads only new ones; a process that exec()s a program under the
    agent, and a new process on the pid of one it remembers, are read
    again and counted."""
    if rerun_isolated(__file__, "test_serve_unstarted_sees_an_exec_and_a_reused_pid",
                      pid_ns=True):
        return
    from test_lazy import NEVER, Lazy, lazy_env
    busy = start()
    srv = None
    plain = later = None
    try:
        srv = Server()
        # Without the agent, then exec'ing a program under it (same pid,
        # same start time: only its stat's stack and environment moved).
        env = dict(lazy_env(YM_SAMPLE_RATE=NEVER))
        plain = subprocess.Popen(
            [sys.executable, "-c",
             "import os, sys\n"
             "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
             "sys.stdin.readline()\n"
             "os.execve(%r, [%r], %r)\n" % (PROG, PROG, env)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
        assert plain.stdout.readline() == "ready\n"
        assert unstarted(srv) == 0
        assert unstarted(srv) == 0   # remembered now
        plain.stdin.write("\n")
        plain.stdin.flush()
        assert plain.stdout.readline() == "ready\n"   # reports_prog's
        assert not os.path.exists("/dev/shm/ymtop-%d" % plain.pid)
        assert unstarted(srv) == 1
        plain.stdin.close()
        plain.wait()
        plain = None
        assert unstarted(srv) == 0
        # A process without the agent, remembered, then gone; a process
        # under the agent on its pid (this pid namespace is ours: the next
        # pid is ours to choose).
        for _ in range(5):
            gone = subprocess.Popen(["sleep", "1000"])
            assert unstarted(srv) == 0
            assert unstarted(srv) == 0
            gone.kill()
            gone.wait()
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(gone.pid - 1))
            later = Lazy([PROG], env={"YM_SAMPLE_RATE": NEVER})
            if later.pid == gone.pid:
                break
            later.finish()
            later = None
        assert later, "no pid could be reused"
        assert unstarted(srv) == 1
    finally:
        if srv:
            srv.stop()
        if plain:
            plain.kill()
            plain.wait()
        if later:
            later.finish()
        busy.finish()


def test_serve_borrows_for_every_idle_process_in_turn():
    """Idle processes' allocator figures come through borrowed threads, a
    budget of borrowing an update (fleet.h); the refreshes that borrow
    nothing do not spend it, so every process has its figures in turn,
    however long the others take (a tiny budget: one borrow a scrape)."""
    if rerun_isolated(__file__, "test_serve_borrows_for_every_idle_process_in_turn",
                      pid_ns=True):
        return
    procs = [start() for _ in range(4)]
    srv = None
    try:
        srv = Server(prefix=["env", "YM_FLEET_BORROW_S=0.000001"])
        ages = {}
        for _ in range(12):
            fams = parse(srv.get("/metrics?per_pid=1")[1].decode())
            ages = {int(l["pid"]): v for l, v in
                    fams.get("ymtop_process_heap_age_seconds", [])}
            if len(ages) == 4 and not any(ages.values()):
                break
        assert set(ages) == {p.pid for p in procs}, ages
        assert not any(ages.values()), ages
    finally:
        if srv:
            srv.stop()
        for p in procs:
            p.finish()


def test_batch_without_pid_counts_every_process():
    """ymtop -b among more agent processes than it lists names them
    all in its count and says how many it did not list."""
    if rerun_isolated(__file__, "test_batch_without_pid_counts_every_process",
                      pid_ns=True, timeout=600):
        return
    procs = fleet_of(70)
    try:
        r = ymtop("-b", "-n", "1", check=False)
        assert r.returncode == 1, r
        assert "70 processes run the agent" in r.stderr, r.stderr
        assert len(re.findall(r"(?m)^ +\d+  allocs$", r.stderr)) == 64, r.stderr
        assert "... and 6 more" in r.stderr, r.stderr
    finally:
        end_fleet(procs)


# ---- series that survive pid churn: per executable and cgroup ----

def series(fams, name, **want):
    return [(l, v) for l, v in fams.get(name, [])
            if all(l.get(k) == v2 for k, v2 in want.items())]


def test_serve_aggregates_per_program_and_per_pid_on_request():
    """Two processes of one program are one set of series labelled exe and
    cgroup, no pid, their values summed; ?per_pid=1 gives two.  In a pid
    namespace of its own: nobody else's reports_prog is summed in."""
    if rerun_isolated(__file__,
                      "test_serve_aggregates_per_program_and_per_pid_on_request",
                      pid_ns=True, timeout=600):
        return
    a, b = start(), start()
    srv = Server()
    try:
        fams = parse(srv.get("/metrics")[1].decode())
        procs = series(fams, "ymtop_process_retained_bytes", exe="reports_prog")
        assert len(procs) == 1, fams["ymtop_process_retained_bytes"]
        labels, agg = procs[0]
        assert "pid" not in labels and "cgroup" in labels, labels
        for name in fams:
            for l, _ in fams[name]:
                assert "pid" not in l, (name, l)
        fill = series(fams, "ymtop_stack_retained_bytes", function="fill_blocks")
        assert len(fill) == 1, fams["ymtop_stack_retained_bytes"]
        within(fill[0][1], 2 * FILL, 0.15, "fill_blocks of both processes")
        per = parse(srv.get("/metrics?per_pid=1")[1].decode())
        each = {l["pid"]: v for l, v in per["ymtop_process_retained_bytes"]}
        assert set(each) == {str(a.pid), str(b.pid)}, each
        within(agg, sum(each.values()), 0.05, "aggregate against per pid")
        assert len(series(per, "ymtop_stack_retained_bytes",
                          function="fill_blocks")) == 2
        # Per label set and kind the stack series add up to no more than
        # the process series.
        for kind, proc in (("malloc", "ymtop_process_retained_bytes"),
                           ("mmap", "ymtop_process_mmap_retained_bytes")):
            total = sum(v for _, v in series(fams, "ymtop_stack_retained_bytes",
                                             exe="reports_prog", kind=kind))
            assert total <= series(fams, proc, exe="reports_prog")[0][1], kind
        assert srv.get("/metrics?per_pid=2")[0] == 400
    finally:
        srv.stop()
        a.finish()
        b.finish()


def test_serve_counters_do_not_fall_when_a_process_exits():
    """The aggregate's counters keep an exited process's counts: a counter
    summed over the running processes would fall when one exits, which
    PromQL's rate() reads as a reset (a spike).  Also with a per-pid
    scrape in between (it notes the counters too)."""
    if rerun_isolated(__file__,
                      "test_serve_counters_do_not_fall_when_a_process_exits",
                      pid_ns=True, timeout=600):
        return
    procs = [start(), start(), start()]
    srv = Server()
    try:
        def counters():
            fams = parse(srv.get("/metrics")[1].decode())
            out = {}
            for name in ("ymtop_process_allocated_bytes_total",
                         "ymtop_process_requested_bytes_total",
                         "ymtop_process_allocations_total"):
                (l, v), = series(fams, name, exe="reports_prog")
                out[name] = v
            return out, fams

        def served():
            per = parse(srv.get("/metrics?per_pid=1")[1].decode())
            return per, {int(l["pid"]) for l, _ in
                         per["ymtop_process_retained_bytes"]}
        before, _ = counters()
        assert before["ymtop_process_allocated_bytes_total"] >= 3 * FILL, before
        # An exit seen first by an aggregate scrape.
        gone = procs.pop(0)
        gone.finish()
        after, _ = counters()
        assert served()[1] == {p.pid for p in procs}
        for name, v in before.items():
            assert after[name] >= v, (name, v, after[name])
        # An exit seen first by a per-pid scrape.
        gone = procs.pop(0)
        gone.finish()
        per, pids = served()
        assert pids == {procs[0].pid}, pids
        last, fams = counters()
        for name, v in after.items():
            assert last[name] >= v, (name, v, last[name])
        # The gauges are the running process's alone.
        (_, ret), = series(fams, "ymtop_process_retained_bytes", exe="reports_prog")
        within(ret, per["ymtop_process_retained_bytes"][0][1], 0.05, "retained")
    finally:
        srv.stop()
        for t in procs:
            t.finish()


def own_cgroup_dir():
    """The directory of our cgroup in the hierarchy ymtop labels (the v1
    memory controller's when there is one, else the unified one), and its
    path; None when no such hierarchy is mounted writable."""
    v1 = v2 = None
    for line in open("/proc/self/cgroup"):
        hid, ctl, path = line.rstrip("\n").split(":", 2)
        if hid == "0" and ctl == "":
            v2 = path
        elif "memory" in ctl.split(","):
            v1 = path
    if v1 is not None:
        root, path = "/sys/fs/cgroup/memory", v1
    elif v2 is not None:
        root, path = "/sys/fs/cgroup", v2
    else:
        return None
    d = root + path
    if not os.path.exists(os.path.join(d, "cgroup.procs")) or \
            not os.access(d, os.W_OK):
        return None
    return d, path


def test_serve_labels_the_cgroup():
    """A process moved into a child cgroup is its own series, with the
    cgroup's path as label; the other process of the program is apart."""
    if rerun_isolated(__file__, "test_serve_labels_the_cgroup", pid_ns=True,
                      timeout=600):
        return
    own = own_cgroup_dir()
    if not own:
        raise Skip("no writable cgroup hierarchy under /sys/fs/cgroup")
    d, path = own
    child = os.path.join(d, "ymtop-test-%d" % os.getpid())
    try:
        os.mkdir(child)
    except OSError as e:
        raise Skip("cannot make a child cgroup: %s" % e)
    a, b = start(), start()
    srv = None
    try:
        with open(os.path.join(child, "cgroup.procs"), "w") as f:
            f.write("%d\n" % b.pid)
        want = path.rstrip("/") + "/ymtop-test-%d" % os.getpid()
        srv = Server()
        fams = parse(srv.get("/metrics")[1].decode())
        procs = series(fams, "ymtop_process_retained_bytes", exe="reports_prog")
        assert sorted(l["cgroup"] for l, _ in procs) == sorted([path, want]), procs
        fill = series(fams, "ymtop_stack_retained_bytes", function="fill_blocks",
                      cgroup=want)
        assert len(fill) == 1, fams["ymtop_stack_retained_bytes"]
        within(fill[0][1], FILL, 0.15, "fill_blocks in the child cgroup")
    finally:
        if srv:
            srv.stop()
        a.finish()
        b.finish()
        try:
            os.rmdir(child)
        except OSError:
            pass


def test_serve_aggregate_read_by_promtool():
    """promtool check metrics passes the aggregate exposition (withheld
    and "(unresolved)" series included); the sampling gauges of two
    processes with the same budget are one series each in the aggregate,
    one a process per pid."""
    exe = shutil.which("promtool")
    if not exe:
        raise Skip("promtool is not installed")
    if rerun_isolated(__file__, "test_serve_aggregate_read_by_promtool",
                      pid_ns=True, timeout=600):
        return
    env = {"YM_SAMPLE_RATE": RATE, "YM_MAX_OVERHEAD": "50"}
    a, b = Target([PROG], env=env), Target([PROG], env=env)
    srv = Server()
    try:
        for path in ("/metrics", "/metrics?per_pid=1"):
            text = srv.get(path)[1].decode()
            fams = parse(text)
            assert "ymtop_stack_series_withheld" in fams, path
            n = 1 if path == "/metrics" else 2
            budget = [v for l, v in fams["ymtop_process_cost_budget_percent"]
                      if l["exe"] == "reports_prog"]
            assert budget == [50.0] * n, (path, budget)
            asked = [v for l, v in fams["ymtop_process_requested_sample_rate_bytes"]
                     if l["exe"] == "reports_prog"]
            assert asked == [float(RATE)] * n, (path, asked)
            r = subprocess.run([exe, "check", "metrics"], input=text,
                               capture_output=True, text=True)
            # promtool lints (counter names, units) on stdout with code
            # 0; a format error is code 1.
            assert r.returncode == 0, (path, r.stdout, r.stderr)
    finally:
        srv.stop()
        a.finish()
        b.finish()


def test_serve_postgres_backends_churn_in_one_set_of_series():
    """PostgreSQL forks a backend per connection: with pgbench connecting
    anew for each transaction (-C), backends come and go between scrapes,
    yet /metrics keeps one set of process series for exe="postgres" (one
    cgroup here), its counters never fall, and Debian's stripped postgres
    publishes no address as a function label.  The cluster is private
    (initdb in a temporary directory, unix socket there) and runs as
    nobody; in pid and mount namespaces of their own."""
    if rerun_isolated(__file__,
                      "test_serve_postgres_backends_churn_in_one_set_of_series",
                      pid_ns=True, timeout=900):
        return
    from test_wrappers import as_nobody, pg_bindir, wait_unix
    from ymlib import readable
    b = pg_bindir()
    if not shutil.which("setpriv"):
        raise Skip("setpriv is not installed")
    if os.geteuid() != 0:
        raise Skip("postgres must run as another user: needs root")
    d = tempfile.mkdtemp(prefix="ym-fleet-pg-")
    os.chmod(d, 0o755)
    agent = readable(AGENT)
    data, sock = os.path.join(d, "data"), os.path.join(d, "sock")
    for x in (data, sock):
        os.mkdir(x, 0o700)
        shutil.chown(x, "nobody", "nogroup")
    script = os.path.join(d, "one.sql")
    with open(script, "w") as f:
        f.write("SELECT repeat('x', 100000) FROM generate_series(1, 20);\n")
    os.chmod(script, 0o644)
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("YM_", "PG")) and k != "LD_PRELOAD"}
    clean.update(LC_ALL="C", TZ="UTC", HOME=d)
    pm = bench = srv = None
    try:
        r = subprocess.run(as_nobody([os.path.join(b, "initdb"), "-D", data,
                                      "-A", "trust", "-U", "postgres", "-N"]),
                           capture_output=True, text=True, timeout=120,
                           env=clean, cwd=d)
        assert r.returncode == 0, r.stderr[-500:]
        pm = subprocess.Popen(
            as_nobody(["env", "LD_PRELOAD=" + agent, "YM_SAMPLE_RATE=8192",
                       os.path.join(b, "postgres"), "-D", data, "-k", sock,
                       "-c", "listen_addresses=", "-c", "fsync=off"]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=clean, cwd=d)
        wait_unix(os.path.join(sock, ".s.PGSQL.5432"), pm, "postgres")
        srv = Server()
        last, pids_seen, scrapes = {}, set(), 0

        def scrape():
            body = srv.get("/metrics")[1].decode()
            assert 'function="[' not in body, body[-3000:]
            fams = parse(body)
            sets = series(fams, "ymtop_process_retained_bytes", exe="postgres")
            assert len(sets) == 1, sets
            assert "pid" not in sets[0][0], sets
            for name in ("ymtop_process_allocated_bytes_total",
                         "ymtop_process_allocations_total"):
                got = series(fams, name, exe="postgres")
                assert len(got) == 1, (name, got)
                (_, v), = got
                assert v >= last.get(name, 0), (name, last.get(name), v)
                last[name] = v
            per = parse(srv.get("/metrics?per_pid=1")[1].decode())
            pids_seen.update(l["pid"] for l, _ in
                             series(per, "ymtop_process_retained_bytes",
                                    exe="postgres"))
        scrape()
        bench = subprocess.Popen(
            as_nobody([os.path.join(b, "pgbench"), "-h", sock, "-U", "postgres",
                       "-n", "-C", "-c", "2", "-t", "100", "-f", script,
                       "postgres"]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=clean, cwd=d)
        while bench.poll() is None:
            scrape()
            scrapes += 1
        assert bench.returncode == 0, bench.stderr.read()[-500:]
        scrape()
        # Backends came and went under the scrapes: more pids than the
        # postmaster's standing children, one set of series all along.
        assert scrapes >= 1 and len(pids_seen) > 6, (scrapes, pids_seen)
    finally:
        if srv:
            srv.stop()
        if bench and bench.poll() is None:
            bench.kill()
            bench.wait()
        if pm and pm.poll() is None:
            subprocess.run(as_nobody([os.path.join(b, "pg_ctl"), "-D", data,
                                      "stop", "-m", "immediate"]),
                           capture_output=True, timeout=120, env=clean, cwd=d)
            try:
                pm.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pm.kill()
                pm.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
