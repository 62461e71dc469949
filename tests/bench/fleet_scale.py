#!/usr/bin/env python3
"""ymtop --serve in front of a fleet: N processes of one program (allocs,
three allocation sites each, every allocation sampled), preloaded, then
one ymtop --serve for them all.  For each N prints the first scrape of
/metrics (cold: every process's symbols), the median of the later ones
(once every process has its allocator figures, and SETTLE more), ymtop's
CPU time (user + system) per later scrape, its VmRSS after them, and how
many processes /metrics counted (?per_pid=1).

    YM_BUILD=build python3 tests/bench/fleet_scale.py [N...]   (10 100 300)

Alone in a pid namespace and a /dev/shm of its own (as root): --serve
serves every agent process it sees, and others' on a shared machine would
count too.  Without root, the segments of processes a signal ended (Ctrl-C)
are removed at the end."""
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from ymlib import remove_segment, start_ticks  # noqa: E402

BUILD = os.path.abspath(os.environ.get("YM_BUILD", "build"))
WARM = 5
# Scrapes after the first, not measured, until the steady state: idle
# processes' allocator figures are taken through borrowed threads within
# FLEET_BORROW_S of each scrape (fleet.h), so at 1000 processes it takes
# tens of scrapes before every one has them (ymtop_process_heap_age_seconds
# 0 for all); then SETTLE more.  At most SETTLE_MAX in all: a process
# whose figures never come (no thread to borrow) must not hold the
# measurement forever, nor one that never moves (10 scrapes without one
# more); the line says how many were still waiting.
SETTLE = 3
SETTLE_MAX = 400


def isolate():
    if os.environ.get("YM_FLEET_NS") == "1" or os.geteuid() != 0:
        return
    r = subprocess.run(
        ["unshare", "-m", "-p", "-f", "--mount-proc", "sh", "-c",
         'mount -t tmpfs tmpfs /dev/shm && exec "$0" "$@"',
         sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
        env=dict(os.environ, YM_FLEET_NS="1"))
    sys.exit(r.returncode)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def scrape(url):
    t = time.monotonic()
    # Its timeout said: the answer comes from an update that started
    # after the request (what is measured), not the last one at 9 s.
    req = urllib.request.Request(url, headers={"X-Prometheus-Scrape-Timeout-Seconds": "600"})
    with urllib.request.urlopen(req, timeout=600) as r:
        body = r.read().decode()
    return time.monotonic() - t, body


def one(n):
    env = dict(os.environ, LD_PRELOAD=os.path.join(BUILD, "libymagent.so"),
               YM_SAMPLE_RATE="1", YM_EARLY_SEGMENT="1")
    argv = [os.path.join(BUILD, "progs", "allocs"), "malloc:4:1000",
            "calloc:4:2000", "fail:4:3000"]
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env, text=True)
             for _ in range(n)]
    ticks = [start_ticks(p.pid) for p in procs]
    srv = None
    try:
        for p in procs:
            p.stdout.readline()          # "ready"
        srv = subprocess.Popen([os.path.join(BUILD, "ymtop"), "--serve",
                                "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
        line = srv.stderr.readline()
        port = re.search(r":(\d+)/metrics", line).group(1)
        url = "http://127.0.0.1:%s/metrics" % port
        cold, body = scrape(url + "?per_pid=1")
        seen = len(re.findall(r"^ymtop_process_retained_bytes", body, re.M))
        skipped = re.search(r"^ymtop_processes_skipped\{[^}]*\} (\d+)", body, re.M)
        waiting, settle, best, since = n, 1, n + 1, 0
        while settle < SETTLE_MAX and since < 10:
            body = scrape(url + "?per_pid=1")[1]
            settle += 1
            ages = re.findall(r"^ymtop_process_heap_age_seconds\{[^}]*\} (\S+)",
                              body, re.M)
            waiting = sum(float(a) != 0 for a in ages) + max(0, n - len(ages))
            if os.environ.get("YM_FLEET_VERBOSE"):
                print("scrape %d: %d figures old" % (settle, waiting),
                      file=sys.stderr, flush=True)
            if not waiting:
                break
            best, since = (waiting, 0) if waiting < best else (best, since + 1)
        for _ in range(SETTLE):
            scrape(url)
        settle += SETTLE
        perf = None
        if os.environ.get("YM_FLEET_PERF"):   # a profile of the later scrapes
            perf = subprocess.Popen(["perf", "record", "-q", "-F", "400", "--call-graph", "dwarf,16384", "-o",
                                     os.environ["YM_FLEET_PERF"], "-p",
                                     str(srv.pid)])
            time.sleep(1)
        c0 = cpu_s(srv.pid)
        warm = sorted(scrape(url)[0] for _ in range(WARM))
        cpu = (cpu_s(srv.pid) - c0) / WARM
        if perf:
            perf.send_signal(2)
            perf.wait()
        rss = rss_kib(srv.pid)
        print("N=%4d  first %7.0f ms  later %5.0f ms (median of %d, CPU %4.0f ms)  "
              "VmRSS %6.1f MiB  in /metrics %d  after %d scrapes (%d figures "
              "still old)%s" %
              (n, cold * 1000, warm[WARM // 2] * 1000, WARM, cpu * 1000,
               rss / 1024.0, seen, settle, waiting,
               ", skipped %s" % skipped.group(1) if skipped else ""), flush=True)
    finally:
        if srv:
            srv.terminate()
            srv.wait()
        for p in procs:
            p.stdin.close()
        for p in procs:
            p.wait()
        # Those a signal ended (Ctrl-C reaches them too) left their
        # segments: in the host's /dev/shm without root.
        for p, t in zip(procs, ticks):
            remove_segment(p.pid, t)


def main():
    isolate()
    for n in [int(a) for a in sys.argv[1:]] or [10, 100, 300]:
        one(n)


if __name__ == "__main__":
    main()
