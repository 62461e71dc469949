/*
 * jemalloc's API, interposed (hooks_jemalloc.h).
 *
 * Not on the malloc family's fast paths: a call here costs one TLS load
 * more than the work it counts.  The accounting is hooks.c's, through the
 * same inline counters (threads.h) and slow paths (sampling.h): a block
 * from mallocx and one from malloc are the same to the estimator, and a
 * block may be allocated with one API and freed with the other.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "giant.h"
#include "got.h"
#include "hooks_jemalloc.h"
#include "life.h"
#include "live.h"
#include "next.h"
#include "sampling.h"
#include "seg.h"
#include "threads.h"

#define EXPORT __attribute__((visibility("default")))

typedef void  *(*mallocx_fn)(size_t, int);
typedef void  *(*rallocx_fn)(void *, size_t, int);
typedef size_t (*xallocx_fn)(void *, size_t, size_t, int);
typedef void   (*sdallocx_fn)(void *, size_t, int);
typedef void   (*dallocx_fn)(void *, int);

/* The next definitions, found once (NULL: none; see the header). */
static struct {
	mallocx_fn mallocx;
	rallocx_fn rallocx;
	xallocx_fn xallocx;
	sdallocx_fn sdallocx;
	dallocx_fn dallocx;
	int resolved;       /* atomic */
} je;

static void je_resolve(void)
{
	if (__atomic_load_n(&je.resolved, __ATOMIC_ACQUIRE))
		return;
	struct agent_tls *t = &agent_tls;
	/* dlsym may allocate: under the guard that goes straight through. */
	agent_guard_enter(t);
	void *from = agent_injected ? RTLD_DEFAULT : RTLD_NEXT;
	void *f[5];
	static const char *const names[5] = {
		"mallocx", "rallocx", "xallocx", "sdallocx", "dallocx"
	};
	for (int i = 0; i < 5; i++) {
		f[i] = dlsym(from, names[i]);
		/* Injected, RTLD_DEFAULT may name ours when we are the only
		 * definition: then there is none to forward to. */
		if (f[i] == (void *)hook_mallocx || f[i] == (void *)hook_rallocx ||
		    f[i] == (void *)hook_xallocx || f[i] == (void *)hook_sdallocx ||
		    f[i] == (void *)hook_dallocx)
			f[i] = NULL;
	}
	/* All or none: a partial set would mix two allocators. */
	if (!f[0] || !f[1] || !f[2] || !f[3] || !f[4])
		memset(f, 0, sizeof f);
	*(void **)&je.mallocx = f[0];
	*(void **)&je.rallocx = f[1];
	*(void **)&je.xallocx = f[2];
	*(void **)&je.sdallocx = f[3];
	*(void **)&je.dallocx = f[4];
	__atomic_store_n(&je.resolved, 1, __ATOMIC_RELEASE);
	agent_guard_leave(t);
}

/* The thread's slot when this call may be counted (registering the
 * thread first, as hooks.c's slow path does), else NULL: the call passes
 * through uncounted (inside the agent, no segment, before resolution). */
static struct ym_thread *je_slot(struct agent_tls *t)
{
	struct ym_thread *s = t->fast;
	if (likely(s != NULL))
		return s;
	if (t->guard || !__atomic_load_n(&agent_next.resolved, __ATOMIC_ACQUIRE))
		return NULL;
	agent_guard_enter(t);
	agent_enter(t);
	agent_guard_leave(t);
	return agent_active() ? t->fast : NULL;
}

static void je_count_alloc(struct agent_tls *t, struct ym_thread *s, void *p,
			   size_t n)
{
	size_t u = agent_usable(p);
	thread_count_alloc(s, u, n);
	if (unlikely((t->countdown -= (int64_t)u) < 0))
		agent_sample(t, p, n, u);
}

static void je_count_free(struct agent_tls *t, struct ym_thread *s, void *p)
{
	thread_count_free(s, agent_usable(p));
	if (agent_exact() || agent_filter_live_maybe(p))
		agent_free_sampled(t, p);
}

/* ---- jemalloc's flags, for the calls without jemalloc ---- */

#define JE_LG_ALIGN_MASK 0x3f
#define JE_ZERO          0x40

static size_t je_align(int flags)
{
	int lg = flags & JE_LG_ALIGN_MASK;
	return lg ? (size_t)1 << lg : 0;
}

static void *emulate_mallocx(size_t n, int flags)
{
	size_t a = je_align(flags);
	void *p = a > 16 ? hook_aligned_alloc(a, (n + a - 1) & ~(a - 1)) :
			   hook_malloc(n);
	if (p && (flags & JE_ZERO))
		memset(p, 0, n);
	return p;
}

static void *emulate_rallocx(void *p, size_t n, int flags)
{
	size_t a = je_align(flags);
	size_t old = agent_next.usable(p);
	if (a <= 16 && !(flags & JE_ZERO))
		return hook_realloc(p, n);
	void *q = emulate_mallocx(n, flags);
	if (q) {
		memcpy(q, p, old < n ? old : n);
		hook_free(p);
	}
	return q;
}

/* ---- The hooks ---- */

EXPORT void *mallocx(size_t n, int flags)
{
	je_resolve();
	if (!je.mallocx)
		return emulate_mallocx(n, flags);
	struct agent_tls *t = &agent_tls;
	struct ym_thread *s = je_slot(t);
	if (s && n >= agent_giant_limit) {
		agent_giant(t, n, agent_cfg.giant_fail);
		if (agent_cfg.giant_fail) {
			errno = ENOMEM;
			return NULL;
		}
	}
	void *p = je.mallocx(n, flags);
	if (p && s && t->fast == s)
		je_count_alloc(t, s, p, n);
	return p;
}

EXPORT void *rallocx(void *p, size_t n, int flags)
{
	je_resolve();
	if (!je.rallocx)
		return emulate_rallocx(p, n, flags);
	struct agent_tls *t = &agent_tls;
	struct ym_thread *s = je_slot(t);
	if (!s)
		return je.rallocx(p, n, flags);
	/* As hooks.c's realloc_slow: a sampled block leaves the live table
	 * before the allocator may hand its address to another thread, and
	 * keeps its stack when it moves. */
	size_t old = agent_usable(p);
	struct ym_live e;
	int sampled = (agent_exact() || agent_filter_live_maybe(p)) &&
		      agent_realloc_take(t, p, &e);
	void *q = je.rallocx(p, n, flags);
	if (q == NULL) {
		if (sampled)
			agent_realloc_put(t, &e, p, e.size, old, old);
		return NULL;
	}
	size_t u = agent_usable(q);
	thread_count_free(s, old);
	thread_count_alloc(s, u, n);
	if (sampled)
		agent_realloc_put(t, &e, q, n, old, u);
	else if (unlikely((t->countdown -= (int64_t)(u > old ? u - old : 0)) < 0))
		agent_sample(t, q, n, u);
	return q;
}

EXPORT size_t xallocx(void *p, size_t n, size_t extra, int flags)
{
	je_resolve();
	if (!je.xallocx)   /* cannot resize in place without jemalloc */
		return agent_next.usable(p);
	struct agent_tls *t = &agent_tls;
	struct ym_thread *s = je_slot(t);
	if (!s)
		return je.xallocx(p, n, extra, flags);
	size_t old = agent_usable(p);
	struct ym_live e;
	int sampled = (agent_exact() || agent_filter_live_maybe(p)) &&
		      agent_realloc_take(t, p, &e);
	size_t u = je.xallocx(p, n, extra, flags);   /* the new usable size */
	if (u != old) {
		thread_count_free(s, old);
		thread_count_alloc(s, u, n);
	}
	if (sampled)
		agent_realloc_put(t, &e, p, u != old ? n : e.size, old, u);
	else if (u > old && unlikely((t->countdown -= (int64_t)(u - old)) < 0))
		agent_sample(t, p, n, u);
	return u;
}

EXPORT void sdallocx(void *p, size_t n, int flags)
{
	je_resolve();
	if (!je.sdallocx) {
		hook_free(p);
		return;
	}
	struct agent_tls *t = &agent_tls;
	struct ym_thread *s = p ? je_slot(t) : NULL;
	if (s)
		je_count_free(t, s, p);
	je.sdallocx(p, n, flags);
}

EXPORT void dallocx(void *p, int flags)
{
	je_resolve();
	if (!je.dallocx) {
		hook_free(p);
		return;
	}
	struct agent_tls *t = &agent_tls;
	struct ym_thread *s = p ? je_slot(t) : NULL;
	if (s)
		je_count_free(t, s, p);
	je.dallocx(p, flags);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#endif
#define HIDDEN_ALIAS(name) __typeof__(hook_##name) hook_##name \
	__attribute__((alias(#name)))
HIDDEN_ALIAS(mallocx);
HIDDEN_ALIAS(rallocx);
HIDDEN_ALIAS(xallocx);
HIDDEN_ALIAS(sdallocx);
HIDDEN_ALIAS(dallocx);
