#!/usr/bin/env bash
# The fast path against its floor: the agent at the default rate, and with
# sampling off (YM_SAMPLE_RATE=1024g), over the bare forwarding shim
# (tests/bench/shim.c, libshim.so: count nothing, forward malloc, free,
# calloc, realloc) on the allocation-bound two-thread benchmark
# (allocbench 2 CALLS), in one interleaved run (tests/bench/ab.py: each
# round every configuration once, in a fresh order; medians).  The shim
# is the first configuration, so the ratios printed are to it; the goal
# is default <= 1.05.
#
#   ROUNDS=N CALLS=N tests/bench/fastpath.sh [BUILD]
set -eu
B=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-11}
CALLS=${CALLS:-4000000}
[ -e "$B/bench/libshim.so" ] && [ -x "$B/bench/allocbench" ] ||
	{ echo "fastpath: build $B/bench/libshim.so and allocbench first (make bench)"; exit 1; }
echo "fastpath: allocbench 2 $CALLS, $ROUNDS rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
CONFIGS="shim=$B/bench/libshim.so none=none nosample=$B/libymagent.so,YM_SAMPLE_RATE=1024g default=$B/libymagent.so" \
	python3 "$HERE/ab.py" "$ROUNDS" "$B/bench/allocbench" 2 "$CALLS"
