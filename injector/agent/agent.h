/*
 * libymagent internals: the state shared by the agent's modules.
 *
 *   hooks.c    the exported malloc family: fast paths, bootstrap, guard
 *   agent.c    life cycle: configuration, segment, threads, fork, exit,
 *              modules, alarms, the sampled slow path
 *   table.c    the stack table, the live table and its filter, the lock
 *   backing.c  memory behind the segment's pages, taken on first use
 *   got.c      injected mode: GOT slots rewritten to the hooks
 *   unwind.c   the calling thread's stack, from .eh_frame (unwind.h)
 *
 * Everything here has hidden visibility; only hooks.c exports symbols.
 */
#ifndef YMTOP_AGENT_H
#define YMTOP_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ymtop/segment.h"

#define AGENT_HIDDEN __attribute__((visibility("hidden")))
#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* The next definitions of what we interpose. */
struct agent_real {
	void *(*malloc)(size_t);
	void  (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	int   (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*usable)(void *);
};

/* Per-thread state.  initial-exec TLS: touching it never allocates, also
 * when the agent is dlopen'ed.  Keep it small (static TLS is scarce). */
enum { TLS_NEW = 0, TLS_OWN, TLS_SHARED, TLS_DEAD };

struct agent_tls {
	/* The one word the fast paths test: the own slot while this thread
	 * may take them (registered, guard 0), else NULL.  Invariant:
	 * fast == (guard == 0 && state == TLS_OWN ? slot : NULL); only
	 * agent_guard_enter/leave, registration, thread exit and fork
	 * change it. */
	struct ym_thread *fast;
	int64_t countdown;          /* bytes to the next sample; < 0: due */
	struct ym_thread *slot;     /* own slot (TLS_OWN) */
	uint64_t rng;
	uint32_t guard;             /* > 0 while inside the agent */
	uint32_t state;             /* TLS_* */
	uint32_t tid;
	uint32_t epoch;             /* agent.epoch at registration */
	uint64_t pending;           /* malloc's request, while in the call */
	/* Counter plane (segment.h): 0 not asked yet, p + 1 own plane p,
	 * PLANE_NONE the stack records; stacks [0, plane_backed) of it are
	 * backed; plane_reset is the reset_count its contents are of. */
	uint32_t plane;
	uint32_t plane_backed;
	uint64_t plane_reset;
	/* The mean rate countdown was drawn at (agent_sample weighs the
	 * sample that ends it with it: ymtop --rate may have changed the
	 * agent's since); 0 before the first draw. */
	uint64_t rate;
};
#define PLANE_NONE UINT32_MAX

extern __thread struct agent_tls agent_tls
	__attribute__((tls_model("initial-exec"))) AGENT_HIDDEN;

/* Inside the agent (or a call it makes) this thread's allocations pass
 * straight through: no fast path, no sample, no recursion. */
static inline void agent_guard_enter(struct agent_tls *t)
{
	t->guard++;
	t->fast = NULL;
}

static inline void agent_guard_leave(struct agent_tls *t)
{
	if (--t->guard == 0 && t->state == TLS_OWN)
		t->fast = t->slot;
}

enum { SEG_NONE = 0, SEG_CREATING, SEG_ACTIVE, SEG_PASSIVE };

struct agent {
	struct agent_real real;
	int      resolved;          /* real.* filled in */
	int      injected;          /* dlopen'ed by ymtop -p: GOT hooks */
	int      glibc_usable;      /* real malloc is glibc's: inline usable */
	int      seg_state;         /* SEG_* (atomic) */
	uint32_t epoch;             /* bumped by fork: stale TLS re-registers */
	pid_t    pid;
	uint32_t pidns;             /* our pid namespace's inode (0 unknown) */

	/* Configuration (YM_*), read once. */
	int      configured;
	uint64_t rate;
	uint64_t giant;
	int      giant_fail;
	int      follow_fork;
	int      keep_segment;
	int      disabled;
	uint64_t seed;              /* YM_SEED; 0: from time and tid */
	uint64_t seeded;            /* threads seeded from it so far */
	uint32_t max_depth, max_stacks, max_live, max_threads;

	/* The segment (NULL unless SEG_ACTIVE). */
	uint8_t           *base;
	uint64_t           size;
	struct ym_header  *hdr;
	struct ym_control *ctl;
	struct ym_thread  *threads;
	uint8_t           *stacks;
	struct ym_live    *live;
	struct ym_stripe  *stripes;
	struct ym_counts  *planes;
	uint8_t           *alarms;
	struct ym_module  *modules;
	uint32_t stack_stride, alarm_stride;
	/* The live table: 2^stripe_log stripes of 2^per_log entries; a
	 * filter slot (agent_filter_slot) >> stripe_shift is the stripe. */
	uint32_t stripe_log, per_log, stripe_shift;
	uint32_t part_log;          /* exact mode: 2^part_log parts (table.c) */
	uint32_t heads_log;         /* room for 2^heads_log chain heads a
				     * stripe, of which it uses 2^hlog[s] */
	uint8_t  hlog[YM_LIVE_STRIPES];

	/* Private memory (never in the segment). */
	uint64_t *index;            /* stack hash -> stack + 1 | tag (table.c) */
	uint32_t  index_mask;
	uint32_t *live_heads;       /* the live table's chains (table.c) */
	uint32_t  live_heads_cap;
	uint32_t  thread_cursor;    /* where to look for an exited slot */
	uint32_t  plane_next;       /* threads that asked for a counter plane */
	uint32_t  seen_reset;

	uintptr_t self_lo, self_hi; /* our own text: frames to drop */

	/* The agent's lock for stacks, thread slots, modules and resets
	 * (bounded spins; the live table's stripes have their own), alone in
	 * its line: the fields around it are read on every sample. */
	_Alignas(64) uint32_t lock;
	char     lock_pad[60];
	int      live_probe;        /* free probes the live table before the
				     * lock (table.c, live_probe_update) */
	int      filter_all;        /* every free takes the slow path: exact
				     * mode, or usable size is a call */

	/* Module publication: the loader's counters at the last scan. */
	unsigned long long mod_adds, mod_subs;
	uint64_t mod_checked_ns;
	uint32_t mod_scanning;      /* try-lock: one scanner at a time */
};

extern struct agent agent AGENT_HIDDEN;

/* Filters in front of the live table, one bit per address hash
 * ((p >> 4) mod 2^15: no multiply, allocator addresses are 16-aligned).
 *
 *   agent_filter_live: set while some live sample hashes there (table.c
 *   keeps the exact count per bit under the lock).  Not kept in exact
 *   mode, where every free and realloc asks the live table.
 *   agent_filter: what free's fast path reads: live | pinned, where the
 *   pinned bits are NULL and the bootstrap allocations, so that one bit
 *   test sends NULL, bootstrap blocks and possible samples to the slow
 *   path.  All ones when every free must go there (agent.filter_all).
 *
 * 4 KiB each, static: they stay in L1 and cost no pointer load.  A false
 * positive costs a lock-free probe of the live table (table_live_has). */
#define AGENT_FILTER_BITS 15
#define AGENT_FILTER_WORDS ((1u << AGENT_FILTER_BITS) / 64)
extern uint64_t agent_filter[AGENT_FILTER_WORDS] AGENT_HIDDEN;
extern uint64_t agent_filter_live[AGENT_FILTER_WORDS] AGENT_HIDDEN;

static inline uint32_t agent_filter_slot(const void *p)
{
	return (uint32_t)((uintptr_t)p >> 4) & ((1u << AGENT_FILTER_BITS) - 1);
}

static inline int filter_test(const uint64_t *f, const void *p)
{
	uint32_t i = agent_filter_slot(p);
	return (int)(__atomic_load_n(&f[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1;
}

/* free's gate: 0 = certainly neither a sample, NULL nor bootstrap. */
static inline int agent_filter_maybe(const void *p)
{
	return filter_test(agent_filter, p);
}

/* 0 = certainly not a live sample. */
static inline int agent_filter_live_maybe(const void *p)
{
	return filter_test(agent_filter_live, p);
}

/* The allocator's usable size of a live block.  glibc: the chunk size
 * minus the size field, or minus the whole header when mmapped (bit 2):
 * one load and four ALU operations, no branch. */
static inline size_t agent_usable_glibc(const void *p)
{
	size_t sz = ((const size_t *)p)[-1];
	return (sz & ~(size_t)7) - 8 - ((sz & 2) << 2);
}

static inline size_t agent_usable(void *p)
{
	if (likely(agent.glibc_usable))
		return agent_usable_glibc(p);
	return agent.real.usable(p);
}

/* Fast-path threshold: requests this large go to the slow path (giant
 * alarm).  SIZE_MAX while not active. */
extern size_t agent_giant_limit AGENT_HIDDEN;

/* ---- agent.c ---- */
int  agent_resolve(void) AGENT_HIDDEN;         /* 1 when real.* usable */
void agent_enter(struct agent_tls *t) AGENT_HIDDEN; /* init + register */
/* Sample the block p of n requested bytes whose usable size `usable` ran
 * the countdown out (sample.h: the weight is n/p(usable)). */
void agent_sample(struct agent_tls *t, void *p, size_t n, size_t usable) AGENT_HIDDEN;
void agent_free_sampled(struct agent_tls *t, void *p) AGENT_HIDDEN;
void agent_giant(struct agent_tls *t, size_t n, int failed) AGENT_HIDDEN;
/* realloc of a possibly sampled block: take its live entry out before the
 * real call (1 if it was sampled); put it back at q with size n and usable
 * size `usable` after, its usable size having been old_usable (q NULL: the
 * block was freed), or let it leave the sample (sample_keep). */
int  agent_realloc_take(struct agent_tls *t, void *p, struct ym_live *e) AGENT_HIDDEN;
void agent_realloc_put(struct agent_tls *t, struct ym_live *e, void *q,
		       size_t n, size_t old_usable, size_t usable) AGENT_HIDDEN;
uint64_t agent_now_ns(void) AGENT_HIDDEN;
void agent_exiting(void) AGENT_HIDDEN;
/* exitstatus.c: record exit()'s status in the header at exit. */
void agent_exitstatus_init(void) AGENT_HIDDEN;
void agent_owner_change(uid_t euid) AGENT_HIDDEN;

/* 1 while the segment is being written. */
static inline int agent_active(void)
{
	return __atomic_load_n(&agent.seg_state, __ATOMIC_ACQUIRE) == SEG_ACTIVE;
}

/* ---- table.c ---- */
int  table_lock(uint32_t spins) AGENT_HIDDEN;  /* 1 if taken */
void table_unlock(void) AGENT_HIDDEN;
int  table_init_private(void) AGENT_HIDDEN;
void table_reset_private(void) AGENT_HIDDEN;
void table_filter_pin(const void *p) AGENT_HIDDEN;  /* bootstrap blocks */
/* Point the tables at a segment laid out by shm_layout (sections[]).  The
 * tables write only segment memory they had backed (backing.h): the caller
 * calls backing_init first. */
void table_map_segment(uint8_t *base, const struct ym_section *sec) AGENT_HIDDEN;
/* The overflow stack and the stripes: 0, or -1 when /dev/shm is full. */
int  table_init_segment(void) AGENT_HIDDEN;
uint32_t table_intern(const uint64_t *frames, uint32_t depth, uint32_t tid,
		      uint64_t now) AGENT_HIDDEN;
/* The live table: each call takes the address's stripe lock, trying
 * `spins` times.  insert: 1 inserted, 0 table full, -1 busy; remove: 1
 * found (copied to *out), 0 not found or busy. */
int  table_live_insert(const struct ym_live *e, uint32_t spins) AGENT_HIDDEN;
int  table_live_remove(uint64_t addr, struct ym_live *out, uint32_t spins) AGENT_HIDDEN;
/* No lock: 0 when addr is certainly not in the live table, 1 when it may
 * be (found, or the table changed during the probe). */
int  table_live_has(uint64_t addr) AGENT_HIDDEN;
/* Agent lock held; 0 when a stripe stayed busy (nothing was reset). */
int  table_reset_counters(void) AGENT_HIDDEN;
/* Counters (no lock), for the stack e->stack: into `own`, the calling
 * thread's entry in its counter plane (agent_counts), or into the stack
 * record with atomic adds when own is NULL. */
void table_count_alloc(const struct ym_live *e, struct ym_counts *own) AGENT_HIDDEN;
void table_count_free(const struct ym_live *e, uint64_t now,
		      struct ym_counts *own) AGENT_HIDDEN;
void table_count_drop(const struct ym_live *e, struct ym_counts *own) AGENT_HIDDEN;
void table_count_resize(const struct ym_live *e, uint64_t w, uint64_t wfx,
			struct ym_counts *own) AGENT_HIDDEN;
/* Plane `plane`'s entry for `stack` (not necessarily backed). */
struct ym_counts *table_plane_entry(uint32_t plane, uint32_t stack) AGENT_HIDDEN;

#endif
