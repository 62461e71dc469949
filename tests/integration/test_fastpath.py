"""The fast paths' instruction counts written beside them in hooks.c are the
binary's.

Each fast-path comment in injector/agent/hooks.c ("Fast path...: N
instructions") states the count of the release build; this test
disassembles build/libymagent.so (objdump) and counts, for each such
function, the shortest path from its entry to a return or an indirect tail
jump (the call of the real function), never through a direct jump out of
the function (the noinline slow paths).  A count other than the stated one
fails: the fast path grew (or the comment is stale).  And malloc's and
free's together, the pair every allocation-bound program pays, must not
exceed PAIR_MAX (BENCHMARKS.md, "The fast path against the bare shim").
The sampled path's constants (sample.h) span at most SAMPLE_CONST_LINES_MAX
cache lines.

Counts are gcc's on x86-64 without YM_ASSERTS: other builds (clang, a
SANITIZER= build, another architecture) are skipped."""
import os
import re
import shutil
import subprocess
import sys

from ymlib import AGENT, Skip, run_tests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOOKS = os.path.join(ROOT, "injector", "agent", "hooks.c")
MARGIN = 0
# malloc + free, gcc -O2 on x86-64: the shim's pair is 2 (two jumps).
PAIR_MAX = 27

# A comment, then "EXPORT type name(": the comment states the fast path's
# count when it says "Fast path" and "N instructions" (the first such N).
COMMENTED = re.compile(r"/\*((?:[^*]|\*(?!/))*)\*/\s*EXPORT\s+[^(]*?\b(\w+)\s*\(")


def stated_counts(text):
    counts = {}
    for body, name in COMMENTED.findall(text):
        n = re.search(r"(\d+)\s+instructions", body)
        if "Fast path" in body and n:
            counts[name] = int(n.group(1))
    return counts


def disassemble(lib, name):
    """[(address, mnemonic, operands)] of the function `name`."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn",
                          "--disassemble=" + name, lib],
                         capture_output=True, text=True, check=True).stdout
    insns, inside = [], False
    for line in out.splitlines():
        if re.match(r"^[0-9a-f]+ <%s>:$" % re.escape(name), line):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
            if not m:
                if insns:
                    break
                continue
            ops = re.sub(r"\s*#.*$", "", m.group(3))
            insns.append((int(m.group(1), 16), m.group(2), ops))
    assert insns, "no function %s in %s" % (name, lib)
    return insns


def fast_path_length(insns):
    """Instructions on the shortest path from the entry to a ret or an
    indirect jmp, following both ways of every conditional jump, direct
    jumps inside the function, and calls (which return)."""
    index = {a: i for i, (a, _, _) in enumerate(insns)}
    best = None
    # Depth-first with the count so far; the graphs are a few dozen nodes.
    stack = [(0, 0, frozenset())]
    while stack:
        i, n, seen = stack.pop()
        if i >= len(insns) or i in seen or (best is not None and n >= best):
            continue
        seen = seen | {i}
        _, op, ops = insns[i]
        n += 1
        if op.startswith("ret"):
            best = n
            continue
        target = re.match(r"^([0-9a-f]+)\s*<", ops)
        if op == "jmp":
            if ops.startswith("*"):
                best = n       # the tail call
            elif target and int(target.group(1), 16) in index:
                stack.append((index[int(target.group(1), 16)], n, seen))
            continue           # else: out to a slow path
        if op.startswith("j") and target:
            t = int(target.group(1), 16)
            if t in index:
                stack.append((index[t], n, seen))
        stack.append((i + 1, n, seen))
    return best


def release_gcc_x86_64(lib):
    if shutil.which("objdump") is None:
        raise Skip("no objdump")
    hdr = subprocess.run(["readelf", "-h", lib], capture_output=True,
                         text=True, check=True).stdout
    if "X86-64" not in hdr:
        raise Skip("counts are stated for x86-64")
    comment = subprocess.run(["readelf", "-p", ".comment", lib],
                             capture_output=True, text=True).stdout
    if "clang" in comment:
        raise Skip("counts are stated for gcc")
    syms = subprocess.run(["nm", lib], capture_output=True, text=True,
                          check=True).stdout
    if re.search(r"\bagent_assert_fail\b", syms):
        raise Skip("a YM_ASSERTS build: counts are the release build's")


def test_hooks_c_states_the_fast_paths_of_the_malloc_family():
    counts = stated_counts(open(HOOKS).read())
    for name in ("malloc", "free", "calloc", "realloc"):
        assert name in counts, "hooks.c states no count for %s: %s" % (
            name, counts)


def test_fast_paths_have_the_instruction_counts_hooks_c_states():
    release_gcc_x86_64(AGENT)
    counts = stated_counts(open(HOOKS).read())
    wrong = []
    for name, stated in sorted(counts.items()):
        n = fast_path_length(disassemble(AGENT, name))
        print("  %s: %s instructions, %d stated" % (name, n, stated))
        if n is None or abs(n - stated) > MARGIN:
            wrong.append("%s: %s instructions, hooks.c says %d"
                         % (name, n, stated))
    assert not wrong, "; ".join(wrong)


def test_malloc_and_free_together_stay_within_the_pair_bound():
    release_gcc_x86_64(AGENT)
    pair = sum(fast_path_length(disassemble(AGENT, f)) for f in ("malloc", "free"))
    print("  malloc + free: %d instructions (bound %d)" % (pair, PAIR_MAX))
    assert pair <= PAIR_MAX, "malloc + free take %d instructions, more than %d" % (
        pair, PAIR_MAX)


# The sample's floating-point constants (sample.h: the draw's -log u, the
# weight's expm1 and 1/p) in one 128-byte block: at the default rate every
# sample finds them cold, so each cache line they span is a first-level miss
# a sample.  Two lines of the block and the compiler's own 2^63 (the
# conversion of a weight to uint64_t); scattered through the constant pool
# they took seven.
SAMPLE_CONST_LINES_MAX = 3


def rodata_range(lib):
    out = subprocess.run(["readelf", "-SW", lib], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        m = re.search(r"\]\s+\.rodata\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)",
                      line)
        if m:
            lo = int(m.group(1), 16)
            return lo, lo + int(m.group(2), 16)
    raise AssertionError("no .rodata in %s" % lib)


def symbol_sizes(lib):
    """{address: size} of the data objects of lib."""
    out = subprocess.run(["nm", "-S", lib], capture_output=True, text=True,
                         check=True).stdout
    sizes = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "rRdDbB":
            sizes[int(f[0], 16)] = int(f[1], 16)
    return sizes


def constant_lines(lib, name):
    """The 64-byte lines of .rodata that `name` reads floating-point
    constants from, and each line's readers: what instructions on xmm
    registers read by address (rip-relative), and every line of a .rodata
    object whose address it takes (a table read through a register)."""
    lo, hi = rodata_range(lib)
    sizes = symbol_sizes(lib)
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn",
                          "--disassemble=" + name, lib],
                         capture_output=True, text=True, check=True).stdout
    lines = {}
    for line in out.splitlines():
        m = re.search(r"\(%rip\).*# ([0-9a-f]+) <", line)
        if not m:
            continue
        a = int(m.group(1), 16)
        if not lo <= a < hi:
            continue
        if re.search(r"\blea\b", line) and a in sizes:
            for n in range(a // 64, (a + max(sizes[a], 1) - 1) // 64 + 1):
                lines.setdefault(n, []).append(line.strip())
        elif "xmm" in line:
            lines.setdefault(a // 64, []).append(line.strip())
    return lines


def test_a_sample_reads_its_constants_from_few_cache_lines():
    release_gcc_x86_64(AGENT)
    lines = constant_lines(AGENT, "agent_sample")
    for n, users in sorted(lines.items()):
        print("  line %#x: %d reads" % (n * 64, len(users)))
    assert lines, "agent_sample reads no constant: the draw is not inlined?"
    assert len(lines) <= SAMPLE_CONST_LINES_MAX, (
        "agent_sample reads constants from %d cache lines, more than %d: %s"
        % (len(lines), SAMPLE_CONST_LINES_MAX,
           [u for us in lines.values() for u in us]))


def test_path_counter_follows_the_likely_branch_and_stops_at_tail_calls():
    # calloc's shape: the likely way is the taken jno; the slow paths leave
    # by direct jumps; the fast path ends in an indirect jmp.
    insns = [(0x10, "mul", "%rsi"),
             (0x12, "jno", "20 <f+0x10>"),
             (0x14, "jmp", "5 <slow>"),
             (0x20, "test", "%r8,%r8"),
             (0x22, "je", "14 <f+0x4>"),
             (0x24, "sub", "%rax,%fs:0x8(%rcx)"),
             (0x28, "js", "30 <f+0x20>"),
             (0x2a, "jmp", "*0x8dae0(%rip)"),
             (0x30, "jmp", "6 <due>")]
    assert fast_path_length(insns) == 7
    # A call returns; ret ends the path.
    insns = [(0x10, "push", "%rbx"), (0x11, "call", "*0x10(%rip)"),
             (0x17, "pop", "%rbx"), (0x18, "ret", "")]
    assert fast_path_length(insns) == 4


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
