"""bench: python3 building and dropping structures (dicts, lists, strings,
objects), the allocation pattern of an interpreter-heavy program.

    pywork.py [ROUNDS [PAUSE_S]]   (PAUSE_S: a sleep after each round, for
                                    a light workload that runs for hours)"""
import sys
import time


class Node:
    __slots__ = ("key", "value", "children")

    def __init__(self, key, value):
        self.key = key
        self.value = value
        self.children = []


def build(n):
    root = Node("root", 0)
    index = {}
    for i in range(n):
        node = Node("k%d" % i, str(i) * (i % 7 + 1))
        index[node.key] = node
        (root if i % 3 == 0 else index["k%d" % (i // 2)]).children.append(node)
    return root, index


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    total = 0
    for r in range(rounds):
        root, index = build(60000)
        words = " ".join(index).split()
        total += len(words) + sum(len(v.value) for v in index.values())
        counts = {}
        for w in words:
            counts[w[:3]] = counts.get(w[:3], 0) + 1
        del root, index, words, counts
        if pause:
            time.sleep(pause)
    print(total)


main()
