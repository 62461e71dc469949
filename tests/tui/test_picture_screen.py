"""The screen during debuginfod lookups (issue 20): a progress line while a
silent server (accepts, never answers) holds a lookup, the screen keeps
refreshing meanwhile, q quits at once; and with a real `debuginfod -F`
server the stripped frames get their names on screen."""
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

from ymlib import run_tests  # noqa: E402
from test_screen import Screen  # noqa: E402
from test_picture import stripped_target  # noqa: E402


def env_line(url, d):
    return "DEBUGINFOD_URLS=%s DEBUGINFOD_CACHE_PATH=%s" % (
        url, os.path.join(d, "cache"))


def test_progress_line_and_q_during_lookup():
    with stripped_target("silent") as (t, srv, d):
        s = Screen(t.pid, env=env_line(srv.url, d))
        try:
            text = s.wait(r"debuginfod: \d+ lookups? \(.*held.*\)")
            assert re.search(r"\[held\+0x[0-9a-f]+\]", text), text
            # Still refreshing: the uptime moves while the lookup hangs.
            up = re.search(r"up (\S+)", text).group(1)
            s.wait(r"up (?!%s\b)\S+" % re.escape(up))
            t0 = time.time()
            s.keys("q")
            s.wait(r"EXIT=0", timeout=5)
            took = time.time() - t0
            assert took < 1.5, "q took %.2f s" % took
        finally:
            s.close()


def test_names_arrive_on_screen():
    with stripped_target("debuginfod") as (t, srv, d):
        s = Screen(t.pid, env=env_line(srv.url, d))
        try:
            s.wait(r"held_site \(held\.c:\d+\)", timeout=15)
        finally:
            s.close()


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
