"""The live screen in a real terminal: tmux runs ymtop, send-keys types,
capture-pane reads what a person would see."""
import contextlib
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from ymlib import BUILD, YMTOP, Plain, Skip, Target, run_tests

PROG = os.path.join(BUILD, "progs", "tuiprog")
SOCK = "ymtop-test-%d" % os.getpid()


def tmux(*args, check=True):
    for _ in range(10):
        r = subprocess.run(["tmux", "-L", SOCK] + list(args),
                           capture_output=True, text=True)
        # The server of the socket exits when its last session is killed:
        # a new session asked for meanwhile meets the one going away.
        if args[0] != "new-session" or \
                "server exited unexpectedly" not in r.stderr:
            break
        time.sleep(0.2)
    if check and r.returncode != 0:
        raise AssertionError("tmux %s: %s" % (args, r.stderr))
    return r.stdout


class Screen:
    """ymtop -p PID in a tmux window of the given size.  After ymtop exits,
    the shell prints EXIT=<status> and stays, so the pane can be read."""

    def __init__(self, pid, cols=100, rows=30, cwd=None, extra="", env=""):
        self.name = "s%d" % pid
        cmd = "cd %s && %s -d 0.3 -p %d %s; echo EXIT=$?; sleep 60" % (
            cwd or os.getcwd(), YMTOP, pid, extra)
        tmux("new-session", "-d", "-s", self.name, "-x", str(cols), "-y",
             str(rows), "env TERM=xterm-256color LANG=C.UTF-8 %s sh -c '%s'" % (env, cmd))

    def text(self):
        return tmux("capture-pane", "-p", "-t", self.name)

    def raw(self):
        """The pane with the escape sequences that draw it (-e)."""
        return tmux("capture-pane", "-p", "-e", "-t", self.name)

    def keys(self, *keys):
        tmux("send-keys", "-t", self.name, *keys)

    def wait(self, pattern, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            t = self.text()
            if re.search(pattern, t):
                return t
            time.sleep(0.1)
        raise AssertionError("screen never showed %r:\n%s" % (pattern, self.text()))

    def close(self):
        tmux("kill-session", "-t", self.name, check=False)


def started(env=None):
    e = {"YM_SAMPLE_RATE": "65536", "YM_SEED": "7"}
    e.update(env or {})
    return Target([PROG], env=e)


@contextlib.contextmanager
def watching(env=None, **screen):
    """tuiprog under the agent and ymtop's screen on it, both ended after."""
    t = started(env)
    s = Screen(t.pid, **screen)
    try:
        yield t, s
    finally:
        s.close()
        t.finish()


def rows_of(text):
    """Table rows: lines that start with a size (marked ? or not: few
    samples), in screen order."""
    return [l for l in text.splitlines()
            if re.match(r"^\s*\??[0-9.]+ (B|KiB|MiB|GiB)\s", l)]


def test_sites_in_retained_order_and_enter_shows_stack():
    with watching() as (t, s):
        text = s.wait(r"small_site")
        rows = rows_of(text)
        assert "big_site" in rows[0] and "small_site" in rows[1], rows
        assert re.search(r"pid %d tuiprog" % t.pid, text)
        s.keys("Enter")
        text = s.wait(r"Stack \d+")
        assert re.search(r"=> 0x[0-9a-f]+ +tuiprog\.c:\d+ +big_site\b", text), text
        assert re.search(r"tuiprog\.c:\d+ +main\b", text), text
        assert "lifetimes of this stack" in text
        s.keys("Escape")
        s.wait(r"FUNCTION \(FILE:LINE\)")


def test_each_view_renders():
    with watching() as (t, s):
        s.wait("big_site")
        s.keys("Tab")
        s.wait(r"\[stacks\]")                 # Functions
        s.keys("Tab")
        s.wait(r"TID +NAME +STATE")             # Threads
        assert re.search(r"%d +tuiprog +live" % t.pid, s.text())
        s.keys("Tab")
        s.wait(r"LIFETIME +OBJECTS")            # Lifetimes
        s.keys("Tab")
        s.wait(r"no giant allocations")         # Alarms
        s.keys("Tab")
        s.wait(r"RSS EXPLAINED")                # Memory
        s.keys("Tab")
        s.wait(r"RETAINED")                     # back to Stacks
        s.keys("?")
        s.wait(r"ymtop keys")
        s.keys("?")


def test_memory_view_explains_rss():
    """The Memory view (issue 20): RSS from smaps_rollup split into
    anonymous, file and shmem beside counted in use and retained~, each
    with its share of RSS; absent figures read "-"."""
    with watching(cols=120) as (t, s):
        s.wait("big_site")
        s.keys("BTab")
        text = s.wait(r"RSS EXPLAINED.*smaps_rollup")
        def row(name):
            m = re.search(r"^%s {2,}(\S+ \S+|-) +(\d+%%)?" % re.escape(name), text,
                          re.M)
            assert m, "no %r row:\n%s" % (name, text)
            return m
        assert row("RSS").group(2) == "100%", text
        for name in ("  anonymous", "  file", "  shmem", "retained~",
                     "tracked mmap"):
            assert row(name).group(1) != "-", (name, text)
        # Sampling: frees count objects, not bytes: "-".  The idle
        # process's allocator figures were taken through a borrowed
        # thread: current, not old.
        assert row("counted in use").group(1) == "-", text
        assert "sampling: frees count objects" in text, text
        assert row("allocator in use").group(1) != "-", text
        assert "statistics, old" not in text, text
        s.keys("q")
        s.wait(r"EXIT=0")


def test_header_shows_the_rate_a_budget_put_in_force_beside_the_one_asked():
    """A cost budget (YM_MAX_OVERHEAD) that lengthened the rate: the
    header's rate is the one in force, followed by the one asked for, the
    budget and its changes."""
    from ymlib import WORKLOAD
    t = Target([WORKLOAD, "budget:64"],
               env={"YM_SAMPLE_RATE": "4096", "YM_MAX_OVERHEAD": "0.01",
                    "YM_SEED": "7"})
    s = Screen(t.pid, cols=160)
    try:
        text = s.wait(r"asked 4\.00 KiB, budget 0\.01%, [0-9]+ changes?\)")
        m = re.search(r"rate ([0-9.]+ [KMGT]?i?B) \(asked 4\.00 KiB", text)
        assert m and m.group(1) != "4.00 KiB", text
        s.keys("q")
        s.wait(r"EXIT=0")
    finally:
        s.close()
        t.finish()


def test_heap_line_says_why_a_musl_program_has_no_allocator_figures():
    """musl's allocator keeps no statistics: the header says so where the
    heap figures would be, and the Memory view's allocator row too."""
    count = os.path.join(BUILD, "musl", "count")
    agent = os.path.join(BUILD, "libymagent-musl.so")
    if not shutil.which("musl-gcc"):
        print("skip: musl-gcc is not installed (musl-tools)")
        return
    t = Target([count], env={"LD_PRELOAD": agent})
    s = Screen(t.pid, cols=160)
    try:
        text = s.wait(r"hold_site")
        assert re.search(r"^RSS .*heap - \(musl's allocator keeps none\)", text,
                         re.M), text
        s.keys("BTab")
        text = s.wait(r"RSS EXPLAINED")
        assert re.search(r"^allocator in use +- .*musl's allocator keeps none",
                         text, re.M), text
        s.keys("q")
        s.wait(r"EXIT=0")
    finally:
        s.close()
        t.finish()


# python3 callocs 256 MiB it never touches (bytes(n): calloc, pages the
# kernel has not given yet): the allocator and the estimate count it, the
# RSS does not.
UNTOUCHED = """
import sys
b = bytes(256 << 20)
print("ready", flush=True)
sys.stdin.readline()
"""


def test_memory_view_names_the_untouched_heap():
    """More heap than anonymous RSS: the Memory view names the retained
    bytes never touched (the live samples' pages, pagemap) and takes them
    out of the heap, instead of a negative unexplained; no negative share
    of RSS; each figure names its unit."""
    t = Target(["python3", "-c", UNTOUCHED], env={"YM_SAMPLE_RATE": "65536"})
    s = Screen(t.pid, cols=160)
    try:
        s.keys("BTab")
        text = s.wait(r"anonymous unexplained")
        untouched = re.search(r"^  never touched +(\d+) MiB", text, re.M)
        assert untouched and int(untouched.group(1)) >= 240, text
        line = [l for l in text.splitlines() if l.startswith("anonymous unexplained")]
        assert line and not re.search(r" -\d+(\.\d+)? MiB", line[0]), text
        assert not re.search(r"-\d+%", text), text
        assert re.search(r"^retained~ .*requested bytes", text, re.M), text
        s.keys("q")
        s.wait(r"EXIT=0")
    finally:
        s.close()
        t.finish()


def test_filter_keeps_matching_rows():
    with watching() as (t, s):
        s.wait("small_site")
        # The prompt's editing keys (view_prompt_key): Backspace erases,
        # ^U the whole line.
        s.keys("/", "xyz", "C-u", "smallq", "BSpace", "Enter")
        text = s.wait(r"filter: small(?!q)")
        rows = rows_of(text)
        assert len(rows) == 1 and "small_site" in rows[0], rows
        s.keys("Escape")
        text = s.wait(r"big_site")


def test_mark_then_growth():
    with watching() as (t, s):
        s.wait("small_site")
        s.keys("m")
        s.wait(r"mark set")
        t.p.stdin.write("grow\n")
        t.p.stdin.flush()
        t.wait_for("grown")
        s.keys("G")   # sort by growth
        text = s.wait(r"\+1[0-9.]+ MiB.*grow_site")
        rows = rows_of(text)
        assert "grow_site" in rows[0], rows


def say(t, cmd, reply):
    t.p.stdin.write(cmd + "\n")
    t.p.stdin.flush()
    t.wait_for(reply)


def test_pause_stops_sampling_and_resume_restarts_it():
    with watching() as (t, s):
        s.wait("small_site")
        s.keys("p")
        s.wait(r"sampling paused in the agent")
        s.wait(r"pid %d tuiprog +up \S+ +paused" % t.pid)
        say(t, "grow", "grown")          # not sampled: no grow_site row
        time.sleep(1)
        assert "grow_site" not in s.text(), s.text()
        s.keys("p")
        s.wait(r"sampling resumed")
        s.wait(r"pid %d tuiprog +up \S+ +sampling" % t.pid)
        say(t, "grow", "grown")
        s.wait(r"grow_site")


def test_alarm_banner_then_dismiss_and_alarms_view():
    with watching({"YM_GIANT_BYTES": "16777216"}) as (t, s):
        s.wait("small_site")
        assert "ALARM" not in s.text()
        say(t, "giant", "giant")
        s.wait(r"ALARM 24\.0 MiB in giant_site\(\) \S+ ago")
        s.keys("a")
        end = time.time() + 5
        while "ALARM" in s.text():
            assert time.time() < end, s.text()
            time.sleep(0.1)
        for _ in range(4):
            s.keys("Tab")
        text = s.wait(r"giant_site")
        assert "24.0 MiB" in text and "reported" in text, text


def test_sort_keys_change_the_order():
    with watching() as (t, s):
        s.wait("small_site")
        s.keys("m")
        s.wait(r"mark set")
        say(t, "grow", "grown")
        s.wait(r"grow_site")
        rows = rows_of(s.text())
        assert "big_site" in rows[0], rows          # by retained
        s.keys("G")                                 # by growth
        s.wait(r"sort: growth|GROWTH")
        end = time.time() + 5
        while "grow_site" not in rows_of(s.text())[0]:
            assert time.time() < end, s.text()
            time.sleep(0.1)
        s.keys("F6")                                # the sort menu
        s.wait(r"(?i)sort by")
        s.keys("Escape")


def test_s_and_f_write_files():
    with tempfile.TemporaryDirectory() as d, watching(cwd=d) as (t, s):
        s.wait("small_site")
        s.keys("s")
        s.wait(r"wrote \./ymtop-%d-tuiprog-.*\.txt" % t.pid)
        s.keys("f")
        s.wait(r"wrote \./ymtop-%d-tuiprog-.*\.folded" % t.pid)
        txt = glob.glob(os.path.join(d, "ymtop-%d-tuiprog-*.txt" % t.pid))
        folded = glob.glob(os.path.join(d, "ymtop-%d-tuiprog-*.folded" % t.pid))
        assert len(txt) == 1 and len(folded) == 1, os.listdir(d)
        report = open(txt[0]).read()
        assert "heap report: pid %d" % t.pid in report
        assert "big_site (tuiprog.c:" in report
        lines = open(folded[0]).read().splitlines()
        big = [l for l in lines if l.split(" ")[0].endswith("big_site")]
        assert big and int(big[0].rsplit(" ", 1)[1]) > 16 * 1024 * 1024, lines
        # A second s in the same second never overwrites.
        s.keys("s")
        time.sleep(0.5)
        assert len(glob.glob(os.path.join(d, "*.txt"))) == 2


def test_resize_to_80x24_stays_sane():
    with watching(cols=132, rows=40) as (t, s):
        s.wait("small_site")
        tmux("resize-window", "-t", s.name, "-x", "80", "-y", "24")
        time.sleep(0.8)
        text = s.wait("big_site")
        lines = text.splitlines()
        assert len(lines) <= 24 and all(len(l) <= 80 for l in lines), lines
        assert re.search(r"RETAINED", text) and re.search(r"q:quit", text)


def test_q_exits_0_and_restores_terminal():
    with watching() as (t, s):
        s.wait("small_site")
        s.keys("q")
        text = s.wait(r"EXIT=\d+")
        assert "EXIT=0" in text, text
        assert "RETAINED" not in text, "the screen was not restored:\n" + text


def signal_restores_terminal(sig):
    with watching() as (t, s):
        s.wait("small_site")
        # Anchored: the shell around ymtop has the same words later on.
        subprocess.run(["pkill", "-" + sig, "-f", "^%s -d 0.3 -p %d" % (YMTOP, t.pid)])
        text = s.wait(r"EXIT=\d+")
        assert "RETAINED" not in text, text


def test_sigterm_restores_terminal():
    signal_restores_terminal("TERM")


def test_sigint_restores_terminal():
    signal_restores_terminal("INT")


def test_target_exit_is_shown_and_data_kept():
    t = started()
    s = Screen(t.pid)
    try:
        s.wait("small_site")
        t.finish()
        text = s.wait(r"exited")
        assert "big_site" in text, text
        s.keys("Enter")
        s.wait(r"Stack \d+")
    finally:
        s.close()


def test_functions_view_avg_and_threads_without_empty_row():
    # AVG was a hard-coded 0 B in the Functions view; the Threads view had
    # an empty "(other threads)" row (the shared slot, which counted
    # nothing).
    with watching(cols=130) as (t, s):
        s.wait("small_site")
        s.keys("Tab")
        text = s.wait(r"\[stacks\]")
        big = [l for l in text.splitlines() if "big_site" in l]
        # LIVE, AVG, AGE, FUNCTION: AVG is the average size, whatever the
        # RATE/s column says (0 B once the program is idle).
        assert big and re.search(r"\d +64\.0 KiB +\S+ big_site", big[0]), text
        small = [l for l in text.splitlines() if "small_site" in l]
        assert small and re.search(r"\d +32\.0 KiB +\S+ small_site", small[0]), text
        s.keys("Tab")
        text = s.wait(r"TID +NAME +STATE")
        text = s.wait(r"%d +tuiprog +live" % t.pid)
        assert "other threads" not in text, text
        # Sampling counts requested bytes, not usable ones: the column
        # says so and is not the 0 B of a counter nobody keeps.
        assert re.search(r"TID +NAME +STATE +REQUESTED", text), text
        assert not re.search(r"%d +tuiprog +live +0 B " % t.pid, text), text


def test_detail_scrolls_past_more_frames():
    # A window too short for the stack: the frames scroll instead of ending
    # at "... N more frames".
    with watching(cols=100, rows=13) as (t, s):
        s.wait("small_site")
        s.keys("Enter")
        text = s.wait(r"frames 1-\d+ of \d+; \d+ more below")
        assert not re.search(r"\s_start\s", text), text
        s.keys("Down")
        s.wait(r"frames 2-")
        s.keys("PPage")
        s.wait(r"frames 1-")
        for _ in range(8):   # (tmux's End is not xterm's: step down)
            s.keys("NPage")
            time.sleep(0.3)
            if re.search(r"\s_start\s", s.text()):
                break
        text = s.wait(r"\s_start\s")
        assert re.search(r"more above", text), text


def test_after_exit_rates_drop_and_threads_exit():
    # The last interval allocated 16 MiB; once the process is gone the
    # header must not keep that rate, and its thread is not live.
    t = started()
    s = Screen(t.pid)
    try:
        s.wait("small_site")
        t.p.stdin.write("grow\nexit\n")
        t.p.stdin.flush()
        t.p.wait(timeout=20)
        text = s.wait(r"exited")
        # Sampling: frees count calls, not bytes (man/ymagent.7).
        assert re.search(r"alloc 0 B/s 0/s +free 0/s", text), text
        s.keys("Tab", "Tab")
        text = s.wait(r"TID +NAME +STATE")
        s.wait(r"%d +\S* +exited" % t.pid)
        assert not re.search(r"%d .* live " % t.pid, s.text()), s.text()
    finally:
        s.close()
        t.finish()


def test_injected_header_shows_the_heap_and_r_sets_rate():
    # Injected: the samples start at the attach; the allocator's own
    # statistics have what came before, beside RSS and the retained
    # estimate.  r asks for a rate.
    t = Plain([PROG], env={"YM_SEED": "7"})
    s = Screen(t.pid, cols=120)
    try:
        s.wait(r"RSS \S+ \S+ +retained~ \S+ \S+ +heap \d\S* \S+ \+free")
        s.wait(r"rate 512 KiB")
        s.keys("r")
        s.wait(r"sample rate in bytes")
        s.keys("8k", "Enter")
        s.wait(r"sample rate 8\.00 KiB asked")
        say(t, "grow", "grown")
        s.wait(r"rate 8\.00 KiB")
        s.keys("r")
        s.wait(r"sample rate in bytes")
        s.keys("1", "Enter")
        s.wait(r"must be a number of bytes from 2")
    finally:
        s.close()
        t.finish()


PY_FREES_OLDER = r"""
import sys
held = [bytearray(1 << 20) for _ in range(40)]
print("ready", flush=True)
sys.stdin.readline()
del held
print("freed", flush=True)
sys.stdin.readline()
"""


def test_injected_exact_counters_are_a_net_change_not_in_use():
    """Exact mode after ymtop -p: python3 frees 40 MiB it held before the
    attach.  The header said "in use since attach -40.2 MiB"; allocated
    minus freed is a net change since the attach, labelled so in the
    header and in the Memory view, never an in use."""
    py = os.path.realpath("/usr/bin/python3")
    if not os.path.exists(py):
        raise Skip("no /usr/bin/python3 here")
    t = Plain([py, "-c", PY_FREES_OLDER], env={"YM_SAMPLE_RATE": "1"})
    s = Screen(t.pid, cols=160)
    try:
        s.wait(r"rate exact")
        say(t, "go", "freed")
        text = s.wait(r"net since attach -[34]\d\.\d MiB")
        assert not re.search(r"in use[a-z ]* -\d", text), text
        s.keys("BTab")
        text = s.wait(r"RSS EXPLAINED.*smaps_rollup")
        assert re.search(r"^counted net change +-[34]\d\.\d MiB +allocated minus "
                         r"freed since the attach", text, re.M), text
        assert not re.search(r"^counted in use", text, re.M), text
        s.keys("q")
        s.wait(r"EXIT=0")
    finally:
        s.close()
        t.finish()


def test_no_color_and_monochrome():
    t = started()
    name = "mono%d" % t.pid
    tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "30",
         "env TERM=vt100 NO_COLOR=1 %s -p %d; echo EXIT=$?; sleep 30" % (YMTOP, t.pid))
    try:
        end = time.time() + 10
        while "small_site" not in tmux("capture-pane", "-p", "-t", name):
            assert time.time() < end, tmux("capture-pane", "-p", "-t", name)
            time.sleep(0.1)
        tmux("send-keys", "-t", name, "q")
        time.sleep(0.5)
        assert "EXIT=0" in tmux("capture-pane", "-p", "-t", name)
    finally:
        tmux("kill-session", "-t", name, check=False)
        t.finish()


# ---- names a hostile target chooses (issue 17) ----
# tests/progs/hostile under a file name with an OSC title and a CSI color;
# its threads, a function symbol and a source file name hold escapes too.
# tests/integration/test_escape.py checks the reports.
HOSTILE = os.path.join(BUILD, "progs", "hostile")
HOSTILE_NAME = "hostile\x1b]0;pwned\x07\x1b[31mx"
SEQ = re.compile(r"\x1b(\[[0-9;]*[A-Za-z]|.)")
# What tmux writes itself for a monochrome screen (NO_COLOR): SGR reset,
# bold, dim, underline, blink, reverse, their ends and default colors;
# never a color (30-38, 40-48, 90-107): the target's CSI 31m would be one.
SGR_OK = {"", "0", "1", "2", "4", "5", "7", "22", "24", "25", "27", "39", "49"}


def escapes_only_ours(s, what):
    """The pane holds no escape sequence but tmux's own attributes, the
    window title is untouched; returns the pane's text."""
    raw = s.raw()
    for m in SEQ.finditer(raw):
        seq = m.group(0)
        assert seq.startswith("\x1b[") and seq.endswith("m"), \
            "%s: %r on the terminal:\n%r" % (what, seq, raw)
        for p in seq[2:-1].split(";"):
            assert p in SGR_OK, "%s: color %r on a monochrome screen:\n%r" % (
                what, seq, raw)
    assert "\x07" not in raw and "\x9b" not in raw, "%s: %r" % (what, raw)
    title = tmux("display-message", "-p", "-t", s.name, "#{pane_title}")
    assert "pwned" not in title, "%s: the window title became %r" % (what, title)
    return s.text()


def test_target_names_reach_the_screen_escaped():
    d = tempfile.mkdtemp(prefix="ymtop-escape-")
    exe = os.path.join(d, HOSTILE_NAME)
    shutil.copy2(HOSTILE, exe)
    t = Target([exe], env={"YM_SAMPLE_RATE": "65536", "YM_SEED": "7"})
    s = Screen(t.pid, cols=160, rows=40, env="NO_COLOR=1")
    try:
        # Header (process name), Stacks view (function and file names).
        s.wait(r"_symbol")
        text = escapes_only_ours(s, "Stacks view")
        assert "hostile\\033]0;p" in text.splitlines()[0], text
        assert "hostile_\\033]0;pwned\\a_symbol" in text, text
        assert "hostile\\033[31m_file.c" in text, text
        s.keys("Tab")
        s.wait(r"\[1\]")
        escapes_only_ours(s, "Functions view")
        # Threads: five live ('?' from /proc), one exited (the agent's
        # raw name, escaped here).
        s.keys("Tab")
        s.wait(r"TID +NAME")
        text = escapes_only_ours(s, "Threads view")
        assert len(re.findall(r"^ +\d+ .* live ", text, re.M)) == 5, text
        assert re.search(r"\\033\]2;gone\\a +exited", text), text
        # The hostile stack in full: its frames and the module's name.
        s.keys("BTab", "BTab", "/", "_symbol", "Enter")
        s.wait(r"filter: _symbol")
        s.keys("Enter")
        s.wait(r"Stack \d+ +\(Enter")
        text = escapes_only_ours(s, "stack detail")
        assert "=> " in text and "hostile_\\033]0;pwned\\a_symbol" in text, text
        assert "hostile\\033]0;pwned\\a\\033[31mx" in text, text
        s.keys("q", "q")
        s.wait(r"EXIT=0")
    finally:
        s.close()
        t.finish()
        shutil.rmtree(d, True)


def test_tab_bar_at_60_columns_does_not_overwrite_itself():
    """At 60 columns the tabs and the sort do not fit in full: the other
    tabs take short names and nothing is written over (the sort was drawn
    over the first tab: " Ssort: retainedons")."""
    with watching(cols=60, rows=20) as (t, s):
        text = s.wait("big_site")
        tabs = [l for l in text.splitlines() if "sort:" in l]
        assert len(tabs) == 1, text
        assert re.match(r"^ Stacks +Fn +Thr +Life +Alrm +Mem +sort: retained$",
                        tabs[0].rstrip()), tabs
        s.keys("Tab")
        text = s.wait(r"big_site +\[1\]")   # Functions
        tabs = [l for l in text.splitlines() if "sort:" in l]
        assert re.match(r"^ Stk +Functions +Thr +Life +Alrm +Mem +sort: retained$",
                        tabs[0].rstrip()), tabs


LONGNAMES = os.path.join(BUILD, "progs", "longnames")
SCOPE = "company::storage::detail::RecordTable<std::"


def test_long_cxx_name_keeps_the_method_visible():
    """A C++ name longer than the row: the list elides template arguments,
    parameters and middle scopes and shows the method (it showed
    "company::storage::detail::RecordTable<std::__cxx11::basic_str" and
    no method); t shows the name whole; the stack detail has it whole with
    its file:line in view, and scrolls sideways to the method."""
    t = Target([LONGNAMES], env={"YM_SAMPLE_RATE": "65536"})
    s = Screen(t.pid, cols=100, rows=24)
    try:
        text = s.wait(r"grow_records_for_ingest")
        row = [l for l in text.splitlines() if "grow_records_for_ingest" in l][0]
        assert re.search(r"\u2026::grow_records_for_ingest\(\u2026\)", row), row
        s.keys("t")
        text = s.wait("names in full")
        assert "company::storage::detail::RecordTable<" in text, text
        assert "grow_records_for_ingest" not in text, text
        s.keys("t")
        s.wait(r"names fitted.*")
        s.wait(r"grow_records_for_ingest")
        s.keys("Enter")
        text = s.wait(r"Stack \d+")
        assert re.search(r"=> 0x[0-9a-f]+ +longnames\.cc:\d+ +" + re.escape(SCOPE),
                         text), text
        assert re.search(r"longnames\.cc:\d+ +main +longnames", text), text
        for _ in range(30):
            s.keys("Right")
            time.sleep(0.2)
            if "records_for_ingest(" in s.text():
                break
        text = s.wait(r"records_for_ingest\(")
        assert re.search(r"=> 0x[0-9a-f]+ +longnames\.cc:\d+ ", text), text
        s.keys("Left")
    finally:
        s.close()
        t.finish()


def test_needs_a_terminal():
    r = subprocess.run([YMTOP, "-p", "1"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "-b" in r.stderr, r


def test_unseen_allocator_line_under_the_header():
    """A program with its own allocator linked in (ownalloc: je_malloc):
    one line under the header says what ymtop cannot see."""
    t = Target([os.path.join(BUILD, "progs", "ownalloc")])
    s = Screen(t.pid, cols=160)
    try:
        text = s.wait(r"cannot see: ownalloc defines je_malloc \(jemalloc "
                      r"linked in\)")
        lines = text.splitlines()
        at = [i for i, l in enumerate(lines) if l.startswith("cannot see:")]
        assert len(at) == 1 and at[0] < 5, text
        s.keys("q")
        s.wait(r"EXIT=0")
    finally:
        s.close()
        t.kill()


def main(tests):
    """A terminal test file's run: its tests, then this socket's tmux
    server stopped whatever happened; the exit status."""
    rc = 1
    try:
        rc = run_tests(dict(tests))
    finally:
        tmux("kill-server", check=False)
    return rc


if __name__ == "__main__":
    sys.exit(main(globals()))
