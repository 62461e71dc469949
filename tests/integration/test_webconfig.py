"""ymtop --serve --web-config FILE: node_exporter's web configuration file
(TLS, mutual TLS, bcrypt basic auth), checked with curl, with Debian's
prometheus scraping over https with basic_auth, and with Debian's
node_exporter reading the same file.  Certificates (a CA, a server
certificate for 127.0.0.1, client certificates of that CA and of another)
are made with openssl at test time in a temporary directory."""
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from ymlib import BUILD, YMTOP, Skip, Target, free_port, run_tests, ymtop

PROG = os.path.join(BUILD, "progs", "reports_prog")


def need(*programs):
    for p in programs:
        if not shutil.which(p):
            raise Skip("%s is not installed" % p)


def bcrypt(password, prefix="$2y$", cost=10):
    """A bcrypt hash made by libxcrypt, as htpasswd -B makes them."""
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p,
                                  ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = lib.crypt_gensalt(b"$2b$", cost, None, 0).decode()
    salt = prefix + salt[4:]
    h = lib.crypt(password.encode(), salt.encode()).decode()
    assert h.startswith(prefix) and len(h) == 60, h
    return h


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Pki:
    """ca.crt; server.crt/key for 127.0.0.1; client.crt/key
    (scraper.example.org) and intruder.crt/key signed by the CA;
    stranger.crt/key self-signed."""

    def __enter__(self):
        need("openssl")
        self.d = tempfile.mkdtemp(prefix="ymtop-webconfig-")
        d = self.d
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                "-subj", "/CN=ymtop test CA", cwd=d)
        for name, ext in (("server", "subjectAltName=IP:127.0.0.1\n"
                                     "extendedKeyUsage=serverAuth\n"),
                          ("client", "subjectAltName=DNS:scraper.example.org\n"
                                     "extendedKeyUsage=clientAuth\n"),
                          ("intruder", "subjectAltName=DNS:intruder.example.org,"
                                       "IP:10.0.0.9\n"
                                       "extendedKeyUsage=clientAuth\n")):
            with open(os.path.join(d, name + ".ext"), "w") as f:
                f.write(ext)
            openssl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr",
                    "-subj", "/CN=" + name, cwd=d)
            openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey",
                    "ca.key", "-CAcreateserial", "-out", name + ".crt", "-days", "2",
                    "-extfile", name + ".ext", cwd=d)
        openssl("req", "-x509", *ec, "-keyout", "stranger.key", "-out", "stranger.crt",
                "-days", "2", "-subj", "/CN=stranger", cwd=d)
        return self

    def path(self, name):
        return os.path.join(self.d, name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def __exit__(self, *exc):
        shutil.rmtree(self.d, ignore_errors=True)


class Server:
    """ymtop --serve 127.0.0.1:0 --web-config FILE [extra]; the port from
    its line on standard error."""

    def __init__(self, conf, *extra, addr="127.0.0.1:0"):
        self.p = subprocess.Popen([YMTOP, "--serve", addr, "--web-config", conf] +
                                  list(extra), stderr=subprocess.PIPE, text=True)
        self.lines = []
        while True:
            line = self.p.stderr.readline()
            assert line, ("ymtop exited", self.lines, self.p.wait())
            self.lines.append(line)
            m = re.search(r"serving (https?)://[^ ]*:(\d+)/metrics", line)
            if m:
                break
        self.scheme, self.port = m.group(1), int(m.group(2))

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def curl(url, *args):
    """(curl's exit status, HTTP status or 0, headers and body)."""
    r = subprocess.run(["curl", "-sS", "-D", "-", "--max-time", "30",
                        "-w", "\n%{http_code}", url] + list(args),
                       capture_output=True, text=True, errors="replace")
    body, _, code = r.stdout.rpartition("\n")
    return r.returncode, int(code or 0), body, r.stderr


def tls_and_users(pki, extra=""):
    return pki.write("web.yml",
                     "tls_server_config:\n"
                     "  cert_file: server.crt\n"       # relative to the file
                     "  key_file: %s\n"
                     "%s"
                     "http_server_config:\n"
                     "  headers:\n"
                     "    Strict-Transport-Security: max-age=63072000\n"
                     "basic_auth_users:\n"
                     "  alice: %s\n"
                     "  bob: '%s'\n" % (pki.path("server.key"), extra,
                                        bcrypt("s3cret"), bcrypt("hunter2", "$2b$")))


def test_https_with_basic_auth_by_curl():
    need("curl")
    t = Target([PROG])
    with Pki() as pki:
        srv = Server(tls_and_users(pki), "-p", str(t.pid))
        try:
            assert srv.scheme == "https", srv.lines
            url = "https://127.0.0.1:%d/metrics" % srv.port
            ca = ["--cacert", pki.path("ca.crt")]
            rc, code, out, err = curl(url, *ca, "-u", "alice:s3cret")
            assert (rc, code) == (0, 200), (rc, code, err)
            # One process: one series, per program and cgroup.
            assert 'ymtop_process_retained_bytes{exe="%s",cgroup="' % \
                os.path.basename(PROG) in out, out[:2000]
            assert "Strict-Transport-Security: max-age=63072000" in out, out[:500]
            # Again: from the cache.
            assert curl(url, *ca, "-u", "alice:s3cret")[:2] == (0, 200)
            assert curl(url, *ca, "-u", "bob:hunter2")[:2] == (0, 200)
            # Wrong password, unknown user, none: 401 with a challenge.
            for cred in (["-u", "alice:S3cret"], ["-u", "alice:hunter2"],
                         ["-u", "carol:s3cret"], []):
                rc, code, out, err = curl(url, *ca, *cred)
                assert (rc, code) == (0, 401), (cred, rc, code, err)
                assert 'WWW-Authenticate: Basic realm="ymtop"' in out, out
                assert "Strict-Transport-Security: max-age=63072000" in out, out
                assert "ymtop_" not in out, out
            # Every path is behind the gate.
            for path in ("/", "/debug/pprof/", "/debug/pprof/heap"):
                rc, code, _, _ = curl("https://127.0.0.1:%d%s" % (srv.port, path), *ca)
                assert code == 401, (path, code)
            # Without the CA, curl does not trust the server.
            rc, code, _, err = curl(url, "-u", "alice:s3cret")
            assert rc == 60 and code == 0, (rc, code, err)
            # Plain HTTP to the TLS port: no HTTP answer at all.
            rc, code, out, err = curl("http://127.0.0.1:%d/metrics" % srv.port,
                                      "-u", "alice:s3cret")
            assert rc != 0 and code == 0 and "ymtop_" not in out, (rc, code, out, err)
            # And the server still serves.
            assert curl(url, *ca, "-u", "alice:s3cret")[:2] == (0, 200)
        finally:
            assert srv.stop() == 0
            t.finish()


def test_mutual_tls_refuses_clients_without_a_certificate():
    need("curl")
    with Pki() as pki:
        conf = pki.write("mtls.yml",
                         "tls_server_config:\n"
                         "  cert_file: server.crt\n"
                         "  key_file: server.key\n"
                         "  client_auth_type: RequireAndVerifyClientCert\n"
                         "  client_ca_file: ca.crt\n")
        # Bound beyond loopback, but protected: no warning.
        srv = Server(conf, addr="0.0.0.0:0")
        try:
            assert not any("warning" in line for line in srv.lines), srv.lines
            url = "https://127.0.0.1:%d/" % srv.port
            ca = ["--cacert", pki.path("ca.crt")]
            rc, code, out, err = curl(url, *ca, "--cert", pki.path("client.crt"),
                                      "--key", pki.path("client.key"))
            assert (rc, code) == (0, 200) and "ymtop" in out, (rc, code, err)
            for tls in ([], ["--tls-max", "1.2"]):
                rc, code, out, err = curl(url, *ca, *tls)
                assert rc != 0 and code == 0, (tls, rc, code, out)
                assert "certificate required" in err, err
            rc, code, out, err = curl(url, *ca, "--cert", pki.path("stranger.crt"),
                                      "--key", pki.path("stranger.key"))
            assert rc != 0 and code == 0, (rc, code, out)
            assert "bad certificate" in err, err
            # A server certificate is not a client's (extendedKeyUsage).
            rc, code, out, err = curl(url, *ca, "--cert", pki.path("server.crt"),
                                      "--key", pki.path("server.key"))
            assert rc != 0 and code == 0, (rc, code, out)
        finally:
            assert srv.stop() == 0
        # client_allowed_sans: of the CA's clients, only those named.
        conf = pki.write("sans.yml",
                         "tls_server_config:\n"
                         "  cert_file: server.crt\n"
                         "  key_file: server.key\n"
                         "  client_auth_type: RequireAndVerifyClientCert\n"
                         "  client_ca_file: ca.crt\n"
                         "  client_allowed_sans: [10.0.0.7, scraper.example.org]\n")
        srv = Server(conf)
        try:
            url = "https://127.0.0.1:%d/" % srv.port
            ca = ["--cacert", pki.path("ca.crt")]
            rc, code, out, err = curl(url, *ca, "--cert", pki.path("client.crt"),
                                      "--key", pki.path("client.key"))
            assert (rc, code) == (0, 200), (rc, code, err)
            rc, code, out, err = curl(url, *ca, "--cert", pki.path("intruder.crt"),
                                      "--key", pki.path("intruder.key"))
            assert rc != 0 and code == 0 and "bad certificate" in err, (rc, code, err)
        finally:
            assert srv.stop() == 0


def query(port, q):
    url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (port, urllib.parse.quote(q))
    ans = json.load(urllib.request.urlopen(url, timeout=10))
    assert ans["status"] == "success", ans
    return ans["data"]["result"]


def test_prometheus_scrapes_over_https_with_basic_auth():
    need("prometheus")
    t = Target([PROG])
    with Pki() as pki:
        srv = Server(tls_and_users(pki), "-p", str(t.pid))
        port = free_port()
        conf = pki.write("prometheus.yml", (
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            "  - job_name: ymtop\n    scheme: https\n"
            "    tls_config:\n      ca_file: %s\n"
            "    basic_auth:\n      username: alice\n      password: s3cret\n"
            "    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
            "  - job_name: wrong\n    scheme: https\n"
            "    tls_config:\n      ca_file: %s\n"
            "    basic_auth:\n      username: alice\n      password: guess\n"
            "    static_configs:\n      - targets: ['127.0.0.1:%d']\n") % (
                pki.path("ca.crt"), srv.port, pki.path("ca.crt"), srv.port))
        prom = subprocess.Popen(["prometheus", "--config.file=" + conf,
                                 "--storage.tsdb.path=" + pki.path("data"),
                                 "--web.listen-address=127.0.0.1:%d" % port],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            q = 'ymtop_process_retained_bytes{job="ymtop",exe="%s"}' % \
                os.path.basename(PROG)
            result, wrong = [], []
            end = time.time() + 90
            while time.time() < end and not (result and wrong):
                time.sleep(1)
                try:
                    result = query(port, q)
                    wrong = query(port, 'up{job="wrong"}')
                except OSError:
                    continue
            assert result, ("no sample", prom.stderr.read() if prom.poll() is not None
                            else "prometheus has no sample after 90 s")
            assert float(result[0]["value"][1]) > 0, result
            # The wrong password's job is down, and has no series.
            assert wrong and wrong[0]["value"][1] == "0", wrong
            assert query(port, 'count(ymtop_process_retained_bytes{job="wrong"})') == []
        finally:
            prom.terminate()
            prom.wait(timeout=30)
            assert srv.stop() == 0
            t.finish()


def test_node_exporter_reads_the_same_file():
    need("curl", "prometheus-node-exporter")
    t = Target([PROG])
    with Pki() as pki:
        conf = tls_and_users(pki)
        port = free_port()
        ne = subprocess.Popen(["prometheus-node-exporter", "--web.config.file=" + conf,
                               "--web.listen-address=127.0.0.1:%d" % port,
                               "--collector.disable-defaults", "--collector.time"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        srv = Server(conf, "-p", str(t.pid))
        try:
            ca = ["--cacert", pki.path("ca.crt")]
            for p in (port, srv.port):
                url = "https://127.0.0.1:%d/metrics" % p
                code = 0
                end = time.time() + 30
                while code == 0 and time.time() < end:
                    rc, code, _, err = curl(url, *ca, "-u", "alice:s3cret")
                    if code == 0:
                        time.sleep(0.2)
                assert code == 200, (p, rc, code, err)
                assert curl(url, *ca, "-u", "alice:wrong")[1] == 401
        finally:
            ne.terminate()
            ne.wait(timeout=30)
            assert srv.stop() == 0
            t.finish()


def test_a_flood_of_wrong_passwords_gets_429_and_a_cached_scraper_passes():
    need("curl")
    with Pki() as pki:
        # Cost 12: about 0.25 s of CPU a check, so that the budget (1 CPU
        # second, refilled at a quarter of a core) is spent in a few.
        conf = pki.write("flood.yml",
                         "tls_server_config:\n  cert_file: server.crt\n"
                         "  key_file: server.key\n"
                         "basic_auth_users:\n  alice: %s\n" % bcrypt("s3cret", cost=12))
        srv = Server(conf)
        try:
            url = "https://127.0.0.1:%d/" % srv.port
            ca = ["--cacert", pki.path("ca.crt")]
            assert curl(url, *ca, "-u", "alice:s3cret")[:2] == (0, 200)
            codes = []
            for i in range(100):
                rc, code, out, err = curl(url, *ca, "-u", "alice:guess%d" % i)
                codes.append(code)
                if code == 429:
                    break
            assert codes[-1] == 429 and set(codes[:-1]) <= {401}, codes
            assert "Retry-After: 1" in out and "retry later" in out, out
            # The scraper's credentials are in the cache: no check needed.
            assert curl(url, *ca, "-u", "alice:s3cret")[:2] == (0, 200)
        finally:
            assert srv.stop() == 0


def test_users_and_headers_follow_the_file():
    """The file is read again when it changes (exporter-toolkit reads it at
    every request): new users and headers apply at the next request; a
    file that does not load is answered 500 until it is fixed; a change of
    TLS settings needs a restart and is not applied."""
    need("curl")
    with Pki() as pki:
        def conf(users, header="", path="auth.yml"):
            # Written beside and renamed over, as editors do.
            tmp = pki.write(path + ".new", header + "basic_auth_users:\n" +
                            "".join("  %s: %s\n" % (u, bcrypt(pw, cost=4))
                                    for u, pw in users))
            os.replace(tmp, pki.path(path))
            return pki.path(path)
        path = conf([("alice", "x")])
        srv = Server(path)
        url = "http://127.0.0.1:%d/" % srv.port
        try:
            assert curl(url, "-u", "alice:x")[1] == 200
            assert curl(url, "-u", "bob:y")[1] == 401
            conf([("bob", "y")], "http_server_config:\n  headers:\n"
                 "    X-Content-Type-Options: nosniff\n")
            rc, code, out, _ = curl(url, "-u", "bob:y")
            assert code == 200 and "X-Content-Type-Options: nosniff" in out, out
            assert curl(url, "-u", "alice:x")[1] == 401
            # Rewritten in place, broken: 500, and nobody is let in.
            with open(path, "a") as f:
                f.write("no_such_key: 1\n")
            assert curl(url, "-u", "bob:y")[1] == 500
            conf([("bob", "y")])
            assert curl(url, "-u", "bob:y")[1] == 200
            # TLS cannot start without a restart: the file is not applied.
            with open(path, "w") as f:
                f.write("tls_server_config:\n  cert_file: server.crt\n"
                        "  key_file: server.key\nbasic_auth_users:\n"
                        "  carol: %s\n" % bcrypt("z", cost=4))
            assert curl(url, "-u", "bob:y")[1] == 200
            assert curl(url, "-u", "carol:z")[1] == 401
        finally:
            srv.stop()
        err = srv.p.stderr.read()
        assert "read again" in err, err
        assert "no_such_key" in err and "answering 500" in err, err
        assert "TLS settings changed" in err, err


def test_warnings_and_refusals():
    with Pki() as pki:
        # Beyond loopback without --web-config: one line of warning.
        p = subprocess.Popen([YMTOP, "--serve", "0.0.0.0:0"], stderr=subprocess.PIPE,
                             text=True)
        try:
            first = p.stderr.readline()
            second = p.stderr.readline()
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=20)
        assert first.startswith("ymtop: warning: --serve 0.0.0.0:0: plain HTTP and no "
                                "authentication"), first
        assert "serving http://0.0.0.0:" in second, second
        # Basic auth without TLS, beyond loopback: warned too.
        conf = pki.write("auth.yml", "basic_auth_users:\n  alice: %s\n" % bcrypt("x", cost=4))
        srv = Server(conf, addr="0.0.0.0:0")
        try:
            assert srv.scheme == "http"
            assert "basic auth over plain HTTP" in srv.lines[0], srv.lines
        finally:
            srv.stop()
        # A mistake in the file: exit 2, one line naming file and line.
        bad = pki.write("bad.yml", "tls_server_config:\n  cert_file: server.crt\n"
                        "  key_file: server.key\n  cipher_suites: [TLS_RSA_WITH_NOPE]\n")
        r = ymtop("--serve", "127.0.0.1:0", "--web-config", bad, check=False)
        assert r.returncode == 2, r
        assert r.stderr == ("ymtop: --web-config %s:4: unknown cipher suite "
                            "'TLS_RSA_WITH_NOPE' (Go's names, such as "
                            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)\n" % bad), r.stderr
        r = ymtop("--web-config", bad, check=False)
        assert r.returncode == 2 and "--web-config applies to --serve" in r.stderr, r


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
