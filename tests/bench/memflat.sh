#!/usr/bin/env bash
# The agent's memory over a long run: allocbench (2 threads, churn) under
# the agent at the default rate for SECS seconds; every STEP seconds the
# target's RSS split into anonymous memory (the program's heap plus the
# agent's private memory) and shared memory (the touched part of the
# segment).  The goal: segment + at most 8 MiB, flat.
#   tests/bench/memflat.sh [BUILD] [SECS] [STEP]
set -eu
B=$(cd "${1:-build}" && pwd)
SECS=${2:-600}
STEP=${3:-30}
. "$(dirname "$0")/segments.sh"
LD_PRELOAD="$B/libymagent.so" "$B/bench/allocbench" 2 100000000000 >/dev/null &
pid=$!
seg_note $pid
# The killed allocbench's segment is removed at exit, Ctrl-C included.
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true; seg_sweep' EXIT
seg_traps
kib() { awk -v k="$1:" '$1 == k {print $2}' /proc/$pid/status; }
echo "seconds  RssAnon_MiB  RssShmem_MiB  VmRSS_MiB"
for t in $(seq 0 "$STEP" "$SECS"); do
	[ "$t" -gt 0 ] && sleep "$STEP"
	awk -v t="$t" -v a="$(kib RssAnon)" -v s="$(kib RssShmem)" -v r="$(kib VmRSS)" \
		'BEGIN {printf "%7d  %11.1f  %12.1f  %9.1f\n", t, a/1024, s/1024, r/1024}'
done
