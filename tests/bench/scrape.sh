#!/usr/bin/env bash
# A Prometheus scrape of ymtop --serve: NPROC processes of 2^DEPTH stacks
# each (manystacks, exact mode: every stack recorded), one ymtop --serve
# for them all.  Prints the first (cold: symbolization) scrape, then the
# median and the max of RUNS warm scrapes, with ymtop's CPU time per warm
# scrape (user+system from /proc) and its VmRSS, and the body's size.
#   tests/bench/scrape.sh [BUILD] [NPROC] [DEPTH] [RUNS]
set -eu
# Alone in a pid namespace and a /dev/shm of its own (root): --serve
# serves every agent process it sees, and others' on a shared machine
# would count too; the killed processes' segments go with the tmpfs.
# Without root they are removed at exit (segments.sh).
if [ "$(id -u)" = 0 ] && [ -z "${YM_SCRAPE_NS:-}" ] && command -v unshare >/dev/null; then
	YM_SCRAPE_NS=1 exec unshare -m -p -f --mount-proc sh -c \
		'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$0" "$@"' "$0" "$@"
fi
. "$(dirname "$0")/segments.sh"
B=$(cd "${1:-build}" && pwd)
NPROC=${2:-10}
DEPTH=${3:-14}
RUNS=${4:-9}
TMP=$(mktemp -d /tmp/ymtop-scrape.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "${srv:-}" ] && kill "$srv" 2>/dev/null || true
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	seg_sweep
	rm -rf "$TMP"
}
trap cleanup EXIT
seg_traps
for i in $(seq "$NPROC"); do
	YM_SAMPLE_RATE=1 LD_PRELOAD="$B/libymagent.so" "$B/bench/manystacks" "$DEPTH" \
		> "$TMP/m$i" &
	pids+=($!)
	seg_note $!
done
for i in $(seq "$NPROC"); do
	for _ in $(seq 200); do grep -q ready "$TMP/m$i" 2>/dev/null && break; sleep 0.1; done
done
"$B/ymtop" --serve 127.0.0.1:0 2> "$TMP/err" &
srv=$!
for _ in $(seq 100); do grep -q serving "$TMP/err" && break; sleep 0.1; done
port=$(grep -o ':[0-9]*/metrics' "$TMP/err" | tr -dc 0-9)
url="http://127.0.0.1:$port/metrics"
ticks() { awk '{print $14 + $15}' "/proc/$srv/stat"; }
hz=$(getconf CLK_TCK)
# Its timeout said: each answer comes from an update that started after
# the request (what is measured), not from the last one at 9 s.
hdr="X-Prometheus-Scrape-Timeout-Seconds: 600"
cold=$(curl -s -H "$hdr" -o "$TMP/body" -w "%{time_total}" "$url?per_pid=1")
series=$(grep -vc '^#' "$TMP/body")
procs=$(grep -c '^ymtop_process_retained_bytes' "$TMP/body")
t0=$(ticks)
for _ in $(seq "$RUNS"); do
	curl -s -H "$hdr" -o /dev/null -w '%{time_total}\n' "$url"
done > "$TMP/times"
t1=$(ticks)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$srv/status")
sort -g "$TMP/times" | awk -v cold="$cold" -v n="$RUNS" -v t0="$t0" -v t1="$t1" \
	-v hz="$hz" -v rss="$rss" -v series="$series" -v procs="$procs" \
	-v bytes="$(stat -c %s "$TMP/body")" -v depth="$DEPTH" '
	{ v[NR] = $1 }
	END {
		printf "scrape of %d processes x %d stacks (%d series, %d bytes): " \
		       "cold %.0f ms, warm median %.0f ms (max %.0f ms, %d runs), " \
		       "ymtop CPU %.0f ms per warm scrape, VmRSS %.0f MiB\n",
		       procs, 2 ^ depth, series, bytes, cold * 1000,
		       v[int((n + 1) / 2)] * 1000, v[n] * 1000, n,
		       (t1 - t0) / hz / n * 1000, rss / 1024
	}'
