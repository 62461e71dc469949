/*
 * table: the stack table (the segment's STACKS, found through a private
 * hash index), the counters of sampled allocations (in the stack records
 * and the counter planes, PLANES), and the agent's lock.  table.c is the
 * only writer of STACKS and PLANES and of the header's stacks_used,
 * planes_used, plane_epoch[] and reset_count, and of the peaks (the
 * header's retained_est, peak_* and mmap_*, the stacks' ext fields).
 *
 * The lock is a spin lock with a bounded number of tries, so that no path
 * ever waits forever: a caller that cannot take it drops the sample and
 * counts it.  It serializes stack insertion, thread slots (threads.c) and
 * resets; the live table's stripes have locks of their own (live.h).
 */
#ifndef YMTOP_AGENT_TABLE_H
#define YMTOP_AGENT_TABLE_H

#include <stdint.h>

#include "base.h"
#include "ymtop/segment.h"

int  table_lock(uint32_t spins) AGENT_HIDDEN;  /* 1 if taken */
void table_unlock(void) AGENT_HIDDEN;

/* The private index, before the segment: 0, or -1 when it cannot be
 * mapped. */
int  table_init_private(uint32_t max_stacks) AGENT_HIDDEN;
/* After fork: the child starts from empty tables (zero-filled pages), no
 * plane handed out, the lock free. */
void table_reset_private(void) AGENT_HIDDEN;
/* The agent is unloaded (detach.h): the private index unmapped. */
void table_unmap_private(void) AGENT_HIDDEN;
/* Point the tables at a segment laid out by shm_layout (sections[]) whose
 * header is at base.  The tables write only segment memory they had
 * backed (backing.h): the caller calls backing_init first. */
void table_map_segment(uint8_t *base, const struct ym_section *sec) AGENT_HIDDEN;
/* The overflow stack: 0, or -1 when /dev/shm is full. */
int  table_init_segment(void) AGENT_HIDDEN;

/* Find or add a stack: its index, YM_STACK_OVERFLOW when the table is
 * full, UINT32_MAX when the lock stayed busy (counted in drop_busy). */
uint32_t table_intern(const uint64_t *frames, uint32_t depth, uint32_t tid,
		      uint64_t now) AGENT_HIDDEN;
/* The same for a stack of another kind (YM_KIND_*): a record of its own. */
uint32_t table_intern_kind(const uint64_t *frames, uint32_t depth, uint32_t tid,
			   uint64_t now, uint32_t kind) AGENT_HIDDEN;

/* A thread's counter plane (segment.h: counter planes), kept in its TLS:
 * plane 0 not asked yet, p + 1 own plane p, PLANE_NONE the stack records;
 * entries [0, backed) of it are backed; reset is the reset_count its
 * contents are of. */
struct table_plane {
	uint32_t plane;
	uint32_t backed;
	uint64_t reset;
};
#define PLANE_NONE UINT32_MAX

/* The calling thread's counters for `stack`: its entry in a plane of its
 * own (asked for on first use, zeroed after a reset), or NULL for the
 * stack record itself. */
struct ym_counts *table_own_counts(struct table_plane *tp, uint32_t stack) AGENT_HIDDEN;
/* Plane `plane`'s entry for `stack` (not necessarily backed). */
struct ym_counts *table_plane_entry(uint32_t plane, uint32_t stack) AGENT_HIDDEN;

/* Counters (no lock), for the stack e->stack (each also moves the
 * process's retained estimate of the stack's kind and raises the peaks:
 * segment.h v6): into `own` (from
 * table_own_counts), or into the stack record with atomic adds when own
 * is NULL. */
void table_count_alloc(const struct ym_live *e, struct ym_counts *own) AGENT_HIDDEN;
/* After each table_count_* call the counters of e's stack have moved:
 * fn(e->addr) is called then (live.c registers its stripes' `counted`
 * word bump, segment.h v8), so that a reader can tell a segment whose
 * counters did not move.  Set once, before the first count. */
void table_on_counted(void (*fn)(uint64_t addr)) AGENT_HIDDEN;
void table_count_free(const struct ym_live *e, uint64_t now,
		      struct ym_counts *own) AGENT_HIDDEN;
void table_count_drop(const struct ym_live *e, struct ym_counts *own) AGENT_HIDDEN;
void table_count_resize(const struct ym_live *e, uint64_t w, uint64_t wfx,
			struct ym_counts *own) AGENT_HIDDEN;

/* A published stack's retained estimate now (record plus the planes of
 * the current reset, as a reader sums them) and its live samples
 * (*samples); no lock, any thread (trend.c). */
int64_t table_stack_retained(uint32_t stack, int64_t *samples) AGENT_HIDDEN;
/* When a published stack's peak was last raised (0: never). */
uint64_t table_stack_peak_ns(uint32_t stack) AGENT_HIDDEN;
/* Stack records published so far (header.stacks_used). */
uint32_t table_stacks_used(void) AGENT_HIDDEN;

/* Resets carried out so far (header.reset_count): samples kept outside
 * the live table (hooks_mmap.c) are forgotten when it moved. */
uint64_t table_reset_count(void) AGENT_HIDDEN;

/* ymtop asked to forget every sample: once the live table is empty
 * (live_reset, under the same lock), the counters zeroed (frames stay, so
 * stacks keep their indexes).  Lock held. */
void table_reset_counters(void) AGENT_HIDDEN;

#endif
