"""The include graph of the agent's folder has no cycle: each module
(x.c with x.h) includes only modules of lower layers
(tests/lint/include_order.py prints the layers, ARCHITECTURE.md draws
them).  A new include that closes a circle fails here."""
import os
import subprocess
import sys
import tempfile

from ymlib import run_tests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINT = os.path.join(ROOT, "tests", "lint", "include_order.py")


def lint(folder):
    return subprocess.run([sys.executable, LINT, folder], capture_output=True,
                          text=True)


def test_agent_folder_has_no_include_cycle():
    r = lint(os.path.join(ROOT, "injector", "agent"))
    assert r.returncode == 0 and "cycle" not in r.stdout, r.stdout + r.stderr
    layers = r.stdout.splitlines()
    assert layers and layers[0].startswith("0: "), r.stdout
    # The orchestrator is the top; the OS primitive and the state word
    # are leaves.
    assert layers[-1].split()[1:] == ["life"], layers[-1]
    low = " ".join(layers[:2])
    assert " os" in low and " segstate" in low, low


def test_lint_fails_on_a_cycle():
    with tempfile.TemporaryDirectory() as d:
        for name, inc in (("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")):
            with open(os.path.join(d, name + ".h"), "w") as f:
                f.write('#include "%s.h"\n' % inc)
        r = lint(d)
        assert r.returncode == 1, r.stdout
        assert r.stdout.strip() == "cycle of 3: a b c", r.stdout


def code_lines(path):
    """The file's lines with comments blanked (C block and line comments)."""
    import re
    text = open(path).read()
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text,
                  flags=re.S)
    return [re.sub(r"//.*", "", l) for l in text.split("\n")]


def test_report_and_screen_never_read_the_segment_header():
    """report/ and screen/ read facts from the model (tui/model/), never
    the segment's header: what an older writer lacked is decided once."""
    bad = []
    for sub in ("report", "screen"):
        d = os.path.join(ROOT, "tui", sub)
        for name in sorted(os.listdir(d)):
            if not name.endswith((".c", ".h")):
                continue
            for n, l in enumerate(code_lines(os.path.join(d, name)), 1):
                if "ym_header" in l or "snap.hdr" in l or "snap->hdr" in l:
                    bad.append("%s/%s:%d: %s" % (sub, name, n, l.strip()))
    assert not bad, "\n".join(bad)


if __name__ == "__main__":
    sys.exit(run_tests(dict(globals())))
