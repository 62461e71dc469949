#!/usr/bin/env bash
# Exact mode (YM_SAMPLE_RATE=1) against heaptrack on two real programs,
# both tools on the same process, in one interleaved run:
#   python  Debian's python3 with PYTHONMALLOC=malloc building, dumping and
#           parsing JSON (tests/bench/pyjson.py ROUNDS_PY: 12.5 million
#           malloc/free pairs at 5, 30-60 native frames deep);
#   cc1plus gcc's C++ compiler proper alone on tests/bench/cxxsmall.cc,
#           preprocessed once beforehand (g++ -E), at -O1.
# Configurations: none, exact (the agent preloaded, YM_SAMPLE_RATE=1),
# heaptrack (heaptrack -o FILE CMD: the target and heaptrack_interpret,
# both children of the heaptrack script, so both in its CPU time), and,
# with BASE=path/to/libymagent.so, base-exact (another agent build).
# Each round runs every configuration once in a fresh order; the figures
# are medians of user+system CPU seconds (the machine is shared: CPU time
# moves less than wall time) and of wall seconds, with the ratios to none
# and the goal's figure: exact mode's overhead over heaptrack's,
# (exact - none) / (heaptrack - none), which should be <= 0.5.
#
#   ROUNDS=N ROUNDS_PY=N WORKLOADS="python cc1plus" tests/bench/exactcost.sh [BUILD]
set -eu
B=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-5}
ROUNDS_PY=${ROUNDS_PY:-5}
WORKLOADS=${WORKLOADS:-"python cc1plus"}
AGENT="$B/libymagent.so"
CC1=${CC1:-$(g++ -print-prog-name=cc1plus)}
TMP=$(mktemp -d /tmp/ymexact.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
command -v heaptrack >/dev/null || { echo "exactcost: no heaptrack: skipped"; exit 0; }
g++ -std=c++17 -E "$HERE/cxxsmall.cc" -o "$TMP/cxx.ii"

CONFIGS="none exact heaptrack"
[ -n "${BASE:-}" ] && CONFIGS="$CONFIGS base-exact"

workload() {
	case $1 in
	python)  echo "/usr/bin/python3 $HERE/pyjson.py $ROUNDS_PY" ;;
	cc1plus) echo "$CC1 -fpreprocessed $TMP/cxx.ii -quiet -O1 -std=c++17 -o $TMP/cxx.s" ;;
	esac
}

# Prints "wall cpu".
run1() {
	local cmd
	cmd=$(workload "$1")
	local -a pre=(env -u LD_PRELOAD PYTHONMALLOC=malloc)
	case $2 in
	exact)      pre+=(LD_PRELOAD="$AGENT" YM_SAMPLE_RATE=1) ;;
	base-exact) pre+=(LD_PRELOAD="$BASE" YM_SAMPLE_RATE=1) ;;
	heaptrack)  pre+=(heaptrack -o "$TMP/ht") ;;
	esac
	local t0 t1
	t0=$(date +%s%N)
	/usr/bin/time -o "$TMP/time" -f "%U %S" "${pre[@]}" $cmd >/dev/null 2>"$TMP/err" </dev/null ||
		{ echo "exactcost: $1 under $2 failed:" >&2; tail -3 "$TMP/err" >&2; exit 1; }
	t1=$(date +%s%N)
	rm -f "$TMP"/ht*
	awk -v w=$(( (t1 - t0) / 1000 )) 'END {printf "%.3f %.3f\n", w / 1e6, $1 + $2}' "$TMP/time"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "exactcost: $ROUNDS interleaved rounds; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A W C
for w in $WORKLOADS; do
	for r in $(seq "$ROUNDS"); do
		for c in $(printf '%s\n' $CONFIGS | shuf); do
			read -r wall cpu < <(run1 "$w" "$c")
			W[$w.$c]+="$wall "
			C[$w.$c]+="$cpu "
		done
	done
	declare -A MW MC
	for c in $CONFIGS; do
		MW[$c]=$(printf '%s\n' ${W[$w.$c]} | median)
		MC[$c]=$(printf '%s\n' ${C[$w.$c]} | median)
	done
	for c in $CONFIGS; do
		awk -v w="$w" -v c="$c" -v mw="${MW[$c]}" -v mc="${MC[$c]}" \
		    -v nw="${MW[none]}" -v nc="${MC[none]}" \
		    'BEGIN {printf "%-8s %-10s wall %7.2f s %5.2fx   cpu %7.2f s %5.2fx\n", w, c, mw, mw / nw, mc, mc / nc}'
	done
	for c in exact base-exact; do
		[ -n "${MC[$c]:-}" ] || continue
		awk -v w="$w" -v c="$c" -v e="${MC[$c]}" -v h="${MC[heaptrack]}" -v n="${MC[none]}" \
		    -v ew="${MW[$c]}" -v hw="${MW[heaptrack]}" -v nw="${MW[none]}" \
		    'BEGIN {printf "%-8s %s overhead / heaptrack overhead: cpu %.2f, wall %.2f (goal <= 0.5)\n", w, c, (e - n) / (h - n), (ew - nw) / (hw - nw)}'
	done
	unset MW MC
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
