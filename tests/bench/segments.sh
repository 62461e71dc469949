# Sourced (bash) by the benchmarks that start processes under the agent
# and kill them: a killed process cannot remove its segment, which would
# stay in /dev/shm (up to hundreds of MiB sparse each).
#   seg_note PID      after starting PID: remember its start time
#   seg_sweep         remove the segment of each noted process that is
#                     gone, only when its header names that pid and start
#                     time (a later process under the same pid keeps its
#                     own); a running one's is left
#   seg_traps         make INT, TERM and HUP exit the script, so that its
#                     EXIT trap (which kills, waits, then calls seg_sweep)
#                     runs on Ctrl-C too
# Segment names and header offsets: include/ymtop/segment.h (YM_NAME_PREFIX,
# YM_PIDNS_INIT; struct ym_header: magic at 0, pid at 24, start_ticks at 32).

declare -A SEG_START=()

seg_ticks() {   # /proc/PID/stat field 22 (the comm may hold spaces)
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	set -- $st
	echo "${20}"
}

seg_note() {
	local t
	t=$(seg_ticks "$1") && SEG_START[$1]=$t
	return 0
}

seg_path() {
	local ns
	ns=$(stat -L -c %i /proc/self/ns/pid 2>/dev/null || echo 0)
	if [ "$ns" = 0 ] || [ "$ns" = 4026531836 ]; then
		echo "/dev/shm/ymtop-$1"
	else
		echo "/dev/shm/ymtop-$1.$ns"
	fi
}

seg_sweep() {
	local p f magic hpid hticks
	for p in "${!SEG_START[@]}"; do
		[ -d "/proc/$p" ] && [ "$(seg_ticks "$p")" = "${SEG_START[$p]}" ] && continue
		f=$(seg_path "$p")
		[ -f "$f" ] || continue
		magic=$(od -An -t x8 -N 8 "$f" 2>/dev/null | tr -d ' ')
		hpid=$(od -An -t u4 -j 24 -N 4 "$f" 2>/dev/null | tr -d ' ')
		hticks=$(od -An -t u8 -j 32 -N 8 "$f" 2>/dev/null | tr -d ' ')
		[ "$magic" = 31474553504f544d ] && [ "$hpid" = "$p" ] &&
			[ "$hticks" = "${SEG_START[$p]}" ] && rm -f "$f"
	done
	return 0
}

seg_traps() {
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
}
