#!/usr/bin/env bash
# Runs every test kind and ends with "N passed, N failed".
#   unit:        build/unit/test_* (cmocka; each test case counts)
#   integration: tests/integration/*.py (each "ok"/"FAIL" line counts)
#   terminal:    tests/tui/*.py (tmux; the same)
#   stress:      tests/stress/test_stress.py (the torture programs, the same)
# The Python tests import their helpers from tests/lib (ymlib.py): this
# puts it on PYTHONPATH.  One test file by hand:
#   PYTHONPATH=tests/lib YM_BUILD=build python3 tests/integration/test_x.py
# Each file's wall time is printed as "time FILE Ns" (CI has a time budget).
set -u
B=${YM_BUILD:-build}
export YM_BUILD=$B
export PYTHONPATH="$(cd "$(dirname "$0")" && pwd)/lib${PYTHONPATH:+:$PYTHONPATH}"
pass=0
fail=0
failed=()

count_cmocka() {   # $1 name, $2 output
	local p f
	# cmocka's summary lines: "[  PASSED  ] N test(s)." and "[  FAILED  ]
	# N test(s), listed below:" (the lines after it name the tests).
	p=$(grep -oE '\[  PASSED  \] [0-9]+ test' <<<"$2" | tail -n1 | grep -oE '[0-9]+')
	f=$(grep -oE '\[  FAILED  \] [0-9]+ test' <<<"$2" | tail -n1 | grep -oE '[0-9]+')
	pass=$((pass + ${p:-0}))
	fail=$((fail + ${f:-0}))
}

# Test files run $LANES at a time (YM_TEST_LANES; default 2 as root, else
# 1): most of a file's time is waiting for a target, ymtop or a timer.  As
# root each file runs in a mount namespace of its own with an empty
# /dev/shm, so no file meets another's segments (or, as pids wrap within a
# run, a killed process's segment under a new process's pid).  Files were
# already written to share the host with other agent processes: those that
# list "every agent process" rerun themselves in a pid namespace of their
# own (ymlib.rerun_isolated).  The slowest files start first.
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	private_shm=1
	LANES=${YM_TEST_LANES:-2}
else
	private_shm=0
	LANES=${YM_TEST_LANES:-1}
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run_one() {   # $1 job number, $2 kind (unit|py), $3 file
	local t0=$SECONDS rc
	if [ "$2" = unit ]; then
		set -- "$1" "$2" "$3" timeout 300 "$3"
	else
		set -- "$1" "$2" "$3" timeout 900 python3 "$3"
	fi
	if [ "$private_shm" = 1 ]; then
		unshare -m sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$@"' \
			sh "${@:4}" >"$work/$1.out" 2>&1
	else
		"${@:4}" >"$work/$1.out" 2>&1
	fi
	rc=$?
	echo "$rc $((SECONDS - t0))" >"$work/$1.rc"
}

# Segments of processes a test killed (SIGKILL leaves them) are removed
# between test files when the files share /dev/shm, as ymtop's stale sweep
# would.  Host names only (ymtop-PID); the segments of other pid
# namespaces are their tests' own.
sweep_segments() {
	local f p
	[ "$private_shm" = 1 ] && return
	for f in /dev/shm/ymtop-*; do
		[ -f "$f" ] || continue
		p=${f#/dev/shm/ymtop-}
		case $p in *[!0-9]*|'') continue ;; esac
		[ -O "$f" ] && ! kill -0 "$p" 2>/dev/null && [ ! -d "/proc/$p" ] && rm -f "$f"
	done
}

collect() {   # $1 job number: print its output, count it
	local n=$1 kind=${kinds[$1]} t=${files[$1]} out rc secs p f
	out=$(cat "$work/$n.out")
	read -r rc secs <"$work/$n.rc"
	if [ "$kind" = unit ]; then
		printf 'time %s %ss\n' "$t" "$secs"
		printf '%s\n' "$out" | grep -E '\[ *(OK|FAILED|ERROR) *\]' | sed "s|^|$(basename "$t"): |"
		count_cmocka "$t" "$out"
		if [ "$rc" -ne 0 ] && ! grep -q '\[  FAILED  \]' <<<"$out"; then
			printf '%s\n' "$out" | tail -n 20
			fail=$((fail + 1)); failed+=("$(basename "$t") (exit $rc)")
		fi
		grep -q '\[  FAILED  \]' <<<"$out" && failed+=("$(basename "$t")")
	else
		printf '%s\n' "$out"
		printf 'time %s %ss\n' "$t" "$secs"
		p=$(grep -c '^ok ' <<<"$out")
		f=$(grep -c '^FAIL ' <<<"$out")
		pass=$((pass + p))
		fail=$((fail + f))
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
			fail=$((fail + 1)); failed+=("$t (exit $rc)")
		fi
		[ "$f" -gt 0 ] && failed+=("$t")
	fi
	sweep_segments
}

# The slowest files first (measured wall time, about a minute each), then
# the rest in name order, then the unit tests.
slow="tests/integration/test_inject.py tests/integration/test_trend.py
tests/integration/test_fleet.py tests/stress/test_stress.py
tests/integration/test_takeover.py tests/integration/test_allocators.py"
kinds=() files=()
for t in $slow; do
	[ -f "$t" ] && kinds+=(py) && files+=("$t")
done
for t in tests/integration/test_*.py tests/tui/test_*.py tests/stress/test_*.py; do
	[ -f "$t" ] || continue
	case " $(echo $slow) " in *" $t "*) continue ;; esac
	kinds+=(py) files+=("$t")
done
for t in "$B"/unit/test_*; do
	[ -x "$t" ] && kinds+=(unit) && files+=("$t")
done

running=0 next=0 done_=()
declare -A reaped=()
while [ "$next" -lt "${#files[@]}" ] || [ "$running" -gt 0 ]; do
	while [ "$running" -lt "$LANES" ] && [ "$next" -lt "${#files[@]}" ]; do
		run_one "$next" "${kinds[$next]}" "${files[$next]}" &
		running=$((running + 1)) next=$((next + 1))
	done
	wait -n
	for ((n = 0; n < next; n++)); do
		[ -z "${reaped[$n]:-}" ] && [ -f "$work/$n.rc" ] || continue
		reaped[$n]=1
		running=$((running - 1))
		collect "$n"
	done
done

[ ${#failed[@]} -gt 0 ] && printf 'failed: %s\n' "${failed[@]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
