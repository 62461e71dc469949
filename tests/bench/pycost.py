#!/usr/bin/env python3
"""bench: the agent's cost on Python (BENCHMARKS.md, "Python: the cost
table").  Runs tests/bench/pyperf_work.py's workloads without the agent
and under it at the default rate (LD_PRELOAD, Debian's python3 with its
default allocator: pymalloc wrapped), interleaved (every round runs each
workload once per configuration, in a fresh order), and prints per
workload the median of the body's CPU time (user+sys, measured in the
process) and the ratio of medians, then their geometric mean.

    tests/bench/pycost.py [BUILD] [ROUNDS]      (defaults: build 7)

Environment: PYTHON (default /usr/bin/python3.11), WORKLOADS (names,
space-separated), CONFIGS ("none default", and "malloc": the agent with
PYTHONMALLOC=malloc; "nopy": the agent with YM_PYMALLOC=0, no wrapper;
"base": the agent at BASE, another build's libymagent.so, at the default
rate: two builds compared in the same interleaved rounds)."""
import math
import os
import random
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "pyperf_work.py")
sys.path.insert(0, HERE)
from pyperf_work import WORKLOADS  # noqa: E402


def run(python, agent, workload, config):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if config == "base":
        env["LD_PRELOAD"] = os.path.abspath(os.environ["BASE"])
    elif config != "none":
        env["LD_PRELOAD"] = agent
    if config == "malloc":
        env["PYTHONMALLOC"] = "malloc"
    if config == "nopy":
        env["YM_PYMALLOC"] = "0"
    out = subprocess.run([python, WORK, workload], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.split()[-1])


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    agent = os.path.abspath(os.path.join(build, "libymagent.so"))
    python = os.environ.get("PYTHON", "/usr/bin/python3.11")
    names = os.environ.get("WORKLOADS", " ".join(WORKLOADS)).split()
    configs = os.environ.get("CONFIGS", "none default").split()
    times = {(w, c): [] for w in names for c in configs}
    rnd = random.Random(1)
    for r in range(rounds):
        order = [(w, c) for w in names for c in configs]
        rnd.shuffle(order)
        for w, c in order:
            times[(w, c)].append(run(python, agent, w, c))
    print("%-14s %s" % ("workload", " ".join("%10s %7s" % (c, "ratio") for c in configs)))
    logs = {c: [] for c in configs}
    for w in names:
        base = statistics.median(times[(w, "none")]) if "none" in configs else None
        cells = []
        for c in configs:
            m = statistics.median(times[(w, c)])
            ratio = m / base if base else float("nan")
            logs[c].append(math.log(ratio))
            cells.append("%10.3f %7.3f" % (m, ratio))
        print("%-14s %s" % (w, " ".join(cells)))
    print("%-14s %s" % ("geomean", " ".join("%10s %7.3f" % ("", math.exp(sum(v) / len(v)))
                                             for v in logs.values())))
    print("rounds %d, python %s, load average %.2f" % (rounds, python, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
