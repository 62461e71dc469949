#!/usr/bin/env bash
# The cost of the trend history (make bench): one slot written (every
# stack's counters read once) at 2^DEPTH stacks, by difference between
# tests/bench/trendwrite in exact mode with a slot every millisecond and
# with none, over the slots the run wrote (one a millisecond); medians of
# ROUNDS interleaved rounds.
#
#   ROUNDS=N CALLS=N tests/bench/trendcost.sh [BUILD]
set -eu
B=$(cd "${1:-build}" && pwd)
ROUNDS=${ROUNDS:-5}
CALLS=${CALLS:-2000000}
AGENT="$B/libymagent.so"
PROG="$B/bench/trendwrite"
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "trendcost: $CALLS malloc/free pairs in exact mode, slots of 1 ms vs none, $ROUNDS rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-7s %10s %10s %12s %14s\n" stacks off_s on_s us/slot ns/stack
for d in 8 11 14; do
	: >/tmp/trendcost.$$.0; : >/tmp/trendcost.$$.1
	for r in $(seq "$ROUNDS"); do
		LD_PRELOAD=$AGENT YM_SAMPLE_RATE=1 YM_TREND_SLOT_MS=0 "$PROG" "$d" "$CALLS" >>/tmp/trendcost.$$.0
		LD_PRELOAD=$AGENT YM_SAMPLE_RATE=1 YM_TREND_SLOT_MS=1 "$PROG" "$d" "$CALLS" >>/tmp/trendcost.$$.1
	done
	z=$(median </tmp/trendcost.$$.0); o=$(median </tmp/trendcost.$$.1)
	# Slots written: one a millisecond of the timed run (its samples are
	# far more frequent); the cost lengthens the run, so count its time.
	per=$(echo "($o - $z) * 1000000 / ($o * 1000)" | bc -l)
	printf "%-7s %10.3f %10.3f %12.1f %14.1f\n" "$((1 << d))" "$z" "$o" "$per" \
		"$(echo "$per * 1000 / (2 ^ $d)" | bc -l)"
done
rm -f /tmp/trendcost.$$.*
