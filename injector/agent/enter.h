/*
 * enter: the slow paths' way into the agent (enter.c): the first slow
 * path of a process and of each thread, the segment when a slow path
 * needs it, and fork.  Below the hook files, which call it, and life.c,
 * which registers the fork handlers; above every subsystem it drives.
 */
#ifndef YMTOP_AGENT_ENTER_H
#define YMTOP_AGENT_ENTER_H

#include "base.h"
#include "sampling.h"
#include "segstate.h"
#include "threads.h"

/* Slow-path entry: make sure the agent is initialized and this thread has
 * a slot (or knows it shares slot 0).  Guard held by the caller; the
 * host's errno is kept. */
void agent_enter(struct agent_tls *t) AGENT_HIDDEN;

/* SEG_PRE: make the segment now (seg_start) and replay the mappings
 * sampled before it.  1 when the segment is active.  Guard held. */
int  agent_segment_start(void) AGENT_HIDDEN;
/* The same, guard not held (taken here), errno kept. */
void agent_segment_slow(struct agent_tls *t) AGENT_HIDDEN;

/* A sample or a giant request is due: the first one makes the segment
 * (seg.h), here, where the hook may call out; agent_sample and
 * agent_giant then find it active (or not: nothing is recorded). */
static inline void agent_need_segment(struct agent_tls *t)
{
	if (unlikely(!agent_active()))
		agent_segment_slow(t);
}

/* agent_sample (sampling.h), after the segment it needs. */
static inline void agent_take_sample(struct agent_tls *t, void *p, size_t n,
				     size_t charged)
{
	agent_need_segment(t);
	/* Detached: no sample is due again on this thread. */
	if (unlikely(__atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE) ==
		     SEG_DETACHED)) {
		t->countdown = INT64_MAX;
		return;
	}
	agent_sample(t, p, n, charged);
}

/* threads_enter for t, with the sampling state of a thread it registers
 * (ymagent_start: the pre-slot's owner adopts its slot).  Guard held. */
void agent_thread_enter(struct agent_tls *t) AGENT_HIDDEN;

/* Register the fork handlers (the constructor, once). */
void agent_atfork(void) AGENT_HIDDEN;

#endif
