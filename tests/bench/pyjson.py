"""bench: python3 building, dumping and parsing JSON (run with
PYTHONMALLOC=malloc: every object a malloc and a free, 30-60 native frames
deep under the interpreter's recursion), the workload of the exact-mode
comparison with heaptrack (BENCHMARKS.md)."""
import json
import sys


def build(depth, width, seed):
    if depth == 0:
        return {"id": seed, "name": "n%d" % seed, "tags": ["a%d" % (seed % 7), "b"],
                "score": seed * 0.5, "ok": seed % 2 == 0}
    return {"level": depth,
            "items": [build(depth - 1, width, seed * width + i) for i in range(width)]}


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    total = 0
    for r in range(rounds):
        doc = build(6, 6, r)
        text = json.dumps(doc)
        back = json.loads(text)
        total += len(text) + len(back["items"])
        del doc, text, back
    print(total)


main()
