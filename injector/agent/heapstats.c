/*
 * heapstats: the allocator's own statistics (heapstats.h).
 *
 * State, this file's: the functions found (once), the header's heap block
 * and the CONTROL section, a flag that lets one thread at a time take
 * them, and the count of malloc_info/malloc_stats calls running.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "heapstats.h"
#include "next.h"
#include "os.h"
#include "segstate.h"
#include "symbols.h"


typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef int (*tc_prop_fn)(const char *, size_t *);
typedef struct mallinfo2 (*mallinfo2_fn)(void);

static struct {
	int found;                 /* 1 once looked up (atomic) */
	uint32_t kind;             /* YM_HEAP_* */
	uint32_t none_why;         /* YM_HEAP_WHY_*, when kind is NONE */
	mallctl_fn mallctl;
	tc_prop_fn tc_prop;
	mallinfo2_fn mallinfo2;
} fn;

static const uint64_t no_limit = UINT64_MAX;
const uint64_t *agent_fast_limit = &no_limit;
static uint64_t armed;             /* the threshold heapstats_arm set */
static struct ym_heapstats *heap;
static struct ym_control *ctl;
static int busy;                   /* a thread is taking them (atomic) */
static int in_stats_print;         /* malloc_info/malloc_stats running */

void heapstats_map_segment(uint8_t *base, const struct ym_section *sec)
{
	heap = &((struct ym_header *)(void *)base)->heap;
	ctl = (struct ym_control *)(void *)(base + sec[YM_SEC_CONTROL].offset);
}

/* The threshold before the segment (heapstats_arm). */
static uint64_t pre_limit;

void heapstats_arm(uint64_t giant)
{
	/* Before the segment: the threshold alone (nobody can ask yet). */
	armed = giant;
	if (!ctl) {
		pre_limit = giant;
		__atomic_store_n(&agent_fast_limit, &pre_limit, __ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&ctl->fast_limit, giant, __ATOMIC_RELAXED);
	__atomic_store_n(&agent_fast_limit, &ctl->fast_limit, __ATOMIC_RELEASE);
}

void heapstats_pre_wake(void)
{
	/* Only the word of before the segment: once the control block's is
	 * in use, nothing changes. */
	__atomic_store_n(&pre_limit, 0, __ATOMIC_RELAXED);
}

void heapstats_detach(void)
{
	__atomic_store_n(&agent_fast_limit, &no_limit, __ATOMIC_RELEASE);
}

void heapstats_fork_child(void)
{
	__atomic_store_n(&agent_fast_limit, &no_limit, __ATOMIC_RELEASE);
	heap = NULL;
	ctl = NULL;
	/* Only this thread exists now: flags other threads held are void. */
	__atomic_store_n(&busy, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&in_stats_print, 0, __ATOMIC_RELAXED);
}

void heapstats_poked(struct agent_tls *t)
{
	/* Not while the segment is being made (its maker may still give up):
	 * a reader cannot ask before it exists. */
	if (!agent_active() || !ctl ||
	    __atomic_load_n(&ctl->fast_limit, __ATOMIC_ACQUIRE) == armed)
		return;
	__atomic_store_n(&ctl->fast_limit, armed, __ATOMIC_RELAXED);
	agent_guard_enter(t);
	heapstats_poll(0);
	agent_guard_leave(t);
}

/* f is defined in the object that defines the process's malloc. */
static int same_object(void *f, void *malloc_fn)
{
	Dl_info a, b;
	return f && malloc_fn && dladdr(f, &a) && dladdr(malloc_fn, &b) &&
	       a.dli_fbase == b.dli_fbase;
}

/* malloc_fn is musl's own (the musl build, malloc defined in the C
 * library, the object that defines getpid). */
static int libc_allocator(void *malloc_fn)
{
#ifdef __GLIBC__
	(void)malloc_fn;
	return 0;
#else
	return same_object((void *)getpid, malloc_fn);
#endif
}

/* Which allocator the process runs, and its statistics function.  dlsym
 * may allocate: the caller holds the guard. */
static void find(void)
{
	void *m = (void *)agent_next.malloc;
	void *jm = sym_global("mallctl");
	void *tc = sym_global("MallocExtension_GetNumericProperty");
	if (same_object(jm, m)) {
		fn.mallctl = (mallctl_fn)jm;
		fn.kind = YM_HEAP_JEMALLOC;
	} else if (same_object(tc, m)) {
		fn.tc_prop = (tc_prop_fn)tc;
		fn.kind = YM_HEAP_TCMALLOC;
	} else {
		void *mi = sym_global("mallinfo2");
#ifdef YM_TEST_OLD_GLIBC
		mi = NULL;   /* as on glibc before 2.33 (test_compat.py) */
#endif
		if (agent_next.glibc_usable || same_object(mi, m)) {
			fn.mallinfo2 = (mallinfo2_fn)mi;
			fn.kind = mi ? YM_HEAP_GLIBC : YM_HEAP_NONE;
			fn.none_why = mi ? YM_HEAP_WHY_UNKNOWN : YM_HEAP_WHY_OLD_GLIBC;
		} else {
			fn.none_why = libc_allocator(m) ? YM_HEAP_WHY_MUSL :
				      YM_HEAP_WHY_OTHER;
		}
	}
	__atomic_store_n(&fn.found, 1, __ATOMIC_RELEASE);
}

static int jm_size(const char *name, uint64_t *out)
{
	size_t v = 0, len = sizeof v;
	if (fn.mallctl(name, &v, &len, NULL, 0) != 0 || len != sizeof v)
		return 0;
	*out = v;
	return 1;
}

static uint32_t take_jemalloc(struct ym_heapstats *h)
{
	/* Stats are refreshed by writing the epoch. */
	uint64_t e = 1;
	size_t len = sizeof e;
	fn.mallctl("epoch", &e, &len, &e, sizeof e);
	uint32_t got = 0;
	got |= jm_size("stats.allocated", &h->in_use_bytes) ? YM_HEAP_IN_USE : 0;
	got |= jm_size("stats.active", &h->active_bytes) ? YM_HEAP_ACTIVE : 0;
	got |= jm_size("stats.resident", &h->resident_bytes) ? YM_HEAP_RESIDENT : 0;
	got |= jm_size("stats.mapped", &h->mapped_bytes) ? YM_HEAP_MAPPED : 0;
	got |= jm_size("stats.retained", &h->retained_bytes) ? YM_HEAP_RETAINED : 0;
	unsigned n = 0;
	size_t nl = sizeof n;
	if (fn.mallctl("arenas.narenas", &n, &nl, NULL, 0) == 0 && nl == sizeof n) {
		h->arenas = n;
		got |= YM_HEAP_ARENAS;
	}
	/* Free inside the heap: pages jemalloc holds active but not
	 * allocated (dirty pages are in resident, not here). */
	if ((got & (YM_HEAP_IN_USE | YM_HEAP_ACTIVE)) ==
	    (YM_HEAP_IN_USE | YM_HEAP_ACTIVE) && h->active_bytes >= h->in_use_bytes) {
		h->free_bytes = h->active_bytes - h->in_use_bytes;
		got |= YM_HEAP_FREE;
	}
	return got;
}

static int tc_get(const char *name, uint64_t *out)
{
	size_t v = 0;
	if (!fn.tc_prop(name, &v))
		return 0;
	*out = v;
	return 1;
}

static uint32_t take_tcmalloc(struct ym_heapstats *h)
{
	uint32_t got = 0;
	uint64_t size = 0, unmapped = 0, pfree = 0, c = 0, tr = 0, th = 0;
	if (tc_get("generic.current_allocated_bytes", &h->in_use_bytes))
		got |= YM_HEAP_IN_USE;
	if (tc_get("tcmalloc.pageheap_unmapped_bytes", &unmapped)) {
		h->retained_bytes = unmapped;
		got |= YM_HEAP_RETAINED;
	}
	if (tc_get("generic.heap_size", &size) && size >= unmapped) {
		h->mapped_bytes = size - unmapped;
		got |= YM_HEAP_MAPPED;
	}
	if (tc_get("tcmalloc.pageheap_free_bytes", &pfree) &&
	    tc_get("tcmalloc.central_cache_free_bytes", &c) &&
	    tc_get("tcmalloc.transfer_cache_free_bytes", &tr) &&
	    tc_get("tcmalloc.thread_cache_free_bytes", &th)) {
		h->free_bytes = pfree + c + tr + th;
		got |= YM_HEAP_FREE;
	}
	return got;
}

/* glibc's heap of another arena than the main one: HEAP_MAX_SIZE-aligned
 * (64 MiB on 64-bit), starting with its heap_info {ar_ptr, prev, size,
 * mprotect_size, pagesize, pad}: 48 bytes; an arena's first heap has prev
 * NULL and its arena right after the heap_info (glibc's new_heap and
 * _int_new_arena). */
#define GLIBC_HEAP_ALIGN (64ULL << 20)
#define GLIBC_HEAP_INFO  48u

/* 1: an arena's first heap; 0: not one; -1: we cannot tell
 * (process_vm_readv refused, e.g. by seccomp).  Only private anonymous
 * memory is read (a file mapping could fault past its file's end). */
static int arena_heap(const struct os_maps_line *l)
{
	uint64_t start = l->start;
	if (start % GLIBC_HEAP_ALIGN || l->end < start || l->end - start < 4096 ||
	    strcmp(l->perms, "rw-p") != 0 || l->offset != 0 ||
	    l->dev_major != 0 || l->dev_minor != 0 || l->inode != 0)
		return 0;
	/* Another thread may unmap this heap between our read of the maps
	 * and this look (glibc's heap_trim does, for the heaps of other
	 * arenas): never dereference it.  process_vm_readv on ourselves
	 * fails with EFAULT where a load would kill the host. */
	uint64_t w[2];
	struct iovec local = { w, sizeof w };
	struct iovec remote = { (void *)(uintptr_t)start, sizeof w };
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof w)
		return errno == EFAULT ? 0 : -1;   /* gone; or we cannot look */
	return w[0] == start + GLIBC_HEAP_INFO && w[1] == 0;
}

static int arena_line(const struct os_maps_line *l, void *arg)
{
	int a = arena_heap(l);
	if (a < 0)
		return -2;   /* unknown, never a short count */
	*(uint64_t *)arg += (uint64_t)a;
	return 0;
}

/* The main arena and one for each first heap of another (mallinfo2 sums
 * them all; malloc_info, which lists them, allocates): /proc/self/maps.
 * 0 when it cannot be read. */
static uint64_t glibc_arenas(void)
{
	uint64_t n = 1;
	return os_maps_walk(arena_line, &n) == 0 ? n : 0;
}

static uint32_t take_glibc(struct ym_heapstats *h)
{
	struct mallinfo2 mi = fn.mallinfo2();
	h->in_use_bytes = mi.uordblks + mi.hblkhd;
	h->free_bytes = mi.fordblks;
	h->mapped_bytes = mi.hblkhd;
	h->arenas = glibc_arenas();
	return YM_HEAP_IN_USE | YM_HEAP_FREE | YM_HEAP_MAPPED |
	       (h->arenas ? YM_HEAP_ARENAS : 0);
}

void heapstats_poll(int force)
{
	if (!heap || !ctl)
		return;
	uint64_t want = __atomic_load_n(&ctl->heap_request, __ATOMIC_ACQUIRE);
	if (!force && want == __atomic_load_n(&heap->answered, __ATOMIC_RELAXED))
		return;
	if (__atomic_load_n(&in_stats_print, __ATOMIC_ACQUIRE))
		return;
	/* At most every 100 ms, and at most 1% of one thread's time:
	 * mallinfo2 walks every free chunk of every arena (36-50 ms on a
	 * fragmented 1 GiB heap, BENCHMARKS.md). */
	uint64_t now = agent_now_ns();
	uint64_t last = __atomic_load_n(&heap->taken_mono_ns, __ATOMIC_RELAXED);
	uint64_t gap = 100 * __atomic_load_n(&heap->cost_ns, __ATOMIC_RELAXED);
	if (gap < YM_HEAP_MIN_INTERVAL_NS)
		gap = YM_HEAP_MIN_INTERVAL_NS;
	if (!force && last && now - last < gap)
		return;
	int expect = 0;
	if (!__atomic_compare_exchange_n(&busy, &expect, 1, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return;
	int saved = errno;   /* the host's (open and dlsym may set it) */
	if (!__atomic_load_n(&fn.found, __ATOMIC_ACQUIRE))
		find();
	struct ym_heapstats h;
	memset(&h, 0, sizeof h);
	h.allocator = fn.kind;
	h.none_why = fn.kind == YM_HEAP_NONE ? fn.none_why : YM_HEAP_WHY_UNKNOWN;
	h.answered = want;
	/* The calls before the figures (segment.h, YM_HEAP_CALLS): a call
	 * counted after this read moves the readers' sum past it. */
	h.calls = threads_calls();
	uint64_t t0 = agent_now_ns();
	switch (fn.kind) {
	case YM_HEAP_JEMALLOC:
		h.present = take_jemalloc(&h);
		break;
	case YM_HEAP_TCMALLOC:
		h.present = take_tcmalloc(&h);
		break;
	case YM_HEAP_GLIBC:
		h.present = take_glibc(&h);
		break;
	}
	if (h.present)
		h.present |= YM_HEAP_CALLS;
	uint64_t t1 = agent_now_ns();
	h.taken_mono_ns = t1;
	h.cost_ns = t1 - t0;
	/* Publish: seq odd, the words, seq even (segment.h). */
	uint32_t seq = __atomic_load_n(&heap->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&heap->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	const uint64_t *src = (const uint64_t *)(const void *)&h;
	uint64_t *dst = (uint64_t *)(void *)heap;
	for (size_t i = 1; i < sizeof h / 8; i++)   /* word 0 holds seq */
		__atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
	uint32_t *d32 = (uint32_t *)(void *)heap;
	__atomic_store_n(&d32[1], h.allocator, __ATOMIC_RELAXED);
	__atomic_store_n(&heap->seq, seq + 2, __ATOMIC_RELEASE);
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
	errno = saved;
}

/* A process that makes no allocator call cannot answer a reader's
 * request: ymtop borrows one of its threads at a safe moment (outside
 * the allocator and ld.so, as for ymtop -p) and makes it call this,
 * which takes the figures now.  1 when they were published, 0 when not
 * (no segment, another thread taking them, malloc_info running). */
EXPORT int ymagent_heapstats(void)
{
	struct agent_tls *t = &agent_tls;
	if (!agent_active() || !heap || !ctl || t->guard)
		return 0;
	uint32_t seq = __atomic_load_n(&heap->seq, __ATOMIC_ACQUIRE);
	agent_guard_enter(t);
	heapstats_poll(1);
	agent_guard_leave(t);
	return __atomic_load_n(&heap->seq, __ATOMIC_ACQUIRE) != seq;
}

/* ---- malloc_info and malloc_stats hold an arena lock while their
 * stdio allocates: a hook reached from there must not call mallinfo2. */

typedef int (*malloc_info_fn)(int, FILE *);
typedef void (*malloc_stats_fn)(void);

EXPORT int malloc_info(int options, FILE *fp)
{
	malloc_info_fn f = (malloc_info_fn)sym_forward("malloc_info");
	if (!f)
		return -1;
	__atomic_add_fetch(&in_stats_print, 1, __ATOMIC_ACQ_REL);
	int rc = f(options, fp);
	__atomic_sub_fetch(&in_stats_print, 1, __ATOMIC_ACQ_REL);
	return rc;
}

EXPORT void malloc_stats(void)
{
	malloc_stats_fn f = (malloc_stats_fn)sym_forward("malloc_stats");
	if (!f)
		return;
	__atomic_add_fetch(&in_stats_print, 1, __ATOMIC_ACQ_REL);
	f();
	__atomic_sub_fetch(&in_stats_print, 1, __ATOMIC_ACQ_REL);
}
