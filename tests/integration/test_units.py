"""Units: the estimates count requested bytes, the allocator's in use counts
usable bytes (each block rounded up to its size class).  Where both are
shown, the reports name each figure's unit and say what the gap between
them is made of.  Against Debian's redis-server, whose jemalloc rounds
every value up to a size class: its in use is the larger."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

from ymlib import AGENT, YMTOP, Skip, run_tests

MiB = 1024 * 1024
TIMEOUT = 120


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
    assert r.returncode == 0 and "ERR" not in r.stdout, (r.stdout, r.stderr)
    return r.stdout.strip()


def test_redis_in_use_and_retained_units_and_gap_explained():
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        raise Skip("redis-server is not installed (make deps)")
    d = tempfile.mkdtemp(prefix="ym-units-")
    sock = os.path.join(d, "redis.sock")
    env = {k: v for k, v in os.environ.items() if not k.startswith("YM_")}
    env.update(LD_PRELOAD=AGENT, YM_SAMPLE_RATE="65536")
    srv = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
         "--appendonly", "no", "--dir", d, "--daemonize", "no",
         "--enable-debug-command", "yes"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    stop = threading.Event()
    busy = None
    try:
        wait_socket(sock, srv)
        # 300 000 values of 100 bytes: jemalloc serves each from the
        # 112-byte class, and the keys, objects and dict entries from
        # theirs.
        cli(sock, "DEBUG", "POPULATE", "300000", "key", "100")

        # The allocator answers a reader at its next call: keep it busy.
        def poke():
            while not stop.is_set():
                subprocess.run(["redis-cli", "-s", sock, "SET", "poke", "x"],
                               capture_output=True, timeout=TIMEOUT)
        busy = threading.Thread(target=poke)
        busy.start()
        out = os.path.join(d, "r-%n.json")
        subprocess.run([YMTOP, "-b", "-n", "4", "-i", "0.5", "-f", "json", "-o",
                        out, "-p", str(srv.pid)], check=True, timeout=TIMEOUT,
                       capture_output=True)
        text = subprocess.run([YMTOP, "-b", "-n", "4", "-i", "0.5", "-p",
                               str(srv.pid)], check=True, timeout=TIMEOUT,
                              capture_output=True, text=True).stdout
    finally:
        stop.set()
        if busy:
            busy.join()
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    try:
        reps = [json.load(open(os.path.join(d, f))) for f in sorted(os.listdir(d))
                if f.endswith(".json")]
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert len(reps) == 4, len(reps)
    fresh = [r for r in reps if r["heap"] and r["heap"]["age_s"] < 2]
    assert fresh, [r["heap"] for r in reps]
    r = fresh[-1]
    x = r["rss_explained"]
    assert x["units"] == {"heap_in_use_bytes": "usable", "heap_free_bytes": "usable",
                          "counted_in_use_bytes": "usable",
                          "retained_bytes": "requested",
                          "mmap_retained_bytes": "requested"}, x
    gap = x["in_use_minus_retained_bytes"]
    assert gap == x["heap_in_use_bytes"] - x["retained_bytes"], x
    assert x["retained_bytes"] > 30 * MiB, x
    # jemalloc's size classes: in use is the larger by its slack.
    assert gap > 0, x
    assert "usable minus requested bytes" in x["in_use_minus_retained_why"], x
    assert "size-class slack" in x["in_use_minus_retained_why"], x
    # The text report: each figure's unit, and the gap's row.
    reps_text = text.split("ymtop 0.")
    shown = [t for t in reps_text if "\n  in use - retained " in t]
    assert shown, text[-3000:]
    t = shown[-1]
    assert "units: estimates (retained, mmap, stacks) in requested bytes, " \
        "in use in usable bytes" in t, t[:2000]
    for row, unit in (("allocator in use", "usable bytes"),
                      ("retained (estimated)", "requested bytes")):
        line = [l for l in t.splitlines() if l.startswith("  " + row)]
        assert line and unit in line[0], (row, t[:2000])
    line = [l for l in t.splitlines() if l.startswith("  in use - retained")][0]
    assert "size-class slack" in line and "+" in line, line


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
