"""The screen says in one line which allocator calls the agent cannot see
(an executable that defines malloc and calls it directly), and says
nothing of the kind when it sees every call."""
import os
import sys

from ymlib import BUILD, Target, run_tests
from test_screen import Screen

OWNMALLOC = os.path.join(BUILD, "progs", "ownmalloc")
DATAPTR = os.path.join(BUILD, "progs", "dataptr")


def test_unseen_calls_line_on_the_screen():
    t = Target([OWNMALLOC])
    s = Screen(t.pid, cols=160, rows=30)
    try:
        text = s.wait(r"unseen: \S*ownmalloc defines malloc and calls it "
                      r"directly")
        assert len([ln for ln in text.splitlines() if "unseen:" in ln]) == 1, \
            text
    finally:
        s.close()
        t.kill()


def test_no_unseen_line_when_every_call_is_seen():
    t = Target([DATAPTR])
    s = Screen(t.pid, cols=160, rows=30)
    try:
        text = s.wait(r"stacks \d+/")
        assert "unseen" not in text, text
    finally:
        s.close()
        t.kill()


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
