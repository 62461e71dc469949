/*
 * The agent's tables: stacks (in the segment, found through a private hash
 * index), live sampled allocations (in the segment, found through private
 * hash chains, with a counting filter in front) and the one lock.
 *
 * Only the sampled slow paths come here, so a lock is fine; it is a spin
 * lock with a bounded number of tries, so that no path can ever wait
 * forever: a caller that cannot take it drops the sample and counts it.
 */
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "agent.h"
#include "backing.h"
#include "sample.h"
#include "shm.h"

uint64_t agent_filter[AGENT_FILTER_WORDS] __attribute__((aligned(64)));
uint64_t agent_filter_live[AGENT_FILTER_WORDS] __attribute__((aligned(64)));
/* Bits that stay set in agent_filter: NULL and bootstrap blocks (those
 * are pinned before the agent is resolved, so before any sample). */
static uint64_t filter_pin[AGENT_FILTER_WORDS];
/* Live samples per bit (lock held); the bit is set while non-zero.  A
 * saturated count stays set until a reset. */
static uint16_t filter_count[1u << AGENT_FILTER_BITS];

/* One word of the gate from the live and pinned bits.  Its writers are
 * serialized (the lock, or a single thread at start-up and after fork);
 * frees read it concurrently. */
static void gate_update(uint32_t w)
{
	uint64_t v = agent.filter_all ? ~0ULL : agent_filter_live[w] | filter_pin[w];
	/* Every free reads these words: a store of the same value (always,
	 * when filter_all) would still take the line from the other CPUs. */
	if (__atomic_load_n(&agent_filter[w], __ATOMIC_RELAXED) != v)
		__atomic_store_n(&agent_filter[w], v, __ATOMIC_RELEASE);
}

void table_filter_pin(const void *p)
{
	uint32_t i = agent_filter_slot(p);
	__atomic_fetch_or(&filter_pin[i / 64], 1ULL << (i % 64), __ATOMIC_RELAXED);
	__atomic_fetch_or(&agent_filter[i / 64], 1ULL << (i % 64), __ATOMIC_RELEASE);
}

/* Whether filter_count may hold non-zero counts.  At start-up it is
 * zero-filled .bss: clearing it would fault in 16 pages for nothing. */
static int filter_dirty;

/* No live sample: the gate holds the pins only (or all ones).  Stores
 * only what changes, so that untouched pages stay untouched. */
static void filter_clear(void)
{
	filter_pin[0] |= 1;   /* NULL */
	for (uint32_t w = 0; w < AGENT_FILTER_WORDS; w++) {
		if (__atomic_load_n(&agent_filter_live[w], __ATOMIC_RELAXED))
			__atomic_store_n(&agent_filter_live[w], 0, __ATOMIC_RELAXED);
		gate_update(w);
	}
	if (__atomic_load_n(&filter_dirty, __ATOMIC_RELAXED))
		memset(filter_count, 0, sizeof filter_count);
	__atomic_store_n(&filter_dirty, 0, __ATOMIC_RELAXED);
}

/* The i-th failed try at a lock.  Holders stay a few hundred ns: spin
 * well past that before a yield (a system call, dear on a virtual
 * machine). */
static void backoff(uint32_t i)
{
	if (i < 1024)
		__builtin_ia32_pause();
	else
		sched_yield();
}

int table_lock(uint32_t spins)
{
	for (uint32_t i = 0; i < spins; i++) {
		if (__atomic_load_n(&agent.lock, __ATOMIC_RELAXED) == 0 &&
		    !__atomic_exchange_n(&agent.lock, 1, __ATOMIC_ACQUIRE))
			return 1;
		backoff(i);
	}
	return 0;
}

void table_unlock(void)
{
	__atomic_store_n(&agent.lock, 0, __ATOMIC_RELEASE);
}

static void *map_private(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* Exact mode's regions of addresses and their parts (stripe_of). */
enum { REGION_SHIFT = 26, REGION_SLOTS = 256, REGION_PROBES = 16 };
static uint64_t region_map[REGION_SLOTS];   /* region + 1 << 8 | part */
static uint32_t region_turn;

static size_t index_bytes(void)
{
	return ((size_t)agent.index_mask + 1) * sizeof *agent.index;
}

static size_t heads_bytes(void)
{
	return (size_t)agent.live_heads_cap * sizeof *agent.live_heads;
}

/* A stripe's chains start with HLOG_MIN heads and double (stripe held)
 * when it holds one entry for four heads, up to heads_log: the heads
 * a stripe uses stay as dense as its live entries, in a few lines, rather
 * than spread over a table sized for the most the stripe could hold (a
 * cache miss at every event in exact mode). */
enum { HLOG_MIN = 4 };

static void heads_init(void)
{
	uint32_t min = agent.heads_log < HLOG_MIN ? agent.heads_log : HLOG_MIN;
	memset(agent.hlog, (int)min, sizeof agent.hlog);
}

int table_init_private(void)
{
	uint32_t n = 1;
	while (n < agent.max_stacks * 2u)
		n <<= 1;
	agent.index_mask = n - 1;
	if (!agent.index && !(agent.index = map_private(index_bytes())))
		return -1;
	/* A chain head for every two entries of the segment's table. */
	n = shm_live_capacity(agent.max_live);
	if (!agent.live_heads) {
		agent.live_heads_cap = n / 2 ? n / 2 : 1;
		if (!(agent.live_heads = map_private(heads_bytes())))
			return -1;
	}
	filter_clear();
	return 0;
}

/* After fork: the child starts from empty tables (zero-filled pages). */
void table_reset_private(void)
{
	if (agent.index)
		madvise(agent.index, index_bytes(), MADV_DONTNEED);
	if (agent.live_heads)
		madvise(agent.live_heads, heads_bytes(), MADV_DONTNEED);
	heads_init();
	filter_clear();
	memset(region_map, 0, sizeof region_map);
	region_turn = 0;
	agent.lock = 0;
	agent.live_probe = 0;
}

static struct ym_stack *stack_at(uint32_t i)
{
	return (struct ym_stack *)(agent.stacks + (size_t)i * agent.stack_stride);
}

void table_map_segment(uint8_t *base, const struct ym_section *sec)
{
	agent.stacks = base + sec[YM_SEC_STACKS].offset;
	agent.stack_stride = sec[YM_SEC_STACKS].stride;
	agent.live = (struct ym_live *)(base + sec[YM_SEC_LIVE].offset);
	agent.stripes = (struct ym_stripe *)(base + sec[YM_SEC_STRIPES].offset);
	agent.planes = (struct ym_counts *)(base + sec[YM_SEC_PLANES].offset);
	agent.stripe_log = (uint32_t)__builtin_ctz(sec[YM_SEC_STRIPES].capacity);
	agent.per_log = (uint32_t)__builtin_ctz(sec[YM_SEC_LIVE].capacity) -
			agent.stripe_log;
	agent.stripe_shift = AGENT_FILTER_BITS - agent.stripe_log;
	/* A head for every two entries, within what table_init_private
	 * mapped for a table of max_live entries. */
	agent.heads_log = agent.per_log ? agent.per_log - 1 : 0;
	while (agent.heads_log > 0 &&
	       ((size_t)1 << (agent.stripe_log + agent.heads_log)) > agent.live_heads_cap)
		agent.heads_log--;
	/* Parts of at least 4 stripes, in exact mode only: elsewhere a
	 * stripe owns the filter words of its addresses (live_filter_off). */
	agent.part_log = agent.rate <= 1 && agent.filter_all &&
			 agent.stripe_log >= 4 ? 2 : 0;
	heads_init();
}

/* The overflow stack, record 0, receives samples that found the table
 * full; it has no frames.  It and the stripes (which every free that hits
 * the filter reads) are backed now; -1 when /dev/shm has no room. */
int table_init_segment(void)
{
	struct ym_stack *s = stack_at(YM_STACK_OVERFLOW);
	if (backing_get(s, agent.stack_stride) != 0 ||
	    backing_get(agent.stripes, sizeof *agent.stripes << agent.stripe_log) != 0)
		return -1;
	s->hash = 1;
	s->depth = 0;
	__atomic_store_n(&agent.hdr->stacks_used, 1, __ATOMIC_RELEASE);
	return 0;
}

static uint64_t hash_frames(const uint64_t *f, uint32_t depth)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ depth;
	for (uint32_t i = 0; i < depth; i++) {
		h ^= f[i];
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h < 2 ? h + 2 : h;   /* 0: unpublished, 1: overflow */
}

/* An index entry: stack + 1 in the low 32 bits, then the depth and 16
 * more bits of the hash, so that a lookup compares the record's frames
 * (never written after publication) and never reads the record's first
 * line, which every sample of that stack writes (its counters): with
 * threads sampling the same stack that line is usually in another CPU's
 * cache. */
static uint64_t index_entry(uint32_t stack, uint64_t h, uint32_t depth)
{
	return (uint64_t)(stack + 1) | (uint64_t)depth << 32 | (h >> 48) << 48;
}

/* Probe the index; returns the stack or UINT32_MAX with *slot the empty
 * index position where it would go. */
static uint32_t probe(uint64_t h, const uint64_t *f, uint32_t depth,
		      uint32_t *slot)
{
	uint32_t mask = agent.index_mask;
	uint32_t i = (uint32_t)h & mask;
	uint64_t tag = index_entry(0, h, depth) & ~0xffffffffULL;
	for (uint32_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
		uint64_t v = __atomic_load_n(&agent.index[i], __ATOMIC_ACQUIRE);
		if (v == 0) {
			*slot = i;
			return UINT32_MAX;
		}
		uint32_t st = (uint32_t)v - 1;
		if ((v & ~0xffffffffULL) == tag &&
		    memcmp(stack_at(st)->frames, f, depth * sizeof *f) == 0)
			return st;
	}
	*slot = UINT32_MAX;
	return UINT32_MAX;
}

/* Find or add a stack.  Lookups take no lock; insertion does. */
uint32_t table_intern(const uint64_t *f, uint32_t depth, uint32_t tid,
		      uint64_t now)
{
	uint64_t h = hash_frames(f, depth);
	uint32_t slot;
	uint32_t found = probe(h, f, depth, &slot);
	if (found != UINT32_MAX)
		return found;

	if (!table_lock(20000)) {
		__atomic_fetch_add(&agent.hdr->drop_busy, 1, __ATOMIC_RELAXED);
		return UINT32_MAX;
	}
	found = probe(h, f, depth, &slot);   /* raced with another insert? */
	if (found == UINT32_MAX) {
		uint64_t used = agent.hdr->stacks_used;
		if (slot == UINT32_MAX ||
		    used >= agent.hdr->sections[YM_SEC_STACKS].capacity ||
		    backing_get(stack_at((uint32_t)used), agent.stack_stride) != 0) {
			found = YM_STACK_OVERFLOW;
			__atomic_fetch_add(&agent.hdr->drop_stacks, 1,
					   __ATOMIC_RELAXED);
			__atomic_fetch_or(&agent.hdr->flags, YM_FLAG_OVERFLOWED,
					  __ATOMIC_RELAXED);
		} else {
			struct ym_stack *s = stack_at((uint32_t)used);
			memcpy(s->frames, f, depth * sizeof *f);
			s->depth = depth;
			s->tid = tid;
			s->first_mono_ns = now;
			s->hash = h;
			found = (uint32_t)used;
			/* Record complete before anyone can find it. */
			__atomic_store_n(&agent.index[slot],
					 index_entry(found, h, depth),
					 __ATOMIC_RELEASE);
			__atomic_store_n(&agent.hdr->stacks_used, used + 1,
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
	size_t cap = agent.hdr->sections[YM_SEC_STACKS].capacity;
	return agent.planes + (size_t)plane * cap + stack;
}

void table_count_alloc(const struct ym_live *e, struct ym_counts *own)
{
	struct ym_counts *c = counts(e->stack, own);
	int o = own != NULL;
	add(&c->alloc_samples, 1, o);
	add(&c->alloc_bytes, e->weight_bytes, o);
	add(&c->alloc_objects_fx, e->weight_fx, o);
}

/* A sampled block left the sample without being freed (realloc thinned
 * it): its estimate goes, no lifetime is recorded. */
void table_count_drop(const struct ym_live *e, struct ym_counts *own)
{
	struct ym_counts *c = counts(e->stack, own);
	int o = own != NULL;
	add(&c->free_samples, 1, o);
	add(&c->free_bytes, e->weight_bytes, o);
	add(&c->free_objects_fx, e->weight_fx, o);
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
}

/* A sampled block changed size in realloc: move its stack's retained
 * estimate from the old weights to the new ones. */
void table_count_resize(const struct ym_live *e, uint64_t w, uint64_t wfx,
			struct ym_counts *own)
{
	struct ym_counts *c = counts(e->stack, own);
	int o = own != NULL;
	if (w >= e->weight_bytes)
		add(&c->alloc_bytes, w - e->weight_bytes, o);
	else
		add(&c->free_bytes, e->weight_bytes - w, o);
	if (wfx >= e->weight_fx)
		add(&c->alloc_objects_fx, wfx - e->weight_fx, o);
	else
		add(&c->free_objects_fx, e->weight_fx - wfx, o);
}

/* ---- Live table: a pool of entries in the segment shared by stripes
 * (segment.h), found through hash chains whose heads are private.  Each
 * stripe's seq is its lock and its seqcount: threads sampling at
 * different addresses never share a line.  A stripe hands out its
 * entries in order and reuses freed ones first (its free list), so the
 * pages the table touches follow the number of live samples, not the
 * table's size: on a virtual machine the first touch of a page costs
 * microseconds even when it is populated.  When sampling, a stripe owns
 * its filter words (the stripe is the filter slot's high bits), so
 * filter_count, agent_filter_live and the gate have one writer per word;
 * exact mode keeps no filter and chooses stripes otherwise (stripe_of).
 *
 * Chain links (heads and next) hold j + 1 for entry j of the stripe, 0
 * for none.  Writers hold the stripe; table_live_has reads without it,
 * so links and addresses are written with atomic stores. */

/* Exact mode has no filter, and every event locks a stripe: with stripes
 * by address bits, two threads would take turns on every stripe's line
 * (and its entries and chain heads), a transfer between CPUs at each
 * event.  There the stripes are in 2^part_log parts, and each 64 MiB
 * region of addresses is given a part, in turn, the first time it is
 * seen: glibc gives each thread's arena heaps of their own, 64 MiB
 * aligned, so threads that free what they allocated keep to their own
 * stripes.  The regions are remembered in a small private table, read
 * without a lock; a region that finds it full takes a part by hash. */
/* Multiplicative hashing: the high half of v times an odd constant.
 * HASH_CHAIN for the live chains and the regions; HASH_PART, another, for
 * the stripe within a part, so that a stripe's entries still spread over
 * all of its chains. */
#define HASH_CHAIN 0x9E3779B97F4A7C15ULL
#define HASH_PART  0xC2B2AE3D27D4EB4FULL

static uint32_t mul_hash(uint64_t v, uint64_t k)
{
	return (uint32_t)(v * k >> 32);
}

static uint32_t region_part(uint64_t addr)
{
	uint64_t r = addr >> REGION_SHIFT, key = r + 1;
	uint32_t h = mul_hash(r, HASH_CHAIN);
	uint32_t mask = (1u << agent.part_log) - 1;
	for (uint32_t i = 0; i < REGION_PROBES; i++) {
		uint64_t *slot = &region_map[(h + i) & (REGION_SLOTS - 1)];
		uint64_t v = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
		if (v == 0) {
			uint32_t part = __atomic_fetch_add(&region_turn, 1,
							   __ATOMIC_RELAXED) & mask;
			uint64_t mine = key << 8 | part;
			if (__atomic_compare_exchange_n(slot, &v, mine, 0,
							__ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE))
				return part;
			/* v: what another thread put there first */
		}
		if (v >> 8 == key)
			return (uint32_t)v & mask;
	}
	return h & mask;
}

static struct ym_stripe *stripe_of(uint64_t addr)
{
	if (agent.part_log == 0)
		return &agent.stripes[agent_filter_slot((void *)addr) >>
				      agent.stripe_shift];
	/* Within the part: the top bits of a hash that is not the chains'. */
	uint32_t in = agent.stripe_log - agent.part_log;
	uint32_t h = mul_hash(addr >> 4, HASH_PART);
	return &agent.stripes[region_part(addr) << in | h >> (32 - in)];
}

static uint32_t stripe_no(const struct ym_stripe *st)
{
	return (uint32_t)(st - agent.stripes);
}

static uint32_t stripe_capacity(void)
{
	return 1u << agent.per_log;
}

/* Entry j of stripe s. */
static struct ym_live *live_at(uint32_t s, uint32_t j)
{
	return &agent.live[ym_live_index(s, j, 1u << agent.stripe_log)];
}

static uint32_t live_hash(uint64_t addr)
{
	return mul_hash(addr >> 4, HASH_CHAIN);
}

static uint32_t *heads_of(uint32_t s)
{
	return &agent.live_heads[(size_t)s << agent.heads_log];
}

static uint32_t hlog_load(uint32_t s)
{
	return __atomic_load_n(&agent.hlog[s], __ATOMIC_RELAXED);
}

static uint32_t *live_head(uint32_t s, uint64_t addr)
{
	return &heads_of(s)[live_hash(addr) & ((1u << hlog_load(s)) - 1)];
}

static uint32_t link_load(const uint32_t *l)
{
	return __atomic_load_n(l, __ATOMIC_RELAXED);
}

static void link_store(uint32_t *l, uint32_t v)
{
	__atomic_store_n(l, v, __ATOMIC_RELAXED);
}

/* Take the stripe: seq from even to odd.  Returns the odd value (for
 * stripe_unlock), 0 when still busy after `spins` tries. */
static uint64_t stripe_lock(struct ym_stripe *st, uint32_t spins)
{
	for (uint32_t i = 0; i < spins; i++) {
		uint64_t v = __atomic_load_n(&st->seq, __ATOMIC_RELAXED);
		if (!(v & 1) &&
		    __atomic_compare_exchange_n(&st->seq, &v, v + 1, 0,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			/* Readers must see seq odd before any entry we change. */
			__atomic_thread_fence(__ATOMIC_RELEASE);
			return v + 1;
		}
		backoff(i);
	}
	return 0;
}

static void stripe_unlock(struct ym_stripe *st, uint64_t odd)
{
	__atomic_store_n(&st->seq, odd + 1, __ATOMIC_RELEASE);
}

/* free's lock-free probe pays off once filter false positives are
 * frequent (live samples / 2^15 filter bits); below that it reads a
 * stripe line that the lock holder writes, for nothing.  Hysteresis:
 * every sampled free reads the flag, it should rarely change.  The
 * stripe's count times the stripes estimates the total.  Stripe held. */
static void live_probe_update(const struct ym_stripe *st)
{
	uint64_t n = st->count << agent.stripe_log;
	int on = agent.live_probe ? n > 512 : n > 1024;
	if (on != __atomic_load_n(&agent.live_probe, __ATOMIC_RELAXED))
		__atomic_store_n(&agent.live_probe, on, __ATOMIC_RELAXED);
}

/* Split every chain of stripe s in two: entries whose hash has bit hlog
 * set move to the new head hlog + 2^hlog.  table_live_has may walk a
 * chain meanwhile: the stripe's seq is odd, so it answers "maybe". */
static void heads_grow(const struct ym_stripe *st)
{
	uint32_t s = stripe_no(st), lg = agent.hlog[s];
	if (lg >= agent.heads_log || st->count << 2 < (1u << lg))
		return;
	uint32_t *heads = heads_of(s), half = 1u << lg, used = (uint32_t)st->used;
	for (uint32_t b = 0; b < half; b++) {
		uint32_t j = heads[b], lo = 0, hi = 0;
		uint32_t *lo_end = &lo, *hi_end = &hi;
		for (uint32_t n = 0; j != 0 && j <= used && n < used; n++) {
			struct ym_live *e = live_at(s, j - 1);
			uint32_t next = e->next;
			if (live_hash(e->addr) & half) {
				*hi_end = j;
				hi_end = &e->next;
			} else {
				*lo_end = j;
				lo_end = &e->next;
			}
			j = next;
		}
		link_store(lo_end, 0);
		link_store(hi_end, 0);
		link_store(&heads[b], lo);
		link_store(&heads[b + half], hi);
	}
	__atomic_store_n(&agent.hlog[s], lg + 1, __ATOMIC_RELAXED);
}

/* Stripe held: the bitmap words have one writer at a time. */
static void filter_set(uint32_t i, int on)
{
	uint64_t *w = &agent_filter_live[i / 64];
	uint64_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
	v = on ? v | 1ULL << (i % 64) : v & ~(1ULL << (i % 64));
	__atomic_store_n(w, v, __ATOMIC_RELEASE);
	gate_update(i / 64);
}

/* Exact mode: every free and realloc asks the live table itself (the gate
 * is all ones, agent_filter_live is not read), so the live filter is not
 * kept: its words and counts were lines that every sample of every
 * thread wrote. */
static int live_filter_off(void)
{
	return agent.rate <= 1 && agent.filter_all;
}

static void filter_inc(uint64_t addr)
{
	if (live_filter_off())
		return;
	uint32_t i = agent_filter_slot((void *)addr);
	if (filter_count[i] == UINT16_MAX)
		return;
	if (!__atomic_load_n(&filter_dirty, __ATOMIC_RELAXED))
		__atomic_store_n(&filter_dirty, 1, __ATOMIC_RELAXED);
	if (filter_count[i]++ == 0)
		filter_set(i, 1);
}

static void filter_dec(uint64_t addr)
{
	if (live_filter_off())
		return;
	uint32_t i = agent_filter_slot((void *)addr);
	if (filter_count[i] == 0 || filter_count[i] == UINT16_MAX)
		return;
	if (--filter_count[i] == 0)
		filter_set(i, 0);
}

int table_live_has(uint64_t addr)
{
	struct ym_stripe *st = stripe_of(addr);
	/* A stripe never used has no chains to read (nor pages to touch). */
	uint32_t used = (uint32_t)__atomic_load_n(&st->used, __ATOMIC_ACQUIRE);
	if (used == 0)
		return 0;
	uint64_t s1 = __atomic_load_n(&st->seq, __ATOMIC_ACQUIRE);
	if (s1 & 1)
		return 1;
	uint32_t s = stripe_no(st), found = 0;
	uint32_t j = link_load(live_head(s, addr));
	/* Bounded: a concurrent writer may relink what we walk. */
	for (uint32_t n = 0; j != 0 && j <= used && n < used; n++) {
		const struct ym_live *e = live_at(s, j - 1);
		if (__atomic_load_n(&e->addr, __ATOMIC_RELAXED) == addr) {
			found = 1;
			break;
		}
		j = link_load(&e->next);
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	/* A concurrent writer may have moved the chain under us. */
	return found || __atomic_load_n(&st->seq, __ATOMIC_RELAXED) != s1;
}

/* Stripe held: the link that holds addr's entry (a head or an entry's
 * next), or the 0 that ends its chain; NULL when the chain is longer
 * than the stripe has entries (never, unless the segment was written by
 * someone else: then the address is treated as not there). */
static uint32_t *live_link(const struct ym_stripe *st, uint64_t addr)
{
	uint32_t s = stripe_no(st), used = (uint32_t)st->used;
	uint32_t *l = live_head(s, addr);
	for (uint32_t n = 0; n <= used; n++) {
		uint32_t j = *l;
		if (j == 0)
			return l;
		if (j > used)
			return NULL;
		struct ym_live *e = live_at(s, j - 1);
		if (e->addr == addr)
			return l;
		l = &e->next;
	}
	return NULL;
}

/* A stripe's free list is split in lanes, one per thread (mod the lanes):
 * an entry a thread freed goes to its own lane, and it takes from there
 * first.  Entries are cache lines; with one list, the entry a thread took
 * was most often the one another thread had just written, and two threads
 * in exact mode paid a line transfer per event. */
static uint32_t lane_own(void)
{
	return agent_tls.tid & (YM_STRIPE_LANES - 1);
}

static uint32_t lane_pop(struct ym_stripe *st, uint32_t lane)
{
	uint32_t j = st->free[lane];
	if (j == 0)
		return 0;
	if (j > st->used) {   /* not ours (a damaged segment): drop the list */
		st->free[lane] = 0;
		return 0;
	}
	st->free[lane] = live_at(stripe_no(st), j - 1)->next;
	return j;
}

/* Stripe held: a free entry's j + 1, 0 when none is left or /dev/shm is
 * full.  Its own lane first; then a new entry, unless more than half of
 * what the stripe handed out lies free in other lanes (threads that
 * exited, or that free what others allocate): then theirs. */
static uint32_t live_take(struct ym_stripe *st)
{
	uint32_t own = lane_own(), j = lane_pop(st, own);
	if (j != 0)
		return j;
	uint32_t used = (uint32_t)st->used;
	if (used < stripe_capacity() && (used - st->count) * 2 <= used) {
		j = used + 1;
		if (backing_get(live_at(stripe_no(st), j - 1),
				sizeof(struct ym_live)) == 0) {
			__atomic_store_n(&st->used, j, __ATOMIC_RELEASE);
			return j;
		}
	}
	for (uint32_t i = 1; i < YM_STRIPE_LANES; i++)
		if ((j = lane_pop(st, (own + i) & (YM_STRIPE_LANES - 1))) != 0)
			return j;
	return 0;
}

/* Stripe held.  A reader may copy the entry meanwhile: it checks the
 * stripe's seq afterwards and copies again.  The address goes last. */
static void live_fill(struct ym_live *d, const struct ym_live *e)
{
	d->size = e->size;
	d->weight_bytes = e->weight_bytes;
	d->weight_fx = e->weight_fx;
	d->birth_mono_ns = e->birth_mono_ns;
	d->stack = e->stack;
	d->tid = e->tid;
	__atomic_store_n(&d->addr, e->addr, __ATOMIC_RELAXED);
}

int table_live_remove(uint64_t addr, struct ym_live *out, uint32_t spins)
{
	struct ym_stripe *st = stripe_of(addr);
	if (__atomic_load_n(&st->used, __ATOMIC_ACQUIRE) == 0)
		return 0;   /* never inserted into: nothing to lock */
	uint64_t seq = stripe_lock(st, spins);
	if (!seq)
		return 0;
	uint32_t *l = live_link(st, addr);
	uint32_t j = l ? *l : 0;
	if (j != 0) {
		struct ym_live *e = live_at(stripe_no(st), j - 1);
		*out = *e;
		link_store(l, e->next);
		__atomic_store_n(&e->addr, 0, __ATOMIC_RELAXED);
		uint32_t lane = lane_own();
		link_store(&e->next, st->free[lane]);
		st->free[lane] = j;
		__atomic_store_n(&st->count, st->count - 1, __ATOMIC_RELAXED);
		filter_dec(addr);
		live_probe_update(st);
	}
	stripe_unlock(st, seq);
	return j != 0;
}

/* Returns 1 when inserted, 0 when the stripe is full, -1 when the stripe
 * stayed busy. */
int table_live_insert(const struct ym_live *e, uint32_t spins)
{
	struct ym_stripe *st = stripe_of(e->addr);
	uint64_t seq = stripe_lock(st, spins);
	if (!seq)
		return -1;
	uint32_t *l = live_link(st, e->addr);
	int ok = l != NULL;
	if (l && *l != 0) {
		/* A stale entry: we missed its free.  Count it freed now
		 * rather than leave it retained forever; the new entry takes
		 * its place (same address: same filter bit). */
		struct ym_live *old = live_at(stripe_no(st), *l - 1);
		table_count_free(old, e->birth_mono_ns, NULL);
		live_fill(old, e);
	} else if (l) {
		uint32_t j = live_take(st);
		if (j == 0) {
			ok = 0;
		} else {
			struct ym_live *d = live_at(stripe_no(st), j - 1);
			link_store(&d->next, 0);
			live_fill(d, e);
			link_store(l, j);
			__atomic_store_n(&st->count, st->count + 1, __ATOMIC_RELAXED);
			filter_inc(e->addr);
			live_probe_update(st);
			heads_grow(st);
		}
	}
	stripe_unlock(st, seq);
	return ok;
}

/* ymtop asked to forget every sample: empty the live table and zero the
 * counters (frames stay, so stacks keep their indexes).  Every stripe is
 * taken, in order (their holders never wait for anything). */
int table_reset_counters(void)
{
	uint32_t n = 1u << agent.stripe_log, taken;
	uint64_t seq[YM_LIMIT_STRIPES];
	for (taken = 0; taken < n; taken++)
		if (!(seq[taken] = stripe_lock(&agent.stripes[taken], 1000000)))
			break;
	int all = taken == n;
	if (all) {
		for (uint32_t i = 0; i < n; i++) {
			struct ym_stripe *st = &agent.stripes[i];
			/* What the stripe used, and no more: the rest are
			 * holes (entries) or untouched pages (heads). */
			if (st->used == 0)
				continue;
			for (uint32_t j = 0; j < st->used; j++)
				memset(live_at(i, j), 0, sizeof *agent.live);
			memset(heads_of(i), 0,
			       sizeof *agent.live_heads << agent.hlog[i]);
			__atomic_store_n(&st->count, 0, __ATOMIC_RELAXED);
			memset(st->free, 0, sizeof st->free);
			__atomic_store_n(&st->used, 0, __ATOMIC_RELEASE);
		}
		filter_clear();
		heads_init();
		live_probe_update(&agent.stripes[0]);
	}
	while (taken > 0) {
		taken--;
		stripe_unlock(&agent.stripes[taken], seq[taken]);
	}
	if (!all)
		return 0;
	uint64_t used = agent.hdr->stacks_used;
	for (uint64_t i = 0; i < used; i++) {
		struct ym_stack *s = stack_at((uint32_t)i);
		size_t off = __builtin_offsetof(struct ym_stack, alloc_samples);
		memset((char *)s + off, 0,
		       __builtin_offsetof(struct ym_stack, frames) - off);
	}
	__atomic_fetch_add(&agent.hdr->reset_count, 1, __ATOMIC_RELEASE);
	return 1;
}
