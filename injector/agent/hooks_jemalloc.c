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
#include "hooks_mmap.h"
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

static void je_count_alloc(struct agent_tls *t, struct ym_thread *s, void *p,
			   size_t n)
{
	size_t u = je_usable(t, p);
	thread_count_alloc(s, u, n);
	if (unlikely((t->countdown -= (int64_t)u) < 0))
		agent_sample(t, p, n, u);
}

static void je_count_free(struct agent_tls *t, struct ym_thread *s, void *p)
{
	thread_count_free(s, je_usable(t, p));
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
	size_t old = je_usable(t, p);
	struct ym_live e;
	int sampled = (agent_exact() || agent_filter_live_maybe(p)) &&
		      agent_realloc_take(t, p, &e);
	void *q = je.rallocx(p, n, flags);
	if (q == NULL) {
		if (sampled)
			agent_realloc_put(t, &e, p, e.size, old, old);
		return NULL;
	}
	size_t u = je_usable(t, q);
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
	size_t old = je_usable(t, p);
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

/* A free through jemalloc's API: counted (and its sample taken out)
 * before the call; 0 when there is no jemalloc (then freed here). */
static int je_freeing(void *p, void *next)
{
	if (!next) {
		hook_free(p);
		return 0;
	}
	struct agent_tls *t = &agent_tls;
	struct ym_thread *s = p ? je_slot(t) : NULL;
	if (s)
		je_count_free(t, s, p);
	return 1;
}

EXPORT void sdallocx(void *p, size_t n, int flags)
{
	je_resolve();
	if (je_freeing(p, (void *)je.sdallocx))
		je.sdallocx(p, n, flags);
}

EXPORT void dallocx(void *p, int flags)
{
	je_resolve();
	if (je_freeing(p, (void *)je.dallocx))
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

/* The next definitions (once), then whose they are (once the malloc
 * family is resolved). */
static __attribute__((noinline)) int cx_resolve(void)
{
	struct agent_tls *t = &agent_tls;
	if (!__atomic_load_n(&cx_found, __ATOMIC_ACQUIRE)) {
		static const char *const names[CX_N] = {
#define X(i, name) [i] = #name,
			CX_NAMES(X)
#undef X
		};
		agent_guard_enter(t);
		void *from = agent_injected ? RTLD_DEFAULT : RTLD_NEXT;
		Dl_info self, other;
		int know = dladdr((void *)cx_resolve, &self) != 0;
		for (int i = 0; i < CX_N; i++) {
			void *f = dlsym(from, names[i]);
			/* Never our own (RTLD_DEFAULT, injected). */
			if (f && know && dladdr(f, &other) &&
			    other.dli_fbase == self.dli_fbase)
				f = NULL;
			__atomic_store_n(&cx_fn[i], f, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&cx_found, 1, __ATOMIC_RELEASE);
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

/* The allocator's operator new returned p for n bytes: count it. */
static __attribute__((noinline)) void *cx_counted_new(void *p, size_t n)
{
	struct agent_tls *t = &agent_tls;
	struct ym_thread *s = p ? je_slot(t) : NULL;
	if (s)
		je_count_alloc(t, s, p, n);
	return p;
}

/* The allocator's operator delete is about to free p: count it. */
static __attribute__((noinline)) void cx_counted_delete(void *p)
{
	(void)je_freeing(p, (void *)cx_counted_delete);
}

/* Called from inside the allocator's own object (tcmalloc's and
 * mimalloc's internals use their operator new through the PLT): its own
 * bookkeeping, never counted, as its malloc from inside is not (a macro:
 * the return address of the operator itself). */
#define cx_inside() \
	(hooks_in_allocator((uintptr_t)__builtin_return_address(0)) == 1)

/* A new: the plain case is one load, a compare and a tail call.  With no
 * next definition at all (a C++ runtime missing: cannot happen in a
 * program that calls these), the malloc family serves it. */
#define CX_NEW(i, name, params, args, n)                                     \
	EXPORT void *name params                                             \
	{                                                                    \
		typedef void *(*fn_t) params;                                \
		if (likely(__atomic_load_n(&cx_mode, __ATOMIC_RELAXED) == CX_PLAIN)) \
			return ((fn_t)cx_fn[i]) args;                        \
		int mode = cx_resolve();                                     \
		fn_t f = (fn_t)cx_fn[i];                                     \
		if (!f)                                                      \
			return hook_malloc(n);                               \
		if (mode != CX_OWN || cx_inside())                           \
			return f args;                                       \
		return cx_counted_new(f args, n);                            \
	}

#define CX_DELETE(i, name, params, args, p)                                  \
	EXPORT void name params                                              \
	{                                                                    \
		typedef void (*fn_t) params;                                 \
		if (likely(__atomic_load_n(&cx_mode, __ATOMIC_RELAXED) == CX_PLAIN)) { \
			((fn_t)cx_fn[i]) args;                               \
			return;                                              \
		}                                                            \
		int mode = cx_resolve();                                     \
		fn_t f = (fn_t)cx_fn[i];                                     \
		if (!f) {                                                    \
			hook_free(p);                                        \
			return;                                              \
		}                                                            \
		if (mode == CX_OWN && !cx_inside())                          \
			cx_counted_delete(p);                                \
		f args;                                                      \
	}

#undef X
typedef const void *nothrow_ref;   /* const std::nothrow_t & */

CX_NEW(0, _Znwm, (size_t n), (n), n)
CX_NEW(1, _Znam, (size_t n), (n), n)
CX_NEW(2, _ZnwmRKSt9nothrow_t, (size_t n, nothrow_ref nt), (n, nt), n)
CX_NEW(3, _ZnamRKSt9nothrow_t, (size_t n, nothrow_ref nt), (n, nt), n)
CX_NEW(4, _ZnwmSt11align_val_t, (size_t n, size_t al), (n, al), n)
CX_NEW(5, _ZnamSt11align_val_t, (size_t n, size_t al), (n, al), n)
CX_NEW(6, _ZnwmSt11align_val_tRKSt9nothrow_t, (size_t n, size_t al, nothrow_ref nt),
       (n, al, nt), n)
CX_NEW(7, _ZnamSt11align_val_tRKSt9nothrow_t, (size_t n, size_t al, nothrow_ref nt),
       (n, al, nt), n)
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

/* got.c's list: the operators by name, with their definitions here. */
const char *const hooks_cxx_names[HOOKS_CXX_N] = {
#define X(i, name) [i] = #name,
	CX_NAMES(X)
#undef X
};

/* Hidden names of the operators: their addresses never go through our
 * GOT, which in a dlopen'ed agent binds them to the process's (got.h). */
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
