"""Security: how segments are created, which segments ymtop accepts, and
that root running ymtop against another user's process writes nothing
through a path that user controls.  The tests run as root and use uid
65534 (nobody) as the other user."""
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile

from ymlib import (AGENT, WORKLOAD, YMTOP, Target, readable,
                   run_tests, ymtop, seg_path)

NOBODY = 65534
VICTIM_TEXT = b"precious: must never change\n"
OFF_PID, OFF_START = 24, 32          # struct ym_header: pid, start_ticks


def need_root():
    if os.geteuid() != 0:
        raise AssertionError("these tests need root (they switch users)")


def one_line_error(r, code):
    assert r.returncode == code, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("ymtop: "), r.stderr


def victim(d):
    path = os.path.join(d, "victim")
    with open(path, "wb") as f:
        f.write(VICTIM_TEXT)
    os.chmod(path, 0o600)
    return path


def assert_intact(path):
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, st
    with open(path, "rb") as f:
        assert f.read() == VICTIM_TEXT, "victim file changed"


def start_ticks(pid):
    """Field 22 of /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def seg(pid):
    return seg_path(pid)


def as_nobody(argv):
    """argv as nobody, with the agent preloaded only after the switch (so
    the segment is created by nobody, not by root's setpriv).  The agent
    and the program are copies nobody can read: the build tree may be in a
    private directory."""
    return Target(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                   "--clear-groups", "env", "LD_PRELOAD=" + readable(AGENT),
                   "YM_EARLY_SEGMENT=1",
                   readable(argv[0])] + argv[1:], preload=False)


# ---- the agent's side: creating the segment ----

def test_segment_is_0600_even_with_umask_0():
    t = Target(["sh", "-c", "umask 0; exec %s" % WORKLOAD])
    try:
        st = os.lstat(seg(t.pid))
        assert stat.S_ISREG(st.st_mode), st
        assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
        assert st.st_uid == os.geteuid()
    finally:
        t.finish()


def planted(make):
    """A program that execs the workload under the agent once something
    has been planted at its segment's name by make(path); returns its
    exit status, stdout and stderr."""
    p = subprocess.Popen(
        ["sh", "-c", 'read x; LD_PRELOAD="$0" YM_EARLY_SEGMENT=1 exec "$1" nowait',
         AGENT, WORKLOAD],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={k: v for k, v in os.environ.items()
                        if k != "LD_PRELOAD" and not k.startswith("YM_")})
    path = seg(p.pid)
    try:
        make(path)
        out, err = p.communicate("go\n", timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err, path


def test_agent_never_follows_a_symlink_planted_at_its_name():
    need_root()
    d = tempfile.mkdtemp()
    try:
        v = victim(d)
        rc, out, err, path = planted(lambda pth: os.symlink(v, pth))
        try:
            assert rc == 0 and out == "ready\n", (rc, out, err)
            # Passive, with one line saying why; the target runs on.
            assert err.count("\n") == 1 and err.startswith("ymagent: "), err
            assert_intact(v)
            assert os.path.islink(path), "the planted link was replaced"
        finally:
            os.unlink(path)
    finally:
        shutil.rmtree(d)


def test_agent_never_takes_over_another_users_file_at_its_name():
    need_root()

    def make(pth):
        with open(pth, "wb") as f:
            f.write(VICTIM_TEXT)
        os.chmod(pth, 0o600)
        os.chown(pth, NOBODY, NOBODY)
    rc, out, err, path = planted(make)
    try:
        assert rc == 0 and out == "ready\n", (rc, out, err)
        assert err.count("\n") == 1 and err.startswith("ymagent: "), err
        st = os.lstat(path)
        assert st.st_uid == NOBODY, "another user's file was replaced"
        with open(path, "rb") as f:
            assert f.read() == VICTIM_TEXT
    finally:
        os.unlink(path)


def test_agent_replaces_its_own_stale_segment():
    rc, out, err, path = planted(
        lambda pth: open(pth, "wb").write(b"stale segment of a dead process"))
    assert rc == 0 and out == "ready\n" and err == "", (rc, out, err)
    assert not os.path.exists(path), "the segment was not removed at exit"


# ---- ymtop's side: which segments it reads ----

def test_ymtop_refuses_segment_not_owned_by_the_process_owner():
    need_root()
    t = as_nobody([WORKLOAD])
    try:
        path = seg(t.pid)
        assert os.lstat(path).st_uid == NOBODY
        r = ymtop("-b", "-n", "1", "-p", t.pid, check=False)
        assert r.returncode == 0, r.stderr        # nobody's own: fine
        os.chown(path, 1, 1)                      # now owned by "daemon"
        r = ymtop("-b", "-n", "1", "-p", t.pid, check=False)
        one_line_error(r, 1)
        assert "owner" in r.stderr and "refused" in r.stderr, r.stderr
        os.chown(path, NOBODY, NOBODY)
    finally:
        t.finish()


def test_ymtop_refuses_group_writable_segment():
    t = Target([WORKLOAD])
    try:
        os.chmod(seg(t.pid), 0o620)
        r = ymtop("-b", "-n", "1", "-p", t.pid, check=False)
        one_line_error(r, 1)
        assert "writable" in r.stderr, r.stderr
        os.chmod(seg(t.pid), 0o600)
    finally:
        t.finish()


def real_segment():
    """The bytes of a real segment, kept by a workload that has exited."""
    t = Target([WORKLOAD], env={"YM_KEEP_SEGMENT": "1"})
    try:
        with open(seg(t.pid), "rb") as f:
            return bytearray(f.read())
    finally:
        t.finish()
        os.unlink(seg(t.pid))


def plant_segment(data, pid, start):
    """data as the segment of pid, recorded with start time start."""
    struct.pack_into("<I", data, OFF_PID, pid)
    struct.pack_into("<Q", data, OFF_START, start)
    fd = os.open(seg(pid), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    os.close(fd)


def test_reused_pid_is_detected():
    """A segment naming a live pid but another start time (left by an
    earlier process with the same pid) is never shown as that process's:
    -p says it is stale, removes it and attaches to the process that has
    the pid now; looking for agents, ymtop never offers it."""
    data = real_segment()
    other = subprocess.Popen(["sleep", "60"])
    path = seg(other.pid)
    try:
        plant_segment(data, other.pid, start_ticks(other.pid) + 1000)
        # Looking for agents: never this one (others may be running); its
        # segment may be swept away as a gone process's (man/ymtop.1).
        r = ymtop("-b", "-n", "1", "-f", "json", check=False)
        offered = [l for l in (r.stderr + r.stdout[:200]).splitlines()
                   if str(other.pid) in l and "is gone" not in l]
        assert not offered, r.stderr
        r = ymtop("-b", "-n", "1", "-f", "json", "-p", other.pid, check=False)
        assert r.returncode == 0, r.stderr
        # (Another agent starting meanwhile may have removed it first.)
        assert "another has its pid" in r.stderr or not r.stderr, r.stderr
        assert '"exe":"/usr/bin/sleep"' in r.stdout, r.stdout[:300]
    finally:
        other.kill()
        other.wait()
        if os.path.exists(path):
            os.unlink(path)


# ---- root writing reports next to a user's files ----

def user_dir():
    d = tempfile.mkdtemp()
    os.chown(d, NOBODY, NOBODY)
    os.chmod(d, 0o755)
    return d


def test_root_report_does_not_follow_a_user_symlink():
    """Root watches nobody's process and writes reports into a directory
    nobody controls, where nobody planted symbolic links at the report's
    name: ymtop refuses, and the file the link points to is intact."""
    need_root()
    d, vd = user_dir(), tempfile.mkdtemp()
    t = as_nobody([WORKLOAD, "small"])
    try:
        v = victim(vd)
        exe = os.path.basename(WORKLOAD)
        for name in ("report.txt", "%s-%d.json" % (exe, t.pid)):
            os.symlink(v, os.path.join(d, name))
        for pattern in ("report.txt", "%e-%p.json"):
            r = ymtop("-b", "-n", "1", "-f", "json" if "json" in pattern
                      else "text", "-p", t.pid, "-o", os.path.join(d, pattern),
                      check=False)
            one_line_error(r, 1)
            assert "exists" in r.stderr, r.stderr
        assert_intact(v)
        assert not [f for f in os.listdir(d) if "tmp" in f], os.listdir(d)
    finally:
        t.finish()
        shutil.rmtree(d)
        shutil.rmtree(vd)


def test_root_report_skips_planted_temporary_names():
    """ymtop writes a report into a temporary file beside it, then links
    it into place.  The temporary names are predictable (they carry
    ymtop's pid): links planted there are never followed, ymtop takes
    another name, and the report is a regular file owned by root."""
    need_root()
    d, vd = user_dir(), tempfile.mkdtemp()
    t = as_nobody([WORKLOAD, "small"])
    try:
        v = victim(vd)
        out = os.path.join(d, "heap.json")
        w = subprocess.Popen(
            ["sh", "-c", 'read x; exec "$0" -b -n 1 -f json -p "$1" -o "$2"',
             YMTOP, str(t.pid), out], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in range(5):   # ymtop keeps the pid of the shell it replaces
            os.symlink(v, os.path.join(d, ".ymtop-tmp-%d-%d" % (w.pid, n)))
        _, err = w.communicate("go\n", timeout=60)
        assert w.returncode == 0, err
        st = os.lstat(out)
        assert stat.S_ISREG(st.st_mode) and st.st_uid == 0, st
        assert b'"pid"' in open(out, "rb").read()
        assert_intact(v)
        left = sorted(f for f in os.listdir(d) if f.startswith(".ymtop-tmp"))
        assert len(left) == 5 and all(
            os.path.islink(os.path.join(d, f)) for f in left), left
    finally:
        t.finish()
        shutil.rmtree(d)
        shutil.rmtree(vd)


def test_process_name_cannot_climb_directories():
    """%e is the process's name: its comm (which the watched user sets with
    prctl) while it runs, else the segment's exe (which that user writes).
    Neither leads outside the -o directory."""
    code = ("import ctypes, sys\n"
            "ctypes.CDLL(None).prctl(15, b'../../evil\\x01', 0, 0, 0)\n"
            "print('ready', flush=True)\n"
            "sys.stdin.readline()\n")
    t = Target(["/usr/bin/python3", "-c", code])
    path = seg(t.pid)
    d = tempfile.mkdtemp()
    try:
        exe_off = 88                  # struct ym_header: exe[512]
        forged = b"/x/..\x01/../../etc/cron.d/evil\n"
        with open(path, "r+b") as f:  # the live segment, as its user could
            f.seek(exe_off)
            f.write(forged + bytes(512 - len(forged)))
        sub = os.path.join(d, "sub")
        os.mkdir(sub)
        r = ymtop("-b", "-n", "1", "-p", t.pid, "-o",
                  os.path.join(sub, "%e.txt"), check=False)
        assert r.returncode == 0, r.stderr
        made = os.listdir(sub)
        assert len(made) == 1 and "/" not in made[0] and ".." not in made[0], made
        assert "evil" in made[0], made
        assert os.listdir(d) == ["sub"], os.listdir(d)
    finally:
        t.finish()
        shutil.rmtree(d)


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
