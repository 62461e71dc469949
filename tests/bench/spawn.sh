#!/bin/sh
# spawn: N short processes one after another (make bench, workloads
# "spawn" and "spawnsh"): what the agent's start-up and exit cost a build
# or a shell script, where every process loads it.
#   spawn.sh N        N runs of /bin/true (allocates nothing)
#   spawn.sh N sh     N runs of sh -c true (a shell: it allocates)
n=${1:-200}
i=0
if [ "${2:-}" = sh ]; then
	while [ "$i" -lt "$n" ]; do
		sh -c true
		i=$((i + 1))
	done
	exit 0
fi
while [ "$i" -lt "$n" ]; do
	/bin/true
	i=$((i + 1))
done
