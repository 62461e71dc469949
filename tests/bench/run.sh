#!/usr/bin/env bash
# make bench: the allocation-heavy benchmark without the agent, with it at
# the default rate, at 64 KiB and in exact mode.  Runs are interleaved
# (one of each configuration per round), the figure is the median of the
# rounds, and ratios are against the no-agent run of the same rounds.
#   ROUNDS=N THREADS=N CALLS=N tests/bench/run.sh [BUILD]
set -eu
B=${1:-build}
ROUNDS=${ROUNDS:-7}
THREADS=${THREADS:-2}
CALLS=${CALLS:-10000000}
AGENT="$PWD/$B/libymagent.so"
BENCH="$B/bench/allocbench"
configs=("none" "default" "64k" "exact")
declare -A times
run() {   # $1 config
	case $1 in
	none)    env -u LD_PRELOAD "$BENCH" "$THREADS" "$CALLS" ;;
	default) LD_PRELOAD="$AGENT" "$BENCH" "$THREADS" "$CALLS" ;;
	64k)     LD_PRELOAD="$AGENT" YM_SAMPLE_RATE=65536 "$BENCH" "$THREADS" "$CALLS" ;;
	exact)   LD_PRELOAD="$AGENT" YM_SAMPLE_RATE=1 "$BENCH" "$THREADS" "$CALLS" ;;
	esac
}
for r in $(seq "$ROUNDS"); do
	for c in "${configs[@]}"; do
		times[$c]+="$(run "$c") "
	done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
base=$(echo "${times[none]}" | median)
echo "allocbench: $THREADS threads x $CALLS malloc/free pairs, sizes 16-1040 B, median of $ROUNDS interleaved rounds"
printf '%-22s %10s %8s\n' configuration seconds ratio
for c in "${configs[@]}"; do
	m=$(echo "${times[$c]}" | median)
	printf '%-22s %10.3f %7.2fx\n' "$c" "$m" "$(echo "$m $base" | awk '{print $1/$2}')"
done
