#!/usr/bin/env python3
"""Interleaved A/B runs of one command under several preloads.

    CONFIGS="none=none A=/path/a.so B=/path/b.so,YM_SAMPLE_RATE=1" \\
      tests/bench/ab.py ROUNDS CMD [ARG...]

Each round runs CMD once under each configuration, in a new random order
(NAME=LIB[,VAR=VALUE...]; LIB "none" preloads nothing), and the medians
of wall, user, system and CPU (user + system) time are printed, wall, user
and CPU as ratios to the first configuration.  User time is the figure to compare for changes to the
agent's own code: an allocation-heavy workload's page faults and cgroup
charging are system time, which moves by several percent between
identical runs on a shared machine."""
import os
import random
import resource
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3 or "CONFIGS" not in os.environ:
        sys.stderr.write(__doc__)
        return 2
    rounds, cmd = int(sys.argv[1]), sys.argv[2:]
    confs = []
    for c in os.environ["CONFIGS"].split():
        name, _, spec = c.partition("=")
        lib, *env = spec.split(",")
        confs.append((name, lib, dict(e.split("=", 1) for e in env)))
    res = {name: ([], [], [], []) for name, _, _ in confs}
    for _ in range(rounds):
        for name, lib, extra in random.sample(confs, len(confs)):
            env = dict(os.environ)
            env.pop("LD_PRELOAD", None)
            env.pop("CONFIGS", None)
            if lib != "none":
                env["LD_PRELOAD"] = lib
            env.update(extra)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            wall = time.monotonic() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode != 0:
                sys.stderr.write("%s: exit %d\n" % (name, r.returncode))
                return 1
            res[name][0].append(wall)
            res[name][1].append(after.ru_utime - before.ru_utime)
            res[name][2].append(after.ru_stime - before.ru_stime)
            res[name][3].append(after.ru_utime - before.ru_utime +
                                after.ru_stime - before.ru_stime)
    med = {n: [statistics.median(v) for v in res[n]] for n in res}
    first = med[confs[0][0]]
    print("%d rounds: %s" % (rounds, " ".join(cmd)))
    print("%-10s %9s %7s %9s %7s %9s %9s %7s" % (
        "config", "wall s", "ratio", "user s", "ratio", "sys s", "cpu s",
        "ratio"))
    for name, _, _ in confs:
        w, u, s, c = med[name]
        print("%-10s %9.3f %6.3fx %9.3f %6.3fx %9.3f %9.3f %6.3fx" %
              (name, w, w / first[0], u, u / first[1] if first[1] else 0, s,
               c, c / first[3] if first[3] else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
