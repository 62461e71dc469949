"""A thread that runs a subinterpreter (CPython 3.12's _xxsubinterpreters,
3.13's _interpreters: an isolated one, with its own GIL and obmalloc state)
keeps buffers in sub_keep while the main thread keeps its own in
main_keep (tests/integration/test_python.py).  Prints "ready", then
waits for a line on stdin."""
import sys
import threading

try:
    import _interpreters as interpreters
    run_string = interpreters.exec
except ImportError:
    import _xxsubinterpreters as interpreters
    run_string = interpreters.run_string

KEEP = []
done = threading.Event()


def main_keep():
    for i in range(200):
        KEEP.append(bytearray(65536))


def in_thread():
    interp = interpreters.create()
    run_string(interp, """
K = []
def sub_keep():
    for i in range(200):
        K.append(bytearray(40000))
sub_keep()
""")
    done.set()
    sys.stdin.readline()


t = threading.Thread(target=in_thread)
t.start()
done.wait()
main_keep()
print("ready", flush=True)
t.join()
