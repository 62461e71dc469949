/*
 * segstate: the segment's state word and its tests (header only), read
 * by every file that writes a section or counts calls; seg.c alone moves
 * it (seg.h says when).  Below every writer of a section: they ask
 * whether the segment is active, and the slow path that needs one makes
 * it (enter.h).
 */
#ifndef YMTOP_AGENT_SEGSTATE_H
#define YMTOP_AGENT_SEGSTATE_H

#include "base.h"

/* SEG_DETACHED: ymtop detached the agent (detach.c): every call passes
 * through, for good, also in fork children. */
enum { SEG_NONE = 0, SEG_PRE, SEG_CREATING, SEG_ACTIVE, SEG_PASSIVE,
       SEG_DETACHED };

/* SEG_* (atomic): seg.c alone moves it. */
extern int agent_seg_state AGENT_HIDDEN;

/* 1 while the segment is being written. */
static inline int agent_active(void)
{
	return __atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) == SEG_ACTIVE;
}

/* Calls are counted: before the segment (the pre-slot, slot 0's
 * stand-in), while it is made, and in it. */
static inline int agent_counting(void)
{
	int s = __atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE);
	return s == SEG_PRE || s == SEG_CREATING || s == SEG_ACTIVE;
}

#endif
