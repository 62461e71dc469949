"""The cgroup picture: the process's cgroup's memory (current, max,
events, pressure, the split of memory.stat, its processes and their RSS)
beside the process's own figures, in JSON and text.  Run inside a child
cgroup the test makes (of the memory controller's hierarchy: v2, or v1 on
a hybrid host), with a limit, the target moved into it before it
allocates; skipped with the reason where no such cgroup can be made."""
import errno
import os

from ymlib import BUILD, Skip, Target, report, run_tests, ymtop

PROG = os.path.join(BUILD, "progs", "resident")
MiB = 1024 * 1024
LIMIT = 96 * MiB


def memory_hierarchy():
    """(directory of our cgroup in the memory hierarchy, v1) as ymtop
    finds it (tui/cgmem.c)."""
    v1 = v2 = None
    with open("/proc/self/cgroup") as f:
        for line in f:
            ident, ctrls, path = line.rstrip("\n").split(":", 2)
            if ident == "0" and ctrls == "":
                v2 = path
            elif "memory" in ctrls.split(","):
                v1 = path
    if v1 is not None:
        return "/sys/fs/cgroup/memory" + v1.rstrip("/"), True
    root = "/sys/fs/cgroup"
    if not os.path.exists(root + "/cgroup.controllers"):
        root += "/unified"
    return root + (v2 or "/").rstrip("/"), False


def make_child():
    base, v1 = memory_hierarchy()
    child = os.path.join(base, "ymtop-test-%d" % os.getpid())
    try:
        os.mkdir(child)
    except OSError as e:
        raise Skip("cannot make a cgroup under %s: %s" % (base, os.strerror(e.errno)))
    try:
        if v1:
            with open(child + "/memory.limit_in_bytes", "w") as f:
                f.write(str(LIMIT))
        else:
            if not os.path.exists(child + "/memory.max"):
                try:
                    with open(base + "/cgroup.subtree_control", "w") as f:
                        f.write("+memory")
                except OSError as e:
                    raise Skip("cgroup v2 at %s: the memory controller cannot be "
                               "enabled for a child (%s)" % (base, os.strerror(e.errno)))
            with open(child + "/memory.max", "w") as f:
                f.write(str(LIMIT))
    except BaseException:
        os.rmdir(child)
        raise
    return child, v1


def test_cgroup_memory_beside_the_process():
    child, v1 = make_child()
    t = None
    try:
        t = Target([PROG], env={"YM_SAMPLE_RATE": "65536"})
        with open(child + "/cgroup.procs", "w") as f:
            f.write(str(t.pid))
        t.p.stdin.write("touch 32\n")
        t.p.stdin.flush()
        t.wait_for("ready")
        rep = report(t.pid)
        text = ymtop("-b", "-n", "1", "-p", t.pid).stdout
    finally:
        if t:
            t.finish()
        for _ in range(50):
            try:
                os.rmdir(child)
                break
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                import time
                time.sleep(0.1)
    c = rep["cgroup"]
    assert c and c["why"] is None, c
    assert c["path"].endswith("/" + os.path.basename(child)), c
    assert c["version"] == (1 if v1 else 2), c
    assert c["memory_max_bytes"] == LIMIT and not c["memory_max_unlimited"], c
    # The 32 MiB written by touch_site are charged here (moved in before).
    assert 32 * MiB <= c["memory_current_bytes"] <= LIMIT, c
    assert c["processes"] == 1, c
    assert abs(c["processes_rss_bytes"] - c["process_rss_bytes"]) <= 4 * MiB, c
    assert c["anon_bytes"] >= 32 * MiB, c
    assert c["events"] is not None and c["events"]["oom_kill"] == 0, c
    if not v1:
        assert c["pressure"] is not None, c
    assert "\nCgroup " + c["path"] in text, text
    assert "memory.current" in text and "oom_kill 0" in text, text


if __name__ == "__main__":
    raise SystemExit(run_tests(globals()))
