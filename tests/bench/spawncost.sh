#!/bin/bash
# The cost of a short process under the agent, per process: ROUNDS
# interleaved rounds of N runs of /bin/true and of sh -c true for each
# configuration (tests/bench/spawnloop.c preloads the children only),
# medians of wall and CPU time per process.
#
#   ROUNDS=11 N=500 tests/bench/spawncost.sh [BUILD]
#
# Configurations: none, empty (a library that defines nothing: the cost
# of preloading any library), shim-tail (a counting interposer), agent,
# agent with YM_DISABLE=1 (loaded, no segment).
set -euo pipefail
B=${1:-build}
ROUNDS=${ROUNDS:-11}
N=${N:-500}
LOOP=$B/bench/spawnloop
for f in "$LOOP" "$B/bench/libempty.so" "$B/bench/libshimtail.so" "$B/libymagent.so"; do
	[ -e "$f" ] || { echo "spawncost: no $f (make bench builds it)" >&2; exit 1; }
done
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
EMPTY=$(abs "$B/bench/libempty.so")
TAIL=$(abs "$B/bench/libshimtail.so")
AGENT=$(abs "$B/libymagent.so")
CONFIGS=("none=" "empty=$EMPTY" "shim-tail=$TAIL" "agent=$AGENT" "disabled=$AGENT,YM_DISABLE=1")
med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
for prog in "/bin/true" "/bin/sh -c true"; do
	declare -A W=() C=()
	for _ in $(seq "$ROUNDS"); do
		for kv in $(printf '%s\n' "${CONFIGS[@]}" | shuf); do
			name=${kv%%=*}; spec=${kv#*=}
			IFS=, read -ra p <<<"$spec"
			lib=${p[0]:-}
			# shellcheck disable=SC2086
			read -r w c < <(env "${p[@]:1}" CHILD_PRELOAD="$lib" "$LOOP" "$N" $prog)
			W[$name]+="$w "; C[$name]+="$c "
		done
	done
	base=$(med <<<"${W[none]}")
	echo "$prog: $ROUNDS rounds of $N runs, per process"
	for kv in "${CONFIGS[@]}"; do
		name=${kv%%=*}
		w=$(med <<<"${W[$name]}"); c=$(med <<<"${C[$name]}")
		printf "  %-10s wall %7.1f us %6.3fx   cpu %7.1f us\n" "$name" "$w" \
			"$(echo "$w / $base" | bc -l)" "$c"
	done
done
