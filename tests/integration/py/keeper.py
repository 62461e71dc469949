"""A Python program with known functions that keep known amounts
(tests/integration/test_python.py).  Commands, one a line on stdin:
small N, medium N, large N, grown_list N, grown_bytes N,
grown_past N, thread N, sqlite N, fork N, fresh N, asyncio N, trace,
quit.
Each prints "done" when finished; "trace" prints the tracemalloc figures
of everything kept so far as JSON lines {"file", "line", "size"}."""
import json
import gc
import os
import sys
import threading
import time
import signal

KEEP = []


def keep_small(n):
    # In a list of its own made at its size, as the grown_* functions
    # below keep theirs (why: above keep_grown_list).
    out = [None] * n
    for i in range(n):
        out[i] = (i, str(i) * 3)
    KEEP.append(out)


def keep_medium(n):
    # Above pymalloc's 512 bytes (it hands them to malloc), far below the
    # sample rate: each is charged once, by malloc's hook, or it would be
    # sampled at twice its chance.
    for i in range(n):
        KEEP.append(bytearray(1024 + i % 512))


def keep_large(n):
    for i in range(n):
        KEEP.append(bytearray(65536))


# The grown_* functions keep their objects in a list of their own made
# at its size: KEEP, grown by append, keeps its first sample's stack in
# ymtop and is tracemalloc's at its last realloc's line, a few hundred
# KiB that the function of neither may be.
def keep_grown_list(n):
    # Lists of 20 items grown by append: 4 reallocs of 32 to 192 bytes
    # each, all in pymalloc.
    out = [None] * n
    for i in range(n):
        lst = []
        for j in range(20):
            lst.append(j)
        out[i] = lst
    KEEP.append(out)


def keep_grown_bytes(n):
    # bytearrays grown by += to 457 bytes (10 reallocs), all in pymalloc.
    out = [None] * n
    for i in range(n):
        b = bytearray()
        for j in range(10):
            b += b"y" * 40
        out[i] = b
    KEEP.append(out)


def keep_grown_past(n):
    # bytearrays grown by += past 512 bytes (pymalloc moves them to
    # malloc at the last ones) to 649 bytes.
    out = [None] * n
    for i in range(n):
        b = bytearray()
        for j in range(16):
            b += b"z" * 37
        out[i] = b
    KEEP.append(out)


def thread_worker(n):
    for i in range(n):
        KEEP.append(bytearray(32768))


def keep_in_thread(n):
    t = threading.Thread(target=thread_worker, args=(n,))
    t.start()
    t.join()


def keep_sqlite(n):
    import sqlite3
    db = sqlite3.connect(":memory:")
    db.execute("create table t (a integer, b text)")
    db.executemany("insert into t values (?, ?)",
                   ((i, "x" * 200) for i in range(n)))
    db.commit()
    KEEP.append(db)


def child_work(n):
    for i in range(n):
        KEEP.append(bytearray(49152))


def keep_in_child(n):
    pid = os.fork()
    if pid == 0:
        child_work(n)
        print("child-ready", flush=True)
        time.sleep(120)
        os._exit(0)
    print("child %d" % pid, flush=True)
    return pid


def keep_from_fresh_code(n):
    # Each function's code object is freed before the next is made, so
    # that one is often made at the same address as the one before.
    for i in range(n):
        ns = {}
        exec("def f_%d():\n    return bytearray(%d)\n" % (i, 4096 + 8 * i), ns)
        KEEP.append(ns["f_%d" % i]())
        del ns


async def task_alpha(n):
    import asyncio
    for i in range(n):
        KEEP.append(bytearray(57344))
        await asyncio.sleep(0)


async def task_beta(n):
    import asyncio
    for i in range(n):
        KEEP.append(bytearray(24576))
        await asyncio.sleep(0)


def keep_in_tasks(n):
    # Two tasks of one event loop, interleaved at every allocation: each
    # allocates while its own coroutine's frames are the thread's.
    import asyncio

    async def both():
        await asyncio.gather(task_alpha(n), task_beta(n))
    asyncio.run(both())


def trace_lines():
    import tracemalloc
    snap = tracemalloc.take_snapshot()
    for st in snap.statistics("lineno"):
        fr = st.traceback[0]
        print(json.dumps({"file": fr.filename, "line": fr.lineno,
                          "size": st.size}))


def main():
    if os.environ.get("KEEPER_TRACE") == "1":
        import tracemalloc
        tracemalloc.start(1)
    print("ready", flush=True)
    children = []
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        n = int(arg) if arg else 0
        if cmd == "small":
            keep_small(n)
        elif cmd == "medium":
            keep_medium(n)
        elif cmd == "large":
            keep_large(n)
        elif cmd == "grown_list":
            keep_grown_list(n)
        elif cmd == "grown_bytes":
            keep_grown_bytes(n)
        elif cmd == "grown_past":
            keep_grown_past(n)
        elif cmd == "thread":
            keep_in_thread(n)
        elif cmd == "sqlite":
            keep_sqlite(n)
        elif cmd == "fork":
            children.append(keep_in_child(n))
        elif cmd == "fresh":
            keep_from_fresh_code(n)
        elif cmd == "asyncio":
            keep_in_tasks(n)
        elif cmd == "trace":
            trace_lines()
        elif cmd == "free":
            KEEP.clear()
            gc.collect()
        elif cmd == "quit":
            break
        print("done", flush=True)
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


main()
