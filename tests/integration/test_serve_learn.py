"""ymtop --serve learns a steady scraper's interval, whoever the scraper
is, and starts an update ahead of its next scrape; ?per_pid=1 is rendered
while it is wanted, and its first request waits for an update that
renders it.

Which update answered is read from the answer itself: a scrape answered
from an update that started after it has an age (ymtop_update_age_seconds,
seconds since that update started) no larger than the request's round
trip; one answered from an update started ahead for it has a larger one.
Only the presence of an update started ahead depends on the machine's
speed (a learnt interval needs four arrivals within a fifth of each
other): the tests look for it among several scrapes, and assert nothing
that needs it where it may be missing.  Each test runs in pid and mount
namespaces of its own: no other agent process is served."""
import time

from test_fleet import parse, start
from test_serve_deadline import Server
from ymlib import rerun_isolated, run_tests

import urllib.error
import urllib.request

INTERVAL = 1.25   # seconds between a scraper's requests (ymtop learns from 1 s)


def get(srv, path, ua, timeout_hdr=None):
    """(status, families or body, age or None, round trip)."""
    h = {"User-Agent": ua}
    if timeout_hdr:
        h["X-Prometheus-Scrape-Timeout-Seconds"] = timeout_hdr
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (srv.port, path), headers=h)
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            st, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        st, body = e.code, e.read()
    rt = time.monotonic() - t0
    if st != 200:
        return st, body, None, rt
    fams = parse(body.decode())
    age = fams.get("ymtop_update_age_seconds")
    return st, fams, float(age[0][1]) if age else None, rt


def ahead(age, rt):
    """Answered from an update that started before the request was sent
    (the age is printed to the millisecond)."""
    return age is not None and age > rt + 0.002


def pids(fams):
    return {l["pid"] for l, _ in fams.get("ymtop_process_retained_bytes", [])
            if "pid" in l}


class Clock:
    """Requests on a steady grid, whatever each one took."""

    def __init__(self):
        self.t0 = time.monotonic()

    def at(self, k):
        d = self.t0 + k * INTERVAL - time.monotonic()
        if d > 0:
            time.sleep(d)


def test_a_steady_scraper_is_learnt_whatever_its_user_agent():
    """vmagent (its User-Agent, with the timeout header) and curl (no
    header) scraping at steady intervals, interleaved: each is learnt on
    its own, and updates are started ahead of their scrapes."""
    if rerun_isolated(__file__, "test_a_steady_scraper_is_learnt_whatever_its_user_agent",
                      pid_ns=True, timeout=600):
        return
    a = start()
    srv = Server(0)
    try:
        clock = Clock()
        seen = {"vm_promscrape": [], "curl/7.88.1": []}
        for k in range(9):
            for half, (ua, hdr) in enumerate((("vm_promscrape", "10"),
                                              ("curl/7.88.1", None))):
                clock.at(k + half / 2)
                st, fams, age, rt = get(srv, "/metrics", ua, hdr)
                assert st == 200, (st, fams)
                seen[ua].append(ahead(age, rt))
        print(seen)
        for ua, was in seen.items():
            assert not any(was[:3]), (ua, was)   # nothing learnt yet
            assert any(was[4:]), (ua, was)
        assert srv.stop() == 0
    finally:
        srv.stop()
        a.finish()


def scrape_until_ahead(srv, clock, k, most=8):
    """Prometheus's /metrics scrapes on the grid from k until one was
    answered from an update started ahead (or `most` more); the next k."""
    for _ in range(most):
        clock.at(k)
        k += 1
        st, fams, age, rt = get(srv, "/metrics", "Prometheus/2.42.0", "10")
        assert st == 200, (st, fams)
        if ahead(age, rt):
            break
    return k


def test_per_pid_is_rendered_from_its_first_request_while_wanted():
    """The first ?per_pid=1, arriving when an update started ahead of it
    (for the aggregate) has no figures per process, waits for one that
    has them: 200, never 503.  Once SERVE_PER_PID_IDLE (10) updates went
    by without another, updates render the aggregate alone again: a
    ?per_pid=1 then is answered from an update started after it, not from
    the one started ahead."""
    if rerun_isolated(__file__, "test_per_pid_is_rendered_from_its_first_request_while_wanted",
                      pid_ns=True, timeout=600):
        return
    a = start()
    srv = Server(0)
    try:
        clock = Clock()
        k = scrape_until_ahead(srv, clock, 0)
        clock.at(k)
        k += 1
        st, fams, age, rt = get(srv, "/metrics?per_pid=1", "Prometheus/2.42.0", "10")
        print("first per_pid", st, age, rt)
        assert st == 200, (st, fams)
        assert pids(fams) == {str(a.pid)}, pids(fams)
        # 12 scrapes of the aggregate: 12 updates at least, none asked
        # per process; then ?per_pid=1 where an update starts ahead.
        for _ in range(12):
            clock.at(k)
            k += 1
            assert get(srv, "/metrics", "Prometheus/2.42.0", "10")[0] == 200
        k = scrape_until_ahead(srv, clock, k)
        clock.at(k)
        st, fams, age, rt = get(srv, "/metrics?per_pid=1", "Prometheus/2.42.0", "10")
        print("per_pid after idle", st, age, rt)
        assert st == 200, (st, fams)
        assert pids(fams) == {str(a.pid)}, pids(fams)
        assert not ahead(age, rt), (age, rt)
        assert srv.stop() == 0
    finally:
        srv.stop()
        a.finish()


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
