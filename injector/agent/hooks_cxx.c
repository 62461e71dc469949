/*
 * hooks_cxx: C++ operator new and delete of the allocator itself
 * (hooks_cxx.h).
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
 * which frees inside jemalloc.)
 *
 * State, this file's: the operators' next definitions and whose they
 * are.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "hooknames.h"
#include "hooks_cxx.h"
#include "hooks_jemalloc.h"
#include "hooks_mmap.h"
#include "scope.h"
#include "symbols.h"
#include "threads.h"

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
			f[i] = sym_forward(hooks_cxx_names[i]);
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

/* What the thread's malloc-family hooks have counted so far: its
 * slot's call count (only this thread writes it) and, for a thread with
 * no slot of its own, its countdown, which every counted call charges. */
struct cx_mark {
	const struct ym_thread *slot;
	uint64_t calls;
	int64_t countdown;
};

static void cx_mark(struct cx_mark *m)
{
	struct agent_tls *t = &agent_tls;
	m->slot = t->slot;
	m->calls = t->slot ? __atomic_load_n(&t->slot->t.alloc_objects,
					     __ATOMIC_RELAXED) : 0;
	m->countdown = t->countdown;
}

/* Whether a malloc-family hook counted a call since cx_mark(m): the
 * allocator's operator went through the malloc family's PLT (Debian's
 * libjemalloc2: aligned new calls aligned_alloc), and its block is
 * counted, and maybe sampled, already.  Counting it here too would count
 * it twice and sample it twice, independently (1.37 times the truth at a
 * rate of the block's size).  A thread without a slot in exact mode
 * (its countdown stays) is the one case this cannot see. */
static int cx_marked(const struct cx_mark *m)
{
	struct agent_tls *t = &agent_tls;
	if (t->slot != m->slot)
		return 1;   /* registered by that call's hook */
	if (t->slot)
		return __atomic_load_n(&t->slot->t.alloc_objects,
				       __ATOMIC_RELAXED) != m->calls;
	return t->countdown != m->countdown;
}

/* The allocator's operator new returned p for n bytes: count it. */
static __attribute__((noinline)) void *cx_counted_new(void *p, size_t n)
{
	struct agent_tls *t = &agent_tls;
	if (p && hooks_je_counting(t))
		hooks_je_count_alloc(t, p, n);
	return p;
}

/* The allocator's operator delete is about to free p: count it. */
static __attribute__((noinline)) void cx_counted_delete(void *p)
{
	(void)hooks_je_freeing(p, (void *)cx_counted_delete, 1);
}

/* Called from inside the allocator's own object (tcmalloc's and
 * mimalloc's internals use their operator new through the PLT): its own
 * bookkeeping, never counted, as its malloc from inside is not (a macro:
 * the return address of the operator itself). */
#define cx_inside() \
	(hooks_in_allocator((uintptr_t)__builtin_return_address(0)) == 1)

/* A new: the plain case is one load, a compare and a tail call.  With no
 * global definition, the caller's scope's (cx_local); with none at all,
 * the malloc family (cx_last_new).  The allocator's own operator is
 * counted here unless it reached the malloc family's hooks itself
 * (cx_marked); not under the guard, as a delete is: it may run the
 * program's new_handler, whose frees must be counted, or throw.
 * A delete runs under the guard: some reach free through the PLT
 * (Debian's libjemalloc2: delete, its nothrow and aligned forms), which
 * would count the free a second time. */
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
		struct cx_mark m_;                                           \
		cx_mark(&m_);                                                \
		void *p_ = f args;                                           \
		return cx_marked(&m_) ? p_ : cx_counted_new(p_, n);          \
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
		if (mode != CX_OWN || cx_inside()) {                         \
			f args;                                              \
			return;                                              \
		}                                                            \
		cx_counted_delete(p);                                        \
		struct agent_tls *t_ = &agent_tls;                           \
		agent_guard_enter(t_);                                       \
		f args;                                                      \
		agent_guard_leave(t_);                                       \
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

void hooks_cxx_resolve(void)
{
	if (agent_slots) {
		hooks_je_global();
		(void)cx_resolve();
		return;
	}
	/* Preloaded: every name in one walk of the objects after ours
	 * (symbols.h); dlsym only for a definition that is not a plain
	 * function. */
	const char *names[HOOKS_JE_N + CX_N];
	void *f[HOOKS_JE_N + CX_N];
	memcpy(names, hooks_je_names, sizeof hooks_je_names);
	memcpy(names + HOOKS_JE_N, hooks_cxx_names, sizeof *names * CX_N);
	sym_next(names, HOOKS_JE_N + CX_N, f);
	for (int k = 0; k < HOOKS_JE_N + CX_N; k++) {
		if (f[k] == SYM_OTHER) {
			f[k] = sym_forward(names[k]);
			if (scope_ours(f[k]))
				f[k] = NULL;
		}
		/* Check builds: the walk agrees with the loader. */
		YM_ASSERT(f[k] == (scope_ours(sym_forward(names[k])) ? NULL :
				   sym_forward(names[k])));
	}
	hooks_je_set(f);
	cx_set(f + HOOKS_JE_N);
	(void)cx_resolve();   /* whose they are */
}
