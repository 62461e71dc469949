#!/bin/sh
# The musl agent's fast path (make bench; BENCHMARKS.md, "musl"): one
# interleaved run (tests/bench/ab.py) of allocbench built by musl-gcc,
# 2 threads allocating and freeing blocks of 16..1040 bytes, under
#   none      no preload: musl's own malloc
#   shim      tests/bench/shim.c built by musl-gcc: forwards malloc, free,
#             calloc and realloc to musl's (dlsym(RTLD_NEXT) at load)
#   ie        the musl agent with initial-exec TLS (preloadable only)
#   agent     build/libymagent-musl.so: TLS descriptors (what ymtop -p
#             needs), default sampling
# each agent at the default rate and with sampling off (YM_SAMPLE_RATE
# 1024g: the fast paths alone).
#
#   tests/bench/musl.sh BUILD [ROUNDS [CALLS]]
set -e
B=${1:-build}
ROUNDS=${2:-7}
CALLS=${3:-1000000}
here=$(dirname "$0")
CONFIGS="none=none shim=$B/bench/musl/libshim-musl.so \
ie-nosample=$B/bench/musl-ie/libymagent-musl.so,YM_SAMPLE_RATE=1024g \
agent-nosample=$B/libymagent-musl.so,YM_SAMPLE_RATE=1024g \
ie=$B/bench/musl-ie/libymagent-musl.so \
agent=$B/libymagent-musl.so" \
	python3 "$here/ab.py" "$ROUNDS" "$B/bench/musl/allocbench" 2 "$CALLS"
