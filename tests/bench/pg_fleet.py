#!/usr/bin/env python3
"""The field trial: a real prefork server, PostgreSQL, with its whole
cluster under the agent, served by `ymtop --serve` over https with basic
auth and scraped every 5 s by Debian's prometheus.

A cluster initdb'd in a temporary directory (run as nobody, unix socket
there, max_connections 250, shared_buffers 16MB), the postmaster started
with LD_PRELOAD=libymagent.so (every backend inherits it), `pgbench -i`,
then for each N `pgbench -n -S -c N -j 2 -T SECS` (N connections held
open: N backends).  For each N it prints, from prometheus's HTTP API and
from /proc:

  first / later   scrape_duration_seconds of the first scrape with the N
                  backends and the median of the later ones
  up              min of `up` over the window (1: never down)
  series          scrape_samples_scraped (the series of one scrape)
  served          per-pid series of exe="postgres" (/metrics?per_pid=1)
                  against the postgres processes in /proc
  rss / cpu       ymtop's VmRSS at the end, its CPU % over the window
  retained        prometheus's ymtop_process_retained_bytes{exe="postgres"}
  contexts        the client backends' memory contexts (PostgreSQL's own
                  pg_log_backend_memory_contexts, "Grand total" of each),
                  summed, beside ymtop's retained and in-use for the same
                  backends (per_pid); the postmaster's VmRSS beside
                  ymtop_process_rss_bytes of its pid

    YM_BUILD=build python3 tests/bench/pg_fleet.py [-T SECS] [-R TPS] [N...]
    (default: -T 40, no rate limit (every client as fast as it can: the
    CPUs saturated), N = 10 50 100 200; -R: pgbench's total rate)

YM_TRIAL_NICE=N runs ymtop under `nice -n N` (-10: ahead of the
backends for the CPU).

As root: alone in a pid namespace and a /dev/shm of its own (--serve
serves every agent process it sees); the cluster runs as nobody."""
import glob
import os
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import base64
import json

BUILD = os.path.abspath(os.environ.get("YM_BUILD", "build"))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "lib"), os.path.join(HERE, "..", "integration")]
os.environ.setdefault("YM_BUILD", BUILD)

from ymlib import AGENT, YMTOP, free_port, readable  # noqa: E402
from test_webconfig import bcrypt                      # noqa: E402

SCRAPE = 5
USER, PASSWORD = "prom", "field-trial"


def isolate():
    if os.environ.get("YM_FLEET_NS") == "1":
        return
    if os.geteuid() != 0:
        sys.exit("pg_fleet: needs root (a pid namespace, a private /dev/shm, "
                 "the cluster run as nobody)")
    r = subprocess.run(
        ["unshare", "-m", "-p", "-f", "--mount-proc", "sh", "-c",
         'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$0" "$@"',
         sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
        env=dict(os.environ, YM_FLEET_NS="1"))
    sys.exit(r.returncode)


def pg_bindir():
    for b in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if all(os.path.exists(os.path.join(b, x))
               for x in ("initdb", "postgres", "pgbench", "psql", "pg_ctl")):
            return b
    sys.exit("pg_fleet: postgresql and postgresql-contrib are not installed")


def as_nobody(argv):
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + argv


def status_kib(pid, key="VmRSS:"):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read().rsplit(")", 1)[1].split()
    return (int(s[11]) + int(s[12])) / os.sysconf("SC_CLK_TCK")


def postgres_pids():
    """Every process running the postgres executable (pgrep -c postgres)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.path.basename(os.readlink("/proc/%s/exe" % d)) == "postgres":
                    out.append(int(d))
            except OSError:
                pass
    return out


class Trial:
    def __init__(self, secs, rate):
        self.secs, self.rate = secs, rate
        self.b = pg_bindir()
        self.d = tempfile.mkdtemp(prefix="ymtop-pgfleet-")
        os.chmod(self.d, 0o755)
        self.data, self.sock = self.path("data"), self.path("sock")
        for x in (self.data, self.sock):
            os.mkdir(x, 0o700)
            shutil.chown(x, "nobody", "nogroup")
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("YM_", "PG")) and k != "LD_PRELOAD"}
        self.env.update(LC_ALL="C", TZ="UTC", HOME=self.d)
        self.pm = self.srv = self.prom = None
        self.srv_err = []
        self.log = self.path("postgres.log")

    def path(self, name):
        return os.path.join(self.d, name)

    def run(self, argv, **kw):
        r = subprocess.run(as_nobody(argv), capture_output=True, text=True,
                           env=self.env, cwd=self.d, **kw)
        if r.returncode:
            raise RuntimeError("%s: %s" % (argv[0], r.stderr[-800:]))
        return r.stdout

    def psql(self, sql):
        return self.run([os.path.join(self.b, "psql"), "-X", "-q", "-At", "-h", self.sock,
                         "-U", "postgres", "-c", sql, "postgres"], timeout=120)

    # ---- the cluster ----
    def start_cluster(self):
        self.run([os.path.join(self.b, "initdb"), "-D", self.data, "-A", "trust",
                  "-U", "postgres", "-N"], timeout=300)
        logf = open(self.log, "w")
        shutil.chown(self.log, "nobody", "nogroup")
        self.pm = subprocess.Popen(
            as_nobody(["env", "LD_PRELOAD=" + readable(AGENT),
                       os.path.join(self.b, "postgres"), "-D", self.data, "-k", self.sock,
                       "-c", "listen_addresses=", "-c", "max_connections=250",
                       "-c", "shared_buffers=16MB", "-c", "fsync=off",
                       "-c", "log_line_prefix=%p ", "-c", "log_min_messages=log"]),
            stdout=logf, stderr=subprocess.STDOUT, env=self.env, cwd=self.d)
        end = time.time() + 60
        while not os.path.exists(os.path.join(self.sock, ".s.PGSQL.5432")):
            if self.pm.poll() is not None or time.time() > end:
                raise RuntimeError("postgres did not start: " + open(self.log).read()[-800:])
            time.sleep(0.1)
        time.sleep(0.5)
        self.run([os.path.join(self.b, "pgbench"), "-i", "-q", "-s", "2", "-h", self.sock,
                  "-U", "postgres", "postgres"], timeout=600)

    # ---- ymtop --serve over https with basic auth ----
    def start_serve(self):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key",
                        "-out", "server.crt", "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"],
                       cwd=self.d, check=True, capture_output=True)
        with open(self.path("web.yml"), "w") as f:
            f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                    "basic_auth_users:\n  %s: %s\n" % (USER, bcrypt(PASSWORD)))
        # YM_TRIAL_NICE=-10: ymtop ahead of the backends for the CPU.
        nice = os.environ.get("YM_TRIAL_NICE")
        self.srv = subprocess.Popen((["nice", "-n", nice] if nice else []) +
                                    [YMTOP, "--serve", "127.0.0.1:0", "--web-config",
                                     self.path("web.yml")],
                                    stderr=subprocess.PIPE, text=True)
        while True:
            line = self.srv.stderr.readline()
            if not line:
                raise RuntimeError("ymtop exited: %s" % self.srv_err)
            self.srv_err.append(line.rstrip())
            m = re.search(r"serving https://[^ ]*:(\d+)/metrics", line)
            if m:
                break
        self.port = int(m.group(1))
        self.srv_err.clear()
        threading.Thread(target=self.drain, daemon=True).start()
        self.ctx = ssl.create_default_context(cafile=self.path("server.crt"))
        self.auth = "Basic " + base64.b64encode(
            ("%s:%s" % (USER, PASSWORD)).encode()).decode()

    def drain(self):
        for line in self.srv.stderr:
            self.srv_err.append(line.rstrip())

    def metrics(self, query=""):
        """A direct scrape (60 s allowed: figures from an update started
        after it), asked again while ymtop answers 503 (the figures per
        process not rendered yet)."""
        req = urllib.request.Request("https://127.0.0.1:%d/metrics%s" % (self.port, query),
                                     headers={"Authorization": self.auth,
                                              "X-Prometheus-Scrape-Timeout-Seconds": "60"})
        t = time.monotonic()
        for _ in range(20):
            try:
                with urllib.request.urlopen(req, context=self.ctx, timeout=300) as r:
                    body = r.read().decode()
                break
            except urllib.error.HTTPError as e:
                if e.code != 503:
                    raise
                time.sleep(1)
        return time.monotonic() - t, body

    # ---- prometheus ----
    def start_prometheus(self):
        self.pport = free_port()
        conf = self.path("prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: %ds\n  scrape_timeout: %ds\n"
                    "  evaluation_interval: %ds\n"
                    "scrape_configs:\n  - job_name: ymtop\n    scheme: https\n"
                    "    tls_config:\n      ca_file: %s\n"
                    "    basic_auth:\n      username: %s\n      password: %s\n"
                    "    static_configs:\n      - targets: ['127.0.0.1:%d']\n" %
                    (SCRAPE, SCRAPE, SCRAPE, self.path("server.crt"), USER, PASSWORD,
                     self.port))
        self.prom = subprocess.Popen(["prometheus", "--config.file=" + conf,
                                      "--storage.tsdb.path=" + self.path("tsdb"),
                                      "--web.listen-address=127.0.0.1:%d" % self.pport],
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(self.path("prometheus.log"), "w"))
        end = time.time() + 60
        while time.time() < end:
            try:
                if self.query("up"):
                    return
            except OSError:
                pass
            time.sleep(1)
        raise RuntimeError("prometheus has no `up` after 60 s")

    def api(self, path, **args):
        url = "http://127.0.0.1:%d/api/v1/%s?%s" % (self.pport, path,
                                                    urllib.parse.urlencode(args))
        with urllib.request.urlopen(url, timeout=30) as r:
            j = json.load(r)
        assert j["status"] == "success", j
        return j["data"]["result"]

    def query(self, q, t=None):
        return self.api("query", query=q, **({"time": "%.3f" % t} if t else {}))

    def range(self, q, start, end):
        """The raw samples of q's one series scraped in (start, end]."""
        r = self.query("%s[%ds]" % (q, int(end - start) + 1), t=end)
        return [(float(t), float(v)) for t, v in r[0]["values"]
                if float(t) > start] if r else []

    # ---- PostgreSQL's own figures ----
    def contexts(self, pids):
        """Grand total of each backend's memory contexts, as the backend
        logs it on pg_log_backend_memory_contexts."""
        start = os.path.getsize(self.log)
        self.psql("SELECT count(pg_log_backend_memory_contexts(p)) FROM unnest("
                  "ARRAY[%s]::int[]) p" % ",".join(map(str, pids)))
        got, end = {}, time.time() + 30
        pat = re.compile(r"^(\d+) LOG:  Grand total: (\d+) bytes in (\d+) blocks; "
                         r"(\d+) free \((\d+) chunks\); (\d+) used", re.M)
        while time.time() < end and len(got) < len(pids):
            time.sleep(0.5)
            with open(self.log) as f:
                f.seek(start)
                for m in pat.finditer(f.read()):
                    got[int(m.group(1))] = (int(m.group(2)), int(m.group(6)))
        return got

    def stop(self):
        for p in (self.prom, self.srv):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if self.pm and self.pm.poll() is None:
            subprocess.run(as_nobody([os.path.join(self.b, "pg_ctl"), "-D", self.data,
                                      "stop", "-m", "fast"]),
                           capture_output=True, env=self.env, cwd=self.d, timeout=120)
            try:
                self.pm.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.pm.kill()
                self.pm.wait()
        if os.environ.get("YM_KEEP_TRIAL") != "1":
            shutil.rmtree(self.d, ignore_errors=True)
        else:
            print("kept", self.d)


def per_pid(body, family):
    out = {}
    for m in re.finditer(r'^%s\{pid="(\d+)",exe="([^"]*)"[^}]*\} (\S+)$' % family, body,
                         re.M):
        out[int(m.group(1))] = (m.group(2), float(m.group(3)))
    return out


def one(tr, n):
    pm = tr.pm.pid
    launch = time.time()
    # -T far beyond the window: connecting 200 clients on a loaded
    # machine takes tens of seconds; pgbench is ended after the window.
    rate = ["-R", str(tr.rate)] if tr.rate else []
    bench = subprocess.Popen(
        as_nobody([os.path.join(tr.b, "pgbench"), "-n", "-S", "-c", str(n), "-j", "2",
                   "-T", "3600"] + rate + ["-h", tr.sock, "-U", "postgres", "postgres"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=tr.env, cwd=tr.d)
    try:
        # Wait until the N backends are connected.
        end = time.time() + 120
        while time.time() < end:
            c = int(tr.psql("SELECT count(*) FROM pg_stat_activity WHERE "
                            "backend_type = 'client backend' AND "
                            "pid <> pg_backend_pid()") or 0)
            if c >= n:
                break
            time.sleep(0.5)
        t0, c0 = time.time(), cpu_s(tr.srv.pid)
        time.sleep(tr.secs / 2)

        # Middle of the window: every process counted? PostgreSQL's own figures.
        procs = postgres_pids()
        client = [int(x) for x in tr.psql(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
            "AND pid <> pg_backend_pid()").split()]
        ctx = tr.contexts(client)
        direct, body = tr.metrics("?per_pid=1")
        ret = per_pid(body, "ymtop_process_retained_bytes")
        inuse = per_pid(body, "ymtop_process_in_use_bytes")
        rss = per_pid(body, "ymtop_process_rss_bytes")
        age = per_pid(body, "ymtop_process_heap_age_seconds")
        pm_rss = status_kib(pm) * 1024
        served = [p for p, (e, _) in ret.items() if e == "postgres"]
        skipped = re.findall(r"^ymtop_processes_(skipped\{[^}]*\}|unstarted) (\S+)", body, re.M)
        segs = sum(1 for x in os.listdir("/dev/shm") if x.startswith("ymtop-"))
        shm = os.statvfs("/dev/shm")
        shm_used = (shm.f_blocks - shm.f_bfree) * shm.f_frsize
        time.sleep(max(0, tr.secs - (time.time() - t0)))
        t1, c1 = time.time(), cpu_s(tr.srv.pid)
        rss_kib = status_kib(tr.srv.pid)
        time.sleep(2)
        # The first scrape since pgbench started meets the new backends.
        dur = tr.range('scrape_duration_seconds{job="ymtop"}', launch, t1)
        ups = tr.range('up{job="ymtop"}', launch, t1)
        samples = tr.range('scrape_samples_scraped{job="ymtop"}', t0, t1)
        uage = tr.range('ymtop_update_age_seconds{job="ymtop"}', launch, t1)
        udur = tr.range('ymtop_update_duration_seconds{job="ymtop"}', launch, t1)
        retained = tr.range('ymtop_process_retained_bytes{exe="postgres"}', t0, t1)
        inuse_agg = tr.range('ymtop_process_in_use_bytes{exe="postgres"}', t0, t1)
        later = [v for _, v in dur[1:]]
        have = [p for p in client if p in ctx]
        cg = sum(ctx[p][0] for p in have)
        cu = sum(ctx[p][1] for p in have)
        yr = sum(ret[p][1] for p in have if p in ret)
        yi = [inuse[p][1] for p in have if p in inuse]
        ages = [age[p][1] for p in have if p in age]
        missing = sorted(set(procs) - set(served))
        print("N=%3d  connected in %.0f s  scrapes %d  first %6.0f ms  later %6.0f ms (median)  up min %s  "
              "series %s  direct %.0f ms" %
              (n, t0 - launch, len(dur), dur[0][1] * 1000 if dur else float("nan"),
               statistics.median(later) * 1000 if later else float("nan"),
               min(v for _, v in ups) if ups else "none",
               int(statistics.median(v for _, v in samples)) if samples else "none",
               direct * 1000), flush=True)
        print("       served %d of %d postgres processes%s  ymtop VmRSS %.1f MiB  "
              "CPU %.1f%%" %
              (len(served), len(procs),
               " (missing %s)" % missing[:8] if missing else "",
               rss_kib / 1024, 100 * (c1 - c0) / (t1 - t0)), flush=True)
        print("       %s; /dev/shm: %d segments, %.0f MiB used" % (
            ", ".join("%s %s" % kv for kv in skipped), segs, shm_used / 2**20), flush=True)
        print("       prometheus retained{exe=postgres} %.1f MiB  in_use %s" %
              (statistics.median(v for _, v in retained) / 2**20 if retained else -1,
               "%.1f MiB" % (statistics.median(v for _, v in inuse_agg) / 2**20)
               if inuse_agg else "absent"), flush=True)
        print("       %d client backends with contexts logged: contexts %.1f MiB "
              "(used %.1f MiB); ymtop retained %.1f MiB, in use %s (%d of %d, "
              "age max %s s)" %
              (len(have), cg / 2**20, cu / 2**20, yr / 2**20,
               "%.1f MiB" % (sum(yi) / 2**20) if yi else "absent", len(yi), len(have),
               max(ages) if ages else "-"), flush=True)
        print("       postmaster VmRSS %.1f MiB, ymtop_process_rss_bytes %s" %
              (pm_rss / 2**20, "%.1f MiB" % (rss[pm][1] / 2**20) if pm in rss
               else "absent"), flush=True)
        print("       up %d of %d scrapes; ymtop_update_age_seconds median %s max %s; "
              "ymtop_update_duration_seconds median %s max %s" %
              (sum(1 for _, v in ups if v == 1), len(ups),
               "%.2f" % statistics.median(v for _, v in uage) if uage else "-",
               "%.2f" % max(v for _, v in uage) if uage else "-",
               "%.2f" % statistics.median(v for _, v in udur) if udur else "-",
               "%.2f" % max(v for _, v in udur) if udur else "-"), flush=True)
        if tr.srv_err:
            print("       ymtop said: %s" % " | ".join(tr.srv_err[-5:]), flush=True)
            tr.srv_err.clear()
    finally:
        bench.terminate()
        bench.wait()
        time.sleep(2)


def main():
    isolate()
    args = sys.argv[1:]
    secs, rate = 40, 0
    while args[:1] in (["-T"], ["-R"]):
        if args[0] == "-T":
            secs = int(args[1])
        else:
            rate = int(args[1])
        args = args[2:]
    ns = [int(a) for a in args] or [10, 50, 100, 200]
    tr = Trial(secs, rate)
    try:
        tr.start_cluster()
        tr.start_serve()
        tr.start_prometheus()
        for n in ns:
            one(tr, n)
    finally:
        tr.stop()


if __name__ == "__main__":
    main()
