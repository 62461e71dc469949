/*
 * The pymalloc wrapper (hooks_py.h).
 *
 * State, this file's: the interpreter's allocators the wrapper calls
 * (orig, orig_arena: written once, in the pending call, with the GIL held,
 * before the wrapper is installed; every caller takes the GIL after that),
 * and the wrapper structures handed to the interpreter.  None is ever
 * cleared: a block allocated through the wrapper may be freed through it
 * at any later time, also after pymalloc_unhook (a wrapper installed on
 * top of ours keeps calling it).
 */
#include "hooks_py.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

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

static struct py_alloc orig[3];
static struct py_arena orig_arena;

static inline int small_request(size_t n)
{
	return n - 1 < PY_SMALL;
}

/* The countdown charged with a small request when the thread may take
 * the fast path: 1 when a sample is due. */
static inline int due(struct agent_tls *t, size_t n)
{
	if (!small_request(n) || !thread_fast(t))
		return 0;
	t->countdown -= (int64_t)n;
	return unlikely(t->countdown < 0);
}

static NOINLINE void *sample_due(struct agent_tls *t, void *p, size_t n)
{
	if (p)
		agent_take_sample(t, p, n, n);
	return p;
}

/* Fast path: the TLS load, the size test, the countdown (as malloc's),
 * then the interpreter's allocator. */
static void *w_malloc(void *ctx, size_t n)
{
	const struct py_alloc *o = ctx;
	struct agent_tls *t = &agent_tls;
	if (unlikely(due(t, n)))
		return sample_due(t, o->malloc(o->ctx, n), n);
	return o->malloc(o->ctx, n);
}

static void *w_calloc(void *ctx, size_t a, size_t b)
{
	const struct py_alloc *o = ctx;
	struct agent_tls *t = &agent_tls;
	size_t n;
	if (!__builtin_mul_overflow(a, b, &n) && unlikely(due(t, n)))
		return sample_due(t, o->calloc(o->ctx, a, b), n);
	return o->calloc(o->ctx, a, b);
}

/* The filter said p may be a sample (or p is NULL). */
static NOINLINE void free_other(const struct py_alloc *o, void *p)
{
	struct agent_tls *t = &agent_tls;
	if (p && thread_fast(t) && (agent_exact() || agent_filter_live_maybe(p)))
		agent_free_sampled(t, p);
	o->free(o->ctx, p);
}

/* Fast path: the filter's bit test, then a tail call (no frame). */
static void w_free(void *ctx, void *p)
{
	const struct py_alloc *o = ctx;
	if (unlikely(agent_filter_maybe(p))) {
		free_other(o, p);
		return;
	}
	o->free(o->ctx, p);
}

/* p may be a sample: the wrapper's own (a small request) leaves the
 * sample, and the call is an allocation of n; malloc's goes back as it
 * was, for the realloc hook that pymalloc's call reaches. */
static NOINLINE void *realloc_other(const struct py_alloc *o,
				    struct agent_tls *t, void *p, size_t n)
{
	struct ym_live e;
	if (p && thread_fast(t) && (agent_exact() || agent_filter_live_maybe(p)) &&
	    agent_realloc_take(t, p, &e)) {
		if (!small_request(e.size)) {
			agent_realloc_put(t, &e, p, e.size, e.size, e.size);
			return o->realloc(o->ctx, p, n);
		}
		agent_realloc_put(t, &e, NULL, 0, 0, 0);
	}
	if (unlikely(due(t, n)))
		return sample_due(t, o->realloc(o->ctx, p, n), n);
	return o->realloc(o->ctx, p, n);
}

static void *w_realloc(void *ctx, void *p, size_t n)
{
	const struct py_alloc *o = ctx;
	struct agent_tls *t = &agent_tls;
	if (unlikely(agent_filter_maybe(p)))
		return realloc_other(o, t, p, n);
	if (unlikely(due(t, n)))
		return sample_due(t, o->realloc(o->ctx, p, n), n);
	return o->realloc(o->ctx, p, n);
}

static struct py_alloc ours[3] = {
	[DOMAIN_MEM] = { &orig[DOMAIN_MEM], w_malloc, w_calloc, w_realloc, w_free },
	[DOMAIN_OBJ] = { &orig[DOMAIN_OBJ], w_malloc, w_calloc, w_realloc, w_free },
};

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

int pyhook_install(void *arg)
{
	(void)arg;
	/* Claimed first: pymalloc_unhook may turn a queued call off. */
	if (!python_hook_cas(YM_PYHOOK_PENDING, YM_PYHOOK_ON))
		return 0;
	struct py_alloc raw, cur;
	python_mem.get(DOMAIN_RAW, &raw);
	int wrapped = 0;
	for (int d = DOMAIN_MEM; d <= DOMAIN_OBJ; d++) {
		python_mem.get(d, &cur);
		/* The raw domain's allocator is malloc (or a wrapper of it,
		 * PYTHONMALLOC=malloc_debug): nothing hidden from the malloc
		 * hooks. */
		if (cur.malloc == raw.malloc || cur.malloc == w_malloc)
			continue;
		orig[d] = cur;
		python_mem.set(d, &ours[d]);
		wrapped++;
	}
	if (wrapped) {
		python_mem.get_arena(&orig_arena);
		python_mem.set_arena(&ours_arena);
	}
	python_hook_set(wrapped ? YM_PYHOOK_ON : YM_PYHOOK_MALLOC);
	return 0;
}

static int uninstall(void *arg)
{
	(void)arg;
	if (python_hook_state() != YM_PYHOOK_ON)
		return 0;
	int stuck = 0;
	struct py_alloc cur;
	for (int d = DOMAIN_MEM; d <= DOMAIN_OBJ; d++) {
		if (!orig[d].malloc)
			continue;
		python_mem.get(d, &cur);
		if (cur.malloc == w_malloc && cur.ctx == &orig[d])
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
