#!/usr/bin/env bash
# The cost of one sample at stack depths 8, 16 and 32 (make bench): unwind,
# stack lookup, live-table insert and the later free, by difference between
# tests/bench/samplecost under the agent at YM_SAMPLE_RATE=$RATE and at
# 1024g (no samples), interleaved rounds, medians; divided by the samples
# the sampled run expects.  Thread time: the runs are single-threaded.
#
#   ROUNDS=N CALLS=N RATE=BYTES tests/bench/samplecost.sh [BUILD]
set -eu
B=$(cd "${1:-build}" && pwd)
ROUNDS=${ROUNDS:-5}
CALLS=${CALLS:-4000000}
RATE=${RATE:-16384}
AGENT="$B/libymagent.so"
PROG="$B/bench/samplecost"
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "samplecost: $CALLS malloc/free pairs, rate $RATE vs no samples, $ROUNDS rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-6s %10s %10s %10s %12s\n" depth none_s nosample_s rate_s ns/sample
for d in 8 16 32; do
	: >/tmp/samplecost.$$.n; : >/tmp/samplecost.$$.0; : >/tmp/samplecost.$$.r; : >/tmp/samplecost.$$.e
	for r in $(seq "$ROUNDS"); do
		"$PROG" "$d" "$CALLS" "$RATE" | cut -d' ' -f1 >>/tmp/samplecost.$$.n
		LD_PRELOAD=$AGENT YM_SAMPLE_RATE=1024g "$PROG" "$d" "$CALLS" "$RATE" | cut -d' ' -f1 >>/tmp/samplecost.$$.0
		LD_PRELOAD=$AGENT YM_SAMPLE_RATE=$RATE "$PROG" "$d" "$CALLS" "$RATE" >/tmp/samplecost.$$.x
		cut -d' ' -f1 /tmp/samplecost.$$.x >>/tmp/samplecost.$$.r
		cut -d' ' -f2 /tmp/samplecost.$$.x >>/tmp/samplecost.$$.e
	done
	n=$(median </tmp/samplecost.$$.n); z=$(median </tmp/samplecost.$$.0)
	s=$(median </tmp/samplecost.$$.r); e=$(median </tmp/samplecost.$$.e)
	printf "%-6s %10.3f %10.3f %10.3f %12.0f\n" "$d" "$n" "$z" "$s" \
		"$(echo "($s - $z) * 1000000000 / $e" | bc -l)"
done
rm -f /tmp/samplecost.$$.*
