/*
 * libymagent internals: the state shared by the agent's modules.
 *
 *   hooks.c    the exported malloc family: fast paths, bootstrap, guard
 *   agent.c    life cycle: configuration, segment, threads, fork, exit,
 *              modules, alarms, the sampled slow path
 *   table.c    the stack table, the live table and its filter, the lock
 *   got.c      injected mode: GOT slots rewritten to the hooks
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
	int64_t countdown;          /* bytes to the next sample; < 0: due */
	struct ym_thread *slot;     /* own slot; non-NULL enables fast paths */
	uint64_t rng;
	uint32_t guard;             /* > 0 while inside the agent */
	uint32_t state;             /* TLS_* */
	uint32_t tid;
	uint32_t epoch;             /* agent.epoch at registration */
};

extern __thread struct agent_tls agent_tls
	__attribute__((tls_model("initial-exec"))) AGENT_HIDDEN;

enum { SEG_NONE = 0, SEG_CREATING, SEG_ACTIVE, SEG_PASSIVE };

struct agent {
	struct agent_real real;
	int      resolved;          /* real.* filled in */
	int      injected;          /* dlopen'ed by ymtop -p: GOT hooks */
	int      glibc_usable;      /* real malloc is glibc's: inline usable */
	int      seg_state;         /* SEG_* (atomic) */
	uint32_t epoch;             /* bumped by fork: stale TLS re-registers */
	pid_t    pid;

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
	uint8_t           *alarms;
	struct ym_module  *modules;
	uint32_t stack_stride, alarm_stride, live_mask;

	/* Private memory (never in the segment). */
	uint32_t *index;            /* stack hash -> stack + 1 */
	uint32_t  index_mask;
	uint32_t  thread_cursor;    /* where to look for an exited slot */
	uint32_t  seen_reset;

	uintptr_t self_lo, self_hi; /* our own text: frames to drop */
	uintptr_t unw_lo, unw_hi;   /* libunwind's */

	uint32_t lock;              /* the agent's one lock (bounded spins) */

	/* Module publication: the loader's counters at the last scan. */
	unsigned long long mod_adds, mod_subs;
	uint64_t mod_checked_ns;
	uint32_t mod_scanning;      /* try-lock: one scanner at a time */
};

extern struct agent agent AGENT_HIDDEN;

/* Filter in front of the live table: a saturating counter per address
 * hash, non-zero when some live sample may hash there.  Read on every
 * free, so it is small enough (64 KiB) to stay in cache and TLB; a false
 * positive costs a lock-free probe of the live table (table_live_has). */
#define AGENT_FILTER_BITS 16
extern uint8_t *agent_filter AGENT_HIDDEN;

static inline uint32_t agent_filter_slot(const void *p)
{
	return (uint32_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ULL >>
			  (64 - AGENT_FILTER_BITS));
}

/* The allocator's usable size of a live block. */
static inline size_t agent_usable(void *p)
{
	if (likely(agent.glibc_usable)) {
		size_t sz = ((const size_t *)p)[-1];
		return (sz & ~(size_t)7) - ((sz & 2) ? 16 : 8);
	}
	return agent.real.usable(p);
}

/* Fast-path threshold: requests this large go to the slow path (giant
 * alarm).  SIZE_MAX while not active. */
extern size_t agent_giant_limit AGENT_HIDDEN;

/* ---- agent.c ---- */
int  agent_resolve(void) AGENT_HIDDEN;         /* 1 when real.* usable */
void agent_enter(struct agent_tls *t) AGENT_HIDDEN; /* init + register */
void agent_sample(struct agent_tls *t, void *p, size_t n) AGENT_HIDDEN;
void agent_free_sampled(struct agent_tls *t, void *p) AGENT_HIDDEN;
void agent_giant(struct agent_tls *t, size_t n, int failed) AGENT_HIDDEN;
/* realloc of a possibly sampled block: take its live entry out before the
 * real call (1 if it was sampled); put it back at q with size n after (q
 * NULL: the block was freed). */
int  agent_realloc_take(struct agent_tls *t, void *p, struct ym_live *e) AGENT_HIDDEN;
void agent_realloc_put(struct agent_tls *t, struct ym_live *e, void *q,
		       size_t n) AGENT_HIDDEN;
uint64_t agent_now_ns(void) AGENT_HIDDEN;
void agent_exiting(void) AGENT_HIDDEN;

/* ---- table.c ---- */
int  table_lock(uint32_t spins) AGENT_HIDDEN;  /* 1 if taken */
void table_unlock(void) AGENT_HIDDEN;
int  table_init_private(void) AGENT_HIDDEN;
void table_reset_private(void) AGENT_HIDDEN;
void table_init_segment(void) AGENT_HIDDEN;
uint32_t table_intern(const uint64_t *frames, uint32_t depth, uint32_t tid,
		      uint64_t now) AGENT_HIDDEN;
/* Lock held: */
int  table_live_insert(const struct ym_live *e) AGENT_HIDDEN;
int  table_live_remove(uint64_t addr, struct ym_live *out) AGENT_HIDDEN;
/* No lock: 0 when addr is certainly not in the live table, 1 when it may
 * be (found, or the table changed during the probe). */
int  table_live_has(uint64_t addr) AGENT_HIDDEN;
void table_reset_counters(void) AGENT_HIDDEN;
/* Counters (no lock): */
void table_count_alloc(const struct ym_live *e) AGENT_HIDDEN;
void table_count_free(const struct ym_live *e, uint64_t now) AGENT_HIDDEN;
void table_count_resize(const struct ym_live *e, uint64_t w, uint64_t wfx) AGENT_HIDDEN;

#endif
