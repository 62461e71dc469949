/*
 * trend: the segment's trend section (segment.h, Trend): once a slot
 * (YM_TREND_SLOT_MS, 10 s by default) the retained estimates of
 * YM_TREND_STACKS stacks, the largest and the rising, so that a ymtop
 * started late sees the last YM_TREND_SLOTS slots.  trend.c is its only
 * writer.
 *
 * No thread and nothing on the fast paths: the thread that takes or
 * frees a sample compares the time it already has with the next slot's
 * (trend_tick, one compare); the first one past it writes the slot.
 */
#ifndef YMTOP_AGENT_TREND_H
#define YMTOP_AGENT_TREND_H

#include <stdint.h>

#include "base.h"
#include "ymtop/segment.h"

/* CLOCK_MONOTONIC of the next slot due; UINT64_MAX: no trend section
 * (none mapped yet, or YM_TREND_SLOT_MS=0). */
extern uint64_t trend_due AGENT_HIDDEN;

/* Point the writer at a segment whose header (sections and trend fields
 * set) is at base; the first sample writes slot 0. */
void trend_map_segment(uint8_t *base) AGENT_HIDDEN;

/* Write the slot due at now (the first thread there), reading every
 * published stack's counters once: 5 to 15 ns a stack (BENCHMARKS.md).
 * Guard held, no lock held. */
void trend_write(uint64_t now) AGENT_HIDDEN;

/* A sample was taken or freed at now: the slot, when it is due. */
static inline void trend_tick(uint64_t now)
{
	if (unlikely(now >= __atomic_load_n(&trend_due, __ATOMIC_RELAXED)))
		trend_write(now);
}

#endif
