/*
 * stale: the segments of processes that are gone.  Segments of processes
 * that died without exiting (killed, exit_group) stay in /dev/shm: the
 * first sample of each segment removes those it may (stale.c says
 * which).  And a process's start time, which tells a reused pid apart.
 */
#ifndef YMTOP_AGENT_STALE_H
#define YMTOP_AGENT_STALE_H

#include <stdint.h>
#include <sys/types.h>

#include "base.h"

/* Field 22 of /proc/<pid>/stat (pid 0: self): the start time in clock
 * ticks; 0 when unreadable. */
uint64_t stale_start_ticks(pid_t pid) AGENT_HIDDEN;
/* The segment being made is self's, in pid namespace ns (its inode, 0
 * unknown): whose segments are judged, and which are never. */
void stale_owner(pid_t self, uint32_t ns) AGENT_HIDDEN;
/* A sample is being taken (guard held, no lock held): the first one of
 * a segment collects. */
void stale_sampled(void) AGENT_HIDDEN;
/* After fork, in the child: its segment's first sample collects again. */
void stale_fork_child(void) AGENT_HIDDEN;

#endif
