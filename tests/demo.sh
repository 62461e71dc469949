#!/usr/bin/env bash
# make demo: run the demo program under the agent and watch it with ymtop.
set -eu
B=${1:-build}
export LD_PRELOAD=
LD_PRELOAD="$PWD/$B/libymagent.so" "$B/progs/demo" 12 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -e /dev/shm/ymtop-$pid ] && break; sleep 0.1; done
sleep 2
echo "== ymtop -b -p $pid -n 3 -i 3 (the demo runs 12 s; see ymtop(1))"
"$B/ymtop" --batch --pid "$pid" --iterations 3 --interval 3 --top 5
wait $pid
