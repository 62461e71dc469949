"""Names a hostile target chooses never put an escape sequence on a
terminal (issue 17).  tests/progs/hostile runs under a file name holding an
OSC window title and a CSI color, with thread names holding CSI, OSC, a C1
CSI and a terminal reset (an exited thread's raw name is the agent's; /proc
shows live ones with '?'), a function symbol holding an OSC title and a
source file name holding a CSI.  The text report, the folded stacks and
ymtop's messages show them escaped (fmt_vis: "\\033]0;pwned\\a"); JSON keeps
them exact, escaped its own way.  The live screen's side is in
tests/tui/test_screen.py (test_target_names_reach_the_screen_escaped)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from ymlib import BUILD, YMTOP, Target, run_tests

PROG = os.path.join(BUILD, "progs", "hostile")
# The executable's file name: OSC 0 (window title) ended by BEL, then CSI
# red.  Its first 15 bytes are the process name (comm).
EXE_NAME = "hostile\x1b]0;pwned\x07\x1b[31mx"
SYMBOL = "hostile_\x1b]0;pwned\x07_symbol"
SOURCE = "hostile\x1b[31m_file.c"
# Every control byte the target's names hold: ESC, BEL, C1 CSI.
RAW = (b"\x1b", b"\x07", b"\xc2\x9b", b"\x9b")


def start():
    d = tempfile.mkdtemp(prefix="ymtop-escape-")
    exe = os.path.join(d, EXE_NAME)
    shutil.copy2(PROG, exe)
    t = Target([exe], env={"YM_SAMPLE_RATE": "65536", "YM_SEED": "7"})
    t.dir = d
    return t


def stop(t):
    t.finish()
    shutil.rmtree(t.dir, True)


def run_bytes(*args):
    r = subprocess.run([YMTOP] + [str(a) for a in args], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def assert_no_raw(out, what):
    for b in RAW:
        assert b not in out, "%s holds %r:\n%r" % (what, b, out[:3000])
    out.decode("utf-8")   # and nothing that is not UTF-8


def test_text_report_escapes_target_names():
    t = start()
    try:
        out = run_bytes("-b", "-n", "1", "-p", t.pid)
        assert_no_raw(out, "text report")
        # Escaped, readable: the path, the symbol, the source file name.
        assert b"hostile\\033]0;pwned\\a\\033[31mx" in out, out[:400]
        assert b"=> hostile_\\033]0;pwned\\a_symbol" in out, out
        assert b"file_site (hostile\\033[31m_file.c:" in out, out
        # Ordinary names are untouched.
        assert b"thread_site (hostile.c:" in out and b"main (hostile.c:" in out
        # Every thread is listed, none of them raw; the exited one under
        # the name the agent kept (/proc's names of live ones have '?').
        threads = out.split(b"Threads (exact):")[1]
        assert threads.count(b" live ") == 5, threads
        assert re.search(rb"\\033\]2;gone\\a +exited", threads), threads
    finally:
        stop(t)


def test_batch_messages_escape_target_names():
    """-o with %e names the file after the target (outfile.c puts '_' for
    what a file name should not hold): "wrote PATH" on stderr is clean."""
    t = start()
    try:
        r = subprocess.run([YMTOP, "-b", "-n", "1", "-p", str(t.pid), "-o",
                            os.path.join(t.dir, "r-%e.txt")], capture_output=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        assert_no_raw(r.stderr, "ymtop's stderr")
        assert b"wrote " in r.stderr and b"/r-hostile_]0;pwned_" in r.stderr, r.stderr
    finally:
        stop(t)


def test_folded_escapes_target_names():
    t = start()
    try:
        out = run_bytes("-b", "-n", "1", "-p", t.pid, "-f", "folded")
        assert_no_raw(out, "folded stacks")
        # ';' separates frames: the name's own becomes ':' (folded.h).
        assert re.search(rb"^\[malloc\];_start;.*;main;hostile_\\033\]0:pwned\\a_symbol \d+$",
                         out, re.M), out
        assert re.search(rb";main;file_site \d+$", out, re.M), out
    finally:
        stop(t)


def test_json_keeps_names_exact():
    """JSON escapes in its own way (\\u001b): a program reading it gets the
    names exactly as the target has them."""
    t = start()
    try:
        rep = json.loads(run_bytes("-b", "-n", "1", "-p", t.pid, "-f", "json"))
        assert rep["exe"].endswith("/" + EXE_NAME), rep["exe"]
        fns = {f["function"] for s in rep["stacks"] for f in s["frames"]}
        files = {f["file"] for s in rep["stacks"] for f in s["frames"]}
        assert SYMBOL in fns, fns
        assert any(f and f.endswith(SOURCE) for f in files), files
    finally:
        stop(t)


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
