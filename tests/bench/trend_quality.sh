#!/usr/bin/env bash
# The trend verdicts' quality (issue 33; ymtop(1), TREND):
#   leak    a 1 MiB/min leak inside a 1 GiB heap (a cache filled at start
#           and churned) at the default sample rate: the leak's verdict
#           and rate after 10 minutes (60 slots), and any other growing
#   steady  redis-server (redis-benchmark rounds on a fixed keyspace, 4 s
#           apart), PostgreSQL (pgbench -R 100, 4 clients: the postmaster
#           and its backends, all under the agent) and python3
#           (tests/bench/pywork.py, 2 s apart) for an hour (360 slots): the
#           stacks whose verdict is growing (there should be none)
# All side by side and light (about a third of a CPU in all), niced.
# SCALE=N makes each slot N times shorter (YM_TREND_SLOT_MS) and the leak
# N times faster: the same points and the same samples in 1/N of the time
# (SCALE=10: 1 minute, then 6 minutes).  SCALE=1 is the benchmark as
# stated (60 minutes).  As root (PostgreSQL runs as nobody; without root
# or PostgreSQL it is left out).
#
#   SCALE=N tests/bench/trend_quality.sh [BUILD]
set -eu
# A /dev/shm of its own (root; mode 1777: PostgreSQL runs as nobody): the
# segments of the processes killed at the end go with the tmpfs.  Without
# root they are removed at exit (segments.sh).  ymtop -p runs here too.
if [ "$(id -u)" = 0 ] && [ -z "${YM_TREND_NS:-}" ] && command -v unshare >/dev/null; then
	YM_TREND_NS=1 exec unshare -m sh -c \
		'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$0" "$@"' "$0" "$@"
fi
B=$(cd "${1:-build}" && pwd)
SRC=$(cd "$(dirname "$0")" && pwd)
. "$SRC/segments.sh"
SCALE=${SCALE:-1}
SLOT_MS=$((10000 / SCALE))
AGENT="$B/libymagent.so"
YMTOP="$B/ymtop"

verdicts() {   # pid label: the verdict of every stack, growing ones named
	"$YMTOP" -b -n 1 -f json -p "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
label = sys.argv[1]
count = {}
for s in d["stacks"]:
    v = s["trend"]["verdict"]
    count[v] = count.get(v, 0) + 1
print("%s: %s" % (label, " ".join("%s %d" % kv for kv in sorted(count.items()))))
for s in d["stacks"]:
    t = s["trend"]
    fns = [f["function"] or "?" for f in s["frames"]][:4]
    if t["verdict"] == "growing" or "leak_site" in fns:
        print("  %-9s %8.0f B/s over %5.0f s, retained %6.1f MiB  %s" % (
            t["verdict"], t["bytes_per_s"], t["window_s"],
            s["retained_bytes"] / 1048576, " < ".join(fns)))
' "$2"
}

echo "trend_quality: slots of $SLOT_MS ms (SCALE=$SCALE); load: $(cut -d' ' -f1-3 /proc/loadavg)"

N="nice -n 10"
TMP=$(mktemp -d); chmod 755 "$TMP"
PIDS=""
# A driver loop's redis-benchmark would outlive the loop: its children first.
trap 'for p in $PIDS; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
      sleep 1; for p in $PIDS; do wait "$p" 2>/dev/null || true; done
      seg_sweep; rm -rf "$TMP"' EXIT
seg_traps

# leak: 1 MiB/min (x SCALE) beside a 1 GiB cache filled in 2 slots and a
# 64 MiB churn.
YM_TREND_SLOT_MS=$SLOT_MS LD_PRELOAD=$AGENT $N "$B/progs/trendprog" \
	"$(awk "BEGIN { print 1024 * $SCALE / 60 }")" 1024 \
	"$((20 / SCALE + 1))" 64 >/dev/null &
LEAK=$!; PIDS="$PIDS $LEAK"; seg_note $LEAK

# steady: redis-server, python3 and PostgreSQL side by side.
PORT=$((20000 + RANDOM % 20000))
YM_TREND_SLOT_MS=$SLOT_MS LD_PRELOAD=$AGENT $N redis-server --port "$PORT" \
	--save "" --appendonly no --daemonize no >/dev/null &
REDIS=$!; PIDS="$PIDS $REDIS"; seg_note $REDIS
(sleep 1; while :; do $N redis-benchmark -p "$PORT" -q -r 100000 -n 20000 -c 4 \
	-t set,get,incr,hset >/dev/null 2>&1; sleep 4; done) &
DRIVE=$!; PIDS="$PIDS $DRIVE"
YM_TREND_SLOT_MS=$SLOT_MS LD_PRELOAD=$AGENT $N python3 "$SRC/pywork.py" 100000000 2 >/dev/null &
PY=$!; PIDS="$PIDS $PY"; seg_note $PY
PB=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
PM=""
if [ "$(id -u)" = 0 ] && [ -x "$PB/postgres" ] && [ -x "$PB/pgbench" ]; then
	NB="setpriv --reuid=nobody --regid=nogroup --clear-groups"
	mkdir -p "$TMP/pg/data" "$TMP/pg/sock"; chown -R nobody:nogroup "$TMP/pg"
	env -u LD_PRELOAD LC_ALL=C $NB "$PB/initdb" -D "$TMP/pg/data" -A trust \
		-U postgres >/dev/null 2>&1
	env LC_ALL=C YM_TREND_SLOT_MS=$SLOT_MS LD_PRELOAD=$AGENT $N $NB "$PB/postgres" \
		-D "$TMP/pg/data" -k "$TMP/pg/sock" -c listen_addresses= \
		-c shared_buffers=16MB >/dev/null 2>&1 &
	PM=$!; PIDS="$PIDS $PM"
	for i in $(seq 60); do   # the postmaster takes seconds to listen
		sleep 1
		! env LC_ALL=C $NB "$PB/pgbench" -h "$TMP/pg/sock" -U postgres -i -s 5 \
			postgres >/dev/null 2>&1 || break
	done
	(env LC_ALL=C $N $NB "$PB/pgbench" -h "$TMP/pg/sock" -U postgres -n -c 4 -j 1 \
		-R 100 -T $((3600 / SCALE + 60)) postgres >/dev/null 2>&1) &
	PIDS="$PIDS $!"
else
	echo "PostgreSQL left out (needs root and postgresql, postgresql-contrib)"
fi

sleep $((600 / SCALE))
verdicts "$LEAK" "leak 1 MiB/min in 1 GiB after 60 slots, truth $((1048576 * SCALE / 60)) B/s"
kill "$LEAK"
sleep $((3000 / SCALE))
verdicts "$REDIS" "redis-server after 360 slots"
verdicts "$PY" "python3 pywork.py after 360 slots"
if [ -n "$PM" ]; then
	for p in $PM $(pgrep -P "$PM"); do   # a backend may end meanwhile
		name=$( (tr '\0' ' ' < "/proc/$p/cmdline") 2>/dev/null | cut -c1-40)
		[ -n "$name" ] || continue
		verdicts "$p" "postgres $p $name after 360 slots" 2>/dev/null || true
	done
fi
