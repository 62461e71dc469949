#!/usr/bin/env bash
# The cost budget (YM_MAX_OVERHEAD, man/ymagent.7) against its goal: an
# allocation-bound workload at YM_SAMPLE_RATE=4096 with a budget of
# $BUDGET % runs within 1.05x of the agent with sampling off
# (YM_SAMPLE_RATE=1024g: the fast paths alone, the floor no budget
# removes).  One interleaved run (tests/bench/ab.py: each round runs every
# configuration once, in a new random order), medians of $ROUNDS rounds;
# the ratio to read is CPU time (user + system), the load average is
# printed with it.  4096 without a budget shows what the budget saves.
#
#   ROUNDS=N CALLS=N BUDGET=PCT tests/bench/budget.sh [BUILD]
set -eu
B=$(cd "${1:-build}" && pwd)
ROUNDS=${ROUNDS:-7}
CALLS=${CALLS:-30000000}
BUDGET=${BUDGET:-2}
here=$(cd "$(dirname "$0")" && pwd)
A="$B/libymagent.so"
echo "budget: allocbench 2 threads x $CALLS calls; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
CONFIGS="nosample=$A,YM_SAMPLE_RATE=1024g budget=$A,YM_SAMPLE_RATE=4096,YM_MAX_OVERHEAD=$BUDGET \
r4096=$A,YM_SAMPLE_RATE=4096" \
	python3 "$here/ab.py" "$ROUNDS" "$B/bench/allocbench" 2 "$CALLS"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
