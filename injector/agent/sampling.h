/*
 * sampling: the sampled slow path.  A thread's countdown ran out (or a
 * possible sample is freed or reallocated): capture the stack, intern it,
 * track the block in the live table and count it (table.h, live.h).  Also
 * the reader of the CONTROL section (rate, pause, reset requests), polled
 * here, and the writer of the header's sample_rate, the PAUSED flag and
 * the drop counters of samples (drop_live; drop_busy with table.c).
 */
#ifndef YMTOP_AGENT_SAMPLING_H
#define YMTOP_AGENT_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "config.h"
#include "modules.h"
#include "python.h"
#include "threads.h"
#include "unwind.h"
#include "ymtop/segment.h"

/* Point at the segment's header and CONTROL section. */
void sampling_map_segment(uint8_t *base, const struct ym_section *sec) AGENT_HIDDEN;
/* The mean rate in force (header.sample_rate at creation). */
uint64_t sampling_rate(void) AGENT_HIDDEN;
/* After fork: no reset seen yet in the child's segment. */
void sampling_fork_child(void) AGENT_HIDDEN;
/* A new thread's random stream and first countdown (YM_SEED makes them
 * reproducible: the n-th registered thread gets the same stream). */
void sampling_thread_start(struct agent_tls *t) AGENT_HIDDEN;

/* A thread's countdown ran out on p (guard held): its next countdown
 * drawn, the control block polled, the stack captured and interned as a
 * stack of `kind` (YM_KIND_*), *e filled as a live entry of p, n
 * requested bytes, `charged` bytes charged to the countdown for it (its
 * request, or its usable size after a realloc), weighed at the rate the
 * countdown was drawn at (sample.h).  0 when no sample is to be taken (no
 * segment, paused, the agent's lock busy).  agent_sample's first part,
 * and hooks_mmap.c's.  calls_out 0 (the mmap path, whose caller may hold
 * any lock: the allocator's in a signal handler or an extent hook): no
 * call that may wait for a lock not the agent's own bounded ones: the
 * allocator's statistics (heapstats.h) and the loader's module scan are
 * left to the next malloc-family sample. */
int sampling_take(struct agent_tls *t, void *p, size_t n, size_t charged,
		  uint32_t kind, int calls_out, struct ym_live *e) AGENT_HIDDEN;
/* A sample taken could not be kept (hooks_mmap.c's table): counted in the
 * header's drop_busy (busy: its lock stayed busy) or drop_live with
 * YM_FLAG_OVERFLOWED (no room), so readers show the figure as a lower
 * bound. */
void sampling_lost(int busy) AGENT_HIDDEN;
/* Sample the block p of n requested bytes whose charge of `charged` bytes
 * ran the countdown out (sample.h: the weight is n/p(charged)).  The
 * segment was made first, where needed (enter.h, agent_take_sample):
 * without one, only the next countdown is drawn. */
void agent_sample(struct agent_tls *t, void *p, size_t n, size_t charged) AGENT_HIDDEN;
/* The filter said p may be a live sample: take it out if it is, and
 * return its requested size (0 if it was none). */
size_t agent_free_sampled(struct agent_tls *t, void *p) AGENT_HIDDEN;
/* realloc of a possibly sampled block: take its live entry out before the
 * real call (1 if it was sampled); put it back at q with size n and usable
 * size `usable` after, its usable size having been old_usable (q NULL: the
 * block was freed), or let it leave the sample (sample_keep). */
int  agent_realloc_take(struct agent_tls *t, void *p, struct ym_live *e) AGENT_HIDDEN;
void agent_realloc_put(struct agent_tls *t, struct ym_live *e, void *q,
		       size_t n, size_t old_usable, size_t usable) AGENT_HIDDEN;

/* Capture return addresses, innermost first, without our own frames.
 * Inlined into its callers (sampling.c, giant.c): one frame less to step
 * through.  The unwinder takes no lock and allocates nothing (unwind.h),
 * so a fork or a signal may come at any point of it. */
static inline __attribute__((always_inline)) uint32_t
agent_capture(uint64_t *out)
{
	uint64_t buf[YM_LIMIT_DEPTH + 16];
	int want = (int)agent_cfg.max_depth + 16;
	int n = unwind_backtrace(buf, want);
	/* The agent's frames leave: the hook's on top, and the pymalloc
	 * wrapper's between the interpreter's (hooks_py.h) when an object
	 * pymalloc forwards reaches malloc through it. */
	uint32_t d = 0;
	for (int i = 0; i < n && d < agent_cfg.max_depth; i++)
		if (buf[i] < agent_self.lo || buf[i] >= agent_self.hi)
			out[d++] = buf[i];
	d = python_append(out, d, agent_cfg.max_depth);
	YM_ASSERT(d <= YM_LIMIT_DEPTH);
	return d;
}

#endif
