#!/usr/bin/env bash
# make bench: every workload without an agent, under ymtop's agent (default
# rate, 64 KiB, exact mode) and, where installed, under heaptrack, valgrind
# massif, and jemalloc with and without its profiler.  On the allocbench
# workloads also the floor under the agent's cost (FLOOR_WORKLOADS):
#   shim        tests/bench/shim.c forwarding malloc/free/calloc/realloc to
#               glibc and nothing else: the cost of interposition itself;
#   shim-count  the same plus exact per-thread totals as the agent's fast
#               path keeps them (TLS slot, countdown, counter adds, usable
#               size from glibc's chunk header), no sampling;
#   shim-tail   shim-count as issue 18's BENCHMARKS.md proposes: the
#               countdown charged with the requested size before the call,
#               one counter add, a tail call; free one counter add (no
#               usable size read anywhere);
#   nosample    the agent with YM_SAMPLE_RATE=1024g: its exact totals and
#               fast paths, no samples.
# So none -> shim -> shim-count -> nosample -> default splits the agent's
# cost into interposition, exact counting, the rest of its fast paths, and
# sampling.  Runs are interleaved
# (one run of each configuration per round, in a fresh order each round),
# the figures are medians over the rounds, and ratios are to the no-agent
# run of the same rounds (jemalloc prof also to plain jemalloc).
#
#   ROUNDS=N CALLS=N WORKLOADS="alloc2 sqlite" CONFIGS="none default" \
#     tests/bench/run.sh [BUILD]
#
# BASE=path/to/libymagent.so adds the configurations "base" and "base-exact":
# that agent at the default rate and in exact mode (a before/after
# comparison within the same rounds).
#
# Columns: wall seconds (median), ratio of medians, CPU seconds (user+sys,
# median) and its ratio, peak RSS over the no-agent run (median of the
# per-round differences, MiB).  heaptrack and massif run on a subset of the
# workloads only (SLOW_WORKLOADS): they are 30-50x slower.  shim, shim-count
# and nosample run on FLOOR_WORKLOADS only (the shims are built by make
# bench as BUILD/bench/libshim.so and libshimcount.so; without them those
# two configurations are skipped).
set -eu
B=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-5}
CALLS=${CALLS:-2000000}
WORKLOADS=${WORKLOADS:-"alloc1 alloc2 alloc4 mixed2 realloc2 sqlite python gxx spawn spawnsh"}
SLOW_WORKLOADS=${SLOW_WORKLOADS:-"alloc2 sqlite"}
FLOOR_WORKLOADS=${FLOOR_WORKLOADS:-"alloc1 alloc2 alloc4 mixed2 realloc2 spawn spawnsh"}
CONFIGS=${CONFIGS:-"none shim shim-count nosample default 64k exact heaptrack massif jemalloc jeprof base base-exact"}
AGENT="$B/libymagent.so"
SHIM="$B/bench/libshim.so"
SHIMCOUNT="$B/bench/libshimcount.so"
SHIMTAIL="$B/bench/libshimtail.so"
BENCH="$B/bench/allocbench"
JEMALLOC=${JEMALLOC:-/usr/lib/$(${CC:-cc} -print-multiarch)/libjemalloc.so.2}
TMP=$(mktemp -d /tmp/ymbench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

have() {
	case $1 in
	heaptrack) command -v heaptrack >/dev/null ;;
	massif)    command -v valgrind >/dev/null ;;
	jemalloc|jeprof) [ -e "$JEMALLOC" ] ;;
	sqlite)    command -v sqlite3 >/dev/null ;;
	gxx)       command -v g++ >/dev/null ;;
	python)    [ -x /usr/bin/python3 ] ;;
	base|base-exact) [ -n "${BASE:-}" ] && [ -e "$BASE" ] ;;
	shim)      [ -e "$SHIM" ] ;;
	shim-count) [ -e "$SHIMCOUNT" ] ;;
	shim-tail) [ -e "$SHIMTAIL" ] ;;
	*)         true ;;
	esac
}

python3 "$HERE/gensql.py" 60000 > "$TMP/bench.sql"

# The workload's command line.
workload() {
	local c2=$((CALLS / 2)) c8=$((CALLS / 8))
	case $1 in
	alloc1)   echo "$BENCH 1 $CALLS" ;;
	alloc2)   echo "$BENCH 2 $CALLS" ;;
	alloc4)   echo "$BENCH 4 $c2" ;;
	mixed2)   echo "$BENCH 2 $c8 16 262144" ;;
	realloc2) echo "$BENCH 2 $c2 16 4096 realloc" ;;
	sqlite)   echo "sqlite3 :memory: -init $TMP/bench.sql .quit" ;;
	python)   echo "/usr/bin/python3 $HERE/pywork.py 8" ;;
	gxx)      echo "g++ -std=c++17 -O1 -c $HERE/cxxwork.cc -o $TMP/cxxwork.o" ;;
	spawn)    echo "sh $HERE/spawn.sh 200" ;;
	spawnsh)  echo "sh $HERE/spawn.sh 200 sh" ;;
	esac
}

# Run workload $1 under configuration $2; prints "wall cpu maxrss_kib".
run1() {
	local cmd out t0 t1
	cmd=$(workload "$1")
	out="$TMP/time.out"
	local -a pre=(env -u LD_PRELOAD -u MALLOC_CONF)
	case $2 in
	none)      ;;
	default)   pre+=(LD_PRELOAD="$AGENT") ;;
	base)      pre+=(LD_PRELOAD="$BASE") ;;
	base-exact) pre+=(LD_PRELOAD="$BASE" YM_SAMPLE_RATE=1) ;;
	64k)       pre+=(LD_PRELOAD="$AGENT" YM_SAMPLE_RATE=65536) ;;
	exact)     pre+=(LD_PRELOAD="$AGENT" YM_SAMPLE_RATE=1) ;;
	nosample)  pre+=(LD_PRELOAD="$AGENT" YM_SAMPLE_RATE=1024g) ;;
	shim)      pre+=(LD_PRELOAD="$SHIM") ;;
	shim-count) pre+=(LD_PRELOAD="$SHIMCOUNT") ;;
	shim-tail) pre+=(LD_PRELOAD="$SHIMTAIL") ;;
	jemalloc)  pre+=(LD_PRELOAD="$JEMALLOC") ;;
	jeprof)    pre+=(LD_PRELOAD="$JEMALLOC" MALLOC_CONF=prof:true,lg_prof_sample:19,prof_prefix:$TMP/jeprof) ;;
	heaptrack) pre+=(heaptrack -o "$TMP/heaptrack") ;;
	massif)    pre+=(valgrind -q --tool=massif --massif-out-file=/dev/null) ;;
	esac
	t0=$(date +%s%N)
	/usr/bin/time -o "$out" -f "%U %S %M" "${pre[@]}" $cmd >/dev/null 2>"$TMP/err" </dev/null ||
		{ echo "bench: $1 under $2 failed:" >&2; tail -3 "$TMP/err" >&2; exit 1; }
	t1=$(date +%s%N)
	rm -f "$TMP"/heaptrack* "$TMP"/jeprof*
	awk -v w=$(( (t1 - t0) / 1000 )) 'END {printf "%.4f %.2f %d\n", w / 1e6, $1 + $2, $3}' "$out"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# The segment each agent configuration creates (kept once, measured): its
# size, and the memory behind it (it is sparse) after a short run.
segment_mib() {
	local rate=$1 pid
	YM_KEEP_SEGMENT=1 YM_SAMPLE_RATE=$rate LD_PRELOAD="$AGENT" "$BENCH" 1 100000 >/dev/null &
	pid=$!
	wait $pid
	local f=/dev/shm/ymtop-$pid
	[ -e "$f" ] && { awk -v s=$(stat -c %s "$f") -v b=$(stat -c %b "$f") \
		'BEGIN {printf "%.1f (%.2f backed)", s / 1048576, b * 512 / 1048576}'; rm -f "$f"; }
}

declare -A W C R
configs_for() {   # the configurations that run on workload $1
	local c
	for c in $CONFIGS; do
		have "$c" || continue
		case $c in
		heaptrack|massif)
			[[ " $SLOW_WORKLOADS " == *" $1 "* ]] || continue ;;
		shim|shim-count|shim-tail|nosample)
			[[ " $FLOOR_WORKLOADS " == *" $1 "* ]] || continue ;;
		esac
		echo "$c"
	done
}

echo "ymtop bench: $ROUNDS interleaved rounds, CALLS=$CALLS; $(nproc) CPUs, $(uname -r)"
for w in $WORKLOADS; do
	have "$w" || { echo "($w skipped: not installed)"; continue; }
	mapfile -t cs < <(configs_for "$w")
	for r in $(seq "$ROUNDS"); do
		# A fresh order each round: no configuration always follows another.
		for c in $(printf '%s\n' "${cs[@]}" | shuf); do
			read -r wall cpu rss < <(run1 "$w" "$c")
			W[$w.$c]+="$wall "
			C[$w.$c]+="$cpu "
			R[$w.$c.$r]=$rss
		done
	done
	printf '\n%s: %s\n' "$w" "$(workload "$w" | sed "s|$B/||; s|$HERE/||; s|$TMP/||g")"
	printf '  %-10s %9s %7s %8s %7s %9s\n' config wall ratio cpu ratio "+rss MiB"
	bw=$(tr ' ' '\n' <<<"${W[$w.none]}" | grep . | median)
	bc=$(tr ' ' '\n' <<<"${C[$w.none]}" | grep . | median)
	for c in "${cs[@]}"; do
		mw=$(tr ' ' '\n' <<<"${W[$w.$c]}" | grep . | median)
		mc=$(tr ' ' '\n' <<<"${C[$w.$c]}" | grep . | median)
		dr=$(for r in $(seq "$ROUNDS"); do
			echo $(( ${R[$w.$c.$r]} - ${R[$w.none.$r]} )); done | median)
		extra=""
		if [ "$c" = jeprof ] && [ -n "${W[$w.jemalloc]:-}" ]; then
			jw=$(tr ' ' '\n' <<<"${W[$w.jemalloc]}" | grep . | median)
			extra=$(awk -v a="$mw" -v b="$jw" 'BEGIN {printf "  (%.2fx over jemalloc)", a / b}')
		fi
		awk -v c="$c" -v mw="$mw" -v bw="$bw" -v mc="$mc" -v bc="$bc" -v dr="$dr" -v x="$extra" \
			'BEGIN {printf "  %-10s %9.3f %6.2fx %8.2f %6.2fx %9.1f%s\n", c, mw, mw / bw, mc, mc / (bc > 0 ? bc : 0.01), dr / 1024, x}'
	done
done
echo
echo "segment: default $(segment_mib 524288) MiB, 64k $(segment_mib 65536) MiB, exact $(segment_mib 1) MiB"
