#!/usr/bin/env python3
"""The include graph of a folder's C files: its layers, or its cycles.

    python3 tests/lint/include_order.py injector/agent

A module is a .c/.h pair (x.c and x.h are one node, "x"); an edge x -> y
means x.c or x.h includes "y.h" from the same folder.  A header-only leaf
(a .h without a .c) is a node too.  Prints the modules layer by layer, the
bottom first (a module includes only modules of lower layers), and exits
0; or prints each cycle (strongly connected component of more than one
module) and exits 1.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def graph(folder):
    nodes = {}
    for name in sorted(os.listdir(folder)):
        stem, ext = os.path.splitext(name)
        if ext in (".c", ".h"):
            nodes.setdefault(stem, set())
    for stem in nodes:
        for ext in (".c", ".h"):
            path = os.path.join(folder, stem + ext)
            if not os.path.exists(path):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for inc in INCLUDE.findall(f.read()):
                    dep = os.path.splitext(os.path.basename(inc))[0]
                    if os.path.dirname(inc) == "" and dep in nodes and dep != stem:
                        nodes[stem].add(dep)
    return nodes


def components(nodes):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(nodes[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(nodes[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "injector/agent"
    nodes = graph(folder)
    cycles = [c for c in components(nodes) if len(c) > 1]
    if cycles:
        for c in cycles:
            print("cycle of %d: %s" % (len(c), " ".join(c)))
        return 1
    layer = {}
    def depth(n):
        if n not in layer:
            layer[n] = 1 + max((depth(d) for d in nodes[n]), default=-1)
        return layer[n]
    for n in nodes:
        depth(n)
    for k in range(max(layer.values(), default=-1) + 1):
        print("%d: %s" % (k, " ".join(sorted(n for n in nodes if layer[n] == k))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
