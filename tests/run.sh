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

for t in "$B"/unit/test_*; do
	[ -x "$t" ] || continue
	t0=$SECONDS
	out=$(timeout 300 "$t" 2>&1)
	rc=$?
	printf 'time %s %ss\n' "$t" $((SECONDS - t0))
	printf '%s\n' "$out" | grep -E '\[ *(OK|FAILED|ERROR) *\]' | sed "s|^|$(basename "$t"): |"
	count_cmocka "$t" "$out"
	if [ $rc -ne 0 ] && ! grep -q '\[  FAILED  \]' <<<"$out"; then
		printf '%s\n' "$out" | tail -n 20
		fail=$((fail + 1)); failed+=("$(basename "$t") (exit $rc)")
	fi
	grep -q '\[  FAILED  \]' <<<"$out" && failed+=("$(basename "$t")")
done

# Segments of processes a test killed (SIGKILL leaves them) are removed
# between test files, as ymtop's stale sweep would: pids wrap within a
# run (pid_max is often 32768), and a later test's process must not meet
# an earlier one's segment under its pid.  Host names only (ymtop-PID);
# the segments of other pid namespaces are their tests' own.
sweep_segments() {
	local f p
	for f in /dev/shm/ymtop-*; do
		[ -f "$f" ] || continue
		p=${f#/dev/shm/ymtop-}
		case $p in *[!0-9]*|'') continue ;; esac
		[ -O "$f" ] && ! kill -0 "$p" 2>/dev/null && [ ! -d "/proc/$p" ] && rm -f "$f"
	done
}

for t in tests/integration/test_*.py tests/tui/test_*.py tests/stress/test_*.py; do
	[ -f "$t" ] || continue
	t0=$SECONDS
	out=$(timeout 900 python3 "$t" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	printf 'time %s %ss\n' "$t" $((SECONDS - t0))
	sweep_segments
	p=$(grep -c '^ok ' <<<"$out")
	f=$(grep -c '^FAIL ' <<<"$out")
	pass=$((pass + p))
	fail=$((fail + f))
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		fail=$((fail + 1)); failed+=("$t (exit $rc)")
	fi
	[ "$f" -gt 0 ] && failed+=("$t")
done

[ ${#failed[@]} -gt 0 ] && printf 'failed: %s\n' "${failed[@]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
