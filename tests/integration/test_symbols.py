"""Symbolization as people read it (issue 3): real C++ and Rust programs under
the agent, checked through ymtop's JSON and text reports.

Programs: tests/progs/symbols.cc (inlined member template, std::vector
growth, std::string), tests/progs/manysites.cc (4096 stacks, for speed),
tests/progs/cxxstart.cc (a frame without line information behind one
with it), tests/progs/mixedcu (a clang unit between two gcc units) and
tests/progs/rust/rsyms.rs, built by the Makefile as rust-v0-rsyms and
rust-legacy-rsyms.  Each documents its allocation sites; the tests find
expected source lines by searching the sources, so they follow edits."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from ymlib import (AGENT, BUILD, Target, functions, report,
                   run_tests, ymtop, seg_path)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROGS = os.path.join(BUILD, "progs")
SYMBOLS = os.path.join(PROGS, "symbols")
MANYSITES = os.path.join(PROGS, "manysites")
RUST = {m: os.path.join(PROGS, "rust-%s-rsyms" % m) for m in ("v0", "legacy")}
EXACT = {"YM_SAMPLE_RATE": "1"}

# What a mangled or hashed name looks like: it must never reach a report.
MANGLED = re.compile(r"(^|[^A-Za-z0-9_])(_Z[A-Za-z0-9_]|_R[A-Za-z0-9_])|"
                     r"::h[0-9a-f]{16}($|[^0-9a-f])")


def source_line(path, text):
    """1-based line of the first line of `path` containing `text`."""
    with open(os.path.join(ROOT, path)) as f:
        for i, line in enumerate(f, 1):
            if text in line:
                return i
    raise AssertionError("%s not found in %s" % (text, path))


def held_report(argv, *extra, fmt="json", env=None):
    """Report of a program that allocates, prints ready and waits."""
    e = dict(EXACT)
    e.update(env or {})
    t = Target(argv, env=e)
    try:
        if fmt == "json":
            return report(t.pid, *extra)
        return ymtop("-b", "-n", "1", "-f", fmt, "-p", t.pid, *extra).stdout
    finally:
        rc, _, err = t.finish()
        assert rc == 0, "%s exited %d: %s" % (argv[0], rc, err)


def stack_with(rep, pred, what):
    found = [s for s in rep["stacks"] if any(pred(f) for f in s["frames"])]
    if not found:
        raise AssertionError("no stack with %s in %s" %
                             (what, [functions(s)[:6] for s in rep["stacks"]]))
    return max(found, key=lambda s: s["allocated_bytes"])


def display(stack):
    return stack["frames"][stack["display_frame"]]


def no_mangled_names(rep):
    for s in rep["stacks"]:
        for f in s["frames"]:
            assert not MANGLED.search(f["function"]), f


def text_blocks(text):
    """Stacks of a text report: list of lists of frame lines."""
    blocks, cur = [], None
    for line in text.splitlines():
        if re.match(r"^#\d+ ", line):
            cur = []
            blocks.append(cur)
        elif cur is not None and line.startswith("   "):
            cur.append(line)
        else:
            cur = None
    return blocks


def text_display(text, through):
    """The '=>' line of the text stack whose frames mention `through`."""
    for b in text_blocks(text):
        if any(through in line for line in b):
            marked = [line for line in b if line.lstrip().startswith("=>")]
            assert len(marked) == 1, b
            return marked[0]
    raise AssertionError("no text stack through %s:\n%s" % (through, text))


# ---- C++ ----

def test_cxx_inlined_member_template_and_caller():
    rep = held_report([SYMBOLS])
    line = source_line("tests/progs/symbols.cc", "new T(std::forward")
    s = stack_with(rep, lambda f: "Pool<Blob>::make<" in f["function"],
                   "Pool<Blob>::make")
    fr = s["frames"]
    i = next(k for k, f in enumerate(fr) if "Pool<Blob>::make<" in f["function"])
    make, caller = fr[i], fr[i + 1]
    assert make["inlined"] is True, make
    assert make["file"].endswith("symbols.cc") and make["line"] == line, make
    # The caller it was inlined into, where the call stands.
    assert caller["function"] == "build_pool()", caller
    assert caller["inlined"] is False and caller["file"].endswith("symbols.cc")
    assert caller["line"] == source_line("tests/progs/symbols.cc",
                                         "pool->make(i)"), caller
    assert fr[0]["function"].startswith("operator new"), fr[0]
    # The user's code, not operator new, is the display frame.
    assert s["display_frame"] == i, (s["display_frame"], functions(s))
    no_mangled_names(rep)


def test_cxx_text_marks_inlined_and_display():
    text = held_report([SYMBOLS], fmt="text")
    line = source_line("tests/progs/symbols.cc", "new T(std::forward")
    d = text_display(text, "build_pool()")
    assert "[inlined] Blob* Pool<Blob>::make<int&>(int&) (symbols.cc:%d)" % line \
        in d, d
    assert "_Z" not in text


def test_frame_without_line_information_shows_none():
    """_start (crt1, no line information) linked right behind main, whose
    line sequence ends with a row at its end: no file or line of main's
    may reach _start's frame, in JSON or in the text report."""
    prog = os.path.join(PROGS, "cxxstart")
    rep = held_report([prog])
    starts = [f for s in rep["stacks"] for f in s["frames"]
              if f["function"] == "_start"]
    assert starts, "no _start frame: %s" % (
        [functions(s) for s in rep["stacks"]])
    for f in starts:
        assert f["file"] is None and f["line"] == 0, f
    # main itself keeps its lines.
    mains = [f for s in rep["stacks"] for f in s["frames"]
             if f["function"] == "main"]
    assert mains and all(f["file"].endswith("cxxstart.cc") and f["line"] > 0
                         for f in mains), mains
    text = held_report([prog], fmt="text")
    labels = [line for line in text.splitlines() if " _start" in line]
    assert labels and all(line.rstrip().endswith("_start")
                          for line in labels), labels


def test_unit_without_aranges_between_two_with_them():
    """clang_alloc's unit (clang: no .debug_aranges) lies between two of
    gcc's: libdw's lookup offers the unit before it, which must not be
    taken; clang_alloc keeps its file and line."""
    rep = held_report([os.path.join(PROGS, "mixedcu")])
    s = stack_with(rep, lambda f: f["function"] == "clang_alloc",
                   "clang_alloc")
    f = next(f for f in s["frames"] if f["function"] == "clang_alloc")
    assert f["file"] and f["file"].endswith("mixedcu/clang.c"), f
    assert f["line"] == source_line("tests/progs/mixedcu/clang.c",
                                    "clang_alloc's allocation"), f
    assert display(s)["function"] == "clang_alloc", s


def test_cxx_vector_growth_display_is_user_function():
    rep = held_report([SYMBOLS])
    s = stack_with(rep, lambda f: f["function"] == "grow_vector()",
                   "grow_vector")
    fns = functions(s)
    # The plumbing is there (std::vector's growth, allocator_traits) ...
    assert any(re.search(r"std::vector<long.*::_M_realloc_(insert|append)", f)
               for f in fns), fns
    assert any("allocator" in f for f in fns), fns
    # ... but the display frame is the user's function.
    assert display(s)["function"] == "grow_vector()", (s["display_frame"], fns)
    assert display(s)["line"] == source_line("tests/progs/symbols.cc",
                                             "v->push_back(i)")
    st = stack_with(rep, lambda f: "_M_construct" in f["function"],
                    "basic_string::_M_construct")
    assert display(st)["function"].startswith("make_strings"), functions(st)


def test_skip_and_no_skip_change_the_display_frame():
    base = held_report([SYMBOLS], fmt="text")
    assert "grow_vector() (symbols.cc:" in text_display(base, "grow_vector()")
    everything = held_report([SYMBOLS], "--no-skip", fmt="text")
    d = text_display(everything, "grow_vector()")
    assert "operator new" in d, d
    skipped = held_report([SYMBOLS], "--skip", "^grow_", "--skip", "^zzz",
                          fmt="text")
    d = text_display(skipped, "grow_vector()")
    assert re.search(r"=> main \(symbols\.cc:\d+\)", d), d
    rep = held_report([SYMBOLS], "--no-skip")
    s = stack_with(rep, lambda f: f["function"] == "grow_vector()", "grow")
    assert s["display_frame"] == 0, s["display_frame"]
    r = ymtop("-b", "-n", "1", "--skip", "(", "-p", os.getpid(), check=False)
    assert r.returncode == 2 and "--skip" in r.stderr, (r.returncode, r.stderr)


def strip_copy(how, tmp):
    path = os.path.join(tmp, how)
    args = ["strip", "--strip-debug"] if how == "nodebug" else ["strip"]
    subprocess.run(args + ["-o", path, SYMBOLS], check=True)
    return path


def test_stripped_binary_uses_symbol_table():
    with tempfile.TemporaryDirectory() as tmp:
        path = strip_copy("nodebug", tmp)
        rep = held_report([path])
        s = stack_with(rep, lambda f: f["function"] == "grow_vector()",
                       "grow_vector from .symtab")
        mine = [f for f in s["frames"] if f["module"] == path]
        assert mine and all(f["file"] is None for f in mine), mine
        assert "main" in functions(s)
        assert display(s)["function"] == "grow_vector()", functions(s)
        no_mangled_names(rep)


def test_fully_stripped_binary_falls_back_to_module_offsets():
    with tempfile.TemporaryDirectory() as tmp:
        path = strip_copy("full", tmp)
        rep = held_report([path])
        mine = [f for s in rep["stacks"] for f in s["frames"]
                if f["module"] == path]
        assert mine, "no frame in the stripped executable"
        for f in mine:
            assert re.fullmatch(r"\[full\+0x[0-9a-f]+\]", f["function"]), f
        # Libraries keep their names: operator new is still plumbing.
        s = stack_with(rep, lambda f: f["function"].startswith("operator new"),
                       "operator new")
        assert display(s)["module"] == path, display(s)
        text = held_report([path], fmt="text")
        assert "[full+0x" in text


def test_separate_debug_file_by_debuglink():
    """DWARF moved out of the executable (objcopy --only-keep-debug, strip
    -g, --add-gnu-debuglink), in .debug/ beside it: lines and inlined frames
    come back.  (Build-id lookup under /usr/lib/debug: tests/unit/test_sym.c.)"""
    if shutil.which("objcopy") is None:
        print("(objcopy not installed)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        os.mkdir(os.path.join(tmp, ".debug"))
        dbg = os.path.join(tmp, ".debug", "prog.debug")
        subprocess.run(["objcopy", "--only-keep-debug", SYMBOLS, dbg], check=True)
        subprocess.run(["strip", "-g", "-o", prog, SYMBOLS], check=True)
        subprocess.run(["objcopy", "--add-gnu-debuglink=" + dbg, prog],
                       check=True)
        rep = held_report([prog])
        s = stack_with(rep, lambda f: "Pool<Blob>::make<" in f["function"],
                       "Pool<Blob>::make from the debug file")
        make = next(f for f in s["frames"] if "Pool<Blob>::make<" in f["function"])
        assert make["inlined"] and make["module"] == prog, make
        assert make["line"] == source_line("tests/progs/symbols.cc",
                                           "new T(std::forward")


def test_non_pie_executable():
    """The same program linked at a fixed address (-no-pie): the load bias
    is 0 and names, lines and inline chains are the same."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        print("(no C++ compiler)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "nopie")
        subprocess.run([cxx, "-std=c++17", "-O2", "-g", "-fno-pie", "-no-pie",
                        "-o", prog, os.path.join(ROOT, "tests/progs/symbols.cc")],
                       check=True)
        rep = held_report([prog])
        s = stack_with(rep, lambda f: f["function"] == "grow_vector()",
                       "grow_vector in a non-PIE executable")
        assert display(s)["function"] == "grow_vector()", functions(s)
        assert display(s)["module"] == prog
        assert int(display(s)["address"], 16) < 0x10000000, display(s)
        s = stack_with(rep, lambda f: "Pool<Blob>::make<" in f["function"],
                       "Pool<Blob>::make")
        assert display(s)["inlined"] is True, display(s)


# ---- Rust ----

def rust_binary(mangling):
    path = RUST[mangling]
    if not os.path.exists(path):
        if shutil.which(os.environ.get("RUSTC", "rustc")) is None:
            print("(rustc not installed: %s not built)" % path)
            return None
        raise AssertionError("%s missing: make %s" % (path, path))
    with open(path, "rb") as f:
        data = f.read()
    # The binary really uses the mangling the test is about.
    marker = b"_RNv" if mangling == "v0" else b"_ZN5rsyms4grow"
    assert marker in data, "%s has no %r symbols" % (path, marker)
    return path


def check_rust(mangling):
    path = rust_binary(mangling)
    if not path:
        return
    rep = held_report([path])
    no_mangled_names(rep)
    src = "tests/progs/rust/rsyms.rs"
    # Vec::push growth: RawVec plumbing under the user's function.
    s = stack_with(rep, lambda f: f["function"] == "rsyms::grow::grow_vec",
                   "rsyms::grow::grow_vec")
    fns = functions(s)
    assert any("raw_vec::RawVec" in f for f in fns), fns
    assert any(re.search(r"alloc::vec::Vec<.*>::push$", f) for f in fns), fns
    d = display(s)
    assert d["function"] == "rsyms::grow::grow_vec", (s["display_frame"], fns)
    assert d["file"].endswith("rsyms.rs"), d
    assert d["line"] == source_line(src, "v.push(std::hint::black_box(i))"), d
    assert "rsyms::main" in fns, fns
    # Box::new in a method: Holder::boxes (v0 prints "<rsyms::grow::Holder>").
    s = stack_with(rep, lambda f: "Holder" in f["function"] and
                   f["function"].endswith("::boxes"), "Holder::boxes")
    assert re.fullmatch(r"<?rsyms::grow::Holder>?::boxes",
                        display(s)["function"]), functions(s)
    # The async fn body is the display frame, past alloc's frames and not
    # the Future::poll wrapper around it.
    s = stack_with(rep, lambda f: f["function"].startswith("rsyms::tasks::fill"),
                   "rsyms::tasks::fill")
    d = display(s)
    assert re.fullmatch(r"rsyms::tasks::fill::\{(\{closure\}|closure#0)\}",
                        d["function"]), functions(s)
    assert d["line"] == source_line(src, "out.push(black_box(vec!")
    assert any(f.endswith(" as core::future::future::Future>::poll")
               for f in functions(s)), functions(s)


def test_rust_v0_names_and_display():
    check_rust("v0")


def test_rust_legacy_names_and_display():
    check_rust("legacy")


# ---- post-mortem ----

def test_post_mortem_changed_file_is_reported_not_misnamed():
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "prog")
        shutil.copy(SYMBOLS, prog)
        for changed in (False, True):
            e = dict(os.environ)
            e.update(EXACT)
            e.update({"YM_KEEP_SEGMENT": "1", "LD_PRELOAD": AGENT})
            p = subprocess.Popen([prog], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, env=e)
            p.communicate("\n", timeout=60)
            seg = seg_path(p.pid)
            try:
                assert p.returncode == 0 and os.path.exists(seg)
                if changed:
                    # Another program at the same path, as after a rebuild.
                    os.unlink(prog)
                    shutil.copy(os.path.join(PROGS, "workload"), prog)
                text = ymtop("-b", "-n", "1", "-p", p.pid).stdout
                rep = report(p.pid)
            finally:
                if os.path.exists(seg):
                    os.unlink(seg)
            assert rep["state"] == "exited", rep["state"]
            mine = [f for s in rep["stacks"] for f in s["frames"]
                    if f["module"] == prog]
            assert mine, "no frames in %s" % prog
            warn = [w for w in text.splitlines() if w.startswith("warning:")]
            if not changed:
                assert "grow_vector()" in [f["function"] for f in mine]
                assert not warn and not rep["warnings"], (warn, rep["warnings"])
                continue
            assert any(prog in w and "build-id mismatch" in w for w in warn), \
                text[:2000]
            assert len(rep["warnings"]) == 1 and prog in rep["warnings"][0]
            # No name at all rather than a wrong one from the new file.
            for f in mine:
                assert re.fullmatch(r"\[prog\+0x[0-9a-f]+\]", f["function"]), f
                assert f["file"] is None and f["line"] == 0, f
            assert "grow_vector" not in text and "hold_" not in text


# ---- many stacks (the speed is measured by make bench) ----

def many_sites_report():
    """ymtop's JSON of manysites (4096 stacks through 2048 distinct sites)
    and the seconds from ymtop's start to its exit."""
    t = Target([MANYSITES], env=EXACT)
    try:
        t0 = time.time()
        r = ymtop("-b", "-n", "1", "-f", "json", "-p", t.pid)
        took = time.time() - t0
    finally:
        rc, _, _ = t.finish()
    assert rc == 0
    return json.loads(r.stdout), took


def test_thousands_of_stacks_each_named():
    rep, _ = many_sites_report()
    sites = [s for s in rep["stacks"]
             if re.fullmatch(r"void\* site<\d+>\(\)", display(s)["function"])]
    assert len(sites) == 4096, len(sites)
    names = {(display(s)["function"], s["frames"][s["display_frame"] + 1]
              ["function"].split("(")[0]) for s in sites}
    assert len(names) == 4096, len(names)


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
