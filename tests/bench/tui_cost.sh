#!/usr/bin/env bash
# ymtop's own CPU while it shows a process with 16384 stacks at the default
# refresh (1 s), in a real terminal (tmux).  Prints the share of one core
# over SECS seconds, after a warm-up (the first symbolization is not part
# of the steady cost).
#   tests/bench/tui_cost.sh [BUILD] [SECS]
set -eu
B=$(cd "${1:-build}" && pwd)
SECS=${2:-30}
SOCK=ymtop-bench-$$
# ymtop -p runs beside the target (same /dev/shm); the killed target's
# segment is removed at exit, Ctrl-C included (segments.sh).
. "$(dirname "$0")/segments.sh"
YM_SAMPLE_RATE=1 LD_PRELOAD="$B/libymagent.so" "$B/bench/manystacks" 14 > /tmp/manystacks.$$ &
target=$!
seg_note $target
trap 'tmux -L $SOCK kill-server 2>/dev/null; kill $target 2>/dev/null; wait $target 2>/dev/null || true
      seg_sweep; rm -f /tmp/manystacks.$$' EXIT
seg_traps
for _ in $(seq 100); do grep -q ready /tmp/manystacks.$$ 2>/dev/null && break; sleep 0.1; done
tmux -L $SOCK new-session -d -s bench -x 120 -y 40 "$B/ymtop -p $target"
sleep 5   # warm-up: first snapshot and symbolization
stacks=$(tmux -L $SOCK capture-pane -p -t bench | grep -o "stacks [0-9]*/[0-9]*" | head -1)
ytop=$(pgrep -f "^$B/ymtop -p $target")
ticks() { awk '{print $14 + $15}' /proc/$ytop/stat; }
t0=$(ticks); sleep "$SECS"; t1=$(ticks)
hz=$(getconf CLK_TCK)
echo "ymtop -p (16384-stack target, $stacks on screen, 1 s refresh): $(echo "$t0 $t1 $hz $SECS" | awk '{printf "%.2f%% of one core over %d s", 100*($2-$1)/$3/$4, $4}')"
