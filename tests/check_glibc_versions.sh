#!/bin/sh
# The agent loads into any glibc from 2.17 on (injector/agent/compat.h):
# fail when LIB asks for a GLIBC_ version above 2.17, for any other
# version (GLIBC_PRIVATE), or needs an object but libc.so.6, libdl.so.2
# and libpthread.so.0.  Run by the Makefile on every link of the agent.
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
extra=$(printf '%s\n' $needed | grep -v -x -e libc.so.6 -e libdl.so.2 -e libpthread.so.0 || true)
if [ -n "$bad" ] || [ -n "$extra" ]; then
	for v in $bad; do
		syms=$(LC_ALL=C objdump -T "$lib" | awk -v v="$v" '$0 ~ "[( ]" v "[) ]" { print $NF }' | tr '\n' ' ')
		echo "$lib: needs $v (glibc 2.17 is the baseline): $syms" >&2
	done
	for n in $extra; do
		echo "$lib: needs $n (only libc.so.6, libdl.so.2, libpthread.so.0)" >&2
	done
	exit 1
fi
