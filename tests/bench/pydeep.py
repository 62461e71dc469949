"""bench: one thread D Python frames deep makes N bytearrays of 1 KiB (each
reaches malloc: over pymalloc's 512 bytes), the sample cost of the Python
frame walk (BENCHMARKS.md, The Python frames of a sample)."""
import sys
def rec(d, n):
    if d:
        return rec(d - 1, n)
    x = None
    for i in range(n):
        x = bytearray(1024)
    return x
rec(int(sys.argv[1]), int(sys.argv[2]))
