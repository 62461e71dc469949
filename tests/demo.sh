#!/usr/bin/env bash
# make demo: run the demo program under the agent and watch it with ymtop:
# the live screen on a terminal (q quits), batch reports otherwise.
set -eu
B=${1:-build}
export LD_PRELOAD=
secs=12
[ -t 0 ] && [ -t 1 ] && secs=120
LD_PRELOAD="$PWD/$B/libymagent.so" "$B/progs/demo" $secs &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
# (/dev/shm/ymtop-PID, with .PIDNS after it inside a container)
for _ in $(seq 50); do
	ls /dev/shm/ymtop-$pid /dev/shm/ymtop-$pid.* >/dev/null 2>&1 && break
	sleep 0.1
done
if [ -t 0 ] && [ -t 1 ]; then
	echo "== ymtop -p $pid (the demo runs $secs s; Tab cycles views, ? helps, q quits)"
	sleep 1
	"$B/ymtop" --pid "$pid"
	exit 0
fi
sleep 2
echo "== ymtop -b -p $pid -n 3 -i 3 (the demo runs $secs s; see ymtop(1))"
"$B/ymtop" --batch --pid "$pid" --iterations 3 --interval 3 --top 5
wait $pid
