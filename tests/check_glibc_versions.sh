#!/bin/sh
# The agent loads into any glibc from 2.17 on (injector/agent/compat.h):
# fail when LIB asks for a GLIBC_ version above 2.17, for any other
# version (GLIBC_PRIVATE), or needs an object but libc.so.6, libdl.so.2
# and libpthread.so.0; on x86_64 also when a function that glibc kept in
# libdl.so.2 or libpthread.so.0 before 2.34 is asked of libc.so.6 (glibc
# before 2.30 fails the load then: injector/agent/glibc-stubs/README).
# Run by the Makefile on every link of the agent.
#   tests/check_glibc_versions.sh LIB
set -eu
lib=$1
LC_ALL=C readelf -W -V "$lib" >/dev/null   # readable, or fail here
bad=$(LC_ALL=C readelf -W -V "$lib" | awk '
	/^Version needs section/ { need = 1; next }
	/^Version (symbols|definition) section/ { need = 0 }
	need && /Name:/ {
		for (i = 1; i <= NF; i++) if ($i == "Name:") v = $(i + 1)
		if (v !~ /^GLIBC_[0-9]+\.[0-9]+(\.[0-9]+)?$/) { print v; next }
		split(substr(v, 7), n, ".")
		if (n[1] > 2 || (n[1] == 2 && n[2] > 17)) print v
	}')
needed=$(LC_ALL=C readelf -W -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
# Version index -> file, from the version needs; then each undefined
# dl* or pthread_* function with the file its version names.  What
# glibc 2.17's libc.so.6 itself defines of those is allowed there.
misplaced=""
if LC_ALL=C readelf -h "$lib" | grep -q 'Machine:.*X86-64'; then
	misplaced=$( { LC_ALL=C readelf -W -V "$lib"; echo "@@SYMS"; \
		LC_ALL=C readelf -W --dyn-syms "$lib"; } | awk '
	/^@@SYMS/ { syms = 1; next }
	!syms && /File:/ { for (i = 1; i <= NF; i++) if ($i == "File:") f = $(i + 1) }
	!syms && /Name:/ { for (i = 1; i <= NF; i++) if ($i == "Version:") file[$(i + 1)] = f }
	syms && / UND / && /\(/ {
		split($8, nv, "@"); n = nv[1]; idx = $9; gsub(/[()]/, "", idx)
		want = ""
		if (n ~ /^dl/ && n != "dl_iterate_phdr") want = "libdl.so.2"
		else if (n ~ /^pthread_/ && n !~ /^pthread_(mutex_lock|mutex_unlock|mutex_init|mutex_destroy|self|equal|exit|attr_.*|cond_.*|condattr_.*|getschedparam|setschedparam|setcancelstate|setcanceltype)$/) want = "libpthread.so.0"
		if (want != "" && file[idx] != want) print n "|" file[idx] "|" want
	}')
fi
extra=$(printf '%s\n' $needed | grep -v -x -e libc.so.6 -e libdl.so.2 -e libpthread.so.0 || true)
if [ -n "$bad" ] || [ -n "$extra" ] || [ -n "$misplaced" ]; then
	for v in $bad; do
		syms=$(LC_ALL=C objdump -T "$lib" | awk -v v="$v" '$0 ~ "[( ]" v "[) ]" { print $NF }' | tr '\n' ' ')
		echo "$lib: needs $v (glibc 2.17 is the baseline): $syms" >&2
	done
	for m in $misplaced; do
		echo "$m" | awk -F'|' -v lib="$lib" '{ printf "%s: %s is asked of %s: glibc before 2.30 finds it only in %s\n", lib, $1, $2, $3 }' >&2
	done
	for n in $extra; do
		echo "$lib: needs $n (only libc.so.6, libdl.so.2, libpthread.so.0)" >&2
	done
	exit 1
fi
