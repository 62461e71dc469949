"""Real deployments: reused pids, exec without the agent, containers (pid
and mount namespaces made with unshare), daemons that drop privileges.
Every case here once showed wrong or stale data without saying so."""
import json
import os
import shutil
import struct
import subprocess
import sys
import time

from ymlib import (AGENT, BUILD, MiB, WORKLOAD, YMTOP, Target, rerun_isolated,
                   functions, readable, run_tests, site, within, ymtop, seg_path)

NOBODY = 65534
DROPPER = os.path.join(BUILD, "progs", "dropper")
OFF_PID, OFF_START, OFF_PIDNS = 24, 32, 84   # struct ym_header


def stat_field22(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def header(path):
    with open(path, "rb") as f:
        return f.read(4096)


def pidns(pid):
    return os.stat("/proc/%d/ns/pid" % pid).st_ino


def need_unshare():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("skip: needs root and unshare for namespaces")
        return False
    r = subprocess.run(["unshare", "--pid", "--mount", "--fork", "true"],
                       capture_output=True)
    if r.returncode != 0:
        print("skip: unshare refused here: %s" % r.stderr.decode().strip())
        return False
    return True


def wait_pid(pred, timeout=20):
    """The first process (by /proc) for which pred(pid) holds."""
    end = time.time() + timeout
    while time.time() < end:
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    if pred(int(d)):
                        return int(d)
                except OSError:
                    pass
        time.sleep(0.05)
    raise AssertionError("no such process appeared")


def cmdline(pid):
    """pid's argv, [b""] once it is gone (listing /proc races with exits)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return [b""]


# ---- guest code ----

def test_agent_calls_nothing_that_translates_or_buffers():
    """The agent runs inside other programs' allocator calls: a strerror
    there went through gettext, which allocates under a lock its caller
    may hold (a PostgreSQL postmaster hung for good in bindtextdomain).
    No translation, no stdio: its imports must not include them."""
    r = subprocess.run(["nm", "-D", "-u", AGENT], capture_output=True,
                       text=True, check=True)
    imported = {line.split()[-1].split("@")[0] for line in r.stdout.splitlines()}
    banned = {"strerror", "strerror_r", "__xpg_strerror_r", "strsignal",
              "gettext", "dgettext", "dcgettext", "setlocale", "printf",
              "fprintf", "vfprintf", "puts", "fputs", "fopen", "fwrite",
              "perror", "opendir", "getpwuid", "syslog"}
    assert not imported & banned, sorted(imported & banned)


# ---- pid reuse ----

def test_segment_records_the_process_start_time():
    """The start time that tells a reused pid apart is field 22 of
    /proc/PID/stat (it was field 21, always 0, so nothing was checked)."""
    t = Target([WORKLOAD, "small"])
    try:
        h = header(seg_path(t.pid))
        got = struct.unpack_from("<Q", h, OFF_START)[0]
        assert got == stat_field22(t.pid) and got != 0, (got, stat_field22(t.pid))
    finally:
        t.finish()


def test_segment_of_a_dead_process_is_not_shown_for_its_pid():
    """A killed process leaves its segment; when its pid goes to another
    process, ymtop never shows the dead one's data as that process's: not
    in the list of agents, and -p removes the stale segment and attaches
    to the process that really has the pid."""
    t = Target([WORKLOAD, "big"])
    dead = seg_path(t.pid)
    # (Read before the kill: any agent starting meanwhile removes it after.)
    data = bytearray(open(dead, "rb").read())
    t.kill()
    other = subprocess.Popen(["sleep", "60"])
    stale = seg_path(other.pid)
    try:
        # The pid reused: the dead process's segment under the new pid.
        struct.pack_into("<I", data, OFF_PID, other.pid)
        fd = os.open(stale, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, data)
        os.close(fd)
        if os.path.exists(dead):
            os.unlink(dead)
        r = ymtop("-b", "-n", "1", check=False)
        assert "pid %d" % other.pid not in r.stdout + r.stderr, r.stdout + r.stderr
        r = ymtop("-b", "-n", "1", "-f", "json", "-p", other.pid)
        # (Another agent starting meanwhile may have removed it first.)
        assert "another has its pid" in r.stderr or not r.stderr, r.stderr
        rep = json.loads(r.stdout)
        assert rep["exe"].endswith("/sleep"), rep["exe"]
        assert not any("hold_big" in functions(s) for s in rep["stacks"])
    finally:
        other.kill()
        other.wait()
        for p in (stale, dead):
            if os.path.exists(p):
                os.unlink(p)


# The next agent that samples collects stale segments (at its first
# sample: a short process that never samples pays none of it).
SAMPLES = ["count:100:1000"]
SAMPLING = {"YM_SAMPLE_RATE": "4096"}


def test_next_agent_removes_segments_of_killed_processes():
    """A killed process's segment, the record of what it held, is left
    for ymtop (which keeps its report) while /dev/shm is at least half
    free; the next sampling agent removes it when /dev/shm is fuller."""
    if rerun_isolated(__file__, "test_next_agent_removes_segments_of_killed_processes"):
        return
    t = Target([WORKLOAD])
    path = seg_path(t.pid)
    t.kill()
    assert os.path.exists(path)
    # An agent that never samples collects nothing.
    Target([WORKLOAD], env={"YM_SAMPLE_RATE": "1024g"}).finish()
    assert os.path.exists(path), "collected by an agent that took no sample"
    Target([WORKLOAD] + SAMPLES, env=SAMPLING).finish()
    assert os.path.exists(path), "a killed process's record removed with room left"
    if os.environ.get("YM_PRIVATE_SHM") != "1":
        return   # not root: /dev/shm is everyone's, not ours to fill
    # A container's /dev/shm (Kubernetes: 64 MiB), more than half used.
    subprocess.run(["mount", "-o", "remount,size=64m", "/dev/shm"], check=True)
    st = os.statvfs("/dev/shm")
    filler = "/dev/shm/filler"
    with open(filler, "wb") as f:
        f.write(b"x" * (st.f_bavail * st.f_frsize // 2 + (1 << 20)))
    try:
        u = Target([WORKLOAD] + SAMPLES, env=SAMPLING)
        try:
            assert not os.path.exists(path), "stale segment left in a full /dev/shm"
        finally:
            u.finish()
    finally:
        os.unlink(filler)


OFF_FLAGS = 728
EXITED, KEPT = 0x1, 0x40


def test_next_agent_keeps_kept_segments_and_removes_unremoved_ones():
    """YM_KEEP_SEGMENT=1 leaves a segment for a post-mortem look: the next
    agent keeps it.  One that its process could not remove at exit (it had
    become another user) is collected."""
    t = Target([WORKLOAD], env={"YM_KEEP_SEGMENT": "1"})
    path = seg_path(t.pid)
    t.finish()
    try:
        flags = struct.unpack_from("<I", header(path), OFF_FLAGS)[0]
        assert flags & (EXITED | KEPT) == EXITED | KEPT, hex(flags)
        Target([WORKLOAD] + SAMPLES, env=SAMPLING).finish()
        assert os.path.exists(path), "a kept segment was removed"
        with open(path, "r+b") as f:
            f.seek(OFF_FLAGS)
            f.write(struct.pack("<I", EXITED))
        Target([WORKLOAD] + SAMPLES, env=SAMPLING).finish()
        assert not os.path.exists(path), "an exited, unremoved segment was left"
    finally:
        if os.path.exists(path):
            os.unlink(path)


# ---- exec ----

def test_exec_without_the_agent_leaves_no_segment():
    """LD_PRELOAD=agent env -u LD_PRELOAD app: env's agent removes its
    segment's name before the exec; ymtop -p injects into app."""
    p = subprocess.Popen(
        ["env", "-u", "LD_PRELOAD", WORKLOAD, "big"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, LD_PRELOAD=AGENT, YM_EARLY_SEGMENT="1"))
    try:
        assert p.stdout.readline().strip() == "ready"
        assert not os.path.exists(seg_path(p.pid)), "env's segment stayed"
        r = ymtop("-b", "-n", "1", "-f", "json", "-p", p.pid)
        assert "stale" not in r.stderr, r.stderr
        rep = json.loads(r.stdout)
        assert rep["exe"] == WORKLOAD and rep["attached"] is True, rep["exe"]
    finally:
        p.communicate("\n", timeout=30)


def test_exec_without_the_agent_is_not_shown_as_live():
    """The same with YM_KEEP_SEGMENT=1, whose segment an exec leaves: the
    segment env made is not app's.  ymtop never lists it; -p says it is
    stale, removes it and injects into app, whose data it then shows."""
    p = subprocess.Popen(
        ["env", "-u", "LD_PRELOAD", WORKLOAD, "big"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, LD_PRELOAD=AGENT, YM_EARLY_SEGMENT="1",
                 YM_KEEP_SEGMENT="1"))
    try:
        assert p.stdout.readline().strip() == "ready"
        seg = seg_path(p.pid)
        assert os.path.exists(seg), "env made no segment: test needs one"
        r = ymtop("-b", "-n", "1", check=False)
        assert "pid %d " % p.pid not in r.stdout, r.stdout
        r = ymtop("-b", "-n", "1", "-f", "json", "-p", p.pid)
        assert "exec'd a program without the agent" in r.stderr, r.stderr
        rep = json.loads(r.stdout)
        assert rep["exe"] == WORKLOAD, rep["exe"]
        assert rep["attached"] is True
    finally:
        p.communicate("\n", timeout=30)


# ---- containers ----

def container(argv, share_shm=False, extra=""):
    """argv as pid 1 of new pid and mount namespaces (its own /proc and,
    unless share_shm, a private /dev/shm), under the agent."""
    setup = "mount -t proc proc /proc; "
    if not share_shm:
        setup += "mount -t tmpfs -o mode=1777 tmpfs /dev/shm; "
    # Sampling every 16 KiB: the estimates below are then within a few
    # per cent (at 512 KiB, 16 MiB in 1000-byte blocks is ~32 samples).
    script = setup + extra + 'exec env LD_PRELOAD="$0" YM_SAMPLE_RATE=16384 "$@"'
    return subprocess.Popen(
        ["unshare", "--pid", "--mount", "--fork", "--propagation", "private",
         "sh", "-c", script, AGENT] + argv,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def status(pid, key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return line.split()[1:]
    return []


def inner_pid(outer, prog):
    """Host pid of the process running prog under the unshare outer (its
    child: unshare forks it, and the shell execs prog)."""
    return wait_pid(lambda pid: status(pid, "PPid") == [str(outer.pid)] and
                    cmdline(pid)[0].endswith(prog.encode()) and
                    len(status(pid, "NSpid")) == 2)


def test_container_with_private_dev_shm_is_watched_from_the_host():
    """A process in its own pid and mount namespaces, with its own
    /dev/shm: ymtop on the host finds its segment through /proc/PID/root
    and NSpid, with -p HOSTPID and without -p, and reports both pids."""
    if not need_unshare():
        return
    c = container([WORKLOAD, "big"])
    try:
        assert c.stdout.readline().strip() == "ready"
        host = inner_pid(c, "workload")
        assert not [f for f in os.listdir("/dev/shm")
                    if f == "ymtop-1" or f.startswith("ymtop-1.")]
        rep = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", host).stdout)
        assert rep["pid"] == host and rep.get("ns_pid") == 1, (rep["pid"], rep.get("ns_pid"))
        within(site(rep, "hold_big")["retained_bytes"], 64 * MiB, 0.15, "hold_big")
        r = ymtop("-b", "-n", "1", check=False)
        assert "pid %d" % host in r.stdout or "%d " % host in r.stderr, r.stdout + r.stderr
    finally:
        c.communicate("\n", timeout=30)


def test_two_containers_sharing_dev_shm_keep_their_own_segments():
    """Two pid namespaces, both with pid 1, sharing the host's /dev/shm:
    each keeps its own segment (named with its namespace) and ymtop shows
    each its own data."""
    if not need_unshare():
        return
    a = container([WORKLOAD, "big"], share_shm=True)
    b = container([WORKLOAD, "small"], share_shm=True)
    try:
        assert a.stdout.readline().strip() == "ready"
        assert b.stdout.readline().strip() == "ready"
        ha, hb = inner_pid(a, "workload"), inner_pid(b, "workload")
        assert pidns(ha) != pidns(hb)
        for host in (ha, hb):
            assert os.path.exists("/dev/shm/ymtop-1.%d" % pidns(host))
        ra = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", ha).stdout)
        rb = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", hb).stdout)
        within(site(ra, "hold_big")["retained_bytes"], 64 * MiB, 0.15, "a big")
        within(site(rb, "hold_small")["retained_bytes"], 16 * MiB, 0.15, "b small")
        assert not any("hold_small" in functions(s) for s in ra["stacks"])
        assert not any("hold_big" in functions(s) for s in rb["stacks"])
    finally:
        a.communicate("\n", timeout=30)
        b.communicate("\n", timeout=30)


def test_ymtop_inside_a_container_works_as_on_a_host():
    """ymtop run in the container's own namespaces finds the agent there
    without -p, as on a host."""
    if not need_unshare():
        return
    script = ("mount -t proc proc /proc; mount -t tmpfs -o mode=1777 tmpfs /dev/shm; "
              'f=$(mktemp); (sleep 30 | LD_PRELOAD="$0" YM_SAMPLE_RATE=16384 '
              '"$1" big > "$f") & '
              'i=0; while ! grep -q ready "$f" && [ $i -lt 100 ]; do '
              "sleep 0.1; i=$((i+1)); done; "
              '"$2" -b -n 1 -f json')
    r = subprocess.run(
        ["unshare", "--pid", "--mount", "--fork", "--propagation", "private",
         "sh", "-c", script, AGENT, WORKLOAD, YMTOP],
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["exe"] == WORKLOAD and "ns_pid" not in rep, (rep["exe"], rep.get("ns_pid"))
    within(site(rep, "hold_big")["retained_bytes"], 64 * MiB, 0.15, "hold_big")


def test_read_only_dev_shm_is_named_as_the_cause():
    """The agent cannot make its segment in a read-only /dev/shm (as some
    container runtimes mount it): ymtop -p says so and how to fix it."""
    if not need_unshare():
        return
    script = ("mount -t proc proc /proc; mount -t tmpfs -o ro tmpfs /dev/shm; "
              'exec "$0" "$@"')
    c = subprocess.Popen(
        ["unshare", "--pid", "--mount", "--fork", "--propagation", "private",
         "sh", "-c", script, os.path.join(BUILD, "progs", "inject_read")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert c.stdout.readline().strip() == "ready"
        host = inner_pid(c, "inject_read")
        r = ymtop("-b", "-n", "1", "-p", host, check=False)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert r.stderr.count("\n") == 1 and "read-only" in r.stderr, r.stderr
    finally:
        c.communicate("x\n", timeout=30)


# ---- daemons ----

def test_idle_daemon_that_forked_away_gets_its_segment_started():
    """A daemon that forked away from where the agent started and has not
    allocated since has the agent but no segment (an idle nginx master):
    ymtop -p starts the segment through the agent instead of calling it
    disabled, and the uptime is the process's, not the segment's."""
    r = subprocess.run([os.path.join(BUILD, "progs", "forkidle")],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, LD_PRELOAD=AGENT))
    child = int(r.stdout.split()[1])
    try:
        time.sleep(2.2)
        assert not os.path.exists(seg_path(child))
        out = ymtop("-b", "-n", "1", "-f", "json", "-p", child, "-i", "0.2")
        rep = json.loads(out.stdout)
        assert rep["pid"] == child and rep["exe"].endswith("forkidle"), rep["exe"]
        assert rep["uptime_s"] >= 2.0, rep["uptime_s"]
        assert os.path.exists(seg_path(child))
    finally:
        os.kill(child, 15)


def test_children_forked_while_the_loader_list_is_walked_do_not_hang():
    """glibc leaves the loader's list lock in a fork child as it was: a
    child forked while another thread was inside dl_iterate_phdr waited
    for ever at the agent's first walk of the list (its segment's module
    scan).  Every child of a program whose thread walks the list all the
    time exits, and one forked from inside a walk (the lock held in it for
    good) shows its allocations with symbolized frames: its module list
    was read without the lock."""
    t = Target([os.path.join(BUILD, "progs", "forkwalk"), "12"],
               env={"YM_SAMPLE_RATE": "65536"})
    kept = None
    try:
        assert "hung 0 of 12" in t.lines, t.lines
        kept = int(next(l.split()[1] for l in t.lines if l.startswith("kept ")))
        end = time.time() + 10
        while not os.path.exists(seg_path(kept)) and time.time() < end:
            time.sleep(0.05)
        assert os.path.exists(seg_path(kept)), "the kept child has no segment"
        time.sleep(0.3)
        rep = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", kept).stdout)
        assert rep["modules_complete"] is True, "the lock was not found"
        s = site(rep, "kept_site")
        assert "child_site" in functions(s) and "main" in functions(s), functions(s)
        within(sum(x["retained_bytes"] for x in rep["stacks"]
                   if "kept_site" in functions(x)), 4 * MiB, 0.4, "kept child")
    finally:
        t.finish()
        t.kill()


# ---- daemons that drop privileges ----

def dropper(*args):
    e = dict(os.environ, LD_PRELOAD=AGENT)
    p = subprocess.Popen([DROPPER] + list(args) + [str(NOBODY)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=e)
    line = p.stdout.readline().split()
    assert line and line[0] == "ready", (line, p.stderr.read())
    return p, int(line[1])


def test_segment_follows_a_process_that_drops_privileges():
    """A daemon started as root whose worker becomes nobody (nginx): the
    worker's segment becomes nobody's, so root's and nobody's ymtop read
    it, ymtop lists it, and the worker removes it when it exits."""
    if os.geteuid() != 0:
        print("skip: needs root to drop privileges")
        return
    p, worker = dropper("fork")
    path = seg_path(worker)
    try:
        assert os.stat(path).st_uid == NOBODY, os.stat(path)
        rep = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", worker).stdout)
        within(site(rep, "before_drop")["retained_bytes"], 4 * MiB, 0.5, "before")
        within(site(rep, "after_drop")["retained_bytes"], 4 * MiB, 0.5, "after")
        r = subprocess.run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                            "--clear-groups", readable(YMTOP), "-b", "-n", "1",
                            "-f", "json", "-p", str(worker)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        r = ymtop("-b", "-n", "1", check=False)
        assert str(worker) in r.stdout + r.stderr, r.stdout + r.stderr
    finally:
        p.communicate("\n", timeout=30)
    assert not os.path.exists(path), "the worker's segment leaked"


NGINX_CONF = """user nobody nogroup;
worker_processes 2;
daemon on;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %(d)s/tmp;
  proxy_temp_path %(d)s/tmp;
  fastcgi_temp_path %(d)s/tmp;
  uwsgi_temp_path %(d)s/tmp;
  scgi_temp_path %(d)s/tmp;
  server { listen 127.0.0.1:%(port)d; location / { return 200 "hi"; } }
}
"""


class Nginx:
    """Debian's nginx in a private prefix on a loopback port, daemonized
    (the master forks away from its starter), workers as nobody."""

    def __init__(self, preload):
        import socket
        import tempfile
        self.dir = tempfile.mkdtemp(prefix="ymtop-nginx-")
        os.chmod(self.dir, 0o755)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(NGINX_CONF % {"d": self.dir, "port": self.port})
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        if preload:
            env["LD_PRELOAD"] = AGENT
            env["YM_SAMPLE_RATE"] = "4096"   # a few requests: enough samples
        subprocess.run(self.cmd(), env=env, check=True, timeout=30)
        self.master = int(open(os.path.join(self.dir, "nginx.pid")).read())

    def cmd(self, *extra):
        return ["nginx", "-p", self.dir, "-c", self.conf,
                "-e", os.path.join(self.dir, "error.log")] + list(extra)

    def workers(self, old=(), timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            w = [p for p in os.listdir("/proc") if p.isdigit() and
                 int(p) not in old and
                 cmdline(int(p))[0].startswith(b"nginx: worker")]
            if len(w) == 2:
                return sorted(int(p) for p in w)
            time.sleep(0.05)
        raise AssertionError("nginx has no two new workers")

    def get(self):
        import urllib.request
        return urllib.request.urlopen("http://127.0.0.1:%d/" % self.port,
                                      timeout=10).read()

    def signal(self, what):
        subprocess.run(self.cmd("-s", what), check=True, timeout=30,
                       capture_output=True)

    def stop(self):
        if os.path.exists("/proc/%d" % self.master):
            subprocess.run(self.cmd("-s", "stop"), timeout=30, capture_output=True)
            end = time.time() + 10
            while os.path.exists("/proc/%d" % self.master) and time.time() < end:
                time.sleep(0.05)
        shutil.rmtree(self.dir, True)


def gone(paths, timeout=10):
    end = time.time() + timeout
    while time.time() < end and any(os.path.exists(p) for p in paths):
        time.sleep(0.05)
    return [p for p in paths if os.path.exists(p)]


def test_nginx_workers_as_nobody_watched_and_cleaned_up():
    """nginx started as root under the agent: its workers (nobody) are
    listed and readable; reload and quit leave no segment behind."""
    if os.geteuid() != 0 or not shutil.which("nginx"):
        print("skip: needs root and nginx (Debian package nginx-light)")
        return
    n = Nginx(preload=True)
    try:
        first = n.workers()
        for _ in range(20):
            assert n.get() == b"hi"
        segs = [seg_path(w) for w in first]
        for p in segs:
            assert os.stat(p).st_uid == NOBODY, (p, os.stat(p).st_uid)
        r = ymtop("-b", "-n", "1", check=False)
        for w in first:
            assert str(w) in r.stdout + r.stderr, r.stdout + r.stderr
        for _ in range(200):
            n.get()
        reps = [json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", w).stdout)
                for w in first]
        assert reps[0]["pid"] == first[0] and reps[0]["exe"].endswith("nginx")
        # The stacks that allocate most: shown at a named frame past nginx's
        # pool and alloc wrappers (nginx is stripped: only its exported
        # names are known).
        top = sorted((s for r in reps for s in r["stacks"]),
                     key=lambda s: -s["allocated_bytes"])[:5]
        assert top, "no stacks sampled"
        wrappers = {"ngx_alloc", "ngx_calloc", "ngx_memalign", "ngx_palloc",
                    "ngx_pnalloc", "ngx_pcalloc", "ngx_create_pool", "malloc"}
        for s in top:
            shown = s["frames"][s["display_frame"]]["function"]
            assert shown not in wrappers and not shown.startswith("["), \
                (shown, [f["function"] for f in s["frames"][:6]])
        n.signal("reload")
        second = n.workers(old=first)
        assert not gone(segs), "old workers' segments leaked after reload"
        n.signal("quit")
        assert not gone([seg_path(w) for w in second] +
                        [seg_path(n.master)]), "segments leaked at quit"
    finally:
        n.stop()


def test_nginx_daemonized_master_attached_and_its_new_workers_followed():
    """nginx started without the agent, daemonized, its master idle in
    sigsuspend: ymtop -p attaches to it (a call chain, not stray words on
    its stack, decides the safe moment), and after a reload the workers it
    forks carry the agent, run as nobody and are readable."""
    if os.geteuid() != 0 or not shutil.which("nginx"):
        print("skip: needs root and nginx (Debian package nginx-light)")
        return
    n = Nginx(preload=False)
    try:
        first = n.workers()
        n.get()
        rep = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", n.master,
                               "-i", "0.2").stdout)
        assert rep["pid"] == n.master and rep["attached"] is True, rep["pid"]
        n.signal("reload")
        second = n.workers(old=first)
        for _ in range(20):
            n.get()
        # A fork child makes its segment when first needed (its first
        # sample, or ymtop -p asking for it): made by the worker, as nobody.
        for w in second:
            r = json.loads(ymtop("-b", "-n", "1", "-f", "json", "-p", w).stdout)
            assert r["pid"] == w, r["pid"]
            assert os.stat(seg_path(w)).st_uid == NOBODY, w
    finally:
        n.stop()


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
