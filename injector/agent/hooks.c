/*
 * The malloc family, interposed.  Each entry point is a fast path:
 *
 *   malloc: one TLS load (t->fast: own slot, NULL when the thread must
 *   take the slow path), the giant compare (against the control block's
 *   fast_limit: a reader lowers it to ask for heap statistics), two
 *   counter bumps in this thread's own cache line (objects, requested
 *   bytes) and the byte countdown charged with the request (sample.h says
 *   why that is unbiased), then a tail call to the real malloc: no
 *   frame, nothing after the call.  The block it returns is never read
 *   at sampling rates above 1 (man/ymagent.7: allocated usable bytes are
 *   counted in exact mode only).
 *   free:   the TLS load, one bit of the 4 KiB gate (NULL, bootstrap
 *   blocks, possible samples, every block under another allocator), one
 *   counter bump, then a tail call.  The freed block is never read at
 *   sampling rates above 1 (man/ymagent.7: freed bytes are counted in
 *   exact mode only).
 *
 * (Instruction counts of the release build, gcc on x86-64, are written
 * beside each function and only there; tests/integration/test_fastpath.py
 * counts them in build/libymagent.so and fails when they differ.  Check
 * builds add the YM_ASSERTs, release builds nothing.)
 *
 * No lock, no atomic read-modify-write, no syscall.  Anything else (first
 * call, nested call, no slot yet, due sample, giant request, filter hit)
 * goes to a noinline slow path.  Pointers and usable sizes are never
 * changed: we only observe.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "enter.h"
#include "giant.h"
#include "heapstats.h"
#include "hooknames.h"
#include "live.h"
#include "next.h"
#include "sampling.h"
#include "symbols.h"
#include "threads.h"

#define NOINLINE __attribute__((noinline))

/* ---- Bootstrap: dlsym allocates before we know the real malloc ---- */

static _Alignas(64) char boot_buf[64 * 1024];
static size_t boot_used;

static void *boot_alloc(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	size_t cur = __atomic_load_n(&boot_used, __ATOMIC_RELAXED);
	for (;;) {
		uintptr_t start = (uintptr_t)boot_buf + cur + 16;
		start = (start + align - 1) & ~(uintptr_t)(align - 1);
		uintptr_t lim = (uintptr_t)boot_buf + sizeof boot_buf;
		if (n > sizeof boot_buf || start > lim || n > lim - start) {
			errno = ENOMEM;
			return NULL;
		}
		size_t end = start + n - (uintptr_t)boot_buf;
		if (__atomic_compare_exchange_n(&boot_used, &cur, end, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			((size_t *)start)[-1] = n;   /* size, for realloc */
			/* free's fast path sends it to free_other. */
			live_filter_pin((void *)start);
			return (void *)start;   /* static storage: zeroed */
		}
	}
}

static inline int is_boot(const void *p)
{
	return (uintptr_t)p - (uintptr_t)boot_buf < sizeof boot_buf;
}

int hooks_boot_block(const void *p)
{
	return is_boot(p);
}

int hooks_boot_lent(void)
{
	return __atomic_load_n(&boot_used, __ATOMIC_RELAXED) != 0;
}

/* ---- Accounting: in the thread's own slot (threads.h) ---- */

/* n is below the fast paths' threshold (heapstats.h), read once.  On
 * x86-64 the compare reads the word itself (one instruction, where the
 * relaxed load and a compare are two): an aligned 8-byte read is atomic
 * there, as the relaxed load's plain mov is. */
static inline int below_limit(size_t n)
{
	const uint64_t *lim = __atomic_load_n(&agent_fast_limit, __ATOMIC_RELAXED);
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	int below;
	__asm__("cmpq %2, %1" : "=@ccb"(below) : "r"(n), "m"(*lim));
	return below;
#else
	return n < __atomic_load_n(lim, __ATOMIC_RELAXED);
#endif
}

/* The thread's slot when this call may take the fast path, else NULL. */
static inline struct ym_thread *fast_slot(const struct agent_tls *t, size_t n)
{
	struct ym_thread *s = thread_fast(t);
	/* The giant threshold, in the control block: a reader lowers it to
	 * ask for the allocator's statistics (heapstats.h). */
	return likely(below_limit(n)) ? s : NULL;
}

/* Charge the thread's byte countdown with c bytes: 1 when a sample is
 * due.  Allocations charge their request, before the call (sample.h says
 * why that stays unbiased); realloc charges the growth of the usable size
 * after it. */
static inline int charge(struct agent_tls *t, size_t c)
{
	/* In uint64_t: a request near SIZE_MAX (YM_GIANT_BYTES raised that
	 * far lets it take the fast path) wraps instead of overflowing, and
	 * then reads as due: the slow path sees the call fail. */
	t->countdown = (int64_t)((uint64_t)t->countdown - (uint64_t)c);
	return unlikely(t->countdown < 0);
}

/* The countdown ran out on p: sample it (agent_sample draws the next
 * gap), and return p.  c: what was charged for it. */
static NOINLINE void *sample_due(struct agent_tls *t, void *p, size_t n,
				 size_t c)
{
	agent_take_sample(t, p, n, c);
	return p;
}

/* Allocated usable bytes are counted in exact mode only (man/ymagent.7,
 * YM_FLAG_NO_ALLOC_BYTES): their read after the call is what a tail call
 * saves.  0 when sampling.  Never below the request n: a block the
 * allocator gave is at least that, but tcmalloc's malloc_usable_size says
 * 0 until its constructor has run (libstdc++'s 72704-byte exception pool,
 * made by an earlier constructor, would count nothing), and then its
 * request is the closest figure there is. */
static size_t alloc_usable(void *p, size_t n)
{
	if (!agent_exact())
		return 0;
	size_t u = agent_usable(p);
	return u < n ? n : u;
}

/* The fast path charged n to the countdown and counted the call, and a
 * sample is due (always so in exact mode): make the call here, then take
 * the sample.  A failed call is uncounted. */
static void *due_done(struct agent_tls *t, struct ym_thread *s, void *p,
		      size_t n)
{
	if (unlikely(p == NULL)) {
		thread_uncount_call(s, n);
		return NULL;
	}
	thread_count_usable(s, alloc_usable(p, n));
	agent_take_sample(t, p, n, n);
	return p;
}

static NOINLINE void *malloc_due(struct agent_tls *t, struct ym_thread *s,
				 size_t n)
{
	return due_done(t, s, agent_next.malloc(n), n);
}

static NOINLINE void *calloc_due(struct agent_tls *t, struct ym_thread *s,
				 size_t a, size_t b, size_t n)
{
	return due_done(t, s, agent_next.calloc(a, b), n);
}

enum { PASS, PROFILE, REFUSE, BOOT };

/* What to do with a call that missed the fast path. */
static NOINLINE int slow_begin(struct agent_tls *t, size_t n)
{
	if (!__atomic_load_n(&agent_next.resolved, __ATOMIC_ACQUIRE)) {
		if (t->guard)
			return BOOT;
		agent_guard_enter(t);
		int ok = agent_resolve();
		agent_guard_leave(t);
		if (!ok)
			return BOOT;
	}
	if (t->guard)
		return t->boot ? BOOT : PASS;
	agent_guard_enter(t);
	agent_enter(t);
	agent_guard_leave(t);
	/* Before the segment too (the pre-slot, slot 0's stand-in). */
	if (!agent_counting())
		return PASS;
	heapstats_poked(t);
	if (n >= agent_giant_limit) {
		agent_need_segment(t);
		agent_giant(t, n, agent_cfg.giant_fail);
		if (agent_cfg.giant_fail) {
			errno = ENOMEM;
			return REFUSE;
		}
	}
	return PROFILE;
}

static NOINLINE void slow_alloc(struct agent_tls *t, void *p, size_t n)
{
	if (!p)
		return;
	size_t u = alloc_usable(p, n);
	thread_count_alloc_here(t, u, n);
	if (charge(t, n))
		agent_take_sample(t, p, n, n);
}

/* The usable size of a block being freed, read in exact mode only: at
 * sampling rates above 1 frees count objects, not bytes (man/ymagent.7). */
static size_t freed_size(void *p)
{
	return agent_exact() ? agent_usable(p) : 0;
}

/* Takes p's sample out, if it has one, and returns the bytes its free
 * counts (freed_size): in exact mode a block tcmalloc gave before its
 * constructor had run, whose usable size it says is 0, counts its sample's
 * request, as its allocation did (alloc_usable). */
static size_t free_take(struct agent_tls *t, void *p)
{
	size_t u = freed_size(p);
	size_t n = 0;
	if (agent_exact() || agent_filter_live_maybe(p))
		n = agent_free_sampled(t, p);
	return u || !agent_exact() ? u : n;
}

static void slow_free_count(struct agent_tls *t, void *p)
{
	thread_count_free_here(t, free_take(t, p));
}

/* ---- malloc ---- */

static NOINLINE void *malloc_slow(struct agent_tls *t, size_t n)
{
	switch (slow_begin(t, n)) {
	case BOOT:
		return boot_alloc(n, 16);
	case REFUSE:
		return NULL;
	case PASS:
		return agent_next.malloc(n);
	}
	void *p = agent_next.malloc(n);
	slow_alloc(t, p, n);
	return p;
}

/* Fast path: 12 instructions ending in a tail call to the real malloc
 * (no frame, nothing after the call), two tests: the TLS gate word and
 * the giant compare through agent_fast_limit, which reads the control
 * block's word in the compare (7), two counter adds (2),
 * the countdown (2), the jump (1).  The countdown is charged with the
 * request, known before the call, so that nothing is left to do after it
 * (sample.h; a usable size read after the call costs a frame and a call:
 * BENCHMARKS.md).  A failed call under the giant
 * threshold stays counted when sampling (exact mode, where every call
 * takes malloc_due, uncounts it). */
EXPORT void *malloc(size_t n)
{
	struct agent_tls *t = &agent_tls;
	struct ym_thread *s = fast_slot(t, n);
	if (unlikely(s == NULL))
		return malloc_slow(t, n);
	agent_assert_fast(t, s);
	thread_count_call(s, n);
	if (charge(t, n))
		return malloc_due(t, s, n);
	return agent_next.malloc(n);
}

/* ---- free ---- */

/* The gate bit was set: NULL, a bootstrap block, a possible sample, or
 * every free comes here (exact mode, usable size is a call). */
static NOINLINE void free_other(struct ym_thread *s, void *p)
{
	if (p == NULL || is_boot(p))
		return;   /* bootstrap memory is static; never freed */
	if (agent_exact())   /* the head's miss beside the block header's */
		live_prefetch((uint64_t)(uintptr_t)p);
	thread_count_free(s, free_take(&agent_tls, p));
	agent_next.free(p);
}

static NOINLINE void free_slow(struct agent_tls *t, void *p)
{
	if (p == NULL || is_boot(p) || !agent_next.resolved)
		return;   /* bootstrap memory is static; never freed */
	if (slow_begin(t, 0) == PROFILE)
		slow_free_count(t, p);
	agent_next.free(p);
}

/* Fast path: 15 instructions ending in a tail call (no frame), two
 * tests: the TLS gate word (4), one bit of the gate (9), one counter add
 * (1), the jump to the real free (1).  The freed block is never touched:
 * its header would be the one likely cache miss of a free (reading its
 * usable size cost 0.10-0.14x of the allocation benchmarks;
 * BENCHMARKS.md).  The fast
 * path runs only at sampling rates above 1 (exact mode gates every free
 * to free_other, which counts the bytes). */
EXPORT void free(void *p)
{
	struct agent_tls *t = &agent_tls;
	struct ym_thread *s = thread_fast(t);
	if (unlikely(s == NULL)) {
		free_slow(t, p);
		return;
	}
	agent_assert_fast(t, s);
	if (unlikely(agent_filter_maybe(p))) {
		free_other(s, p);
		return;
	}
	thread_count_freed(s);
	agent_next.free(p);
}

EXPORT void cfree(void *p)
{
	hook_free(p);
}

/* ---- calloc ---- */

static NOINLINE void *calloc_slow(struct agent_tls *t, size_t a, size_t b,
				  size_t n)
{
	switch (slow_begin(t, n)) {
	case BOOT:
		if (n == SIZE_MAX) {
			errno = ENOMEM;
			return NULL;
		}
		return boot_alloc(n, 16);
	case REFUSE:
		return NULL;
	case PASS:
		return agent_next.calloc(a, b);
	}
	void *p = agent_next.calloc(a, b);
	slow_alloc(t, p, n);
	return p;
}

/* Fast path: 15 instructions ending in a tail call: malloc's, with the
 * overflow-checked multiply.  A failed call under the giant threshold
 * stays counted when sampling (exact mode uncounts it). */
EXPORT void *calloc(size_t a, size_t b)
{
	struct agent_tls *t = &agent_tls;
	size_t n;
	/* The real calloc fails it; the giant path sees it. */
	if (__builtin_mul_overflow(a, b, &n))
		return calloc_slow(t, a, b, SIZE_MAX);
	struct ym_thread *s = fast_slot(t, n);
	if (unlikely(s == NULL))
		return calloc_slow(t, a, b, n);
	agent_assert_fast(t, s);
	thread_count_call(s, n);
	if (charge(t, n))
		return calloc_due(t, s, a, b, n);
	return agent_next.calloc(a, b);
}

/* ---- realloc ---- */

/* Everything the fast path does not take: NULL, bootstrap blocks, possible
 * samples, a due sample, filter_all, no own slot, giant requests.
 *
 * The estimate (sample.h): the block's usable size goes from old to u.
 * A sampled block keeps its stack and birth (one long-lived block) or
 * leaves the sample when it shrank (sample_keep); an unsampled one is
 * charged its growth u - old, moved or in place: the bytes it had were
 * charged when they were allocated or grown. */
static NOINLINE void *realloc_slow(struct agent_tls *t, void *p, size_t n)
{
	if (p == NULL)
		return hook_malloc(n);
	if (is_boot(p)) {
		size_t old = ((size_t *)p)[-1];
		void *q = hook_malloc(n);
		if (q)
			memcpy(q, p, old < n ? old : n);
		return q;
	}
	int mode = fast_slot(t, n) ? PROFILE : slow_begin(t, n);
	if (mode == REFUSE)
		return NULL;
	if (mode != PROFILE)
		return agent_next.realloc(p, n);

	size_t old = agent_usable(p);
	struct ym_live e;
	/* A sampled block leaves the live table before the allocator may
	 * hand its address to another thread. */
	int sampled = (agent_exact() || agent_filter_live_maybe(p)) &&
		      agent_realloc_take(t, p, &e);
	void *q = agent_next.realloc(p, n);
	if (q == NULL) {
		if (n != 0) {   /* failed: p is untouched, nothing charged */
			if (sampled)
				agent_realloc_put(t, &e, p, e.size, old, old);
			return NULL;
		}
		/* realloc(p, 0) freed p (glibc, jemalloc, tcmalloc). */
		if (sampled)
			agent_realloc_put(t, &e, NULL, 0, old, 0);
		thread_count_free_here(t, agent_exact() ? old : 0);
		return NULL;
	}
	/* One free and one allocation, in exact totals. */
	thread_count_free_here(t, agent_exact() ? old : 0);
	size_t u = agent_usable(q);
	if (u < n)   /* tcmalloc's before its constructor: 0 (alloc_usable) */
		u = n;
	thread_count_alloc_here(t, agent_exact() ? u : 0, n);
	/* In exact mode the countdown is always due: a block we missed
	 * (allocated before the segment existed) is taken in here. */
	if (sampled)
		agent_realloc_put(t, &e, q, n, old, u);
	else if (charge(t, u > old ? u - old : 0))
		agent_take_sample(t, q, n, u);
	return q;
}

/* The fast path's realloc returned NULL after it counted a free and an
 * allocation of n. */
static NOINLINE void *realloc_failed(struct ym_thread *s, size_t n)
{
	thread_uncount_call(s, n);
	if (n != 0)   /* failed: p is untouched (n == 0: glibc freed it) */
		thread_uncount_freed(s);
	return NULL;
}

/* Fast path: 63 instructions to ret, one call: the TLS gate word, one
 * bit of the gate
 * (which is set for NULL, bootstrap blocks and possible samples, and
 * everywhere when filter_all: so the block is glibc's and not sampled,
 * the gate invariant of live.h), the old usable size (for the countdown:
 * the block is the caller's, its header hot), three counter bumps, the
 * real call, the new usable size and the countdown charged with the
 * growth of the usable size (sample.h says why the growth). */
EXPORT void *realloc(void *p, size_t n)
{
	struct agent_tls *t = &agent_tls;
	struct ym_thread *s = fast_slot(t, n);
	if (unlikely(s == NULL || agent_filter_maybe(p)))
		return realloc_slow(t, p, n);
	agent_assert_fast(t, s);
	size_t old = agent_usable_glibc(p);
	thread_count_freed(s);
	thread_count_call(s, n);
	void *q = agent_next.realloc(p, n);
	if (unlikely(q == NULL))
		return realloc_failed(s, n);
	size_t u = agent_usable_glibc(q);
	if (charge(t, u > old ? u - old : 0))
		return sample_due(t, q, n, u);
	return q;
}

EXPORT void *reallocarray(void *p, size_t a, size_t b)
{
	size_t n;
	if (__builtin_mul_overflow(a, b, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return hook_realloc(p, n);
}

/* ---- aligned allocations ---- */

static int bad_align(size_t align)
{
	return align == 0 || (align & (align - 1)) != 0;
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	struct agent_tls *t = &agent_tls;
	int mode = fast_slot(t, n) ? PROFILE : slow_begin(t, n);
	if (mode == BOOT) {
		if (bad_align(align) || align % sizeof(void *))
			return EINVAL;
		void *p = boot_alloc(n, align);
		if (!p)
			return ENOMEM;
		*out = p;
		return 0;
	}
	if (mode == REFUSE)
		return ENOMEM;
	int rc = agent_next.posix_memalign(out, align, n);
	if (rc == 0 && mode == PROFILE)
		slow_alloc(t, *out, n);
	return rc;
}

/* Each reads agent_next at call time: before the first slow_begin the
 * pointers are not resolved yet. */
typedef void *(*align_fn)(size_t, size_t);

static void *aligned_alloc_fn(size_t align, size_t n)
{
	if (agent_next.aligned_alloc)
		return agent_next.aligned_alloc(align, n);
	return agent_next.memalign(align, n);
}

static void *memalign_fn(size_t align, size_t n)
{
	return agent_next.memalign(align, n);
}

static void *aligned_common(align_fn fn, size_t align, size_t n)
{
	struct agent_tls *t = &agent_tls;
	int mode = fast_slot(t, n) ? PROFILE : slow_begin(t, n);
	if (mode == BOOT) {
		if (bad_align(align)) {
			errno = EINVAL;
			return NULL;
		}
		return boot_alloc(n, align);
	}
	if (mode == REFUSE)
		return NULL;
	void *p = fn(align, n);
	if (mode == PROFILE)
		slow_alloc(t, p, n);
	return p;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
	return aligned_common(aligned_alloc_fn, align, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
	return aligned_common(memalign_fn, align, n);
}

static void *valloc_fn(size_t align, size_t n)
{
	(void)align;
	return agent_next.valloc(n);
}

static void *pvalloc_fn(size_t align, size_t n)
{
	(void)align;
	return agent_next.pvalloc(n);
}

EXPORT void *valloc(size_t n)
{
	return aligned_common(valloc_fn, (size_t)sysconf(_SC_PAGESIZE), n);
}

EXPORT void *pvalloc(size_t n)
{
	return aligned_common(pvalloc_fn, (size_t)sysconf(_SC_PAGESIZE), n);
}

/* Hidden names of the entry points (hooknames.h).  The prototypes in hooks.h
 * lack glibc's malloc attributes on purpose: no optimization may assume
 * anything about the block beyond what the real allocator gives. */
HIDDEN_ALIAS(malloc);
HIDDEN_ALIAS(free);
HIDDEN_ALIAS(calloc);
HIDDEN_ALIAS(realloc);
HIDDEN_ALIAS(reallocarray);
HIDDEN_ALIAS(posix_memalign);
HIDDEN_ALIAS(aligned_alloc);
HIDDEN_ALIAS(memalign);
HIDDEN_ALIAS(valloc);
HIDDEN_ALIAS(pvalloc);
