"""ymtop's command line and its handling of bad input: one clear line on
stderr, exit status 1 or 2, never a crash."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ymlib import (WORKLOAD, YMTOP, Target, rerun_isolated, run_tests, seg_path,
                   site, ymtop)


def one_line_error(r, code):
    assert r.returncode == code, (r.returncode, r.stderr)
    assert r.stderr.startswith("ymtop: "), r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == "", r.stdout


def test_usage_errors_exit_2():
    for args in (["-p", "abc"], ["-i", "-5", "-b"], ["-f", "xml"], ["-n", "x"],
                 ["--bogus"], ["-p"], ["-d", "0"], ["-p", "99999999999"],
                 ["--interval", "1e999"], ["extra"], ["--skip", "("]):
        one_line_error(ymtop(*args, check=False), 2)


def test_sort_and_rate_usage_errors_exit_2():
    # Strict: whole words and whole numbers in range, one line, status 2.
    for args in (["--sort", "total"], ["--sort", ""], ["--sort", "Rate"],
                 ["--sort"], ["--rate", "1"], ["--rate", "0"], ["--rate", "-4096"],
                 ["--rate", "4096x"], ["--rate", "2T"], ["--rate", ""],
                 ["--rate", "99999999999999999999999"], ["--rate", "4 k"]):
        one_line_error(ymtop(*args, check=False), 2)


def test_batch_interval_300_parses_as_written():
    # `ymtop --batch --interval 300` must work exactly as written: with a
    # preloaded agent the first report comes at once (no settle), then
    # SIGTERM ends the wait for the next one cleanly.
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        p = subprocess.Popen([YMTOP, "--batch", "--interval", "300", "--pid",
                              str(t.pid)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        end = time.time() + 20
        first = p.stdout.readline()
        assert first.startswith("ymtop ") and time.time() < end, first
        p.terminate()
        out, err = p.communicate(timeout=20)
        assert p.returncode == 0 and err == "", (p.returncode, err)
    finally:
        t.finish()


def test_rate_refused_for_an_exact_agent_exit_1():
    t = Target([WORKLOAD], env={"YM_SAMPLE_RATE": "1"})
    try:
        r = ymtop("-b", "-n", "1", "--rate", "4096", "-p", t.pid, check=False)
        one_line_error(r, 1)
        assert "YM_SAMPLE_RATE=1" in r.stderr, r.stderr
    finally:
        t.finish()


def test_unknown_pid_exit_1():
    # A pid that cannot exist (above pid_max's hard limit is refused as a
    # usage error; this one is in range but unused).
    pid = 4194000
    while os.path.exists("/proc/%d" % pid):
        pid -= 1
    one_line_error(ymtop("-b", "-p", pid, check=False), 1)


def test_process_without_agent_and_no_agent_file_exit_1():
    # Without a segment ymtop injects the agent (test_inject.py); when the
    # agent file is missing it says so and leaves the target alone.
    p = subprocess.Popen(["sleep", "30"])
    try:
        r = ymtop("-b", "-p", p.pid, check=False,
                  env=dict(os.environ, YM_AGENT="/nonexistent/libymagent.so"))
        one_line_error(r, 1)
        assert "/nonexistent/libymagent.so" in r.stderr, r.stderr
        assert p.poll() is None
        assert not os.path.exists(seg_path(p.pid))
    finally:
        p.kill()
        p.wait()


def fake_segment(data):
    """A live process without the agent that maps a segment file for its
    pid holding data (a file it does not map is stale: ymtop -p removes it
    and loads the agent, test_leftovers.py)."""
    code = ("import mmap, sys\n"
            "f = open(sys.stdin.readline().strip(), 'r+b')\n"
            "m = mmap.mmap(f.fileno(), 0)\n"
            "print('ready', flush=True)\n"
            "sys.stdin.read()\n")
    p = subprocess.Popen(["/usr/bin/python3", "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    path = seg_path(p.pid)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    os.close(fd)
    p.stdin.write(path + "\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "ready"
    return p, path


def test_garbage_segment_exit_1():
    for data in (b"garbage" * 1000, os.urandom(1 << 16)):
        p, path = fake_segment(data)
        try:
            one_line_error(ymtop("-b", "-p", p.pid, check=False), 1)
            assert os.path.exists(path), "a segment its process maps was removed"
        finally:
            os.unlink(path)
            p.kill()
            p.wait()


def test_truncated_segment_exit_1():
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        with open(seg_path(t.pid), "rb") as f:
            real = f.read()
    finally:
        t.finish()
    for cut in (100, 4096, 5000, len(real) // 2, len(real) - 1):
        p, path = fake_segment(real[:cut])
        try:
            one_line_error(ymtop("-b", "-p", p.pid, check=False), 1)
        finally:
            os.unlink(path)
            p.kill()
            p.wait()


def test_world_writable_segment_refused():
    t = Target([WORKLOAD], env={})
    try:
        path = seg_path(t.pid)
        os.chmod(path, 0o666)
        r = ymtop("-b", "-p", t.pid, check=False)
        one_line_error(r, 1)
        assert "writable" in r.stderr
        os.chmod(path, 0o600)
        os.rename(path, path + ".real")
        os.symlink(path + ".real", path)
        r = ymtop("-b", "-p", t.pid, check=False)
        one_line_error(r, 1)
        assert "link" in r.stderr
        os.unlink(path)
        os.rename(path + ".real", path)
    finally:
        t.finish()


def test_picks_the_only_agent_or_lists():
    """Discovery sees every agent on the machine, also processes that have
    no segment yet (through /proc): run in mount and pid namespaces with
    an empty /dev/shm of their own (as root), so that other programs under
    the agent (benchmarks, other test runs) do not count."""
    if rerun_isolated(__file__, "test_picks_the_only_agent_or_lists",
                      pid_ns=True):
        return
    a = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        r = ymtop("-b", "-n", "1", "-f", "json")
        assert json.loads(r.stdout)["pid"] == a.pid
        b = Target([WORKLOAD], env={})
        try:
            r = ymtop("-b", "-n", "1", check=False)
            assert r.returncode == 1
            assert str(a.pid) in r.stderr and str(b.pid) in r.stderr
        finally:
            b.finish()
    finally:
        a.finish()


def test_batch_interval_long_options_and_output_files():
    d = tempfile.mkdtemp()
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        out = os.path.join(d, "r-%p-%n.json")
        ymtop("--batch", "--interval", "0.2", "--iterations", "3", "--pid",
              t.pid, "--format", "json", "--output", out)
        files = sorted(os.listdir(d))
        assert files == ["r-%d-%d.json" % (t.pid, n) for n in (1, 2, 3)], files
        for f in files:
            rep = json.load(open(os.path.join(d, f)))
            assert site(rep, "hold_big")["retained_bytes"] > 0
        # Never overwrite: the same names again is an error, files intact.
        r = ymtop("-b", "-i", "0.2", "-n", "1", "-p", t.pid, "-o", out,
                  check=False)
        one_line_error(r, 1)
        assert "exists" in r.stderr
        # Unwritable directory: a clean error, nothing left behind.
        r = ymtop("-b", "-n", "1", "-p", t.pid, "-o", "/proc/nope/x.txt",
                  check=False)
        one_line_error(r, 1)
    finally:
        t.finish()
        shutil.rmtree(d)


def test_batch_ends_with_final_report_when_target_exits():
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    p = subprocess.Popen([YMTOP, "-b", "-i", "0.2", "-f", "json", "-p",
                          str(t.pid)], stdout=subprocess.PIPE, text=True)
    time.sleep(0.7)
    t.finish()
    out, _ = p.communicate(timeout=20)
    assert p.returncode == 0
    reports = [json.loads(line) for line in out.splitlines() if line]
    assert len(reports) >= 2, len(reports)
    assert reports[-1]["state"] == "exited", reports[-1]["state"]
    assert reports[0]["state"] == "sampling"


def test_text_report_names_sites():
    t = Target([WORKLOAD, "big", "small"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        r = ymtop("-b", "-n", "1", "-p", t.pid)
    finally:
        t.finish()
    lines = r.stdout.splitlines()
    assert lines[0].startswith("ymtop ") and str(t.pid) in lines[0]
    first = [l for l in lines if l.startswith("#1 ")]
    assert first, r.stdout
    idx = lines.index(first[0])
    assert "hold_big (workload.c:" in lines[idx + 1], lines[idx:idx + 3]
    assert "=>" in lines[idx + 1]


def test_version_and_help():
    r = ymtop("--version")
    assert r.stdout.startswith("ymtop ")
    r = ymtop("--help")
    assert "--batch" in r.stdout and "--interval" in r.stdout


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
