/*
 * threads: per-thread state (TLS), the recursion guard, and the segment's
 * THREADS section: one slot a thread, each with one writer, its thread,
 * whose exact totals the inline counters below keep on the fast paths;
 * slot 0 is shared by threads that got no slot (atomic adds).  threads.c
 * and the inline functions here are the only writers of THREADS and of
 * the header's threads_used, retired, retire_seq and drop_threads.
 *
 * Before the segment (seg.h, SEG_PRE) the first thread counts into a
 * private pre-slot, on the same fast paths, and threads that come while
 * it is being made into a private stand-in for slot 0.  The thread that
 * makes the segment moves both into it (threads_publish_pre): the
 * stand-in after the adders in flight left it; the pre-slot as a copy
 * into a slot of the segment, which its owner adopts at its next slow
 * path (its fast word is cleared for that), adding what it counted after
 * the copy.  Totals stay exact.
 */
#ifndef YMTOP_AGENT_THREADS_H
#define YMTOP_AGENT_THREADS_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "table.h"
#include "ymtop/segment.h"

/* Per-thread state.  Touching it never allocates, also when the agent is
 * dlopen'ed (AGENT_TLS_MODEL, base.h).  Keep it small (static TLS is
 * scarce). */
enum { TLS_NEW = 0, TLS_OWN, TLS_SHARED, TLS_DEAD };

struct agent_tls {
	/* The one word the fast paths test: the own slot while this thread
	 * may take them (registered, guard 0, not forking), else NULL.
	 * Invariant: fast == (guard == 0 && state == TLS_OWN && !forking ?
	 * slot : NULL); only agent_guard_enter/leave, registration, thread
	 * exit and fork change it, and the thread that makes the segment,
	 * which clears a pre-slot owner's (threads_publish_pre,
	 * threads_drop_pre: the owner then takes a slow path and adopts its
	 * slot; threads_pre_sync closes the race with the owner's own store).
	 * Written by another thread, so every access is a relaxed atomic
	 * (thread_fast, thread_fast_set): a plain mov on x86-64, the fast
	 * paths' instructions are a plain load's. */
	struct ym_thread *fast;
	int64_t countdown;          /* bytes to the next sample; < 0: due */
	struct ym_thread *slot;     /* own slot (TLS_OWN) */
	uint64_t rng;
	uint32_t guard;             /* > 0 while inside the agent */
	uint32_t state;             /* TLS_* */
	uint32_t tid;
	uint32_t epoch;             /* threads' epoch at registration */
	struct table_plane plane;   /* its counter plane (table.h) */
	/* The mean rate countdown was drawn at (agent_sample weighs the
	 * sample that ends it with it: ymtop --rate may have changed the
	 * agent's since); 0 before the first draw. */
	uint64_t rate;
	/* When this thread last read the control block, and whether it said
	 * pause then (sampling.c: at most once a millisecond). */
	uint64_t polled_ns;
	uint32_t paused;
	/* Between the agent's fork handlers (life.c): every call takes a
	 * slow path, which tells the parent from a child whose handlers
	 * registered before the agent's run first. */
	uint32_t forking;
	/* Owns the pre-slot (threads.c): its fast word may be cleared by
	 * the thread that makes the segment. */
	uint32_t pre;
	/* While set (guard held), this thread's allocations come from the
	 * bootstrap buffer: a dlsym that finds nothing mallocs its message,
	 * which must not touch the host's heap (hooks_jemalloc.c). */
	uint32_t boot;
	/* This thread's recent frees that the filter sent to the live table,
	 * and how many of those were samples (sampling.c: whether a probe
	 * before the lock pays). */
	uint32_t filter_hits;
	uint32_t filter_found;
	/* Time on the sampled paths not yet added to the process's sum
	 * (budget.h; only while a budget is set). */
	uint64_t budget_ns;
};

extern __thread struct agent_tls agent_tls
	AGENT_TLS_MODEL AGENT_HIDDEN;

/* The fast word (the invariant above), read and written by its thread. */
static inline struct ym_thread *thread_fast(const struct agent_tls *t)
{
	return __atomic_load_n(&t->fast, __ATOMIC_RELAXED);
}

static inline void thread_fast_set(struct agent_tls *t, struct ym_thread *s)
{
	__atomic_store_n(&t->fast, s, __ATOMIC_RELAXED);
}

/* The thread's own slot when it may count there: fast's, but also while
 * it forks (the slow paths count then). */
static inline struct ym_thread *thread_own_slot(const struct agent_tls *t)
{
	return t->guard == 0 && t->state == TLS_OWN ? t->slot : NULL;
}

/* fast from what it stands for (the invariant above), after guard or
 * forking changed. */
void threads_pre_sync(struct agent_tls *t) AGENT_HIDDEN;

static inline void thread_fast_sync(struct agent_tls *t)
{
	thread_fast_set(t, t->forking ? NULL : thread_own_slot(t));
	if (unlikely(t->pre))
		threads_pre_sync(t);
}

/* Inside the agent (or a call it makes) this thread's allocations pass
 * straight through: no fast path, no sample, no recursion. */
static inline void agent_guard_enter(struct agent_tls *t)
{
	t->guard++;
	thread_fast_set(t, NULL);
}

static inline void agent_guard_leave(struct agent_tls *t)
{
	YM_ASSERT(t->guard > 0);
	t->guard--;
	thread_fast_sync(t);
}

/* The fast paths' precondition: s = t->fast is not NULL only for a
 * registered thread outside the agent, in its own slot. */
static inline void agent_assert_fast(const struct agent_tls *t,
				     const struct ym_thread *s)
{
	YM_ASSERT(s && s == t->slot && t->guard == 0 && t->state == TLS_OWN &&
		  !t->forking);
	(void)t;
	(void)s;
}

/* ---- Counting in a thread's own slot: one writer, no atomic
 * read-modify-write.  On x86-64 one plain add to memory (an aligned
 * 8-byte store: readers never see it torn), elsewhere a relaxed load and
 * store. */
static inline void thread_bump(uint64_t *c, uint64_t v)
{
#if defined(__x86_64__)
	__asm__("addq %1, %0" : "+m"(*c) : "er"(v));
#else
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v,
			 __ATOMIC_RELAXED);
#endif
}

/* An allocation call of n bytes (counted before the call). */
static inline void thread_count_call(struct ym_thread *s, size_t n)
{
	thread_bump(&s->t.alloc_objects, 1);
	thread_bump(&s->t.req_bytes, n);
}

/* The usable size u of the block that call returned. */
static inline void thread_count_usable(struct ym_thread *s, size_t u)
{
	thread_bump(&s->t.alloc_bytes, u);
}

/* An allocation of n bytes, usable size u (counted after the call). */
static inline void thread_count_alloc(struct ym_thread *s, size_t u, size_t n)
{
	thread_bump(&s->t.alloc_objects, 1);
	thread_bump(&s->t.alloc_bytes, u);
	thread_bump(&s->t.req_bytes, n);
}

/* The call counted by thread_count_call failed. */
static inline void thread_uncount_call(struct ym_thread *s, size_t n)
{
	thread_bump(&s->t.alloc_objects, (uint64_t)-1);
	thread_bump(&s->t.req_bytes, -(uint64_t)n);
}

/* A free of a block of usable size u. */
static inline void thread_count_free(struct ym_thread *s, size_t u)
{
	thread_bump(&s->t.free_objects, 1);
	thread_bump(&s->t.free_bytes, u);
}

/* A free, counted by its object only: at sampling rates above 1 the
 * freed block's size is not read (man/ymagent.7: freed bytes are not
 * counted there; the allocator's statistics say what is in use). */
static inline void thread_count_freed(struct ym_thread *s)
{
	thread_bump(&s->t.free_objects, 1);
}

/* The free counted by thread_count_freed did not happen. */
static inline void thread_uncount_freed(struct ym_thread *s)
{
	thread_bump(&s->t.free_objects, (uint64_t)-1);
}

/* ---- Slot 0, shared by threads without a slot of their own: atomic
 * adds (threads.c). */
void thread_shared_alloc(size_t u, size_t n) AGENT_HIDDEN;
void thread_shared_free(size_t u) AGENT_HIDDEN;

/* Where a counted call of the slow paths lands: the thread's own slot,
 * else slot 0's (more threads than slots, or not registered yet). */
static inline void thread_count_alloc_here(const struct agent_tls *t, size_t u,
					   size_t n)
{
	if (t->slot)
		thread_count_alloc(t->slot, u, n);
	else
		thread_shared_alloc(u, n);
}

static inline void thread_count_free_here(const struct agent_tls *t, size_t u)
{
	if (t->slot)
		thread_count_free(t->slot, u);
	else
		thread_shared_free(u);
}

/* The allocator calls the segment counts (segment.h, YM_HEAP_CALLS): the
 * sum over the thread slots and the retired totals of alloc_objects +
 * free_objects, as a reader sums them.  0 before the segment.  Reads
 * other threads' counters (relaxed loads): any thread, any time. */
uint64_t threads_calls(void) AGENT_HIDDEN;

/* Detach: the key deleted, so that no thread's exit calls the agent's
 * destructor (its registration fails from then on: EINVAL). */
void threads_detach(void) AGENT_HIDDEN;
/* Before the segment: the key whose destructor marks a slot exited. */
void threads_init(void) AGENT_HIDDEN;
/* Point at the segment's THREADS section (header at base); back and
 * claim slot 0 (the shared slot): 0, or -1 when /dev/shm is full. */
int  threads_map_segment(uint8_t *base, const struct ym_section *sec,
			 uint32_t max_threads) AGENT_HIDDEN;
/* Give the calling thread a slot if it has none yet and the segment is
 * active, or let it share slot 0; TLS of a pre-fork thread is renewed
 * first.  Before the segment (SEG_PRE): the pre-slot, when nobody has it
 * yet.  Returns THREADS_SEGMENT when another thread has it and the
 * caller should make the segment now (seg_start), then call again;
 * THREADS_STARTED when the thread was just registered (a slot, slot 0's
 * share, or the pre-slot): the caller draws its sampling state
 * (sampling_thread_start, enter.c).  Guard held. */
#define THREADS_SEGMENT 1
#define THREADS_STARTED 2
int  threads_enter(struct agent_tls *t) AGENT_HIDDEN;
/* The segment is made (its maker, guard held, before SEG_ACTIVE): the
 * pre-slot into a slot of its own (adopted by its owner: self at once),
 * or into the retired totals when its owner exited. */
void threads_publish_pre(struct agent_tls *self) AGENT_HIDDEN;
/* No segment will come (SEG_PASSIVE): the pre-slot's owner stops
 * counting at its next slow path. */
void threads_drop_pre(void) AGENT_HIDDEN;
/* After fork, in the child's only thread: a new epoch (every other TLS
 * is stale), this thread not registered. */
void threads_fork_child(struct agent_tls *t) AGENT_HIDDEN;

#endif
