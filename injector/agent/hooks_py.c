/*
 * The pymalloc wrapper (hooks_py.h).
 *
 * State, this file's: the interpreter's allocators the wrapper calls
 * (orig, orig_arena: written once, in the pending call, with the GIL held,
 * before the wrapper is installed; every caller takes the GIL after that),
 * and the wrapper structures handed to the interpreter.  None is ever
 * cleared: a wrapper installed on top of ours (tracemalloc started after
 * the agent) keeps calling it after pymalloc_unhook.  Blocks allocated
 * through the wrapper are the interpreter's or malloc's own and need
 * nothing of the agent to be freed.
 */
#include "hooks_py.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "enter.h"
#include "live.h"
#include "python.h"
#include "sampling.h"
#include "threads.h"
#include "ymtop/segment.h"

#define NOINLINE __attribute__((noinline))

/* CPython's PyMemAllocatorEx and PyObjectArenaAllocator (stable since
 * 3.5). */
struct py_alloc {
	void *ctx;
	void *(*malloc)(void *ctx, size_t n);
	void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
	void *(*realloc)(void *ctx, void *p, size_t n);
	void  (*free)(void *ctx, void *p);
};
struct py_arena {
	void *ctx;
	void *(*alloc)(void *ctx, size_t n);
	void  (*free)(void *ctx, void *p, size_t n);
};
enum { DOMAIN_RAW = 0, DOMAIN_MEM = 1, DOMAIN_OBJ = 2 };

/* pymalloc's SMALL_REQUEST_THRESHOLD (3.11-3.13): requests of 1..512
 * bytes are its own, 0 and larger ones go to malloc. */
#define PY_SMALL 512u

static struct py_alloc orig[3];   /* [RAW]: where sampled blocks come from */
static struct py_arena orig_arena;

static inline int small_request(size_t n)
{
	return n - 1 < PY_SMALL;
}

/* Charge the thread's countdown with a request of n bytes: 1 when it
 * ran out.  Only the requests pymalloc serves itself (1..512 bytes) are
 * charged here: it hands 0 and larger ones to malloc, whose hook charges
 * them, and a request charged by both would be sampled at twice its
 * chance while weighed at the rate once.  The thread's gate is on the
 * due path only (due_ours), which takes the charge back when the thread
 * is off its fast path.  In uint64_t as the malloc hooks' (hooks.c). */
static inline int charge(struct agent_tls *t, size_t n)
{
	if (!small_request(n))
		return 0;
	t->countdown = (int64_t)((uint64_t)t->countdown - (uint64_t)n);
	return unlikely(t->countdown < 0);
}

/* The countdown ran out on a small request: 1 when the wrapper samples
 * it (a thread on its fast path).  Otherwise the charge is taken back,
 * the countdown is as it was, and the interpreter's allocator serves the
 * request; a thread off its fast path (not registered yet, forking)
 * samples nothing. */
static inline int due_ours(struct agent_tls *t, size_t n)
{
	if (thread_fast(t))
		return 1;
	t->countdown = (int64_t)((uint64_t)t->countdown + (uint64_t)n);
	return 0;
}

/* A due request of n bytes: served by the raw domain's allocator
 * (malloc), with the guard held so that the malloc hooks pass it through
 * uncounted, then counted and sampled here.  pymalloc's free and realloc
 * send a block that is not in their arenas to the raw domain: its free
 * reaches the free hook, which takes it out of the sample, so the wrapper
 * needs no free of its own (sys.getallocatedblocks() reads one less for
 * each such block freed). */
static NOINLINE void *alloc_sampled(struct agent_tls *t, size_t a, size_t n,
				    int zero)
{
	const struct py_alloc *r = &orig[DOMAIN_RAW];
	agent_guard_enter(t);
	void *p = zero ? r->calloc(r->ctx, a, n / a) : r->malloc(r->ctx, n);
	int saved = errno;
	agent_guard_leave(t);
	errno = saved;
	if (p) {
		struct ym_thread *s = thread_fast(t);
		if (s)
			thread_count_call(s, n);
		agent_take_sample(t, p, n, n);
	}
	return p;
}

/* A due realloc: the interpreter's, then the block moved to one of the
 * raw domain's (at most 512 bytes copied), sampled. */
static void *realloc_sampled(const struct py_alloc *o, struct agent_tls *t,
			     void *p, size_t n)
{
	void *q = o->realloc(o->ctx, p, n);
	if (!q)
		return q;
	void *r = alloc_sampled(t, 1, n, 0);
	if (!r)
		return q;   /* stays unsampled */
	memcpy(r, q, n);
	o->free(o->ctx, q);
	return r;
}

/* A realloc that is not due of a block the live filter says may be a
 * sample.  Each realloc of a small request (1..512 bytes) is charged its
 * whole request n and, when due, draws the block afresh (realloc_sampled:
 * weighed at n/p(n), sample.h); a block pymalloc moves out of its pools
 * (grown past 512 bytes) is malloc'd anew, charged its whole request by
 * malloc's hook.  So a sample that meets either must leave the sample
 * here: carried on by malloc's realloc hook (it is a block of the raw
 * domain) it would keep every chance it had at every realloc before, and
 * a list or bytearray grown by appends would show at the sum of its sizes
 * over its last size (2 to 4 times tracemalloc's figure below 512 bytes,
 * 1.2 times for one grown from 37 bytes to 1.5 KiB).  It leaves by a move
 * to a block of the interpreter's (at most 512 bytes copied: the smaller
 * of the sample's request, known from its entry, and n), and its free.
 * A sample of malloc's (a request of more than 512 bytes) realloc'd to
 * more than 512 bytes is malloc's realloc hook's, which charges its
 * growth; a block that is no sample (the filter's false positive) is the
 * interpreter's realloc as usual. */
static NOINLINE void *realloc_kept(const struct py_alloc *o, void *ctx,
				   void *p, size_t n)
{
	struct agent_tls *t = &agent_tls;
	struct ym_live e;
	if (!thread_fast(t) || !agent_realloc_take(t, p, &e))
		return o->realloc(ctx, p, n);
	void *q = NULL;
	if (small_request(n) || small_request((size_t)e.size))
		q = o->malloc(ctx, n);
	if (!q) {   /* as it was: malloc's realloc hook's */
		agent_realloc_put(t, &e, p, (size_t)e.size, 0, 0);
		return o->realloc(ctx, p, n);
	}
	memcpy(q, p, e.size < n ? (size_t)e.size : n);
	agent_realloc_put(t, &e, NULL, 0, 0, 0);
	o->free(ctx, p);   /* not pymalloc's: to the raw domain's free */
	return q;
}

/* The due paths of the wrappers below (o: the domain's allocator). */
static NOINLINE void *malloc_due(const struct py_alloc *o, void *ctx, size_t n)
{
	struct agent_tls *t = &agent_tls;
	if (due_ours(t, n))
		return alloc_sampled(t, 1, n, 0);
	return o->malloc(ctx, n);
}

static NOINLINE void *calloc_due(const struct py_alloc *o, void *ctx,
				 size_t a, size_t b, size_t n)
{
	struct agent_tls *t = &agent_tls;
	if (due_ours(t, n))
		return alloc_sampled(t, a, n, 1);   /* n >= 1: a >= 1 */
	return o->calloc(ctx, a, b);
}

static NOINLINE void *realloc_due(const struct py_alloc *o, void *ctx,
				  void *p, size_t n)
{
	struct agent_tls *t = &agent_tls;
	if (due_ours(t, n))
		return realloc_sampled(o, t, p, n);
	return o->realloc(ctx, p, n);
}

/* Fast paths, one set a domain (no context to load): the size test,
 * the TLS address, the countdown charged and tested, a tail call to the
 * interpreter's allocator (7 instructions for malloc and 16 for realloc,
 * which tests the live filter's bit of the block too (realloc_kept), on
 * x86-64, gcc, tests/integration/test_python.py).  The thread's gate is
 * on the due path, about one call in YM_SAMPLE_RATE / (mean request)
 * (charge above).  free is the interpreter's own. */
#define WRAP(D)                                                               \
static void *w_malloc_##D(void *ctx, size_t n)                                \
{                                                                             \
	if (charge(&agent_tls, n))                                            \
		return malloc_due(&orig[D], ctx, n);                          \
	return orig[D].malloc(ctx, n);                                        \
}                                                                             \
static void *w_calloc_##D(void *ctx, size_t a, size_t b)                      \
{                                                                             \
	size_t n;                                                             \
	if (!__builtin_mul_overflow(a, b, &n) && charge(&agent_tls, n))       \
		return calloc_due(&orig[D], ctx, a, b, n);                    \
	return orig[D].calloc(ctx, a, b);                                     \
}                                                                             \
static void *w_realloc_##D(void *ctx, void *p, size_t n)                      \
{                                                                             \
	if (charge(&agent_tls, n))                                            \
		return realloc_due(&orig[D], ctx, p, n);                      \
	if (agent_filter_live_maybe(p))                                       \
		return realloc_kept(&orig[D], ctx, p, n);                     \
	return orig[D].realloc(ctx, p, n);                                    \
}
WRAP(DOMAIN_MEM)
WRAP(DOMAIN_OBJ)

static void *(*const w_malloc[3])(void *, size_t) = {
	[DOMAIN_MEM] = w_malloc_DOMAIN_MEM, [DOMAIN_OBJ] = w_malloc_DOMAIN_OBJ,
};
static void *(*const w_calloc[3])(void *, size_t, size_t) = {
	[DOMAIN_MEM] = w_calloc_DOMAIN_MEM, [DOMAIN_OBJ] = w_calloc_DOMAIN_OBJ,
};
static void *(*const w_realloc[3])(void *, void *, size_t) = {
	[DOMAIN_MEM] = w_realloc_DOMAIN_MEM, [DOMAIN_OBJ] = w_realloc_DOMAIN_OBJ,
};
static struct py_alloc ours[3];

/* Arenas: mapped and unmapped with the guard held (the mmap hooks pass
 * them through): their objects are sampled one by one. */
static void *w_arena_alloc(void *ctx, size_t n)
{
	const struct py_arena *o = ctx;
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	void *p = o->alloc(o->ctx, n);
	int saved = errno;
	agent_guard_leave(t);
	errno = saved;
	return p;
}

static void w_arena_free(void *ctx, void *p, size_t n)
{
	const struct py_arena *o = ctx;
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	o->free(o->ctx, p, n);
	agent_guard_leave(t);
}

static struct py_arena ours_arena = { &orig_arena, w_arena_alloc, w_arena_free };

/* The interpreter's debug hooks (PYTHONMALLOC=pymalloc_debug or
 * malloc_debug, python -X dev) in force: 1 for pymalloc's, 2 for
 * malloc's, else 0.  Their free checks a header of the domain's own that
 * a block of the raw domain does not have (a sampled object freed by the
 * interpreter would abort it: "bad ID"), so the wrapper stays off under
 * pymalloc's; under malloc's every object reaches malloc. */
static int debug_hooks(void)
{
	const char *nm = python_mem.name ? python_mem.name() : NULL;
	if (!nm)
		return 0;
	if (strcmp(nm, "pymalloc_debug") == 0)
		return 1;
	if (strcmp(nm, "malloc_debug") == 0)
		return 2;
	return 0;
}

static void install(void)
{
	/* Claimed first: pymalloc_unhook may turn a queued call off. */
	if (!python_hook_cas(YM_PYHOOK_PENDING, YM_PYHOOK_ON))
		return;
	int dbg = debug_hooks();
	if (dbg) {
		python_hook_set(dbg == 1 ? YM_PYHOOK_OFF : YM_PYHOOK_MALLOC);
		return;
	}
	struct py_alloc cur;
	python_mem.get(DOMAIN_RAW, &orig[DOMAIN_RAW]);
	int wrapped = 0;
	for (int d = DOMAIN_MEM; d <= DOMAIN_OBJ; d++) {
		python_mem.get(d, &cur);
		/* The raw domain's allocator is malloc (or a wrapper of it,
		 * PYTHONMALLOC=malloc_debug): nothing hidden from the malloc
		 * hooks. */
		if (cur.malloc == orig[DOMAIN_RAW].malloc || cur.malloc == w_malloc[d])
			continue;
		orig[d] = cur;
		ours[d] = (struct py_alloc){ cur.ctx, w_malloc[d], w_calloc[d],
					     w_realloc[d], cur.free };
		python_mem.set(d, &ours[d]);
		wrapped++;
	}
	if (wrapped) {
		python_mem.get_arena(&orig_arena);
		python_mem.set_arena(&ours_arena);
	}
	python_hook_set(wrapped ? YM_PYHOOK_ON : YM_PYHOOK_MALLOC);
}

int pyhook_install(void *arg)
{
	(void)arg;
	install();
	python_pending_done();
	return 0;
}

static void remove_wrapper(void)
{
	if (python_hook_state() != YM_PYHOOK_ON)
		return;
	int stuck = 0;
	struct py_alloc cur;
	for (int d = DOMAIN_MEM; d <= DOMAIN_OBJ; d++) {
		if (!ours[d].malloc)
			continue;
		python_mem.get(d, &cur);
		if (cur.malloc == w_malloc[d])
			python_mem.set(d, &orig[d]);
		else
			stuck = 1;
	}
	struct py_arena a;
	python_mem.get_arena(&a);
	if (a.alloc == w_arena_alloc && a.ctx == &orig_arena)
		python_mem.set_arena(&orig_arena);
	else
		stuck = 1;
	if (!stuck)
		python_hook_set(YM_PYHOOK_OFF);
}

static int uninstall(void *arg)
{
	(void)arg;
	remove_wrapper();
	python_pending_done();
	return 0;
}

uint32_t pymalloc_unhook(void)
{
	/* Not installed yet: a queued installer finds OFF and does
	 * nothing. */
	if (!python_hook_cas(YM_PYHOOK_WAITING, YM_PYHOOK_OFF) &&
	    !python_hook_cas(YM_PYHOOK_PENDING, YM_PYHOOK_OFF) &&
	    python_hook_state() == YM_PYHOOK_ON)
		python_pending(uninstall);
	return python_hook_state();
}

int pymalloc_unloadable(void)
{
	uint32_t s = python_hook_state();
	return s != YM_PYHOOK_ON && python_pending_outstanding() == 0;
}
