"""make bench: how long ymtop -p pauses the thread it borrows and how long
from `ymtop -p` to the first report, median (max) of ROUNDS injections into
fresh processes started without the agent: one quiet (blocked in read) and
one with 9 threads allocating flat out.  Goals: pause < 100 ms, first
report < 1 s.   ROUNDS=N python3 tests/bench/inject_timing.py"""
import os

from test_inject import Plain, inject, prog


def timings(argv, runs):
    pauses, walls = [], []
    for _ in range(runs):
        t = Plain(argv)
        try:
            _, pause, wall = inject(t)
            pauses.append(pause)
            walls.append(wall * 1000)
            t.send("x\n")
            t.finish()
        finally:
            t.kill()
    pauses.sort()
    walls.sort()
    return pauses[runs // 2], pauses[-1], walls[runs // 2], walls[-1]


def main():
    runs = int(os.environ.get("ROUNDS", "5"))
    for name, what in (("inject_read", "a quiet process (blocked in read)"),
                       ("inject_threads", "9 threads allocating flat out")):
        print("injection into %s: pause median %.1f ms (max %.1f), ymtop -p "
              "to first report median %.0f ms (max %.0f)"
              % ((what,) + timings([prog(name)], runs)), flush=True)


if __name__ == "__main__":
    main()
