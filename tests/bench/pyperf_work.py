"""bench: small workloads that mirror pyperformance's (json_dumps,
json_loads, regex, richards, deltablue, chaos, unpickle, sqlite_synth,
asyncio_echo), written here so that nothing is downloaded.  Each body takes
0.2-0.5 s of CPU at scale 1 on Debian's python3.11; the script prints
the body's CPU time (user+sys, time.process_time).

    python3 pyperf_work.py WORKLOAD [SCALE]

tests/bench/pycost.py runs them with and without the agent."""
import sys


def json_dumps(scale):
    import json
    data = {"key%d" % i: [i, str(i) * 5, {"a": i * 1.5, "b": [True, None, "x" * 10]}]
            for i in range(200)}
    for _ in range(1800 * scale):
        json.dumps(data)


def json_loads(scale):
    import json
    text = json.dumps([{"id": i, "name": "user%d" % i, "tags": ["a", "b", str(i)],
                        "score": i / 7.0} for i in range(300)])
    for _ in range(1500 * scale):
        json.loads(text)


def regex(scale):
    import re
    text = " ".join("word%d user%d@example.com 10.0.%d.%d http://host%d/p?q=%d" %
                    (i, i, i % 256, i * 7 % 256, i, i) for i in range(400))
    pats = [r"\b\w+@\w+\.com\b", r"\d+\.\d+\.\d+\.\d+", r"http://(\w+)/p\?q=(\d+)",
            r"word(\d+)", r"(?i)USER\d{2,3}"]
    for _ in range(125 * scale):
        for p in pats:
            re.purge()
            re.findall(p, text)
            re.sub(p, "-", text)


def richards(scale):
    # A scheduler of tasks exchanging packets: objects and method calls.
    class Packet:
        __slots__ = ("link", "ident", "kind", "datum", "data")

        def __init__(self, link, ident, kind):
            self.link, self.ident, self.kind, self.datum = link, ident, kind, 0
            self.data = [0] * 4

    class Task:
        def __init__(self, ident, prio, queue):
            self.ident, self.prio, self.queue, self.count = ident, prio, queue, 0

        def run(self, pkt, sched):
            self.count += 1
            if pkt is not None:
                pkt.datum = (pkt.datum + self.count) % 26
                pkt.data[self.count % 4] = pkt.datum
                dest = (self.ident + pkt.datum) % len(sched)
                sched[dest].queue.append(pkt)
            return Packet(None, self.ident, self.count % 3) if self.count % 5 == 0 else None

    for _ in range(20 * scale):
        sched = [Task(i, i % 4, [Packet(None, i, 0) for _ in range(3)]) for i in range(10)]
        for step in range(60000):
            t = sched[step % 10]
            pkt = t.queue.pop(0) if t.queue else None
            extra = t.run(pkt, sched)
            if extra is not None and len(t.queue) < 50:
                t.queue.append(extra)


def deltablue(scale):
    # Chains of variables under equality and scale constraints, planned
    # and propagated: many small objects and lists.
    class Var:
        __slots__ = ("value", "constraints", "determined_by", "mark", "walk")

        def __init__(self, v):
            self.value, self.constraints, self.determined_by = v, [], None
            self.mark, self.walk = 0, 0

    class Eq:
        def __init__(self, a, b, scale_=1, off=0):
            self.a, self.b, self.s, self.o = a, b, scale_, off
            a.constraints.append(self)
            b.constraints.append(self)

        def execute(self):
            self.b.value = self.a.value * self.s + self.o

    for _ in range(32 * scale):
        vs = [Var(i) for i in range(2000)]
        cs = [Eq(vs[i], vs[i + 1], 1 + i % 2, i % 3) for i in range(len(vs) - 1)]
        for k in range(20):
            vs[0].value = k
            plan = []
            todo = [vs[0]]
            mark = k + 1
            while todo:
                v = todo.pop()
                v.mark = mark
                for c in v.constraints:
                    if c.a is v and c.b.mark != mark:
                        plan.append(c)
                        todo.append(c.b)
            for c in plan:
                c.execute()


def chaos(scale):
    import random
    rnd = random.Random(1)

    class Point:
        __slots__ = ("x", "y")

        def __init__(self, x, y):
            self.x, self.y = x, y

    maps = [(0.5, 0.0, 0.0), (0.5, 0.5, 0.0), (0.5, 0.25, 0.5)]
    for _ in range(2 * scale):
        p = Point(0.3, 0.3)
        pts = []
        for i in range(250000):
            s, dx, dy = maps[rnd.randrange(3)]
            p = Point(p.x * s + dx, p.y * s + dy)
            if i % 4 == 0:
                pts.append(p)
        grid = {}
        for q in pts:
            k = (int(q.x * 64), int(q.y * 64))
            grid[k] = grid.get(k, 0) + 1


def unpickle(scale):
    import pickle
    data = pickle.dumps([{"id": i, "name": "n%d" % i, "vals": (i, i * 2.5, str(i)),
                          "flags": [True, False]} for i in range(1000)], 4)
    for _ in range(600 * scale):
        pickle.loads(data)


def sqlite_synth(scale):
    import sqlite3
    db = sqlite3.connect(":memory:")
    db.create_function("py_len", 1, lambda s: len(s) * 2)
    db.execute("create table t (a integer, b text)")
    for _ in range(5 * scale):
        db.execute("delete from t")
        db.executemany("insert into t values (?, ?)",
                       ((i, "row%d" % i * 3) for i in range(40000)))
        db.execute("select sum(py_len(b)) from t").fetchone()
        list(db.execute("select a, b from t where a % 7 = 0"))


def asyncio_echo(scale):
    import asyncio
    import socket

    async def serve(reader, writer):
        while True:
            line = await reader.readline()
            if not line:
                break
            writer.write(line)
            await writer.drain()
        writer.close()

    async def main():
        a, b = socket.socketpair()
        sr, sw = await asyncio.open_connection(sock=a)
        task = asyncio.ensure_future(serve(sr, sw))
        cr, cw = await asyncio.open_connection(sock=b)
        for i in range(1000 * scale):
            cw.write(b"message %d %s\n" % (i, b"x" * (i % 50)))
            await cw.drain()
            await cr.readline()
        cw.close()
        await task

    asyncio.run(main())


WORKLOADS = {f.__name__: f for f in (json_dumps, json_loads, regex, richards, deltablue,
                                     chaos, unpickle, sqlite_synth, asyncio_echo)}

if __name__ == "__main__":
    import time
    work = WORKLOADS[sys.argv[1]]
    scale = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    t0 = time.process_time()
    work(scale)
    # The body's CPU time (user+sys of this process), without the
    # interpreter's start, as pyperformance times its loops.
    print("%.6f" % (time.process_time() - t0))
