"""ymtop --serve answers within a scrape's deadline: the fleet is updated
by a thread of its own, a scrape is answered from an update that started
after it when that completes in time (X-Prometheus-Scrape-Timeout-Seconds
less a margin), else from the last complete update with its age
(ymtop_update_age_seconds), and before any update completed with what a
listing found (ymtop_processes_pending).  The update is made slow with
YM_TEST_UPDATE_DELAY_MS (read by the server only), so that which update
answered is decided by the deadline alone, never by the machine's speed;
ymtop_updates_total names the update that answered.  Each test runs in
pid and mount namespaces of its own: no other agent process is served."""
import concurrent.futures
import gzip
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from test_fleet import parse, start
from ymlib import YMTOP, rerun_isolated, run_tests


class Server:
    """ymtop --serve on a free loopback port, its update delayed by
    delay_ms."""

    def __init__(self, delay_ms):
        env = dict(os.environ, YM_TEST_UPDATE_DELAY_MS=str(delay_ms))
        self.p = subprocess.Popen([YMTOP, "--serve", "127.0.0.1:0"], env=env,
                                  stderr=subprocess.PIPE, text=True)
        line = self.p.stderr.readline()
        m = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", line)
        assert m, line
        self.port = int(m.group(1))

    def get(self, path, timeout_hdr=None):
        """(status, body, headers), the request carrying the header of a
        Prometheus scrape with timeout_hdr seconds (a string) if given."""
        h = {} if timeout_hdr is None else \
            {"X-Prometheus-Scrape-Timeout-Seconds": timeout_hdr}
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path),
                                     headers=h)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            self.p.wait(timeout=120)
        return self.p.returncode


def scrape(srv, timeout_hdr, per_pid=True):
    """The families, the pids served, ymtop_updates_total and the age."""
    st, body, hdr = srv.get("/metrics" + ("?per_pid=1" if per_pid else ""),
                            timeout_hdr)
    assert st == 200, (st, body)
    assert hdr["Content-Type"].startswith("text/plain; version=0.0.4"), hdr
    fams = parse(body.decode())
    pids = {int(l["pid"]) for l, _ in fams.get("ymtop_process_retained_bytes", [])
            if "pid" in l}
    (_, seq), = fams["ymtop_updates_total"]
    age = fams.get("ymtop_update_age_seconds")
    return fams, pids, int(float(seq)), float(age[0][1]) if age else None


def test_slow_update_answered_from_the_last_with_its_age():
    """A scrape whose deadline comes before the update it started
    completes gets the last complete update's figures (a process started
    since is not in them) with their age; a scrape that can wait gets the
    new ones."""
    if rerun_isolated(__file__, "test_slow_update_answered_from_the_last_with_its_age",
                      pid_ns=True, timeout=600):
        return
    a = start()
    b = None
    srv = Server(4000)
    try:
        # 60 s: an update that starts after the request completes in time.
        _, pids, seq, age = scrape(srv, "60")
        assert pids == {a.pid} and seq >= 1 and age is not None, (pids, seq, age)
        b = start()
        # 1 s: answered half a second after it arrived; the update it
        # started takes 4 s at least: the last complete one answers.
        fams, pids, seq2, age = scrape(srv, "1")
        assert seq2 == seq, (seq, seq2)
        assert pids == {a.pid}, pids
        assert age > 0, age
        (_, dur), = fams["ymtop_update_duration_seconds"]
        assert float(dur) >= 4.0, dur
        # A later scrape that can wait: the update started after it.
        _, pids, seq3, age = scrape(srv, "60")
        assert seq3 > seq and pids == {a.pid, b.pid}, (seq3, pids)
        assert srv.stop() == 0
    finally:
        srv.stop()
        for t in (a, b):
            if t:
                t.finish()


def test_first_scrape_before_any_update_completed():
    """Before the first update completes, a scrape is answered in time
    with what a listing found: the agent processes pending, no figures."""
    if rerun_isolated(__file__, "test_first_scrape_before_any_update_completed",
                      pid_ns=True, timeout=600):
        return
    a = start()
    srv = Server(30000)
    try:
        fams, pids, seq, age = scrape(srv, "1", per_pid=False)
        assert seq == 0 and age is None and not pids, (seq, age, pids)
        (_, pending), = fams["ymtop_processes_pending"]
        assert int(pending) == 1, pending
        st, body, _ = srv.get("/debug/pprof/", "1")
        assert st == 200 and body == b"", (st, body)
        assert srv.stop() == 0
    finally:
        srv.stop()
        a.finish()


def test_bad_scrape_timeout_is_refused():
    """X-Prometheus-Scrape-Timeout-Seconds must be a positive decimal of
    at most 600 seconds: anything else is answered 400, saying so."""
    if rerun_isolated(__file__, "test_bad_scrape_timeout_is_refused",
                      pid_ns=True, timeout=600):
        return
    a = start()
    srv = Server(0)
    try:
        for bad in ("abc", "0", "0.0", "-1", "1e3", "601", "5.", ".5", "1.2.3",
                    "+5", "5 s", "NaN", "inf", "99999999999999999"):
            st, body, _ = srv.get("/metrics", bad)
            assert st == 400, (bad, st, body[:200])
            assert b"X-Prometheus-Scrape-Timeout-Seconds" in body, body
        for good in ("10", "0.5", "4.75", "600"):
            _, pids, _, _ = scrape(srv, good)
            assert pids == {a.pid}, (good, pids)
        assert srv.stop() == 0
    finally:
        srv.stop()
        a.finish()


def test_idle_server_does_not_update():
    """Without requests nothing is updated: the update that answers a
    scrape after a pause is the next one after the last scrape's."""
    if rerun_isolated(__file__, "test_idle_server_does_not_update",
                      pid_ns=True, timeout=600):
        return
    a = start()
    srv = Server(0)
    try:
        _, _, seq, _ = scrape(srv, "60")
        time.sleep(3)
        _, _, seq2, _ = scrape(srv, "60")
        assert seq2 == seq + 1, (seq, seq2)
        assert srv.stop() == 0
    finally:
        srv.stop()
        a.finish()


def test_concurrent_scrapes_and_profiles_while_updating():
    """Scrapes, per-process scrapes, profiles and the list at once while
    slow updates run: every answer whole and right, no crash."""
    if rerun_isolated(__file__, "test_concurrent_scrapes_and_profiles_while_updating",
                      pid_ns=True, timeout=600):
        return
    a, b = start(), start()
    srv = Server(700)
    try:
        scrape(srv, "60")   # one update done: both processes known

        def one(i):
            kind = i % 4
            if kind == 0:
                fams, pids, seq, age = scrape(srv, "2", per_pid=False)
                assert seq >= 1 and age is not None and age >= 0, (seq, age)
                assert "ymtop_process_retained_bytes" in fams, fams.keys()
            elif kind == 1:
                _, pids, _, _ = scrape(srv, "5")
                assert pids == {a.pid, b.pid}, pids
            elif kind == 2:
                pid = (a, b)[i % 8 // 4].pid
                st, body, hdr = srv.get("/debug/pprof/heap?pid=%d" % pid, "2")
                if st == 503:
                    assert hdr["Retry-After"] == "1", hdr
                    return
                assert st == 200, (st, body)
                assert b"hold_base" in gzip.decompress(body)
            else:
                st, body, _ = srv.get("/debug/pprof/", "2")
                assert st == 200, st
                assert body.decode().splitlines() == [
                    "%d reports_prog /debug/pprof/heap?pid=%d" % (p, p)
                    for p in sorted((a.pid, b.pid))], body

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            for f in [ex.submit(one, i) for i in range(48)]:
                f.result()
        assert srv.stop() == 0
    finally:
        srv.stop()
        a.finish()
        b.finish()


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
