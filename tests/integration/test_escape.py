"""Names a hostile target chooses never put an escape sequence on a
terminal (issue 17).  tests/progs/hostile runs under a file name holding an
OSC window title and a CSI color, with thread names holding CSI, OSC, a C1
CSI and a terminal reset (an exited thread's raw name is the agent's; /proc
shows live ones with '?'), a function symbol holding an OSC title and a
source file name holding a CSI.  The text report, the folded stacks and the
live screen (tmux, read back with capture-pane -e) show them escaped
(fmt_vis: "\\033]0;pwned\\a"); JSON keeps them exact, escaped its own way."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

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
        assert re.search(rb"^_start;.*;main;hostile_\\033\]0:pwned\\a_symbol \d+$",
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


# ---- the live screen, in tmux ----

SOCK = "ymtop-escape-%d" % os.getpid()


def tmux(*args, check=True):
    r = subprocess.run(["tmux", "-L", SOCK] + list(args), capture_output=True)
    if check and r.returncode != 0:
        raise AssertionError("tmux %s: %s" % (args, r.stderr))
    return r.stdout


SEQ = re.compile(rb"\x1b(\[[0-9;]*[A-Za-z]|.)")
# What tmux itself writes for ymtop's monochrome attributes (NO_COLOR):
# SGR reset, bold, dim, underline, blink, reverse and their ends; never a
# color (30-49, 90-107): the target's CSI 31m would show as one.
SGR_OK = {b"", b"0", b"1", b"2", b"4", b"5", b"7", b"22", b"24", b"25", b"27",
          b"39", b"49"}


def check_pane(name, what):
    raw = tmux("capture-pane", "-p", "-e", "-t", name)
    for m in SEQ.finditer(raw):
        seq = m.group(0)
        assert seq.startswith(b"\x1b[") and seq.endswith(b"m"), \
            "%s: %r on the terminal:\n%r" % (what, seq, raw)
        for p in seq[2:-1].split(b";"):
            assert p in SGR_OK, "%s: color %r on a monochrome screen:\n%r" % (
                what, seq, raw)
    for b in (b"\x07", b"\xc2\x9b"):
        assert b not in raw, "%s: %r on the terminal" % (what, b)
    title = tmux("display-message", "-p", "-t", name, "#{pane_title}")
    assert b"pwned" not in title, "%s: the window title became %r" % (what, title)
    return tmux("capture-pane", "-p", "-t", name).decode("utf-8")


def wait_text(name, pattern, timeout=10):
    end = time.time() + timeout
    while True:
        text = tmux("capture-pane", "-p", "-t", name).decode("utf-8")
        if re.search(pattern, text):
            return text
        if time.time() > end:
            raise AssertionError("screen never showed %r:\n%s" % (pattern, text))
        time.sleep(0.1)


def test_screen_escapes_target_names():
    t = start()
    name = "e%d" % t.pid
    try:
        cmd = "%s -d 0.3 -p %d; echo EXIT=$?; sleep 60" % (YMTOP, t.pid)
        tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "40",
             "env TERM=xterm-256color LANG=C.UTF-8 NO_COLOR=1 sh -c '%s'" % cmd)
        # Header (process name) and Stacks view (function, file names).
        wait_text(name, r"_symbol")
        text = check_pane(name, "Stacks view")
        assert "hostile_\\033]0;pwned\\a_symbol" in text, text
        assert "hostile\\033]0;p" in text.splitlines()[0], text
        assert "hostile\\033[31m_file.c" in text, text
        # Functions, then Threads: the five threads' names.
        tmux("send-keys", "-t", name, "Tab")
        wait_text(name, r"\[1\]")
        check_pane(name, "Functions view")
        tmux("send-keys", "-t", name, "Tab")
        text = wait_text(name, r"TID +NAME")
        text = check_pane(name, "Threads view")
        assert len(re.findall(r"^ +\d+ .* live ", text, re.M)) == 5, text
        assert re.search(r"\\033\]2;gone\\a +exited", text), text
        # The hostile stack in full: frames and the module's file name.
        tmux("send-keys", "-t", name, "BTab", "BTab")
        tmux("send-keys", "-t", name, "/", "_symbol", "Enter")
        wait_text(name, r"filter: _symbol")
        tmux("send-keys", "-t", name, "Enter")
        text = wait_text(name, r"Stack \d+ +\(Enter")
        text = check_pane(name, "stack detail")
        assert "=> " in text and "hostile_\\033]0;pwned\\a_symbol" in text, text
        assert "hostile\\033]0;pwned\\a\\033[31mx" in text, text
        tmux("send-keys", "-t", name, "q", "q")
        wait_text(name, r"EXIT=0")
    finally:
        tmux("kill-session", "-t", name, check=False)
        stop(t)


if __name__ == "__main__":
    try:
        rc = run_tests(dict(globals()))
    finally:
        tmux("kill-server", check=False)
    sys.exit(rc)
