#!/usr/bin/env bash
# Seed corpus for fuzz_segment: real segments, kept small.
#   tests/fuzz/make_seeds.sh BUILD_DIR OUT_DIR
# Runs the workload under the agent with the smallest tables the agent
# accepts (YM_MAX_STACKS=16 YM_MAX_LIVE=64 YM_MAX_THREADS=16 YM_MAX_DEPTH=8:
# a segment of a few hundred KiB instead of 16 MiB) and YM_KEEP_SEGMENT=1,
# and copies /dev/shm/ymtop-<pid> once the process has exited (without its
# trailing zeroes: about 80 KiB each, under the fuzzer's -max_len).  Several
# workloads give segments with threads, stacks, live entries, an overflowed
# stack table, alarms and modules.
set -eu
B=$1
OUT=$2
mkdir -p "$OUT"
small="YM_MAX_STACKS=16 YM_MAX_LIVE=64 YM_MAX_THREADS=16 YM_MAX_DEPTH=8 YM_KEEP_SEGMENT=1 YM_SEED=1"
i=0
seed() {   # env... -- workload steps
	local envs=()
	while [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env $small "${envs[@]}" LD_PRELOAD="${AGENT_LIB:-$B/libymagent.so}" \
		"$B/progs/workload" nowait "$@" >/dev/null 2>&1 &
	local pid=$!
	wait $pid || true
	local seg=/dev/shm/ymtop-$pid
	if [ -f "$seg" ]; then
		# Trailing zeroes dropped: fuzz_segment re-extends an input
		# to the total_size its header claims.
		python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); open(sys.argv[2], "wb").write(d.rstrip(b"\0"))' \
			"$seg" "$OUT/seg-$i"
		rm -f "$seg"
		i=$((i + 1))
	fi
}
seed YM_SAMPLE_RATE=1 -- count:100:48
seed YM_SAMPLE_RATE=4096 -- small churn threads:4
seed YM_SAMPLE_RATE=1 -- threads:20 realloc calloc aligned
seed YM_SAMPLE_RATE=65536 YM_GIANT_BYTES=1048576 -- giant:2000000 big
seed YM_SAMPLE_RATE=1 YM_GIANT_BYTES=1000 YM_GIANT_ACTION=fail -- giant:5000 count:10:2000
# (The forked child stops profiling: its kept segment would stay behind.)
seed YM_SAMPLE_RATE=65536 YM_FOLLOW_FORK=0 -- "plugin:$B/progs/libplugin.so" fork
# A newer compatible writer (segment.h, Versions and sizes; Makefile,
# ABI_NEWER): a longer header and longer records for the reader to skip.
if [ -f "$B/abi-newer/libymagent.so" ]; then
	AGENT_LIB="$B/abi-newer/libymagent.so" \
		seed YM_SAMPLE_RATE=4096 YM_GIANT_BYTES=1048576 -- small threads:4 giant:2000000
fi
[ "$i" -gt 0 ] || { echo "make_seeds: no segment produced" >&2; exit 1; }
ls -l "$OUT" | tail -n +2 | awk '{ s += $5 } END { printf "make_seeds: %d seeds, %d bytes\n", NR, s }'
