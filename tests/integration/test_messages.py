"""Messages that name the true reason, and everyday use: a pid that is no
process to watch (a kernel thread, ymtop itself, a thread id), a process
the kernel protects from root, agents that only other users run; a
report pipe closed by its reader, --rate without a terminal, thread names
of a process in a container."""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

from ymlib import (AGENT, BUILD, WORKLOAD, YMTOP, Skip, Target, readable,
                   rerun_isolated, run_tests, ymtop)

NAMED = os.path.join(BUILD, "progs", "named_threads")
PF_KTHREAD = 0x00200000


def one_line_error(r, code=1):
    assert r.returncode == code, (r.returncode, r.stderr)
    assert r.stderr.startswith("ymtop: "), r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == "", r.stdout


def kernel_thread():
    """A kernel thread we can see (none inside a container), or None."""
    for d in sorted(os.listdir("/proc"), key=lambda x: (len(x), x)):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[6]) & PF_KTHREAD:   # field 9: flags
            return int(d)
    return None


def test_kernel_thread_is_named_as_such():
    """A kernel thread has no user space: the message says so (it said
    "cannot read /proc/2/exe ... run ymtop as root", to root)."""
    k = kernel_thread()
    if k is None:
        raise Skip("no kernel thread visible (a container)")
    r = ymtop("-b", "-n", "1", "-p", k, check=False)
    one_line_error(r)
    assert "kernel thread" in r.stderr and "root" not in r.stderr, r.stderr


def test_ymtop_on_its_own_pid_says_so():
    """ymtop -p with its own pid (it said EPERM and "same user")."""
    r = subprocess.run(["sh", "-c", 'exec "$0" -b -n 1 -p $$', YMTOP],
                       capture_output=True, text=True, timeout=60)
    one_line_error(r)
    assert "itself" in r.stderr and "EPERM" not in r.stderr, r.stderr
    assert "same user" not in r.stderr, r.stderr


def test_thread_id_points_to_its_process():
    """A thread's id is no process: the message names the process to give
    instead (it said "starting it failed")."""
    t = Target([NAMED, "2"])
    try:
        tids = [int(x) for x in os.listdir("/proc/%d/task" % t.pid)
                if int(x) != t.pid]
        assert tids, "no thread"
        r = ymtop("-b", "-n", "1", "-p", tids[0], check=False)
        one_line_error(r)
        assert "thread" in r.stderr and "-p %d" % t.pid in r.stderr, r.stderr
        assert "starting it failed" not in r.stderr, r.stderr
    finally:
        t.finish()


LANDLOCK = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
# A ruleset that handles only making block devices (ymtop makes none):
# what matters is the domain, which may not ptrace out of itself.
attr = ctypes.c_uint64(1 << 11)
fd = libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(8), ctypes.c_uint32(0))
if fd < 0:
    sys.exit(77)
libc.prctl(38, 1, 0, 0, 0)   # PR_SET_NO_NEW_PRIVS
if libc.syscall(446, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
    sys.exit(77)
os.execv(sys.argv[1], sys.argv[1:])
'''

PID1 = r'''
import os, subprocess, sys
# pid 1 of a new pid namespace; ymtop runs in a Landlock domain it is
# not in, so the kernel refuses ymtop ptrace access to it, root or not.
r = subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2], "-b", "-n",
                    "1", "-p", "1"], capture_output=True, text=True)
sys.stdout.write(r.stdout)
sys.stderr.write(r.stderr)
sys.exit(r.returncode)
'''


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))


def test_pid_1_protected_from_root_is_not_told_to_be_root():
    """Root with CAP_SYS_PTRACE refused by a security module (here
    Landlock, as a sandbox protects its init): the message says so and
    does not tell root to run as root."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise Skip("needs root and unshare")
    if landlock_abi() < 1:
        raise Skip("Landlock is not enabled in this kernel")
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc",
                        sys.executable, "-c", PID1, LANDLOCK, YMTOP],
                       capture_output=True, text=True, timeout=60)
    if r.returncode == 77:
        raise Skip("Landlock refused the domain")
    one_line_error(r)
    assert "ptrace of process 1 refused" in r.stderr, r.stderr
    assert "security module" in r.stderr, r.stderr
    assert "run ymtop as root" not in r.stderr, r.stderr


def test_root_of_a_user_namespace_is_told_where_its_power_ends():
    """ymtop as root of a user namespace (a rootless container) against a
    process outside it: the kernel refuses, and root there is no remedy
    (it was told to run as root)."""
    if not shutil.which("unshare"):
        raise Skip("needs unshare")
    if subprocess.run(["unshare", "-U", "-r", "true"], capture_output=True).returncode:
        raise Skip("user namespaces are not available here")
    t = subprocess.Popen(["sleep", "60"])
    try:
        r = subprocess.run(["unshare", "-U", "-r", YMTOP, "-b", "-n", "1", "-p",
                            str(t.pid)], capture_output=True, text=True, timeout=60)
        one_line_error(r)
        assert "user namespace" in r.stderr, r.stderr
        assert "run ymtop as root" not in r.stderr, r.stderr
    finally:
        t.kill()
        t.wait()


def test_other_users_agents_are_named_to_a_user():
    """A user whose only agent processes are root's is told they exist and
    whose they are (not "no running process has the agent loaded").  In a
    pid namespace and /dev/shm of its own: other agents do not count."""
    if rerun_isolated(__file__, "test_other_users_agents_are_named_to_a_user",
                      pid_ns=True):
        return
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or not setpriv:
        raise Skip("needs root and setpriv")
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        r = subprocess.run([setpriv, "--reuid=65534", "--regid=65534",
                            "--clear-groups", readable(YMTOP), "-b", "-n", "1"],
                           capture_output=True, text=True, timeout=60)
        one_line_error(r)
        assert "other users" in r.stderr and "pid %d" % t.pid in r.stderr, r.stderr
        assert "uid 0" in r.stderr, r.stderr
    finally:
        t.finish()


def test_closed_pipe_ends_batch_quietly():
    """`ymtop -b ... | head -1`: once the reader is gone ymtop exits 0 with
    nothing on stderr, without waiting for the next report (-i 300)."""
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        p = subprocess.Popen([YMTOP, "-b", "-n", "5", "-i", "300", "-p", str(t.pid)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        first = p.stdout.readline()
        assert first.startswith("ymtop "), first
        p.stdout.close()
        try:
            p.wait(timeout=60)   # the next report is 300 s away
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise AssertionError("ymtop waited for its next report")
        err = p.stderr.read()
        assert p.returncode == 0 and err == "", (p.returncode, err)
    finally:
        t.finish()


def test_head_of_a_batch_pipeline_exits_0():
    """The shell pipeline of the manual, with pipefail: status 0, no
    error text."""
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "65536"})
    try:
        r = subprocess.run(["bash", "-o", "pipefail", "-c",
                            '"$0" -b -n 5 -i 1 -p "$1" | head -1', YMTOP, str(t.pid)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
        assert r.stdout.startswith("ymtop "), r.stdout
    finally:
        t.finish()


def test_rate_without_a_terminal_changes_the_rate_and_says_so():
    """`ymtop --rate 64k -p PID` from a script (no terminal): the rate is
    asked, one line says so, status 0 (it said "the live screen needs a
    terminal")."""
    t = Target([WORKLOAD, "big"], env={"YM_SAMPLE_RATE": "524288"})
    try:
        r = ymtop("--rate", "64k", "-p", t.pid, check=False)
        assert r.returncode == 0, (r.returncode, r.stderr)
        assert r.stdout == "" and r.stderr.count("\n") == 1, (r.stdout, r.stderr)
        assert "sample rate 64" in r.stderr and "asked" in r.stderr, r.stderr
        # The control block holds it: the program's next sample takes it.
        t.p.stdin.write("\n")
        t.p.stdin.flush()
    finally:
        t.finish()


def container(argv):
    script = ("mount -t proc proc /proc; mount -t tmpfs -o mode=1777 tmpfs /dev/shm; "
              'exec env LD_PRELOAD="$0" YM_SAMPLE_RATE=16384 "$@"')
    return subprocess.Popen(
        ["unshare", "--pid", "--mount", "--fork", "--propagation", "private",
         "sh", "-c", script, AGENT] + argv,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def host_pid_of(outer, prog):
    """Host pid of prog, run by unshare's child (two NSpid levels)."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/status" % d) as f:
                st = dict(l.split(":", 1) for l in f if ":" in l)
        except OSError:
            continue
        # comm, not argv: redis-server writes a title over its argv
        if (st["PPid"].split() == [str(outer.pid)] and len(st["NSpid"].split()) == 2
                and st["Name"].strip() == prog[:15]):
            return int(d)
    raise AssertionError("no %s under unshare %d" % (prog, outer.pid))


def test_thread_names_of_a_process_in_a_container():
    """The agent records the tids a container's process sees; /proc on the
    host names its threads by the host's: names come through NSpid (they
    were empty)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise Skip("needs root and unshare")
    c = container([NAMED, "3"])
    try:
        assert c.stdout.readline().strip() == "ready", c.stderr.read()
        host = host_pid_of(c, "named_threads")
        rep = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", host).stdout)
        names = sorted(t["name"] for t in rep["threads"])
        for i in range(3):
            assert "ymnamed-%d" % i in names, names
        assert "named_threads" in names, names   # the main thread
    finally:
        c.communicate("\n", timeout=30)


def test_redis_in_a_container_names_its_threads():
    """Debian's redis-server (jemalloc, named threads) in its own pid and
    mount namespaces, watched from the host: every thread that allocated
    has its name (the main thread's was empty)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise Skip("needs root and unshare")
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        raise Skip("redis-server and redis-cli are not installed (make deps)")
    d = tempfile.mkdtemp(prefix="ymtop-redis-")
    sock = os.path.join(d, "redis.sock")
    c = container(["redis-server", "--port", "0", "--save", "", "--appendonly", "no",
                   "--io-threads", "2", "--unixsocket", sock, "--dir", d])
    try:
        for _ in range(100):
            line = c.stdout.readline()
            if not line or "ready to accept connections" in line.lower():
                break
        host = host_pid_of(c, "redis-server")
        for i in range(50):
            subprocess.run(["redis-cli", "-s", sock, "SET", "k%d" % i, "v" * 65536],
                           capture_output=True, timeout=30, check=True)
        rep = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", host).stdout)
        names = [t["name"] for t in rep["threads"]]
        assert "redis-server" in names and "" not in names, names
    finally:
        subprocess.run(["redis-cli", "-s", sock, "SHUTDOWN", "NOSAVE"],
                       capture_output=True, timeout=30)
        c.communicate(timeout=30)
        shutil.rmtree(d, True)


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
