#!/usr/bin/env bash
# System calls of ymtop's host list (no -p: every agent process) a
# watched process and refresh, by kind, counted by strace -f over SECS
# seconds after WARM (default 20) seconds of warm-up, of NPROC idle
# processes of one program (allocs, three allocation sites each).  Each
# build in turn in front of the same processes (preloaded with the
# first's agent).  A refresh opens /dev/shm twice (the listing of the
# processes with a segment, and of those that sampled nothing yet).
# Alone in a pid namespace and a /dev/shm of its own (as root).
#   tests/bench/host_strace.sh BUILD[:BUILD...] NPROC SECS
set -eu
if [ -z "${YM_HOST_NS:-}" ]; then
	YM_HOST_NS=1 exec unshare -m -p -f --mount-proc sh -c \
		'mount -t tmpfs tmpfs /dev/shm && exec "$0" "$@"' "$0" "$@"
fi
IFS=: read -r -a BS <<< "$1"; N=$2; S=$3
B0=$(cd "${BS[0]}" && pwd)
TMP=$(mktemp -d /tmp/ymtop-strace.XXXXXX)
mkfifo $TMP/hold; exec 3<>$TMP/hold
for i in $(seq $N); do YM_SAMPLE_RATE=1 YM_EARLY_SEGMENT=1 LD_PRELOAD=$B0/libymagent.so $B0/progs/allocs malloc:4:1000 calloc:4:2000 fail:4:3000 <&3 >$TMP/a$i 2>/dev/null & done
for i in $(seq $N); do for _ in $(seq 600); do grep -q ready $TMP/a$i 2>/dev/null && break; sleep 0.1; done; done
ulimit -n "$(ulimit -Hn)"
for b in "${BS[@]}"; do
	B=$(cd "$b" && pwd)
	tmux -L ymtop-strace-$$ new-session -d -s b -x 160 -y 50 "$B/ymtop"
	sleep ${WARM:-20}
	y=$(pgrep -x ymtop | head -1)
	timeout $S strace -f -o $TMP/t -p $y || true
	tmux -L ymtop-strace-$$ kill-server
	while pgrep -x ymtop >/dev/null; do sleep 0.2; done
	r=$(( $(grep -c 'openat(AT_FDCWD, "/dev/shm"' $TMP/t || true) / 2 ))
	echo "$B: refreshes $r, processes $N"
	awk '{print $2}' $TMP/t | cut -d'(' -f1 | sort | uniq -c | sort -rn | awk -v r=$r -v n=$N '{printf "  %s %.2f\n", $2, $1/r/n}' | head -10
	echo total $(grep -c . $TMP/t) | awk -v r=$r -v n=$N '{printf "  total a process and refresh %.2f\n", $2/r/n}'
done
kill $(jobs -p) 2>/dev/null || true
rm -rf $TMP
