/*
 * jemalloc's API and the allocator's C++ operators, interposed
 * (hooks_jemalloc.h); where the caller's own scope is searched for their
 * definitions, scope.h.
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
#define JE_N 5
static const char *const je_names[JE_N] = {
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
		if (scope_ours(f[i]))
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
	if (scope_cached(&cache, scope_gen() + 1, ra, je_names, JE_N, f) != JE_N)
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
			if (scope_ours(f[i]))   /* RTLD_DEFAULT, injected */
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
	scope_cached(&cache[i], scope_gen() + 1, ra, &hooks_cxx_names[i], 1, &f);
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
			if (scope_ours(f[k]))
				f[k] = NULL;
		}
		/* Check builds: the walk agrees with the loader. */
		YM_ASSERT(f[k] == (scope_ours(global_sym(names[k])) ? NULL :
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
