/*
 * shim: the floor under the agent's cost, for make bench
 * (tests/bench/run.sh, configurations "shim" and "shim-count").
 *
 * An LD_PRELOAD interposer of malloc, free, calloc and realloc, built twice
 * from this file:
 *
 *   libshim.so       each entry point only forwards to glibc
 *                    (__libc_malloc, __libc_free, __libc_calloc,
 *                    __libc_realloc): what interposition itself costs (the
 *                    call into the preloaded library and the jump on).
 *   libshimcount.so  (-DSHIM_COUNT) the same plus the least the agent's
 *                    fast path must do for exact per-thread totals: the
 *                    thread's slot pointer from initial-exec TLS, a byte
 *                    countdown (which never fires), three counter adds on
 *                    malloc (objects, requested bytes, usable bytes read
 *                    from glibc's chunk header) and two on free (objects,
 *                    usable bytes).  No sampling, no sample filter, no
 *                    segment: each thread's counters are one 64-byte slot
 *                    of a static array, handed out by an atomic counter;
 *                    threads past its end pass through uncounted.
 *
 * So none -> shim is the cost of interposing, shim -> shim-count the cost
 * of exact counting, and shim-count -> the agent with sampling off
 * (YM_SAMPLE_RATE=1024g) / on the rest of the agent's fast paths and its
 * samples.
 *
 * The other entry points (memalign, posix_memalign, aligned_alloc, ...)
 * are glibc's own; their blocks are counted when freed through free().
 * With SHIM_REPORT=1 libshimcount.so prints its totals at exit.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define EXPORT   __attribute__((visibility("default")))
#define NOINLINE __attribute__((noinline))
#define unlikely(x) __builtin_expect(!!(x), 0)
#define likely(x)   __builtin_expect(!!(x), 1)

#ifndef SHIM_NEXT
/* glibc's allocator under its internal names (exported since 2.2.5). */
extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t a, size_t b);
extern void *__libc_realloc(void *p, size_t n);
#else
/* musl (libshim-musl.so, -DSHIM_NEXT, built by musl-gcc) exports no
 * internal names: the next definitions, from dlsym(RTLD_NEXT) at load
 * (musl's dlsym does not allocate), as the agent forwards when
 * preloaded.  Nothing allocates before a preloaded library's
 * constructor in a musl program. */
#include <dlfcn.h>
static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);

__attribute__((constructor)) static void shim_next(void)
{
	next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
}
#define __libc_malloc(n)     next_malloc(n)
#define __libc_free(p)       next_free(p)
#define __libc_calloc(a, b)  next_calloc(a, b)
#define __libc_realloc(p, n) next_realloc(p, n)
#endif

#ifndef SHIM_COUNT

EXPORT void *malloc(size_t n)
{
	return __libc_malloc(n);
}

EXPORT void free(void *p)
{
	__libc_free(p);
}

EXPORT void *calloc(size_t a, size_t b)
{
	return __libc_calloc(a, b);
}

EXPORT void *realloc(void *p, size_t n)
{
	return __libc_realloc(p, n);
}

#else /* SHIM_COUNT */

enum { SHIM_SLOTS = 512 };

/* A thread's totals: one cache line, written by that thread only. */
struct slot {
	_Alignas(64) uint64_t alloc_objects;
	uint64_t alloc_bytes;      /* usable size */
	uint64_t req_bytes;        /* requested size */
	uint64_t free_objects;
	uint64_t free_bytes;       /* usable size */
};

_Static_assert(sizeof(struct slot) == 64, "one slot, one cache line");

static struct slot slots[SHIM_SLOTS];
static unsigned next_slot;

/* Far more bytes than any run allocates: the countdown is paid on every
 * call but never fires. */
#define SHIM_COUNTDOWN (INT64_C(1) << 62)

struct shim_tls {
	struct slot *slot;         /* NULL: not claimed yet, or pass-through */
	int64_t countdown;         /* bytes left before a (never taken) sample */
	int passthru;              /* no slot left: never counted */
};

static __thread struct shim_tls tls __attribute__((tls_model("initial-exec")));

/* One add to memory by the slot's only writer: no atomic read-modify-write
 * (readers, here only report(), never see a torn 8-byte store). */
static inline void bump(uint64_t *c, uint64_t v)
{
#if defined(__x86_64__)
	__asm__("addq %1, %0" : "+m"(*c) : "er"(v));
#else
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v,
			 __ATOMIC_RELAXED);
#endif
}

/* glibc's usable size from the chunk header just below the block: the
 * chunk size without its flag bits, less the header, less one more word
 * when the chunk is mmapped (bit 1). */
static inline size_t usable(const void *p)
{
	size_t sz = ((const size_t *)p)[-1];
	return (sz & ~(size_t)7) - 8 - ((sz & 2) << 2);
}

/* The thread's first call: a slot of its own, or pass-through for good. */
static NOINLINE struct slot *claim(struct shim_tls *t)
{
	if (t->passthru)
		return NULL;
	unsigned i = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED);
	if (i >= SHIM_SLOTS) {
		t->passthru = 1;
		return NULL;
	}
	t->countdown = SHIM_COUNTDOWN;
	t->slot = &slots[i];
	return t->slot;
}

/* Where a profiler would take a sample; here it only starts over. */
static NOINLINE void countdown_fired(struct shim_tls *t)
{
	t->countdown = SHIM_COUNTDOWN;
}

/* Charges n bytes; signed wrap is avoided by subtracting in uint64_t. */
static inline void charge(struct shim_tls *t, size_t n)
{
	t->countdown = (int64_t)((uint64_t)t->countdown - (uint64_t)n);
	if (unlikely(t->countdown < 0))
		countdown_fired(t);
}

static NOINLINE void *alloc_failed(struct slot *s, size_t n)
{
	bump(&s->alloc_objects, -(uint64_t)1);
	bump(&s->req_bytes, -(uint64_t)n);
	return NULL;
}

EXPORT void *malloc(size_t n)
{
	struct shim_tls *t = &tls;
	struct slot *s = t->slot;
	if (unlikely(s == NULL) && (s = claim(t)) == NULL)
		return __libc_malloc(n);
	charge(t, n);
#ifdef SHIM_TAIL
	/* The design BENCHMARKS.md proposes (issue 18): the countdown charged
	 * with the requested size before the call (requested bytes are what
	 * it walked), the object counted, then a tail call: nothing after the
	 * call, no usable size.  (A failed call stays counted here.) */
	bump(&s->alloc_objects, 1);
	return __libc_malloc(n);
#endif
	/* Counted before the call, so that only s lives across it. */
	bump(&s->alloc_objects, 1);
	bump(&s->req_bytes, n);
	void *p = __libc_malloc(n);
	if (unlikely(p == NULL))
		return alloc_failed(s, n);
	bump(&s->alloc_bytes, usable(p));
	return p;
}

static NOINLINE void free_slow(void *p)
{
	struct slot *s;
	if (p != NULL && (s = claim(&tls)) != NULL) {
		bump(&s->free_objects, 1);
		bump(&s->free_bytes, usable(p));
	}
	__libc_free(p);
}

EXPORT void free(void *p)
{
	struct slot *s = tls.slot;
	if (unlikely(s == NULL || p == NULL)) {
		free_slow(p);
		return;
	}
	bump(&s->free_objects, 1);
#ifndef SHIM_TAIL
	bump(&s->free_bytes, usable(p));
#endif
	__libc_free(p);
}

EXPORT void *calloc(size_t a, size_t b)
{
	struct shim_tls *t = &tls;
	struct slot *s = t->slot;
	size_t n;
	if (__builtin_mul_overflow(a, b, &n))
		n = SIZE_MAX;   /* glibc fails it */
	if (unlikely(s == NULL) && (s = claim(t)) == NULL)
		return __libc_calloc(a, b);
	charge(t, n);
	void *p = __libc_calloc(a, b);
	if (likely(p != NULL)) {
		bump(&s->alloc_objects, 1);
		bump(&s->req_bytes, n);
		bump(&s->alloc_bytes, usable(p));
	}
	return p;
}

/* A resize is a free of the old block and an allocation of the new one;
 * the countdown is charged with the growth only. */
EXPORT void *realloc(void *p, size_t n)
{
	if (p == NULL)
		return malloc(n);
	struct shim_tls *t = &tls;
	struct slot *s = t->slot;
	if (unlikely(s == NULL) && (s = claim(t)) == NULL)
		return __libc_realloc(p, n);
	size_t old = usable(p);
	charge(t, n > old ? n - old : 0);
	void *q = __libc_realloc(p, n);
	if (q == NULL && n != 0)
		return NULL;    /* failed: p is untouched */
	bump(&s->free_objects, 1);
	bump(&s->free_bytes, old);
	if (q != NULL) {        /* else realloc(p, 0) freed p */
		bump(&s->alloc_objects, 1);
		bump(&s->req_bytes, n);
		bump(&s->alloc_bytes, usable(q));
	}
	return q;
}

/* SHIM_REPORT=1: the totals over all slots, at exit. */
__attribute__((destructor)) static void report(void)
{
	const char *e = getenv("SHIM_REPORT");
	if (e == NULL || *e == '\0' || *e == '0')
		return;
	uint64_t v[5] = { 0 };
	unsigned used = __atomic_load_n(&next_slot, __ATOMIC_RELAXED);
	if (used > SHIM_SLOTS)
		used = SHIM_SLOTS;
	for (unsigned i = 0; i < used; i++) {
		struct slot *s = &slots[i];
		v[0] += __atomic_load_n(&s->alloc_objects, __ATOMIC_RELAXED);
		v[1] += __atomic_load_n(&s->alloc_bytes, __ATOMIC_RELAXED);
		v[2] += __atomic_load_n(&s->req_bytes, __ATOMIC_RELAXED);
		v[3] += __atomic_load_n(&s->free_objects, __ATOMIC_RELAXED);
		v[4] += __atomic_load_n(&s->free_bytes, __ATOMIC_RELAXED);
	}
	char buf[256];
	int len = snprintf(buf, sizeof buf,
			   "shim-count: %u threads; alloc %llu objects, "
			   "%llu bytes (%llu requested); free %llu objects, "
			   "%llu bytes\n", used,
			   (unsigned long long)v[0], (unsigned long long)v[1],
			   (unsigned long long)v[2], (unsigned long long)v[3],
			   (unsigned long long)v[4]);
	if (len > 0)
		(void)!write(2, buf, (size_t)len < sizeof buf ? (size_t)len : sizeof buf - 1);
}

#endif /* SHIM_COUNT */
