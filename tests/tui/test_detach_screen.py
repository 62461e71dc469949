"""The screen's X key (man/ymtop.1, KEYS): asks, then detaches the agent
from the process ymtop -p loaded it into; the status line says how; with
--duration, q afterwards has nothing left to detach and exits 0."""
import os

from ymlib import BUILD, Plain, seg_path
from test_screen import Screen, main

CHURN = os.path.join(BUILD, "progs", "churn")


def test_x_asks_then_detaches():
    t = Plain([CHURN, "2"])
    s = Screen(t.pid, cols=160, extra="--duration 600")
    try:
        s.wait(r"rate 512 KiB", timeout=60)
        s.keys("X")
        s.wait(r"detach the agent from process %d" % t.pid)
        s.keys("Escape")
        s.wait(r"rate 512 KiB")
        assert os.path.exists(seg_path(t.pid))
        s.keys("X")
        s.wait(r"detach the agent from process %d" % t.pid)
        s.keys("y", "Enter")
        s.wait(r"agent detached (and unloaded|\(sampling off)", timeout=60)
        assert not os.path.exists(seg_path(t.pid))
        s.keys("q")
        s.wait(r"EXIT=0", timeout=30)
        out, err = t.p.communicate("quit\n", timeout=60)
        assert t.p.returncode == 0 and "checked ok" in out, (out, err)
    finally:
        s.close()
        t.kill()


if __name__ == "__main__":
    raise SystemExit(main(globals()))
