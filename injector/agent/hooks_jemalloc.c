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
#include "sampling.h"
#include "seg.h"
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
#define JE_N 5
static const char *const je_names[JE_N] = {
	"mallocx", "rallocx", "xallocx", "sdallocx", "dallocx"
};

/* The next definitions, once found (see the header). */
static struct je_fns je;
static int je_resolved;            /* atomic: je set */
static int je_none;                /* atomic: the global scope has none */

/* ---- Definitions in the caller's scope ----
 *
 * RTLD_NEXT (and RTLD_DEFAULT, injected) search the global scope only.
 * An object dlopen'ed RTLD_LOCAL (a Python extension module, a PAM or
 * NSS module) binds its references to the global scope first, where the
 * preloaded agent is, then to its own local scope: its dependencies,
 * libstdc++ or libjemalloc among them.  When the global scope has no
 * definition, the one the caller would have bound to without us is
 * searched in the caller's local scope: it differs from caller to
 * caller, and an object may be unloaded, so the answer is kept for the
 * caller's object only until an object is loaded or unloaded
 * (scope_cached).  The global scope is searched once (dlsym takes the
 * loader's lock; the caller's scope is searched without it). */

/* Changes whenever an object is loaded or unloaded. */
static unsigned long long dl_gen(void)
{
	unsigned long long v[2];
	loader_counters(v);
	return v[0] + v[1];
}

/* Whether f is one of ours (RTLD_DEFAULT, injected, or a scope that
 * holds the agent).  Lock-free where glibc has _dl_find_object. */
static int ours(void *f)
{
	struct agent_object self;
	return f && agent_find_object((const void *)ours, &self) == 0 &&
	       (char *)f >= (char *)self.map_start &&
	       (char *)f < (char *)self.map_end;
}

/* ---- A symbol lookup that takes no lock of the loader's but
 * dl_iterate_phdr's (held only while the list of objects changes; none in a
 * fork child that must not take it, loader.h):
 * dladdr, dlopen and dlsym take the loader's lock, which a dlopen holds
 * while it runs the constructors; a constructor that starts a thread
 * and joins it would wait forever on a thread calling operator new. */

#define SCOPE_NEEDED 32

struct scope_q {
	uintptr_t ra;
	const char *const *names;
	int n;
	void **out;
	int rank[JE_N];              /* where each was found; lower wins */
	const char *needed[SCOPE_NEEDED];
	int nneeded;
	int caller;                  /* found, and not the main program */
};

static void scope_try(struct scope_q *q, const struct dl_phdr_info *info,
		      int rank)
{
	for (int k = 0; k < q->n; k++) {
		if (q->out[k] && q->rank[k] <= rank)
			continue;
		void *f = sym_lookup(info, q->names[k]);
		if (f && f != SYM_OTHER && !ours(f)) {
			q->out[k] = f;
			q->rank[k] = rank;
		}
	}
}

/* Pass 1: the caller's object: its own definitions, its DT_NEEDED. */
static int scope_caller(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct scope_q *q = arg;
	if (!sym_holds(info, q->ra))
		return 0;
	/* The main program's scope is the global one, already searched. */
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 1;
	q->caller = 1;
	q->nneeded = sym_needed(info, q->needed, SCOPE_NEEDED);
	scope_try(q, info, 0);
	return 1;
}

/* Pass 2: the caller's direct dependencies, in DT_NEEDED order; then
 * (rank SCOPE_NEEDED + 1) any object but the main program, in load
 * order, for a caller that relies on a library it does not name. */
static int scope_deps(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct scope_q *q = arg;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0;
	const char *so = sym_soname(info);
	int rank = SCOPE_NEEDED + 1;
	for (int k = 0; k < q->nneeded; k++)
		if (strcmp(q->needed[k], so) == 0) {
			rank = k + 1;
			break;
		}
	scope_try(q, info, rank);
	return 0;
}

/* names[0..n) as the object holding the code at ra would find them in
 * its own scope, into out; how many were found.  Never allocates, takes
 * no lock but dl_iterate_phdr's.  The object is executing the call, so
 * its dependencies stay loaded while it uses what is returned. */
static int scope_syms(const void *ra, const char *const *names, int n,
		      void **out)
{
	struct scope_q q = { .ra = (uintptr_t)ra, .names = names, .n = n,
			     .out = out };
	memset(out, 0, sizeof *out * (size_t)n);
	loader_iterate(scope_caller, &q);
	if (!q.caller)
		return 0;
	loader_iterate(scope_deps, &q);
	int found = 0;
	for (int k = 0; k < n; k++)
		found += out[k] != NULL;
	return found;
}

/* The global definition of name (dlsym: the loader's lock; the
 * constructor, preloaded, asks sym_next instead): symbols.h. */
static void *global_sym(const char *name)
{
	return sym_forward(name);
}

/* The last lookup in a caller's scope, for the next call from the same
 * object: valid while no object was loaded or unloaded (the object is
 * the same one, and so is its scope).  A sequence lock: odd while
 * written; a writer that finds it taken leaves the entry alone. */
struct scope_cache {
	unsigned seq;
	void *lm;                   /* the caller's link map */
	unsigned long long gen;     /* dl_gen() + 1 when found */
	void *fn[JE_N];
};

/* scope_syms, through c; g: dl_gen() + 1. */
static int scope_cached(struct scope_cache *c, unsigned long long g,
			const void *ra, const char *const *names, int n,
			void **out)
{
	struct agent_object o;   /* never allocates */
	void *lm = agent_find_object(ra, &o) == 0 ? o.link_map : NULL;
	unsigned s1 = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
	int found = 0;
	if (lm && !(s1 & 1) &&
	    __atomic_load_n(&c->lm, __ATOMIC_RELAXED) == lm &&
	    __atomic_load_n(&c->gen, __ATOMIC_RELAXED) == g) {
		for (int i = 0; i < n; i++) {
			out[i] = __atomic_load_n(&c->fn[i], __ATOMIC_RELAXED);
			found += out[i] != NULL;
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&c->seq, __ATOMIC_RELAXED) == s1)
			return found;
	}
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	found = scope_syms(ra, names, n, out);
	agent_guard_leave(t);
	if (lm && !(s1 & 1) &&
	    __atomic_compare_exchange_n(&c->seq, &s1, s1 + 1, 0,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		__atomic_store_n(&c->lm, lm, __ATOMIC_RELAXED);
		__atomic_store_n(&c->gen, g, __ATOMIC_RELAXED);
		for (int i = 0; i < n; i++)
			__atomic_store_n(&c->fn[i], out[i], __ATOMIC_RELAXED);
		__atomic_store_n(&c->seq, s1 + 2, __ATOMIC_RELEASE);
	}
	return found;
}

/* The global definitions f: all or none (a partial set would mix two
 * allocators). */
static void je_set(void *const f[JE_N])
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
static void je_global(void)
{
	if (__atomic_load_n(&je_resolved, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&je_none, __ATOMIC_ACQUIRE))
		return;
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	void *f[JE_N];
	for (int i = 0; i < JE_N; i++) {
		f[i] = global_sym(je_names[i]);
		if (ours(f[i]))
			f[i] = NULL;
	}
	je_set(f);
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
	je_global();
	if (__atomic_load_n(&je_resolved, __ATOMIC_ACQUIRE))
		return &je;
	*counted = 0;
	static struct scope_cache cache;
	void *f[JE_N];
	if (scope_cached(&cache, dl_gen() + 1, ra, je_names, JE_N, f) != JE_N)
		memset(f, 0, sizeof f);
	memcpy(local, f, sizeof *local);
	return local;
}
_Static_assert(sizeof(struct je_fns) == JE_N * sizeof(void *), "je_fns");

/* Whether this call is counted (registering the thread first, as
 * hooks.c's slow path does): in the thread's own slot, else in slot 0's
 * (threads.h: thread_count_alloc_here).  0: it passes through uncounted
 * (inside the agent, before the malloc family is resolved, passive). */
static int je_counting(struct agent_tls *t)
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

static void je_count_alloc(struct agent_tls *t, void *p, size_t n)
{
	size_t u = je_usable(t, p);
	thread_count_alloc_here(t, u, n);
	if (unlikely((t->countdown -= (int64_t)u) < 0))
		agent_take_sample(t, p, n, u);
}

static void je_count_free(struct agent_tls *t, void *p)
{
	thread_count_free_here(t, je_usable(t, p));
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
	int c = je_counting(t);
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
		je_count_alloc(t, p, n);
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
	if (!counted || !je_counting(t))
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
	if (!counted || !je_counting(t))
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
static int je_freeing(void *p, void *next, int counted)
{
	if (!next) {
		hook_free(p);
		return 0;
	}
	struct agent_tls *t = &agent_tls;
	if (p && counted && je_counting(t))
		je_count_free(t, p);
	return 1;
}

EXPORT void sdallocx(void *p, size_t n, int flags)
{
	struct je_fns l;
	int counted;
	const struct je_fns *j = je_resolve(JE_CALLER, &l, &counted);
	if (je_freeing(p, (void *)j->sdallocx, counted))
		j->sdallocx(p, n, flags);
}

EXPORT void dallocx(void *p, int flags)
{
	struct je_fns l;
	int counted;
	const struct je_fns *j = je_resolve(JE_CALLER, &l, &counted);
	if (je_freeing(p, (void *)j->dallocx, counted))
		j->dallocx(p, flags);
}

HIDDEN_ALIAS(mallocx);
HIDDEN_ALIAS(rallocx);
HIDDEN_ALIAS(xallocx);
HIDDEN_ALIAS(sdallocx);
HIDDEN_ALIAS(dallocx);

/* ---- C++ operator new and delete of the allocator itself ----
 *
 * jemalloc, tcmalloc and mimalloc define operator new and delete (sized
 * and aligned deletes included) that call their allocator directly, never
 * through malloc's PLT slot: without these hooks a C++ program using them
 * would be invisible.  Each operator is forwarded to the next definition;
 * when that lies in the object of the malloc the agent forwards to, the
 * call is counted as malloc's and free's are (and sampled); otherwise
 * (libstdc++'s, which calls malloc and free) it is a tail call, counted
 * where it lands.  (Checked: with glibc, libstdc++'s sized delete
 * _ZdlPvm reaches free; with Debian's libjemalloc2 it is jemalloc's own,
 * which frees inside jemalloc.) */

enum { CX_UNKNOWN = 0, CX_PLAIN, CX_OWN };
static int cx_mode;                /* atomic */
static int cx_found;               /* atomic: cx_fn[] set */

#define CX_NAMES(X)                                                         \
	X(0, _Znwm) X(1, _Znam) X(2, _ZnwmRKSt9nothrow_t)                   \
	X(3, _ZnamRKSt9nothrow_t) X(4, _ZnwmSt11align_val_t)                \
	X(5, _ZnamSt11align_val_t) X(6, _ZnwmSt11align_val_tRKSt9nothrow_t) \
	X(7, _ZnamSt11align_val_tRKSt9nothrow_t) X(8, _ZdlPv) X(9, _ZdaPv)  \
	X(10, _ZdlPvm) X(11, _ZdaPvm) X(12, _ZdlPvRKSt9nothrow_t)           \
	X(13, _ZdaPvRKSt9nothrow_t) X(14, _ZdlPvSt11align_val_t)            \
	X(15, _ZdaPvSt11align_val_t) X(16, _ZdlPvmSt11align_val_t)          \
	X(17, _ZdaPvmSt11align_val_t)                                       \
	X(18, _ZdlPvSt11align_val_tRKSt9nothrow_t)                          \
	X(19, _ZdaPvSt11align_val_tRKSt9nothrow_t)
#define CX_N 20
static void *cx_fn[CX_N];


/* The next definitions (once found in the global scope), then whose they
 * are (once the malloc family is resolved). */
static void cx_set(void *const f[CX_N])
{
	for (int i = 0; i < CX_N; i++)
		__atomic_store_n(&cx_fn[i], f[i], __ATOMIC_RELAXED);
	__atomic_store_n(&cx_found, 1, __ATOMIC_RELEASE);
}

static __attribute__((noinline)) int cx_resolve(void)
{
	struct agent_tls *t = &agent_tls;
	if (!__atomic_load_n(&cx_found, __ATOMIC_ACQUIRE)) {
		agent_guard_enter(t);
		/* Once: dlsym takes the loader's lock (see scope_syms).
		 * Those it finds none of, each call finds in its
		 * caller's scope (cx_local). */
		void *f[CX_N];
		for (int i = 0; i < CX_N; i++) {
			f[i] = global_sym(hooks_cxx_names[i]);
			if (ours(f[i]))   /* RTLD_DEFAULT, injected */
				f[i] = NULL;
		}
		cx_set(f);
		agent_guard_leave(t);
	}
	int mode = __atomic_load_n(&cx_mode, __ATOMIC_ACQUIRE);
	if (mode == CX_UNKNOWN && cx_fn[0]) {
		int own = hooks_in_allocator((uintptr_t)cx_fn[0]);
		if (own >= 0) {
			mode = own ? CX_OWN : CX_PLAIN;
			__atomic_store_n(&cx_mode, mode, __ATOMIC_RELEASE);
		}
	}
	return mode;
}

/* Operator i as the caller at ra would bind it without us, when the
 * global scope has none: its own scope's (an object dlopen'ed
 * RTLD_LOCAL with libstdc++ among its dependencies).  A tail call,
 * never counted: whatever it calls is counted where it lands. */
static __attribute__((noinline)) void *cx_local(unsigned i, const void *ra)
{
	static struct scope_cache cache[CX_N];
	void *f;
	scope_cached(&cache[i], dl_gen() + 1, ra, &hooks_cxx_names[i], 1, &f);
	return f;
}

/* The last resort, with no definition anywhere (cannot happen in a
 * program that calls these: its reference would be unresolved): the
 * malloc family, alignment honoured. */
static void *cx_last_new(size_t n, size_t al)
{
	if (n == 0)
		n = 1;
	if (al <= 16)
		return hook_malloc(n);
	void *p;
	return hook_posix_memalign(&p, al, n) == 0 ? p : NULL;
}

/* The allocator's operator new returned p for n bytes: count it. */
static __attribute__((noinline)) void *cx_counted_new(void *p, size_t n)
{
	struct agent_tls *t = &agent_tls;
	if (p && je_counting(t))
		je_count_alloc(t, p, n);
	return p;
}

/* The allocator's operator delete is about to free p: count it. */
static __attribute__((noinline)) void cx_counted_delete(void *p)
{
	(void)je_freeing(p, (void *)cx_counted_delete, 1);
}

/* Called from inside the allocator's own object (tcmalloc's and
 * mimalloc's internals use their operator new through the PLT): its own
 * bookkeeping, never counted, as its malloc from inside is not (a macro:
 * the return address of the operator itself). */
#define cx_inside() \
	(hooks_in_allocator((uintptr_t)__builtin_return_address(0)) == 1)

/* A new: the plain case is one load, a compare and a tail call.  With no
 * global definition, the caller's scope's (cx_local); with none at all,
 * the malloc family (cx_last_new). */
#define CX_NEW(i, name, params, args, n, al)                                 \
	EXPORT void *name params                                             \
	{                                                                    \
		typedef void *(*fn_t) params;                                \
		fn_t f = (fn_t)__atomic_load_n(&cx_fn[i], __ATOMIC_RELAXED); \
		if (likely(__atomic_load_n(&cx_mode, __ATOMIC_RELAXED) == CX_PLAIN && f)) \
			return f args;                                       \
		int mode = cx_resolve();                                     \
		f = (fn_t)__atomic_load_n(&cx_fn[i], __ATOMIC_RELAXED);      \
		if (!f) {                                                    \
			f = (fn_t)cx_local(i, __builtin_return_address(0));  \
			return f ? f args : cx_last_new(n, al);              \
		}                                                            \
		if (mode != CX_OWN || cx_inside())                           \
			return f args;                                       \
		return cx_counted_new(f args, n);                            \
	}

#define CX_DELETE(i, name, params, args, p)                                  \
	EXPORT void name params                                              \
	{                                                                    \
		typedef void (*fn_t) params;                                 \
		fn_t f = (fn_t)__atomic_load_n(&cx_fn[i], __ATOMIC_RELAXED); \
		if (likely(__atomic_load_n(&cx_mode, __ATOMIC_RELAXED) == CX_PLAIN && f)) { \
			f args;                                              \
			return;                                              \
		}                                                            \
		int mode = cx_resolve();                                     \
		f = (fn_t)__atomic_load_n(&cx_fn[i], __ATOMIC_RELAXED);      \
		if (!f) {                                                    \
			f = (fn_t)cx_local(i, __builtin_return_address(0));  \
			if (f)                                               \
				f args;                                      \
			else                                                 \
				hook_free(p);                                \
			return;                                              \
		}                                                            \
		if (mode == CX_OWN && !cx_inside())                          \
			cx_counted_delete(p);                                \
		f args;                                                      \
	}

#undef X
typedef const void *nothrow_ref;   /* const std::nothrow_t & */

CX_NEW(0, _Znwm, (size_t n), (n), n, 0)
CX_NEW(1, _Znam, (size_t n), (n), n, 0)
CX_NEW(2, _ZnwmRKSt9nothrow_t, (size_t n, nothrow_ref nt), (n, nt), n, 0)
CX_NEW(3, _ZnamRKSt9nothrow_t, (size_t n, nothrow_ref nt), (n, nt), n, 0)
CX_NEW(4, _ZnwmSt11align_val_t, (size_t n, size_t al), (n, al), n, al)
CX_NEW(5, _ZnamSt11align_val_t, (size_t n, size_t al), (n, al), n, al)
CX_NEW(6, _ZnwmSt11align_val_tRKSt9nothrow_t, (size_t n, size_t al, nothrow_ref nt),
       (n, al, nt), n, al)
CX_NEW(7, _ZnamSt11align_val_tRKSt9nothrow_t, (size_t n, size_t al, nothrow_ref nt),
       (n, al, nt), n, al)
CX_DELETE(8, _ZdlPv, (void *p), (p), p)
CX_DELETE(9, _ZdaPv, (void *p), (p), p)
CX_DELETE(10, _ZdlPvm, (void *p, size_t n), (p, n), p)
CX_DELETE(11, _ZdaPvm, (void *p, size_t n), (p, n), p)
CX_DELETE(12, _ZdlPvRKSt9nothrow_t, (void *p, nothrow_ref nt), (p, nt), p)
CX_DELETE(13, _ZdaPvRKSt9nothrow_t, (void *p, nothrow_ref nt), (p, nt), p)
CX_DELETE(14, _ZdlPvSt11align_val_t, (void *p, size_t al), (p, al), p)
CX_DELETE(15, _ZdaPvSt11align_val_t, (void *p, size_t al), (p, al), p)
CX_DELETE(16, _ZdlPvmSt11align_val_t, (void *p, size_t n, size_t al), (p, n, al), p)
CX_DELETE(17, _ZdaPvmSt11align_val_t, (void *p, size_t n, size_t al), (p, n, al), p)
CX_DELETE(18, _ZdlPvSt11align_val_tRKSt9nothrow_t, (void *p, size_t al, nothrow_ref nt),
	  (p, al, nt), p)
CX_DELETE(19, _ZdaPvSt11align_val_tRKSt9nothrow_t, (void *p, size_t al, nothrow_ref nt),
	  (p, al, nt), p)

void hooks_jemalloc_resolve(void)
{
	if (agent_slots) {
		je_global();
		(void)cx_resolve();
		return;
	}
	/* Preloaded: every name in one walk of the objects after ours
	 * (symbols.h); dlsym only for a definition that is not a plain
	 * function. */
	const char *names[JE_N + CX_N];
	void *f[JE_N + CX_N];
	memcpy(names, je_names, sizeof je_names);
	memcpy(names + JE_N, hooks_cxx_names, sizeof *names * CX_N);
	sym_next(names, JE_N + CX_N, f);
	for (int k = 0; k < JE_N + CX_N; k++) {
		if (f[k] == SYM_OTHER) {
			f[k] = global_sym(names[k]);
			if (ours(f[k]))
				f[k] = NULL;
		}
		/* Check builds: the walk agrees with the loader. */
		YM_ASSERT(f[k] == (ours(global_sym(names[k])) ? NULL :
				   global_sym(names[k])));
	}
	je_set(f);
	cx_set(f + JE_N);
	(void)cx_resolve();   /* whose they are */
}

/* got.c's list: the operators by name, with their definitions here. */
const char *const hooks_cxx_names[HOOKS_CXX_N] = {
#define X(i, name) [i] = #name,
	CX_NAMES(X)
#undef X
};

/* Hidden names of the operators: their addresses never go through our
 * GOT, which in a dlopen'ed agent binds them to the process's (hooknames.h). */
#define X(i, name) extern __typeof__(name) cxhook_##name \
	__attribute__((alias(#name), visibility("hidden")));
CX_NAMES(X)
#undef X

void *hooks_cxx_fn(unsigned i)
{
	static void *const fns[CX_N] = {
#define X(i, name) [i] = (void *)cxhook_##name,
		CX_NAMES(X)
#undef X
	};
	return i < CX_N ? fns[i] : NULL;
}
_Static_assert(CX_N == HOOKS_CXX_N, "operators counted");
