/*
 * jemalloc's API, interposed (hooks_jemalloc.h); where the caller's own
 * scope is searched for its definitions, scope.h; the allocator's C++
 * operators, counted with these helpers, hooks_cxx.c.
 *
 * Not on the malloc family's fast paths: a call here costs one TLS load
 * more than the work it counts.  The accounting is hooks.c's, through the
 * same inline counters (threads.h) and slow paths (sampling.h): a block
 * from mallocx and one from malloc are the same to the estimator, and a
 * block may be allocated with one API and freed with the other.
 */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "compat.h"
#include "config.h"
#include "enter.h"
#include "giant.h"
#include "hooknames.h"
#include "hooks_jemalloc.h"
#include "hooks_mmap.h"
#include "live.h"
#include "loader.h"
#include "next.h"
#include "scope.h"
#include "sampling.h"
#include "symbols.h"
#include "threads.h"


typedef void  *(*mallocx_fn)(size_t, int);
typedef void  *(*rallocx_fn)(void *, size_t, int);
typedef size_t (*xallocx_fn)(void *, size_t, size_t, int);
typedef void   (*sdallocx_fn)(void *, size_t, int);
typedef void   (*dallocx_fn)(void *, int);

struct je_fns {
	mallocx_fn mallocx;
	rallocx_fn rallocx;
	xallocx_fn xallocx;
	sdallocx_fn sdallocx;
	dallocx_fn dallocx;
};
#define JE_N HOOKS_JE_N
const char *const hooks_je_names[JE_N] = {
	"mallocx", "rallocx", "xallocx", "sdallocx", "dallocx"
};

/* The next definitions, once found (see the header). */
static struct je_fns je;
static int je_resolved;            /* atomic: je set */
static int je_none;                /* atomic: the global scope has none */

/* The global definition of name (dlsym: the loader's lock; the
 * constructor, preloaded, asks sym_next instead): symbols.h. */
static void *global_sym(const char *name)
{
	return sym_forward(name);
}

/* The global definitions f: all or none (a partial set would mix two
 * allocators). */
void hooks_je_set(void *const f[JE_N])
{
	int found = 0;
	for (int i = 0; i < JE_N; i++)
		found += f[i] != NULL;
	if (found == JE_N) {
		memcpy(&je, f, sizeof je);
		__atomic_store_n(&je_resolved, 1, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&je_none, 1, __ATOMIC_RELEASE);
	}
}

/* The global definitions, searched once (dlsym takes the loader's lock:
 * hooks_jemalloc_resolve does it from the agent's constructor). */
void hooks_je_global(void)
{
	if (__atomic_load_n(&je_resolved, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&je_none, __ATOMIC_ACQUIRE))
		return;
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	void *f[JE_N];
	for (int i = 0; i < JE_N; i++) {
		f[i] = global_sym(hooks_je_names[i]);
		if (scope_ours(f[i]))
			f[i] = NULL;
	}
	hooks_je_set(f);
	agent_guard_leave(t);
}

/* jemalloc's functions for a call from ra: the global ones when there
 * are, else those of the caller's scope, into *local (all NULL: none
 * anywhere, the calls are emulated).  *counted: whether the calls may
 * be counted (the global ones only: a libjemalloc in a local scope is
 * not the malloc the agent measures usable sizes with). */
static const struct je_fns *je_resolve(const void *ra, struct je_fns *local,
				       int *counted)
{
	*counted = 1;
	if (likely(__atomic_load_n(&je_resolved, __ATOMIC_ACQUIRE)))
		return &je;
	hooks_je_global();
	if (__atomic_load_n(&je_resolved, __ATOMIC_ACQUIRE))
		return &je;
	*counted = 0;
	static struct scope_cache cache;
	void *f[JE_N];
	if (scope_cached(&cache, scope_gen() + 1, ra, hooks_je_names, JE_N, f) != JE_N)
		memset(f, 0, sizeof f);
	memcpy(local, f, sizeof *local);
	return local;
}
_Static_assert(sizeof(struct je_fns) == JE_N * sizeof(void *), "je_fns");
_Static_assert(JE_N <= SCOPE_MAX, "a lookup holds them");

/* Whether this call is counted (registering the thread first, as
 * hooks.c's slow path does): in the thread's own slot, else in slot 0's
 * (threads.h: thread_count_alloc_here).  0: it passes through uncounted
 * (inside the agent, before the malloc family is resolved, passive). */
int hooks_je_counting(struct agent_tls *t)
{
	if (likely(thread_fast(t) != NULL))
		return 1;
	if (t->guard || !__atomic_load_n(&agent_next.resolved, __ATOMIC_ACQUIRE))
		return 0;
	agent_guard_enter(t);
	agent_enter(t);
	agent_guard_leave(t);
	return agent_counting();
}

/* The allocator's usable size of p, under the guard: tcmalloc's
 * allocates on its first call (MallocExtension::instance calls operator
 * new), which must pass straight through. */
static size_t je_usable(struct agent_tls *t, void *p)
{
	agent_guard_enter(t);
	size_t u = agent_usable(p);
	agent_guard_leave(t);
	return u;
}

void hooks_je_count_alloc(struct agent_tls *t, void *p, size_t n)
{
	size_t u = je_usable(t, p);
	if (u < n)   /* tcmalloc's before its constructor: 0 (hooks.c) */
		u = n;
	thread_count_alloc_here(t, u, n);
	if (unlikely((t->countdown -= (int64_t)u) < 0))
		agent_take_sample(t, p, n, u);
}

static void je_count_free(struct agent_tls *t, void *p)
{
	size_t u = je_usable(t, p);
	size_t n = 0;
	if (agent_exact() || agent_filter_live_maybe(p))
		n = agent_free_sampled(t, p);
	/* tcmalloc's before its constructor: 0; the sample's request, as
	 * hooks_je_count_alloc counted it */
	thread_count_free_here(t, u ? u : n);
}

/* ---- jemalloc's flags, for the calls without jemalloc ---- */

#define JE_LG_ALIGN_MASK 0x3f
#define JE_ZERO          0x40

static size_t je_align(int flags)
{
	int lg = flags & JE_LG_ALIGN_MASK;
	return lg ? (size_t)1 << lg : 0;
}

/* As jemalloc's: NULL when n cannot be had (rounded up to the
 * alignment, n + a - 1 would wrap to a small size), errno untouched
 * (jemalloc's mallocx and rallocx never set it). */
static void *emulate_mallocx(size_t n, int flags)
{
	size_t a = je_align(flags);
	if (a > 16 && n > SIZE_MAX - (a - 1))
		return NULL;
	int saved = errno;
	void *p = a > 16 ? hook_aligned_alloc(a, (n + a - 1) & ~(a - 1)) :
			   hook_malloc(n);
	if (!p)
		errno = saved;
	else if (flags & JE_ZERO)
		memset(p, 0, n);
	return p;
}

static void *emulate_rallocx(void *p, size_t n, int flags)
{
	size_t a = je_align(flags);
	size_t old = agent_next.usable(p);
	if (a <= 16 && !(flags & JE_ZERO)) {
		int saved = errno;
		void *q = hook_realloc(p, n);
		if (!q)
			errno = saved;
		return q;
	}
	void *q = emulate_mallocx(n, flags);
	if (q) {
		memcpy(q, p, old < n ? old : n);
		hook_free(p);
	}
	return q;
}

/* ---- The hooks ---- */

/* In a hook: the code that called it. */
#define JE_CALLER __builtin_return_address(0)

EXPORT void *mallocx(size_t n, int flags)
{
	struct je_fns l;
	int counted;
	const struct je_fns *j = je_resolve(JE_CALLER, &l, &counted);
	if (!j->mallocx)
		return emulate_mallocx(n, flags);
	if (!counted)
		return j->mallocx(n, flags);
	struct agent_tls *t = &agent_tls;
	int c = hooks_je_counting(t);
	if (c && n >= agent_giant_limit) {
		agent_need_segment(t);
		agent_giant(t, n, agent_cfg.giant_fail);
		if (agent_cfg.giant_fail) {
			errno = ENOMEM;
			return NULL;
		}
	}
	void *p = j->mallocx(n, flags);
	if (p && c)
		hooks_je_count_alloc(t, p, n);
	return p;
}

EXPORT void *rallocx(void *p, size_t n, int flags)
{
	struct je_fns l;
	int counted;
	const struct je_fns *j = je_resolve(JE_CALLER, &l, &counted);
	if (!j->rallocx)
		return emulate_rallocx(p, n, flags);
	struct agent_tls *t = &agent_tls;
	if (!counted || !hooks_je_counting(t))
		return j->rallocx(p, n, flags);
	/* As hooks.c's realloc_slow: a sampled block leaves the live table
	 * before the allocator may hand its address to another thread, and
	 * keeps its stack when it moves. */
	size_t old = je_usable(t, p);
	struct ym_live e;
	int sampled = (agent_exact() || agent_filter_live_maybe(p)) &&
		      agent_realloc_take(t, p, &e);
	void *q = j->rallocx(p, n, flags);
	if (q == NULL) {
		if (sampled)
			agent_realloc_put(t, &e, p, e.size, old, old);
		return NULL;
	}
	size_t u = je_usable(t, q);
	thread_count_free_here(t, old);
	thread_count_alloc_here(t, u, n);
	if (sampled)
		agent_realloc_put(t, &e, q, n, old, u);
	else if (unlikely((t->countdown -= (int64_t)(u > old ? u - old : 0)) < 0))
		agent_take_sample(t, q, n, u);
	return q;
}

EXPORT size_t xallocx(void *p, size_t n, size_t extra, int flags)
{
	struct je_fns l;
	int counted;
	const struct je_fns *j = je_resolve(JE_CALLER, &l, &counted);
	if (!j->xallocx)   /* cannot resize in place without jemalloc */
		return agent_next.usable(p);
	struct agent_tls *t = &agent_tls;
	if (!counted || !hooks_je_counting(t))
		return j->xallocx(p, n, extra, flags);
	size_t old = je_usable(t, p);
	struct ym_live e;
	int sampled = (agent_exact() || agent_filter_live_maybe(p)) &&
		      agent_realloc_take(t, p, &e);
	size_t u = j->xallocx(p, n, extra, flags);   /* the new usable size */
	if (u != old) {
		thread_count_free_here(t, old);
		thread_count_alloc_here(t, u, n);
	}
	if (sampled)
		agent_realloc_put(t, &e, p, u != old ? n : e.size, old, u);
	else if (u > old && unlikely((t->countdown -= (int64_t)(u - old)) < 0))
		agent_take_sample(t, p, n, u);
	return u;
}

/* A free through jemalloc's API: counted (and its sample taken out)
 * before the call; 0 when there is no jemalloc (then freed here). */
int hooks_je_freeing(void *p, void *next, int counted)
{
	if (!next) {
		hook_free(p);
		return 0;
	}
	struct agent_tls *t = &agent_tls;
	if (p && counted && hooks_je_counting(t))
		je_count_free(t, p);
	return 1;
}

EXPORT void sdallocx(void *p, size_t n, int flags)
{
	struct je_fns l;
	int counted;
	const struct je_fns *j = je_resolve(JE_CALLER, &l, &counted);
	if (hooks_je_freeing(p, (void *)j->sdallocx, counted))
		j->sdallocx(p, n, flags);
}

EXPORT void dallocx(void *p, int flags)
{
	struct je_fns l;
	int counted;
	const struct je_fns *j = je_resolve(JE_CALLER, &l, &counted);
	if (hooks_je_freeing(p, (void *)j->dallocx, counted))
		j->dallocx(p, flags);
}

HIDDEN_ALIAS(mallocx);
HIDDEN_ALIAS(rallocx);
HIDDEN_ALIAS(xallocx);
HIDDEN_ALIAS(sdallocx);
HIDDEN_ALIAS(dallocx);
