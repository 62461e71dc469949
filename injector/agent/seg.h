/*
 * seg: the shared segment's life: created once per process (and once per
 * child after fork) on the first slow path, retired at exit, handed to a
 * new owner at setuid.  seg.c writes the header's fields fixed at
 * creation (magic last), and exit_mono_ns, EXITED, KEPT and uid; each
 * section is then written by its own file (life.c has the map).
 */
#ifndef YMTOP_AGENT_SEG_H
#define YMTOP_AGENT_SEG_H

#include <sys/types.h>

#include "base.h"

enum { SEG_NONE = 0, SEG_CREATING, SEG_ACTIVE, SEG_PASSIVE };

/* SEG_* (atomic): seg.c alone moves it. */
extern int agent_seg_state AGENT_HIDDEN;

/* 1 while the segment is being written. */
static inline int agent_active(void)
{
	return __atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) == SEG_ACTIVE;
}

/* Create the segment if nobody did yet: configuration, the private
 * tables, the segment, then SEG_ACTIVE (or SEG_PASSIVE after one line on
 * stderr).  Called on a slow path with the guard held. */
void seg_activate(void) AGENT_HIDDEN;
/* The constructor: this process owns the agent's state (a vfork child,
 * which shares it, does not: seg_activate passes it through). */
void seg_note_owner(void) AGENT_HIDDEN;
/* A sample is being taken (guard held, no lock held): the first one of
 * a segment removes the segments of processes that are gone. */
void seg_sampled(void) AGENT_HIDDEN;
/* After fork, in the child: stop writing into the parent's segment;
 * start one of our own lazily, on the next call (follow: YM_FOLLOW_FORK
 * and not disabled), or stay passive. */
void seg_fork_child(int follow) AGENT_HIDDEN;

/* The process is leaving (exit, or _exit which runs no destructors). */
void agent_exiting(void) AGENT_HIDDEN;
/* The same from the agent's destructor, run by exit(): YM_FLAG_EXITED may
 * be left to the on_exit handler, which publishes it after the status. */
void agent_exiting_in_exit(void) AGENT_HIDDEN;
/* Record exit()'s status in the header at exit (glibc's on_exit).  Called
 * once, at start, with the guard held. */
void seg_exit_status_init(void) AGENT_HIDDEN;
/* The process is about to take the effective uid `euid`. */
void agent_owner_change(uid_t euid) AGENT_HIDDEN;

#endif
