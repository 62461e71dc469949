#!/bin/sh
# spawn: N short processes one after another (make bench, workload
# "spawn"): what the agent's start-up and exit cost a build or a shell
# script, where every process loads it.  Usage: spawn.sh N
n=${1:-200}
i=0
while [ "$i" -lt "$n" ]; do
	/bin/true
	i=$((i + 1))
done
