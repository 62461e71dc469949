#!/usr/bin/env python3
"""Python frames (segment.h v8, injector/agent/python.h): CPython programs
show the Python function, file and line that allocated, spliced into the
native stack, and the retained bytes per Python function agree with
tracemalloc's figures for the same program run separately (tracemalloc
counts requested bytes of Python-domain allocations: with
PYTHONMALLOC=malloc they all reach malloc, which ymtop counts in requested
bytes too)."""
import ast
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ymlib import (Plain, Skip, Target, attach, report, rerun_isolated,  # noqa: E402
                   run_tests, within, ymtop)

KEEPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "py", "keeper.py")
DEBIAN = "/usr/bin/python3.11"
PYENV = {m: "/root/.pyenv/versions/%s/bin/python%s" % (v, m)
         for m, v in (("3.11", "3.11.7"), ("3.12", "3.12.1"), ("3.13", "3.13.0"))}
RATE = "8192"


def functions_of_lines():
    """keeper.py's line -> the function it is in."""
    tree = ast.parse(open(KEEPER).read())
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for ln in range(node.lineno, node.end_lineno + 1):
                out[ln] = node.name
    return out


def line_of(text):
    """The line of keeper.py that holds text (once)."""
    lines = [i + 1 for i, l in enumerate(open(KEEPER).read().splitlines())
             if text in l]
    assert len(lines) == 1, (text, lines)
    return lines[0]


def display(stack):
    return stack["frames"][stack["display_frame"]] if stack["frames"] else None


def python_sites(rep):
    """Retained bytes by (function, line) of display frames from Python."""
    out = {}
    for s in rep["stacks"]:
        d = display(s)
        if d and d.get("kind") == "python" and d["file"] == KEEPER:
            k = (d["function"], d["line"])
            out[k] = out.get(k, 0) + s["retained_bytes"]
    return out


def by_function(sites):
    f = {}
    for (fn, _), v in sites.items():
        f[fn] = f.get(fn, 0) + v
    return f


def run(t, cmd):
    t.p.stdin.write(cmd + "\n")
    t.p.stdin.flush()
    t.wait_for("done")


def tracemalloc_figures(python, commands, env=None):
    """Retained bytes by keeper.py function, as tracemalloc counts them in
    a run of its own."""
    t = Plain([python, KEEPER], env=dict(env or {}, KEEPER_TRACE="1"))
    try:
        for c in commands:
            run(t, c)
        t.lines = []
        run(t, "trace")
        fol = functions_of_lines()
        out = {}
        for l in t.lines:
            if not l.startswith("{"):
                continue
            r = json.loads(l)
            if r["file"] == KEEPER and r["line"] in fol:
                fn = fol[r["line"]]
                out[fn] = out.get(fn, 0) + r["size"]
        return out
    finally:
        t.finish()


def keeper(python, env=None):
    return Target([python, KEEPER],
                  env=dict({"YM_SAMPLE_RATE": RATE}, **(env or {})))


def check_version(python, env, commands, expect):
    """Run commands under the agent; each function in expect shows as a
    display frame from Python with its file and the line that allocated,
    and keeps what tracemalloc says within tol."""
    if not os.path.exists(python):
        raise Skip("%s is not installed" % python)
    t = keeper(python, env)
    try:
        for c in commands:
            run(t, c)
        rep = report(t.pid)
    finally:
        t.finish()
    sites = python_sites(rep)
    for fn, line in expect:
        assert (fn, line) in sites, "no display frame %s (keeper.py:%d) in %s" % (
            fn, line, sorted(sites))
    truth = tracemalloc_figures(python, commands, env)
    got = by_function(sites)
    if os.environ.get("YM_VERBOSE"):
        print("ymtop %s, tracemalloc %s" % (got, truth))
    for fn, _ in expect:
        within(got.get(fn, 0), truth[fn], 0.15, "%s retained, %s" % (fn, python))
    return rep


SMALL_AND_LARGE = (["small 60000", "medium 20000", "large 200"],
                   [("keep_small", line_of("out[i] = (i, str(i) * 3)")),
                    ("keep_medium", line_of("KEEP.append(bytearray(1024 + i % 512))")),
                    ("keep_large", line_of("KEEP.append(bytearray(65536))"))])


def mmap_retained(rep):
    return sum(s["retained_bytes"] for s in rep["stacks"] if s["kind"] == "mmap")


def test_debian_python_malloc_shows_functions_and_lines_as_tracemalloc_counts():
    rep = check_version(DEBIAN, {"PYTHONMALLOC": "malloc"}, *SMALL_AND_LARGE)
    # Every object reaches malloc: no wrapper needed.
    assert rep["python"]["pymalloc"] == "malloc", rep["python"]


def check_pymalloc(python):
    """The default allocator: the pymalloc wrapper samples the small
    objects (keep_small's tuples and strs, 40-80 bytes each) at their own
    size and line, the buffers pymalloc forwards to malloc (1-1.5 KiB,
    far below the rate, and 64 KiB) are sampled once (twice would be
    double tracemalloc's figure), and the
    arenas the small objects live in are not counted again as [mmap]
    (60000 objects fill about 9 MiB of them)."""
    rep = check_version(python, {}, *SMALL_AND_LARGE)
    assert rep["python"]["pymalloc"] == "installed", rep["python"]
    assert rep["python"]["text"] is None, rep["python"]
    assert mmap_retained(rep) < 3 << 20, mmap_retained(rep)


def test_debian_python_default_allocator_samples_pymalloc_objects_once():
    check_pymalloc(DEBIAN)


GROWN = (["grown_list 20000", "grown_bytes 8000", "grown_past 6000"],
         [("keep_grown_list", line_of("lst.append(j)")),
          ("keep_grown_bytes", line_of('b += b"y" * 40')),
          ("keep_grown_past", line_of('b += b"z" * 37'))])


def check_grown(python):
    """Objects grown by realloc, as tracemalloc counts them: each realloc
    of 1..512 bytes is charged its whole request and draws the block
    afresh, so a sample that is not drawn again leaves (kept by malloc's
    realloc hook, a list of 20 appended items showed at 2.2 times its
    size, a bytearray grown by += to 457 bytes at 4 times), and so does one
    pymalloc moves to malloc past 512 bytes (malloc'd anew there)."""
    rep = check_version(python, {}, *GROWN)
    assert rep["python"]["pymalloc"] == "installed", rep["python"]


def test_debian_python_objects_grown_by_realloc_as_tracemalloc_counts():
    check_grown(DEBIAN)


def test_pyenv_python_3_13_objects_grown_by_realloc_as_tracemalloc_counts():
    if not os.path.exists(PYENV["3.13"]):
        raise Skip("%s is not installed" % PYENV["3.13"])
    check_grown(PYENV["3.13"])


def check_debug_hooks(python, env, args, hook):
    """The interpreter's debug hooks check a header of the domain's own at
    every free, which a sampled object served by malloc does not have: the
    wrapper stays off under pymalloc's (ymtop says so in one line) and is
    not needed under malloc's, and the program runs on (a wrapped one
    aborted at its start: "bad ID: Allocated using API 'r'")."""
    if not os.path.exists(python):
        raise Skip("%s is not installed" % python)
    t = Target([python] + args + [KEEPER], env=dict({"YM_SAMPLE_RATE": RATE}, **env))
    try:
        for c in ("small 20000", "grown_bytes 2000", "medium 2000"):
            run(t, c)
        rep = report(t.pid)
        text = ymtop("-b", "-n", "1", "-p", t.pid).stdout
    finally:
        rc, _, err = t.finish()
    assert rc == 0, (rc, err[-2000:])
    assert rep["python"]["pymalloc"] == hook, rep["python"]
    if hook == "off":
        assert "debug hooks" in text, text


def test_debian_python_pymalloc_debug_hooks_leave_the_wrapper_off():
    check_debug_hooks(DEBIAN, {"PYTHONMALLOC": "pymalloc_debug"}, [], "off")


def test_debian_python_malloc_debug_hooks_need_no_wrapper():
    check_debug_hooks(DEBIAN, {"PYTHONMALLOC": "malloc_debug"}, [], "malloc")


def test_pyenv_python_3_13_dev_mode_leaves_the_wrapper_off():
    check_debug_hooks(PYENV["3.13"], {}, ["-X", "dev"], "off")


def check_pyenv(minor):
    if not os.path.exists(PYENV[minor]):
        raise Skip("%s is not installed" % PYENV[minor])
    check_pymalloc(PYENV[minor])


def check_pyenv_malloc(minor):
    """PYTHONMALLOC=malloc: every object reaches malloc, the frames and
    the figures come without the wrapper."""
    if not os.path.exists(PYENV[minor]):
        raise Skip("%s is not installed" % PYENV[minor])
    rep = check_version(PYENV[minor], {"PYTHONMALLOC": "malloc"}, *SMALL_AND_LARGE)
    assert rep["python"]["pymalloc"] == "malloc", rep["python"]
    assert rep["python"]["version"].startswith(minor + "."), rep["python"]


def test_pyenv_python_3_11():
    check_pyenv("3.11")


def test_pyenv_python_3_12():
    check_pyenv("3.12")


def test_pyenv_python_3_13():
    check_pyenv("3.13")


def test_pyenv_python_3_11_malloc():
    check_pyenv_malloc("3.11")


def test_pyenv_python_3_12_malloc():
    check_pyenv_malloc("3.12")


def test_pyenv_python_3_13_malloc():
    check_pyenv_malloc("3.13")


def test_a_thread_shows_its_own_frames():
    t = keeper(DEBIAN)
    try:
        run(t, "thread 200")
        rep = report(t.pid)
    finally:
        t.finish()
    line = line_of("KEEP.append(bytearray(32768))")
    s = max((s for s in rep["stacks"] if display(s) and
             display(s)["function"] == "thread_worker"),
            key=lambda s: s["retained_bytes"], default=None)
    assert s, "no thread_worker display frame"
    d = display(s)
    assert d["kind"] == "python" and d["line"] == line, d
    # The thread's chain, not the main thread's (which waits in join).
    names = [f["function"] for f in s["frames"] if f.get("kind") == "python"]
    assert "keep_in_thread" not in names and "main" not in names, names
    within(s["retained_bytes"], 200 * 32768, 0.15, "thread_worker retained")


def test_a_c_extension_shows_its_native_frame_with_the_python_caller():
    t = keeper(DEBIAN)
    try:
        run(t, "sqlite 20000")
        rep = report(t.pid)
    finally:
        t.finish()
    line = line_of("db.executemany(")
    found = []
    for s in rep["stacks"]:
        d = display(s)
        py = [f for f in s["frames"] if f.get("kind") == "python"]
        if py and py[0]["function"] == "keep_sqlite":
            found.append((s["retained_bytes"], d, py[0]))
    assert found, "no stack through keep_sqlite"
    retained, d, caller = max(found, key=lambda x: x[0])
    assert d["kind"] == "native" and "sqlite3" in (d["module"] or ""), d
    assert caller["line"] == line, caller


def test_a_forked_worker_shows_its_frames_in_its_own_segment():
    t = keeper(DEBIAN)
    try:
        t.p.stdin.write("fork 100\n")
        t.p.stdin.flush()
        t.wait_for("child-ready")
        child = [int(l.split()[1]) for l in t.lines if l.startswith("child ")]
        if not child:
            t.wait_for("done")
            child = [int(l.split()[1]) for l in t.lines if l.startswith("child ")]
        rep = report(child[0])
    finally:
        t.finish()
    sites = python_sites(rep)
    line = line_of("KEEP.append(bytearray(49152))")
    assert ("child_work", line) in sites, sorted(sites)
    within(sites[("child_work", line)], 100 * 49152, 0.15, "child_work retained")


def check_attach(python, name):
    if not os.path.exists(python):
        raise Skip("%s is not installed" % python)
    if rerun_isolated(__file__, name):
        return
    t = Plain([python, KEEPER], env={"YM_SAMPLE_RATE": RATE})
    try:
        attach(t.pid)
        # The main thread waits in a read of stdin, GIL released: the
        # wrapper's installer is queued and says so until it runs.
        before = report(t.pid)["python"]
        text = ymtop("-b", "-n", "1", "-f", "text", "-p", t.pid).stdout
        run(t, "large 200")
        run(t, "small 60000")
        rep = report(t.pid)
    finally:
        t.finish()
    assert before["pymalloc"] == "pending", before
    assert sum(l.startswith("pymalloc hook pending") for l in text.splitlines()) == 1, text
    assert rep["python"]["pymalloc"] == "installed", rep["python"]
    sites = python_sites(rep)
    line = line_of("KEEP.append(bytearray(65536))")
    assert ("keep_large", line) in sites, sorted(sites)
    got = by_function(sites)
    within(got["keep_large"], 200 * 65536, 0.15, "keep_large retained")
    truth = tracemalloc_figures(python, ["small 60000"])
    within(got["keep_small"], truth["keep_small"], 0.15, "keep_small retained")


def test_attach_to_python_started_without_the_agent():
    check_attach(DEBIAN, "test_attach_to_python_started_without_the_agent")


def test_attach_to_pyenv_python_3_13_started_without_the_agent():
    # 3.13 finds its layouts in _Py_DebugOffsets and its thread states
    # through tstate->current_frame: attach reads them from outside.
    check_attach(PYENV["3.13"], "test_attach_to_pyenv_python_3_13_started_without_the_agent")


def test_detach_waits_for_the_interpreter_to_put_its_allocators_back():
    """--detach from a Python whose pymalloc ymtop -p wrapped: the
    interpreter's tables lead to the agent until its main thread runs the
    pending call that puts them back.  Blocked in a read of stdin it has
    not: the agent stays dormant and ymtop says why; once the thread has
    run Python again, a second --detach unloads the agent, and the
    interpreter frees what it allocated through the wrapper and exits 0."""
    t = Plain([DEBIAN, KEEPER], env={"YM_SAMPLE_RATE": RATE})
    try:
        attach(t.pid)
        run(t, "small 60000")
        assert report(t.pid)["python"]["pymalloc"] == "installed"
        r = ymtop("-p", t.pid, "--detach")
        assert "dormant: the Python interpreter still calls its allocator " \
            "wrapper" in r.stderr, r.stderr
        run(t, "small 1000")
        r = ymtop("-p", t.pid, "--detach")
        assert "agent detached and unloaded" in r.stderr, r.stderr
        with open("/proc/%d/maps" % t.pid) as f:
            assert "libymagent" not in f.read()
        run(t, "free")
        rc, _, err = t.finish()
        assert rc == 0, err
    finally:
        t.kill()


def test_an_interpreter_dlopened_after_the_segment_gets_frames_and_the_wrapper():
    # A C program makes the segment with its own allocations, then loads
    # libpython with dlopen and runs keeper.py in it (an embedded Python).
    embed = os.path.join(os.environ.get("YM_BUILD", "build"), "progs", "embedpy")
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"):
        raise Skip("libpython3.11 is not installed")
    t = Target([os.path.abspath(embed), KEEPER], env={"YM_SAMPLE_RATE": RATE})
    try:
        run(t, "small 60000")
        rep = report(t.pid)
    finally:
        t.finish()
    assert rep["python"]["frames"] is True, rep["python"]
    assert rep["python"]["pymalloc"] == "installed", rep["python"]
    truth = tracemalloc_figures(DEBIAN, ["small 60000"])
    within(by_function(python_sites(rep)).get("keep_small", 0), truth["keep_small"], 0.15,
           "keep_small retained, embedded")


def check_subinterpreter(python):
    if not os.path.exists(python):
        raise Skip("%s is not installed" % python)
    prog = os.path.join(os.path.dirname(KEEPER), "subinterp.py")
    t = Target([python, prog], env={"YM_SAMPLE_RATE": RATE})
    try:
        rep = report(t.pid)
    finally:
        t.finish()
    seen = {}
    for s in rep["stacks"]:
        d = display(s)
        if d and d.get("kind") == "python" and d["function"] in ("sub_keep", "main_keep"):
            names = [f["function"] for f in s["frames"] if f.get("kind") == "python"]
            other = "main_keep" if d["function"] == "sub_keep" else "sub_keep"
            assert other not in names and "in_thread" not in names, names
            seen[d["function"]] = seen.get(d["function"], 0) + s["retained_bytes"]
    within(seen.get("sub_keep", 0), 200 * 40000, 0.15, "sub_keep retained")
    within(seen.get("main_keep", 0), 200 * 65536, 0.15, "main_keep retained")


def test_a_thread_running_a_subinterpreter_shows_its_frames_not_another_interpreters():
    check_subinterpreter(PYENV["3.12"])


def test_a_3_13_isolated_subinterpreter_shows_its_frames_not_another_interpreters():
    # 3.13's _interpreters: the subinterpreter has a GIL and an obmalloc
    # state of its own, its thread a thread state of its own.
    check_subinterpreter(PYENV["3.13"])


def check_asyncio(python):
    """Two tasks of one event loop, interleaved at every allocation: each
    task's buffers show its own coroutine's function and line as display
    frame, the other task's coroutine nowhere in its stack."""
    if not os.path.exists(python):
        raise Skip("%s is not installed" % python)
    t = keeper(python)
    try:
        run(t, "asyncio 200")
        rep = report(t.pid)
    finally:
        t.finish()
    want = {"task_alpha": (line_of("KEEP.append(bytearray(57344))"), 57344),
            "task_beta": (line_of("KEEP.append(bytearray(24576))"), 24576)}
    seen = {}
    for s in rep["stacks"]:
        d = display(s)
        if d and d.get("kind") == "python" and d["function"] in want:
            names = [f["function"] for f in s["frames"] if f.get("kind") == "python"]
            other = "task_beta" if d["function"] == "task_alpha" else "task_alpha"
            assert other not in names, names
            k = (d["function"], d["line"])
            seen[k] = seen.get(k, 0) + s["retained_bytes"]
    # The await line allocates too (asyncio.sleep's coroutine): small,
    # and freed when the task resumes.
    for fn, (line, size) in want.items():
        within(seen.get((fn, line), 0), 200 * size, 0.15,
               "%s retained at keeper.py:%d, %s (%s)" % (fn, line, python, seen))


def test_asyncio_tasks_show_their_coroutines_lines():
    check_asyncio(DEBIAN)


def test_asyncio_tasks_show_their_coroutines_lines_pyenv_3_13():
    check_asyncio(PYENV["3.13"])


def test_a_code_object_made_where_a_freed_one_was_keeps_its_own_name():
    # Exact mode with pymalloc's objects would fill the stack table at
    # the interpreter's start: this test is about code objects, not them.
    t = Target([DEBIAN, KEEPER], env={"YM_SAMPLE_RATE": "1", "YM_PYMALLOC": "0"})
    try:
        run(t, "fresh 300")
        rep = report(t.pid)
    finally:
        t.finish()
    seen = 0
    for s in rep["stacks"]:
        d = display(s)
        if d and d.get("kind") == "python" and d["function"].startswith("f_"):
            k = int(d["function"][2:])
            # bytearray(n) asks for n + 1 bytes: exact mode, one object.
            assert s["retained_bytes"] == 4096 + 8 * k + 1, (d, s["retained_bytes"])
            seen += 1
    assert seen == 300, seen
    assert rep["python"]["code_objects"] >= 300, rep["python"]


def test_every_format_names_the_python_function():
    import shutil
    import sqlite3
    import tempfile
    t = keeper(DEBIAN)
    d = tempfile.mkdtemp(prefix="ymtop-py-")
    try:
        run(t, "large 100")
        folded = ymtop("-b", "-n", "1", "-f", "folded", "-p", t.pid).stdout
        prom = ymtop("-b", "-n", "1", "-f", "prometheus", "-p", t.pid).stdout
        ymtop("-b", "-n", "1", "-f", "sqlite", "-o", d + "/r.db", "-p", t.pid)
        ymtop("-b", "-n", "1", "-f", "pprof", "-o", d + "/r.pb.gz", "-p", t.pid)
        line = line_of("KEEP.append(bytearray(65536))")
        leaf = [l for l in folded.splitlines() if l.rsplit(" ", 1)[0].endswith(";main;keep_large")]
        assert leaf, folded
        assert any('function="keep_large"' in l and "keeper.py:%d" % line in l
                   for l in prom.splitlines()), prom
        db = sqlite3.connect(d + "/r.db")
        rows = db.execute("select file, line from frames where function = 'keep_large'").fetchall()
        assert (KEEPER, line) in rows, rows
        go = shutil.which("go")
        if go:
            r = subprocess.run([go, "tool", "pprof", "-top", "-sample_index=inuse_space",
                                d + "/r.pb.gz"], capture_output=True, text=True, timeout=120)
            top = [l for l in r.stdout.splitlines() if l.strip().endswith("keep_large")]
            assert top and float(top[0].split()[1].rstrip("%")) > 0, r.stdout
    finally:
        t.finish()
        shutil.rmtree(d, True)


def test_an_unknown_interpreter_version_says_so_in_one_line():
    old = "/root/.pyenv/versions/3.10.13/bin/python3.10"
    if not os.path.exists(old):
        raise Skip("%s is not installed" % old)
    t = keeper(old, {"PYTHONMALLOC": "malloc"})
    try:
        run(t, "large 50")
        rep = report(t.pid)
        text = ymtop("-b", "-n", "1", "-f", "text", "-p", t.pid).stdout
    finally:
        t.finish()
    py = rep["python"]
    assert py and py["frames"] is False and py["version"] is None, py
    line = "python before 3.11: native frames only"
    assert py["text"].startswith(line), py
    assert sum(line in l for l in text.splitlines()) == 1, text
    assert not any(f.get("kind") == "python" for s in rep["stacks"]
                   for f in s["frames"])


def test_a_known_interpreter_says_nothing_and_counts_its_code_objects():
    t = keeper(DEBIAN)
    try:
        run(t, "large 50")
        rep = report(t.pid)
    finally:
        t.finish()
    py = rep["python"]
    assert py["version"].startswith("3.11.") and py["frames"] is True, py
    assert py["text"] is None and py["code_objects"] > 0, py


def longest_tail_path(insns):
    """Instructions on the longest path from the entry to an indirect jmp
    (the tail call of the interpreter's allocator), never through a
    direct jump out of the function (the due path): the path of a call
    that is neither due nor bypassed early."""
    import re
    index = {a: i for i, (a, _, _) in enumerate(insns)}
    best = None
    stack = [(0, 0, frozenset())]
    while stack:
        i, n, seen = stack.pop()
        if i >= len(insns) or i in seen:
            continue
        seen = seen | {i}
        _, op, ops = insns[i]
        n += 1
        if op.startswith("ret"):
            continue
        target = re.match(r"^([0-9a-f]+)\s*<", ops)
        if op == "jmp":
            if ops.startswith("*"):
                best = max(best or 0, n)
            elif target and int(target.group(1), 16) in index:
                stack.append((index[int(target.group(1), 16)], n, seen))
            continue
        if op.startswith("j") and target and int(target.group(1), 16) in index:
            stack.append((index[int(target.group(1), 16)], n, seen))
        stack.append((i + 1, n, seen))
    return best


def test_the_pymalloc_wrappers_fast_paths_have_the_count_hooks_py_c_states():
    """Every PyObject_Malloc, PyMem_Malloc and their reallocs go through
    the wrapper (BENCHMARKS.md, "Python: the cost table"): its fast path
    is the count hooks_py.c states, on every path of a call that is not
    due (a size test or a gate test before the countdown makes a path
    longer than the stated count)."""
    import re
    from test_fastpath import AGENT, disassemble, release_gcc_x86_64
    release_gcc_x86_64(AGENT)
    src = open(os.path.join(os.path.dirname(KEEPER), "..", "..", "..", "injector",
                            "agent", "hooks_py.c")).read()
    m = re.search(r"\((\d+) instructions for malloc and (\d+) for realloc", src)
    counts = {"malloc": int(m.group(1)), "realloc": int(m.group(2))}
    for fn, stated in counts.items():
        for d in ("MEM", "OBJ"):
            name = "w_%s_DOMAIN_%s" % (fn, d)
            n = longest_tail_path(disassemble(AGENT, name))
            assert n is not None and n <= stated, "%s: %s instructions, hooks_py.c says %d" % (
                name, n, stated)


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
