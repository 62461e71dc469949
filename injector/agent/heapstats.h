/*
 * heapstats: the allocator's own statistics, read inside the target and
 * published in the header's heap block (segment.h, struct ym_heapstats):
 * glibc's mallinfo2, jemalloc's mallctl stats.*, tcmalloc's
 * MallocExtension_GetNumericProperty.  heapstats.c is the only writer of
 * header.heap and the only reader of control.heap_request.
 *
 * Taken only when a reader asks (control.heap_request moved), at most
 * every YM_HEAP_MIN_INTERVAL_NS and every 100 times the last call's
 * cost (1% of a thread), by one thread at a time, and only where
 * the calling thread is not inside the allocator and holds no lock of the
 * agent: the sample slow path before its first lock (after the real call
 * returned), and an injected start (the injector borrows a thread outside
 * libc's allocator).  Those calls take the allocator's locks (mallinfo2:
 * every arena's), so never while malloc_info or malloc_stats runs in the
 * process: those hold an arena lock while their stdio allocates (the
 * wrappers in heapstats.c count them).  Allocation-free: the functions
 * are found once with dlsym under the guard.
 */
#ifndef YMTOP_AGENT_HEAPSTATS_H
#define YMTOP_AGENT_HEAPSTATS_H

#include <stdint.h>

#include "base.h"
#include "threads.h"
#include "ymtop/segment.h"

/* The allocation fast paths' threshold (segment.h, control.fast_limit):
 * requests at or above it take the slow path.  A word of ours holding
 * SIZE_MAX until heapstats_arm, then the control block's word. */
extern const uint64_t *agent_fast_limit AGENT_HIDDEN;

/* Point at the segment's header and CONTROL section (a new segment: no
 * statistics yet). */
void heapstats_map_segment(uint8_t *base, const struct ym_section *sec) AGENT_HIDDEN;
/* Answer a pending request, if any and if the last answer is old enough.
 * force: take them now whatever was asked (an injected start).  Guard
 * held, no agent lock held, not inside the allocator. */
void heapstats_poll(int force) AGENT_HIDDEN;
/* The fast paths' threshold is `giant`: in a word of ours before the
 * segment (seg_prepare), in the control block once it is mapped. */
void heapstats_arm(uint64_t giant) AGENT_HIDDEN;
/* Before the segment (SEG_PRE): every allocation call takes the slow
 * path from now on, until the segment is made (seg_want). */
void heapstats_pre_wake(void) AGENT_HIDDEN;
/* On a slow path, at the entry of an allocation call (guard not held, no
 * lock held): a reader lowered the threshold to ask for statistics:
 * restore it and answer. */
void heapstats_poked(struct agent_tls *t) AGENT_HIDDEN;
/* After fork, before the parent's segment is unmapped. */
/* Detach: the fast paths compare against no limit (a reader's lowered
 * threshold would send every call to a slow path that passes through). */
void heapstats_detach(void) AGENT_HIDDEN;
void heapstats_fork_child(void) AGENT_HIDDEN;

#endif
