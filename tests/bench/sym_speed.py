"""make bench: seconds for `ymtop -b -n 1 -f json` on a process with 4096
stacks through 2048 distinct sites (exact mode), from ymtop's start to its
exit: attach, symbolize every frame, write the report.  Median of ROUNDS.
Goal (issue 3): thousands of stacks well under a second."""
import os

from test_symbols import many_sites_report

runs = int(os.environ.get("ROUNDS", "5"))
took = sorted(many_sites_report()[1] for _ in range(runs))
print("4096 stacks symbolized and reported: median %.2f s (min %.2f, max %.2f, "
      "%d runs)" % (took[runs // 2], took[0], took[-1], runs))
