/*
 * live: the live table (sampled allocations not yet freed, in the
 * segment's STRIPES and LIVE sections) and the filters in front of it
 * that free's fast path reads.  live.c is the only writer of STRIPES, LIVE
 * and the filters; it counts through table.h (a stale entry it repairs).
 */
#ifndef YMTOP_AGENT_LIVE_H
#define YMTOP_AGENT_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "ymtop/segment.h"

/* Filters in front of the live table, one bit per address hash
 * ((p >> 4) mod 2^15: no multiply, allocator addresses are 16-aligned).
 *
 *   agent_filter_live: set while some live sample hashes there (live.c
 *   keeps the exact count per bit under the stripe's lock).  Not kept in
 *   exact mode, where every free and realloc asks the live table.
 *   agent_filter, the gate: what free's fast path reads: live | pinned,
 *   where the pinned bits are NULL and the bootstrap allocations, so that
 *   one bit test sends NULL, bootstrap blocks and possible samples to the
 *   slow path.  All ones when every free must go there (filter_all).
 *
 * THE GATE INVARIANT, which makes free's and realloc's fast paths safe
 * under any allocator: those paths read glibc's chunk header
 * (agent_usable_glibc) and call nothing else, so they may be taken only
 * when the next allocator is glibc's.  live_init_private sets filter_all
 * whenever it is not (or in exact mode), and with filter_all every gate
 * word is all ones, from before the first thread can take a fast path
 * (registration needs an active segment, after live_init_private) until
 * the process ends (fork keeps filter_all).  So a fast free never sees a
 * block of another allocator; agent_usable_glibc asserts it (next.h).
 *
 * 4 KiB each, static: they stay in L1 and cost no pointer load.  A false
 * positive costs a look into the live table: a lock-free probe (live_has)
 * where the thread's hits are mostly false (sampling.c), else the
 * stripe's lock. */
#define AGENT_FILTER_BITS 15
#define AGENT_FILTER_WORDS ((1u << AGENT_FILTER_BITS) / 64)
extern uint64_t agent_filter[AGENT_FILTER_WORDS] AGENT_HIDDEN;
extern uint64_t agent_filter_live[AGENT_FILTER_WORDS] AGENT_HIDDEN;

static inline uint32_t agent_filter_slot(const void *p)
{
	return (uint32_t)((uintptr_t)p >> 4) & ((1u << AGENT_FILTER_BITS) - 1);
}

static inline int agent_filter_test(const uint64_t *f, const void *p)
{
	uint32_t i = agent_filter_slot(p);
	return (int)(__atomic_load_n(&f[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1;
}

/* free's gate: 0 = certainly neither a sample, NULL nor bootstrap, and
 * the allocator is glibc's (the gate invariant).  Five instructions: a
 * shift, an index, a load, a bit test, a branch. */
static inline int agent_filter_maybe(const void *p)
{
	return agent_filter_test(agent_filter, p);
}

/* 0 = certainly not a live sample. */
static inline int agent_filter_live_maybe(const void *p)
{
	return agent_filter_test(agent_filter_live, p);
}

/* Pin p's gate bit for good (bootstrap blocks: hooks.c). */
void live_filter_pin(const void *p) AGENT_HIDDEN;

/* The gate alone, at the agent's start (seg_prepare): before the first
 * fast free. */
void live_init_gate(int exact, int glibc_usable) AGENT_HIDDEN;
/* The private chains and the gate, before the segment: 0, or -1 when
 * the private memory cannot be mapped.  exact: YM_SAMPLE_RATE=1;
 * glibc_usable: the next allocator is glibc's (the gate invariant). */
int  live_init_private(uint32_t max_live, int exact, int glibc_usable) AGENT_HIDDEN;
/* After fork: the child starts from empty tables (zero-filled pages). */
void live_reset_private(void) AGENT_HIDDEN;
/* The agent is unloaded (detach.h): the chains' heads unmapped. */
void live_unmap_private(void) AGENT_HIDDEN;
/* Point the table at a segment laid out by shm_layout (sections[]);
 * it writes only what it had backed (backing.h). */
void live_map_segment(uint8_t *base, const struct ym_section *sec) AGENT_HIDDEN;
/* Back the stripes (every free that hits the filter reads them): 0, or
 * -1 when /dev/shm is full. */
int  live_init_segment(void) AGENT_HIDDEN;

/* Each call takes the address's stripe lock, trying `spins` times; tid is
 * the calling thread's (its free-list lane).  insert: 1 inserted, 0 table
 * full, -1 busy; remove: 1 found (copied to *out), 0 not found or busy. */
int  live_insert(const struct ym_live *e, uint32_t tid, uint32_t spins) AGENT_HIDDEN;
int  live_remove(uint64_t addr, uint32_t tid, struct ym_live *out,
		 uint32_t spins) AGENT_HIDDEN;
/* No lock: 0 when addr is certainly not in the live table, 1 when it may
 * be (found, or the table changed during the probe). */
int  live_has(uint64_t addr) AGENT_HIDDEN;
/* A hint: the chain head live_insert or live_remove of addr will read is
 * brought into the cache meanwhile (exact mode: it misses at nearly
 * every event, and the unwind before an insert hides it).  Reads
 * nothing that needs the stripe held; wrong only in speed. */
void live_prefetch(uint64_t addr) AGENT_HIDDEN;
/* The same before an insert, and the entry that insert will take from
 * the thread's lane (tid), which in exact mode is another miss. */
void live_prefetch_insert(uint64_t addr, uint32_t tid) AGENT_HIDDEN;
/* After a change of stack counters for a sample of addr: add 1 to its
 * stripe's counted word (segment.h, struct ym_stripe, v8), so that a
 * reader sees that its copy of the stacks is old. */
void live_counted(uint64_t addr) AGENT_HIDDEN;
/* Empty the table, every stripe taken in order: 0 when one stayed busy
 * (nothing was emptied).  Under table_lock, before table_reset_counters. */
int  live_reset(void) AGENT_HIDDEN;
/* 2^n parts of the stripes, one per address region: exact mode; n = 0
 * when sampling (tests). */
uint32_t live_part_log(void) AGENT_HIDDEN;

/* Entries of other addresses the chain walks passed: defined in the
 * unit tests' build of the agent's modules only (YM_AGENT_TEST). */
uint64_t live_test_links_passed(void) AGENT_HIDDEN;

#endif
