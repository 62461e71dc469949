#!/usr/bin/env bash
# ymtop's own CPU while it shows the host list (no -p: every agent process)
# of NPROC processes of one program (allocs, three allocation sites each,
# every allocation sampled), at the default refresh, in a real terminal
# (tmux).  Prints the share of one core over SECS seconds after a warm-up
# of WARM seconds (the first snapshots and symbolization are not part of
# the steady cost).  Alone in a pid namespace and a /dev/shm of its own
# (as root): the host list shows every agent process it sees.
#   tests/bench/host_cost.sh [BUILD[:BUILD...]] [NPROC] [SECS] [WARM] [ROUNDS]
# Several builds (separated by ':'): each in turn in front of the same
# processes (preloaded with the first's agent), ROUNDS times (A B A B ...):
# a loaded machine shifts every build alike, and the processes are made
# once.
set -eu
if [ "$(id -u)" = 0 ] && [ -z "${YM_HOST_NS:-}" ] && command -v unshare >/dev/null; then
	YM_HOST_NS=1 exec unshare -m -p -f --mount-proc sh -c \
		'mount -t tmpfs tmpfs /dev/shm && exec "$0" "$@"' "$0" "$@"
fi
IFS=: read -r -a BUILDS <<< "${1:-build}"
for i in "${!BUILDS[@]}"; do BUILDS[i]=$(cd "${BUILDS[i]}" && pwd); done
B=${BUILDS[0]}
NPROC=${2:-1000}
SECS=${3:-30}
WARM=${4:-20}
ROUNDS=${5:-1}
SOCK=ymtop-host-$$
TMP=$(mktemp -d /tmp/ymtop-host.XXXXXX)
pids=()
# Without root (no private /dev/shm) the killed processes' segments are
# removed at exit (segments.sh).
. "$(dirname "$0")/segments.sh"
cleanup() {
	tmux -L "$SOCK" kill-server 2>/dev/null || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	seg_sweep
	rm -rf "$TMP"
}
trap cleanup EXIT
seg_traps
mkfifo "$TMP/hold"
exec 3<>"$TMP/hold"   # the processes wait on it: EOF never comes
for i in $(seq "$NPROC"); do
	YM_SAMPLE_RATE=1 YM_EARLY_SEGMENT=1 LD_PRELOAD="$B/libymagent.so" \
		"$B/progs/allocs" malloc:4:1000 calloc:4:2000 fail:4:3000 \
		<&3 > "$TMP/a$i" 2>/dev/null &
	pids+=($!)
	seg_note $!
done
for i in $(seq "$NPROC"); do
	for _ in $(seq 600); do grep -q ready "$TMP/a$i" 2>/dev/null && break; sleep 0.1; done
done
ulimit -n "$(ulimit -Hn)"
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$ytop/stat"; }
measure() {
	local b=$1 n=$2
	tmux -L "$SOCK" new-session -d -s bench -x 160 -y 50 "$b/ymtop"
	sleep "$WARM"
	ytop=$(pgrep -x ymtop | head -1)
	local seen perf="" pstat t0 t1 calls
	seen=$(tmux -L "$SOCK" capture-pane -p -t bench | head -3 | tr -s ' ' | tr '\n' '|')
	# YM_HOST_PERF=FILE: a profile of ymtop over the measured seconds
	# (FILE.N for the Nth run).
	if [ -n "${YM_HOST_PERF:-}" ]; then
		perf record -q -g -o "$YM_HOST_PERF.$n" -p "$ytop" & perf=$!
	fi
	# System calls over the same seconds: work that the machine's load
	# does not stretch (the CPU share does, on a loaded machine).
	perf stat -x, -e raw_syscalls:sys_enter -p "$ytop" -o "$TMP/calls" &
	pstat=$!
	t0=$(ticks); sleep "$SECS"; t1=$(ticks)
	kill -INT "$pstat"; wait "$pstat" || true
	calls=$(awk -F, '/sys_enter/ {print $1}' "$TMP/calls")
	if [ -n "$perf" ]; then kill -INT "$perf"; wait "$perf" || true; fi
	echo "$b: ymtop host list of $NPROC processes (default refresh): $(echo "$t0 $t1 $hz $SECS" |
		awk '{printf "%.2f%% of one core over %d s", 100*($2-$1)/$3/$4, $4}'), $((calls / SECS)) system calls a second; VmRSS $(awk '/VmRSS/ {printf "%.0f MiB", $2/1024}' "/proc/$ytop/status"); load $(cut -d' ' -f1-3 /proc/loadavg); screen: $seen"
	tmux -L "$SOCK" kill-server 2>/dev/null || true
	while pgrep -x ymtop >/dev/null; do sleep 0.2; done
}
run=0
for _ in $(seq "$ROUNDS"); do
	for b in "${BUILDS[@]}"; do
		run=$((run + 1))
		measure "$b" "$run"
	done
done
