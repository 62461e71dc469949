/*
 * table: the stack table, the counters and the agent's lock (table.h).
 *
 * State, all of it this file's: the lock, the private stack index and
 * who counted each stack, the segment's STACKS and PLANES sections and
 * the planes handed out, and
 * the peaks (the stacks' ext fields, the header's retained_est and
 * peak_* and their mmap twins: moved by the counting functions below).  Only
 * the sampled slow paths come here, so a lock is fine.
 */
#include <string.h>
#include <sys/mman.h>

#include "backing.h"
#include "config.h"
#include "hash.h"
#include "os.h"
#include "sample.h"
#include "shm.h"
#include "table.h"

/* The agent's lock, alone in its line: the data around it is read on
 * every sample. */
static struct {
	_Alignas(64) uint32_t word;
	char pad[60];
} lock;

/* The index: stack hash -> stack + 1 | tag (index_entry), private. */
static uint64_t *stack_index;
static uint32_t  stack_index_mask;

/* Who counted each stack, private (stack_writer entries, one a stack of
 * the index's capacity): 0 nobody yet, else counts_id of the only
 * counters written for it (its record, or one plane entry), or
 * WRITERS_MANY.  Then those counters alone are the stack's estimate. */
static uint32_t *stack_writers;
#define WRITERS_MANY UINT32_MAX

/* The segment (table_map_segment). */
static struct ym_header *hdr;
static uint8_t          *stacks;
static uint32_t          stack_stride;
static uint32_t          stack_ext_off;   /* struct ym_stack_ext in a record */
static struct ym_counts *planes;

/* Threads that asked for a counter plane. */
static uint32_t plane_next;
/* The calling thread's moves of the process's retained estimates
 * (malloc, mmap) not added to the header yet, and the reset_count they
 * are of (retained_moved). */
static __thread int64_t  pending_est[2];
static __thread uint64_t pending_reset;

/* Entries [0, plane_backed[p]) of plane p are backed (atomic, written by
 * the plane's owner): what another thread may read of it (peaks). */
static uint32_t plane_backed[YM_PLANES];

int table_lock(uint32_t spins)
{
	for (uint32_t i = 0; i < spins; i++) {
		if (__atomic_load_n(&lock.word, __ATOMIC_RELAXED) == 0 &&
		    !__atomic_exchange_n(&lock.word, 1, __ATOMIC_ACQUIRE))
			return 1;
		agent_backoff(i);
	}
	return 0;
}

void table_unlock(void)
{
	YM_ASSERT(__atomic_load_n(&lock.word, __ATOMIC_RELAXED) == 1);
	__atomic_store_n(&lock.word, 0, __ATOMIC_RELEASE);
}

static size_t stack_index_bytes(void)
{
	return ((size_t)stack_index_mask + 1) * sizeof *stack_index;
}

static size_t stack_writers_bytes(void)
{
	return ((size_t)stack_index_mask + 1) * sizeof *stack_writers;
}

int table_init_private(uint32_t max_stacks)
{
	uint32_t n = 1;
	while (n < max_stacks * 2u)
		n <<= 1;
	/* Mapped once a process (a child keeps its parent's, emptied);
	 * again only for a table of another size (tests). */
	if (stack_index && n != stack_index_mask + 1) {
		os_unmap(stack_index, stack_index_bytes());
		os_unmap(stack_writers, stack_writers_bytes());
		stack_index = NULL;
		stack_writers = NULL;
	}
	stack_index_mask = n - 1;
	if (!stack_index && !(stack_index = agent_map_private(stack_index_bytes())))
		return -1;
	if (!stack_writers && !(stack_writers = agent_map_private(stack_writers_bytes()))) {
		os_unmap(stack_index, stack_index_bytes());
		stack_index = NULL;
		return -1;
	}
	return 0;
}

void table_unmap_private(void)
{
	if (stack_index)
		os_unmap(stack_index, stack_index_bytes());
	if (stack_writers)
		os_unmap(stack_writers, stack_writers_bytes());
	stack_index = NULL;
	stack_writers = NULL;
}

void table_reset_private(void)
{
	if (stack_index)
		os_advise(stack_index, stack_index_bytes(), MADV_DONTNEED);
	if (stack_writers)
		os_advise(stack_writers, stack_writers_bytes(), MADV_DONTNEED);
	lock.word = 0;
	plane_next = 0;
	memset(plane_backed, 0, sizeof plane_backed);
	/* The forking thread's moves were the parent's. */
	pending_est[0] = pending_est[1] = 0;
}

static struct ym_stack *stack_at(uint32_t i)
{
	return (struct ym_stack *)(stacks + (size_t)i * stack_stride);
}

/* The v6 fields after stack i's frames (segment.h, struct ym_stack_ext). */
static struct ym_stack_ext *stack_ext(uint32_t i)
{
	return (struct ym_stack_ext *)(void *)((uint8_t *)stack_at(i) + stack_ext_off);
}

void table_map_segment(uint8_t *base, const struct ym_section *sec)
{
	hdr = (struct ym_header *)base;
	stacks = base + sec[YM_SEC_STACKS].offset;
	stack_stride = sec[YM_SEC_STACKS].stride;
	/* After the frames (shm_layout made the stride shm_stack_stride). */
	stack_ext_off = stack_stride - (uint32_t)sizeof(struct ym_stack_ext) -
			SHM_RECORD_TAIL;
	planes = (struct ym_counts *)(base + sec[YM_SEC_PLANES].offset);
}

/* The overflow stack, record 0, receives samples that found the table
 * full; it has no frames.  Backed now; -1 when /dev/shm has no room. */
int table_init_segment(void)
{
	struct ym_stack *s = stack_at(YM_STACK_OVERFLOW);
	if (backing_get(s, stack_stride) != 0)
		return -1;
	s->hash = 1;
	s->depth = 0;
	__atomic_store_n(&hdr->stacks_used, 1, __ATOMIC_RELEASE);
	return 0;
}

/* The index's hash of a stack (the record keeps it only as a mark that
 * it is published: no reader recomputes it).  A sum of products, each
 * frame salted by its position so that order counts: the multiplies are
 * independent of each other, so a deep stack costs an add a frame on the
 * dependent chain, where a multiply a frame in a chain (FNV over words)
 * cost 4-5 cycles a frame, 2% of exact mode on python3.  Mixed at the
 * end: the probe takes the low bits and the index tag the high ones. */
static uint64_t hash_frames(const uint64_t *f, uint32_t depth)
{
	uint64_t a = YM_FNV1A_INIT ^ depth, b = 0;
	uint32_t i = 0;
	for (; i + 1 < depth; i += 2) {
		a += (f[i] ^ (uint64_t)i * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
		b += (f[i + 1] ^ (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull) *
		     0xc4ceb9fe1a85ec53ull;
	}
	if (i < depth)
		a += (f[i] ^ (uint64_t)i * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
	uint64_t h = a ^ (b << 31 | b >> 33);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 29;
	return h < 2 ? h + 2 : h;   /* 0: unpublished, 1: overflow */
}

/* An index entry: stack + 1 in the low 32 bits, then the depth and 16
 * more bits of the hash, so that a lookup compares the record's frames
 * (never written after publication) and never reads the record's first
 * line, which every sample of that stack writes (its counters): with
 * threads sampling the same stack that line is usually in another CPU's
 * cache. */
#define KIND_TAG 0x8000u   /* in the depth argument of index_entry */

static uint64_t index_entry(uint32_t stack, uint64_t h, uint32_t depth)
{
	return (uint64_t)(stack + 1) | (uint64_t)depth << 32 | (h >> 48) << 48;
}

/* Probe the index; returns the stack or UINT32_MAX with *slot the empty
 * index position where it would go. */
static uint32_t probe(uint64_t h, const uint64_t *f, uint32_t depth,
		      uint32_t *slot)
{
	uint32_t mask = stack_index_mask;
	uint32_t i = (uint32_t)h & mask;
	uint64_t tag = index_entry(0, h, depth) & ~0xffffffffULL;
	for (uint32_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
		uint64_t v = __atomic_load_n(&stack_index[i], __ATOMIC_ACQUIRE);
		if (v == 0) {
			*slot = i;
			return UINT32_MAX;
		}
		uint32_t st = (uint32_t)v - 1;
		if ((v & ~0xffffffffULL) == tag &&
		    memcmp(stack_at(st)->frames, f,
			   (depth & ~KIND_TAG) * sizeof *f) == 0)
			return st;
	}
	*slot = UINT32_MAX;
	return UINT32_MAX;
}

/* Find or add a stack.  Lookups take no lock; insertion does. */
uint32_t table_intern(const uint64_t *f, uint32_t depth, uint32_t tid,
		      uint64_t now)
{
	return table_intern_kind(f, depth, tid, now, YM_KIND_MALLOC);
}

uint32_t table_intern_kind(const uint64_t *f, uint32_t depth, uint32_t tid,
			   uint64_t now, uint32_t kind)
{
	/* The kind is part of the stack: its own hash, and the index tag
	 * (bit 47 of the depth field, index_entry) keeps it apart. */
	uint64_t h = hash_frames(f, depth) ^ ((uint64_t)kind << 56);
	if (h < 2)
		h += 2;
	depth |= kind ? KIND_TAG : 0;
	uint32_t slot;
	uint32_t found = probe(h, f, depth, &slot);
	if (found != UINT32_MAX)
		return found;

	if (!table_lock(AGENT_SPINS_SHORT)) {
		__atomic_fetch_add(&hdr->drop_busy, 1, __ATOMIC_RELAXED);
		return UINT32_MAX;
	}
	found = probe(h, f, depth, &slot);   /* raced with another insert? */
	if (found == UINT32_MAX) {
		uint64_t used = hdr->stacks_used;
		/* Records are appended: exact mode, which may add one at
		 * every event, backs the next 60 KiB in the same call. */
		if (slot == UINT32_MAX ||
		    used >= hdr->sections[YM_SEC_STACKS].capacity ||
		    backing_get_ahead(stack_at((uint32_t)used), stack_stride,
				      agent_exact() ? (size_t)60 << 10 : 0) != 0) {
			found = YM_STACK_OVERFLOW;
			__atomic_fetch_add(&hdr->drop_stacks, 1,
					   __ATOMIC_RELAXED);
			__atomic_fetch_or(&hdr->flags, YM_FLAG_OVERFLOWED,
					  __ATOMIC_RELAXED);
		} else {
			struct ym_stack *s = stack_at((uint32_t)used);
			uint32_t d = depth & ~KIND_TAG;
			memcpy(s->frames, f, d * sizeof *f);
			s->depth = d;
			stack_ext((uint32_t)used)->kind = kind;
			s->tid = tid;
			s->first_mono_ns = now;
			s->hash = h;
			found = (uint32_t)used;
			/* Record complete before anyone can find it. */
			__atomic_store_n(&stack_index[slot],
					 index_entry(found, h, depth),
					 __ATOMIC_RELEASE);
			__atomic_store_n(&hdr->stacks_used, used + 1,
					 __ATOMIC_RELEASE);
		}
	}
	table_unlock();
	return found;
}

/* Counting goes to the calling thread's plane entry (own: it is the only
 * writer, relaxed load and store) or to the stack record (shared: atomic
 * adds).  Either way the reader sums both (segment.h: counter planes). */
static void add(uint64_t *c, uint64_t v, int own)
{
	if (own)
		__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v,
				 __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static struct ym_counts *counts(uint32_t stack, struct ym_counts *own)
{
	return own ? own : ym_stack_counts(stack_at(stack));
}

struct ym_counts *table_plane_entry(uint32_t plane, uint32_t stack)
{
	size_t cap = hdr->sections[YM_SEC_STACKS].capacity;
	return planes + (size_t)plane * cap + stack;
}

/* ---- Peaks (segment.h, v6): on the sampled paths only ---- */

/* Raise *peak to v (monotonic between resets), and say when: 1 when
 * this call raised it. */
static int raise_peak(uint64_t *peak, uint64_t *when, uint64_t v)
{
	uint64_t cur = __atomic_load_n(peak, __ATOMIC_RELAXED);
	while (v > cur)
		if (__atomic_compare_exchange_n(peak, &cur, v, 1, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED)) {
			__atomic_store_n(when, agent_now_ns(), __ATOMIC_RELAXED);
			return 1;
		}
	return 0;
}

/* The live samples behind counters c. */
static uint64_t live_samples(const struct ym_counts *c)
{
	return __atomic_load_n(&c->alloc_samples, __ATOMIC_RELAXED) -
	       __atomic_load_n(&c->free_samples, __ATOMIC_RELAXED);
}

/* n as ym_stack_ext.peak_samples holds it. */
static uint32_t sample_cap(int64_t n)
{
	return n <= 0 ? 0 : n >= (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* The stack's retained estimate now and its live samples (*n): its
 * record's counters and its entries in the planes of the current reset
 * (as a reader sums them), reading only the backed part of another
 * thread's plane. */
static int64_t stack_retained(uint32_t stack, int64_t *n)
{
	struct ym_counts *c = ym_stack_counts(stack_at(stack));
	uint64_t a = __atomic_load_n(&c->alloc_bytes, __ATOMIC_RELAXED);
	uint64_t f = __atomic_load_n(&c->free_bytes, __ATOMIC_RELAXED);
	uint64_t k = live_samples(c);
	uint64_t r = __atomic_load_n(&hdr->reset_count, __ATOMIC_ACQUIRE);
	uint64_t used = __atomic_load_n(&hdr->planes_used, __ATOMIC_ACQUIRE);
	for (uint32_t p = 0; p < used && p < YM_PLANES; p++) {
		if (__atomic_load_n(&hdr->plane_epoch[p], __ATOMIC_ACQUIRE) != r ||
		    stack >= __atomic_load_n(&plane_backed[p], __ATOMIC_ACQUIRE))
			continue;
		struct ym_counts *q = table_plane_entry(p, stack);
		a += __atomic_load_n(&q->alloc_bytes, __ATOMIC_RELAXED);
		f += __atomic_load_n(&q->free_bytes, __ATOMIC_RELAXED);
		k += live_samples(q);
	}
	*n = (int64_t)k;
	return (int64_t)(a - f);
}

int64_t table_stack_retained(uint32_t stack, int64_t *samples)
{
	return stack_retained(stack, samples);
}

uint64_t table_stack_peak_ns(uint32_t stack)
{
	return __atomic_load_n(&stack_ext(stack)->peak_mono_ns, __ATOMIC_RELAXED);
}

uint32_t table_stacks_used(void)
{
	return (uint32_t)__atomic_load_n(&hdr->stacks_used, __ATOMIC_ACQUIRE);
}

/* Peak work in steps of PEAK_STEP bytes.  At the default rates every
 * sample weighs more than a step, so every sample does it; at small rates
 * and in exact mode (every allocation a sample) threads would otherwise
 * contend on the header's estimate and read each other's plane entries on
 * every allocation (exact mode with 2 threads: +45%).  So:
 *   - a thread adds its moves of the process's estimate to the header
 *     once they reach a step (TLS, forgotten at a reset): the estimate
 *     and its peak lag the truth by less than a step a thread;
 *   - a stack's peak is compared with its estimate on every sample
 *     while its counts are all in one place (stack_writers: the record,
 *     or one thread's plane entry, which then is the whole estimate, so
 *     the peak is exact), and otherwise raised on every sample while the
 *     thread's own count of bytes allocated there is within its first
 *     step, then when it crosses a multiple of a step: small stacks are
 *     exact, others lag by less than a step a thread. */
#define PEAK_STEP (64u << 10)

/* A thread's pending move v of the process's estimate, this sample's d
 * included, reached a step: add it to the header, and raise the peak.
 * When a reset came since the last flush, only d is added: the rest may
 * be of before the reset (less than a step of moves after it are lost). */
static __attribute__((noinline)) void process_flush(int mmap, int64_t v, int64_t d)
{
	pending_est[mmap] = 0;
	uint64_t r = __atomic_load_n(&hdr->reset_count, __ATOMIC_RELAXED);
	if (r != pending_reset) {
		pending_reset = r;
		pending_est[!mmap] = 0;
		v = d;
	}
	int64_t *est = mmap ? &hdr->mmap_retained_est : &hdr->retained_est;
	int64_t now = __atomic_add_fetch(est, v, __ATOMIC_RELAXED);
	if (v > 0 && now > 0)
		raise_peak(mmap ? &hdr->mmap_peak_retained : &hdr->peak_retained,
			   mmap ? &hdr->mmap_peak_mono_ns : &hdr->peak_mono_ns,
			   (uint64_t)now);
}

/* Raise the stack's peak to `bytes` carried by n live samples. */
static void stack_peak_to(struct ym_stack_ext *x, int64_t bytes, int64_t n)
{
	if (bytes > 0 && raise_peak(&x->peak_bytes, &x->peak_mono_ns, (uint64_t)bytes))
		__atomic_store_n(&x->peak_samples, sample_cap(n), __ATOMIC_RELAXED);
}

/* Counters c's name in stack_writers: their place in the segment in
 * words (under 2^30: a segment is at most 8 GiB), plus one.  The
 * record's are the same for every thread that counts into it. */
static uint32_t counts_id(const struct ym_counts *c)
{
	return (uint32_t)(((uintptr_t)c - (uintptr_t)hdr) >> 3) + 1;
}

/* Counters c are about to move for `stack`: say who counts it.  The
 * claim comes before the counters move (acquire: nothing after it moves
 * before it), so that a thread that still sees itself alone after its
 * own counters moved (retained_moved) reads an estimate the stack had:
 * another thread's counts for it come after its claim. */
static inline void writers_claim(uint32_t stack, const struct ym_counts *c)
{
	uint32_t *w = &stack_writers[stack];
	uint32_t id = counts_id(c), cur = __atomic_load_n(w, __ATOMIC_ACQUIRE);
	while (unlikely(cur != id && cur != WRITERS_MANY) &&
	       !__atomic_compare_exchange_n(w, &cur, cur == 0 ? id : WRITERS_MANY, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
}

/* Raise the stack's peak to its estimate summed over the planes. */
static __attribute__((noinline)) void stack_peak(uint32_t stack,
						 struct ym_stack_ext *x)
{
	int64_t n;
	int64_t mine = stack_retained(stack, &n);
	stack_peak_to(x, mine, n);
}

/* The stack's retained estimate moved by d; c is the thread's counters
 * for it (plane entry or record), already moved.  Inline: on every
 * sample (in exact mode every allocation and free), a TLS add and two
 * compares unless a step is reached, and while c is the stack's only
 * counters three loads and a compare more. */
static inline void retained_moved(uint32_t stack, int64_t d,
				  const struct ym_counts *c)
{
	struct ym_stack_ext *x = stack_ext(stack);
	int mmap = __atomic_load_n(&x->kind, __ATOMIC_RELAXED) == YM_KIND_MMAP;
	int64_t v = pending_est[mmap] + d;
	if (unlikely(v >= PEAK_STEP || v <= -(int64_t)PEAK_STEP))
		process_flush(mmap, v, d);
	else
		pending_est[mmap] = v;
	if (d <= 0)
		return;
	uint64_t after = __atomic_load_n(&c->alloc_bytes, __ATOMIC_RELAXED);
	if (__atomic_load_n(&stack_writers[stack], __ATOMIC_ACQUIRE) == counts_id(c)) {
		/* Nothing else counted this stack: c is its whole estimate. */
		int64_t mine = (int64_t)(after -
			__atomic_load_n(&c->free_bytes, __ATOMIC_RELAXED));
		if (unlikely(mine > (int64_t)__atomic_load_n(&x->peak_bytes,
							     __ATOMIC_RELAXED)))
			stack_peak_to(x, mine, (int64_t)live_samples(c));
		return;
	}
	if (unlikely(after <= PEAK_STEP ||
		     after / PEAK_STEP != (after - (uint64_t)d) / PEAK_STEP))
		stack_peak(stack, x);
}

static void (*counted_fn)(uint64_t addr);

void table_on_counted(void (*fn)(uint64_t addr))
{
	__atomic_store_n(&counted_fn, fn, __ATOMIC_RELEASE);
}

static inline void counted(uint64_t addr)
{
	void (*fn)(uint64_t) = __atomic_load_n(&counted_fn, __ATOMIC_ACQUIRE);
	if (fn)
		fn(addr);
}

void table_count_alloc(const struct ym_live *e, struct ym_counts *own)
{
	struct ym_counts *c = counts(e->stack, own);
	int o = own != NULL;
	writers_claim(e->stack, c);
	add(&c->alloc_samples, 1, o);
	add(&c->alloc_bytes, e->weight_bytes, o);
	add(&c->alloc_objects_fx, e->weight_fx, o);
	retained_moved(e->stack, (int64_t)e->weight_bytes, c);
	counted(e->addr);
}

/* A sampled block left the sample without being freed (realloc thinned
 * it): its estimate goes, no lifetime is recorded. */
void table_count_drop(const struct ym_live *e, struct ym_counts *own)
{
	struct ym_counts *c = counts(e->stack, own);
	int o = own != NULL;
	writers_claim(e->stack, c);
	add(&c->free_samples, 1, o);
	add(&c->free_bytes, e->weight_bytes, o);
	add(&c->free_objects_fx, e->weight_fx, o);
	retained_moved(e->stack, -(int64_t)e->weight_bytes, c);
	counted(e->addr);
}

/* A sampled block was freed: gone, and its lifetime recorded. */
void table_count_free(const struct ym_live *e, uint64_t now, struct ym_counts *own)
{
	table_count_drop(e, own);
	struct ym_counts *c = counts(e->stack, own);
	int o = own != NULL;
	unsigned b = sample_life_bucket(now > e->birth_mono_ns ?
					now - e->birth_mono_ns : 0);
	add(&c->life[b].objects_fx, e->weight_fx, o);
	add(&c->life[b].bytes, e->weight_bytes, o);
	counted(e->addr);
}

/* A sampled block changed size in realloc: move its stack's retained
 * estimate from the old weights to the new ones. */
void table_count_resize(const struct ym_live *e, uint64_t w, uint64_t wfx,
			struct ym_counts *own)
{
	struct ym_counts *c = counts(e->stack, own);
	int o = own != NULL;
	writers_claim(e->stack, c);
	if (w >= e->weight_bytes)
		add(&c->alloc_bytes, w - e->weight_bytes, o);
	else
		add(&c->free_bytes, e->weight_bytes - w, o);
	if (wfx >= e->weight_fx)
		add(&c->alloc_objects_fx, wfx - e->weight_fx, o);
	else
		add(&c->free_objects_fx, e->weight_fx - wfx, o);
	retained_moved(e->stack, (int64_t)(w - e->weight_bytes), c);
	counted(e->addr);
}

/* The first thread that samples keeps the records, so a single-threaded
 * program costs ymtop nothing more to read; the next YM_PLANES get a
 * plane each, so that threads sampling the same stacks never write the
 * same lines. */
struct ym_counts *table_own_counts(struct table_plane *tp, uint32_t stack)
{
	if (tp->plane == PLANE_NONE)
		return NULL;
	if (tp->plane == 0) {
		uint32_t n = __atomic_fetch_add(&plane_next, 1, __ATOMIC_RELAXED);
		if (n == 0 || n > YM_PLANES) {
			tp->plane = PLANE_NONE;
			return NULL;
		}
		tp->plane = n;   /* plane n - 1, zero-filled */
		tp->backed = 0;
		tp->reset = __atomic_load_n(&hdr->reset_count, __ATOMIC_ACQUIRE);
		__atomic_store_n(&hdr->plane_epoch[n - 1], tp->reset,
				 __ATOMIC_RELEASE);
		uint64_t u = __atomic_load_n(&hdr->planes_used, __ATOMIC_RELAXED);
		while (u < n && !__atomic_compare_exchange_n(&hdr->planes_used, &u, n, 0,
							     __ATOMIC_RELEASE,
							     __ATOMIC_RELAXED))
			;
	}
	uint32_t p = tp->plane - 1;
	YM_ASSERT(p < YM_PLANES);
	uint64_t r = __atomic_load_n(&hdr->reset_count, __ATOMIC_ACQUIRE);
	if (r != tp->reset) {
		/* ymtop reset the counters: zero ours, then say whose they are
		 * (readers skip the plane meanwhile). */
		memset(table_plane_entry(p, 0), 0,
		       (size_t)tp->backed * sizeof(struct ym_counts));
		tp->reset = r;
		__atomic_store_n(&hdr->plane_epoch[p], r, __ATOMIC_RELEASE);
	}
	if (stack >= tp->backed) {
		if (backing_get(table_plane_entry(p, tp->backed),
				(size_t)(stack + 1 - tp->backed) *
				sizeof(struct ym_counts)) != 0)
			return NULL;
		tp->backed = stack + 1;
		__atomic_store_n(&plane_backed[p], tp->backed, __ATOMIC_RELEASE);
	}
	return table_plane_entry(p, stack);
}

uint64_t table_reset_count(void)
{
	return __atomic_load_n(&hdr->reset_count, __ATOMIC_ACQUIRE);
}

void table_reset_counters(void)
{
	YM_ASSERT(__atomic_load_n(&lock.word, __ATOMIC_RELAXED) == 1);
	uint64_t used = hdr->stacks_used;
	for (uint64_t i = 0; i < used; i++) {
		struct ym_stack *s = stack_at((uint32_t)i);
		size_t off = __builtin_offsetof(struct ym_stack, alloc_samples);
		memset((char *)s + off, 0,
		       __builtin_offsetof(struct ym_stack, frames) - off);
		struct ym_stack_ext *x = stack_ext((uint32_t)i);
		__atomic_store_n(&x->peak_bytes, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&x->peak_mono_ns, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&x->peak_samples, 0, __ATOMIC_RELAXED);
	}
	/* Peaks restart with the counters. */
	__atomic_store_n(&hdr->retained_est, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&hdr->peak_retained, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&hdr->peak_mono_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&hdr->mmap_retained_est, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&hdr->mmap_peak_retained, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&hdr->mmap_peak_mono_ns, 0, __ATOMIC_RELAXED);
	__atomic_fetch_add(&hdr->reset_count, 1, __ATOMIC_RELEASE);
}
