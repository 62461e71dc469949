/*
 * live: the live table and its filters (live.h).  Sampled allocations not
 * yet freed, in the segment (STRIPES, LIVE), found through hash chains
 * whose heads are private, with a counting filter in front that free's
 * fast path reads.  Only the sampled slow paths come here.
 *
 * State, all of it this file's: the filters and their counts, the chain
 * heads (private memory), the stripes' geometry, exact mode's region map,
 * and the segment's STRIPES and LIVE sections, which nothing else writes.
 */
#include <string.h>
#include <sys/mman.h>

#include "backing.h"
#include "live.h"
#include "os.h"
#include "segpriv.h"
#include "shm.h"
#include "table.h"

uint64_t agent_filter[AGENT_FILTER_WORDS] __attribute__((aligned(64)));
uint64_t agent_filter_live[AGENT_FILTER_WORDS] __attribute__((aligned(64)));
/* Bits that stay set in agent_filter: NULL and bootstrap blocks (those
 * are pinned before the agent is resolved, so before any sample). */
static uint64_t filter_pin[AGENT_FILTER_WORDS];
/* Live samples per bit (stripe held); the bit is set while non-zero.  A
 * saturated count stays set until a reset. */
static uint16_t filter_count[1u << AGENT_FILTER_BITS];

/* Set once before the segment (live_init_private), kept across fork. */
static int exact;          /* YM_SAMPLE_RATE=1 */
/* Every free takes the slow path: exact mode, or usable size is a call
 * (the gate invariant, live.h). */
static int filter_all;

/* The segment's table (live_map_segment): 2^stripe_log stripes of
 * 2^per_log entries; a filter slot (agent_filter_slot) >> stripe_shift
 * is the stripe when sampling. */
static struct ym_live   *live;
static struct ym_stripe *stripes;
static uint32_t stripe_log, per_log, stripe_shift;
static uint32_t part_log;   /* exact mode: 2^part_log parts (stripe_of) */

/* The chains' heads (private): room for 2^heads_log heads a stripe, of
 * which stripe s uses 2^hlog[s]. */
static uint32_t *live_heads;
static uint32_t  live_heads_cap;
static uint32_t  heads_log;
static uint8_t   hlog[YM_LIVE_STRIPES];
/* A head holds j + 1 of its chain's first entry in the bits of head_jmask
 * and, above them, the chain's marks (chain_mark): all ones while a
 * stripe's entries need every bit of the word (no marks then). */
static uint32_t  head_jmask = UINT32_MAX;

/* One word of the gate from the live and pinned bits.  Its writers are
 * serialized (the lock, or a single thread at start-up and after fork)
 * but for live_filter_pin's atomic or; frees read it concurrently: every
 * access to a gate, live or pin word is atomic (relaxed loads are plain
 * movs on x86-64). */
static void gate_update(uint32_t w)
{
	uint64_t v = filter_all ? ~0ULL :
		__atomic_load_n(&agent_filter_live[w], __ATOMIC_RELAXED) |
		__atomic_load_n(&filter_pin[w], __ATOMIC_RELAXED);
	/* Every free reads these words: a store of the same value (always,
	 * when filter_all) would still take the line from the other CPUs. */
	if (__atomic_load_n(&agent_filter[w], __ATOMIC_RELAXED) != v)
		__atomic_store_n(&agent_filter[w], v, __ATOMIC_RELEASE);
	YM_ASSERT(!filter_all ||
		  __atomic_load_n(&agent_filter[w], __ATOMIC_RELAXED) == ~0ULL);
}

void live_filter_pin(const void *p)
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

/* Exact mode's regions of addresses and their parts (stripe_of). */
enum { REGION_SHIFT = 26, REGION_SLOTS = 256, REGION_PROBES = 16 };
static uint64_t region_map[REGION_SLOTS];   /* region + 1 << 8 | part */
static uint32_t region_turn;


static size_t heads_bytes(void)
{
	return (size_t)live_heads_cap * sizeof *live_heads;
}

/* A stripe's chains start with HLOG_MIN heads and double (stripe held)
 * when it holds one entry for four heads, up to heads_log: the heads
 * a stripe uses stay as dense as its live entries, in a few lines, rather
 * than spread over a table sized for the most the stripe could hold (a
 * cache miss at every event in exact mode). */
enum { HLOG_MIN = 4 };
/* Heads: entry numbers in the low HEAD_JBITS bits when a stripe holds
 * fewer than 2^HEAD_JBITS entries; 2^HEAD_MARK_LOG mark bits above. */
enum { HEAD_JBITS = 24, HEAD_MARK_LOG = 3 };
_Static_assert(HEAD_JBITS + (1 << HEAD_MARK_LOG) == 32, "a head is a word");

static void heads_init(void)
{
	uint32_t min = heads_log < HLOG_MIN ? heads_log : HLOG_MIN;
	memset(hlog, (int)min, sizeof hlog);
}


void live_init_gate(int exact_mode, int glibc_usable)
{
	exact = exact_mode;
	filter_all = exact_mode || !glibc_usable;
	/* The gate invariant (live.h): what free's fast path relies on. */
	YM_ASSERT(filter_all || glibc_usable);
	if (filter_all) {
		filter_clear();
		return;
	}
	/* Nothing is sampled yet (a fork child's filter was cleared): the
	 * gate is its pins, NULL's and the bootstrap blocks', and its
	 * zero-filled pages stay untouched (a short process's start). */
	filter_pin[0] |= 1;
	gate_update(0);
}

int live_init_private(uint32_t max_live, int exact_mode, int glibc_usable)
{
	exact = exact_mode;
	filter_all = exact_mode || !glibc_usable;
	YM_ASSERT(filter_all || glibc_usable);
	/* A chain head for every two entries of the segment's table. */
	uint32_t n = shm_live_capacity(max_live), cap = n / 2 ? n / 2 : 1;
	/* Mapped once a process (a child keeps its parent's, emptied);
	 * again only for a table of another size (tests). */
	if (live_heads && cap != live_heads_cap) {
		os_unmap(live_heads, heads_bytes());
		live_heads = NULL;
	}
	if (!live_heads) {
		live_heads_cap = cap;
		if (!(live_heads = agent_map_private(heads_bytes())))
			return -1;
	}
	filter_clear();
	return 0;
}

void live_unmap_private(void)
{
	if (live_heads)
		os_unmap(live_heads, heads_bytes());
	live_heads = NULL;
}

void live_reset_private(void)
{
	if (live_heads)
		os_advise(live_heads, heads_bytes(), MADV_DONTNEED);
	heads_init();
	filter_clear();
	memset(region_map, 0, sizeof region_map);
	region_turn = 0;
}

void live_map_segment(uint8_t *base, const struct ym_section *sec)
{
	live = (struct ym_live *)(base + sec[YM_SEC_LIVE].offset);
	stripes = (struct ym_stripe *)(base + sec[YM_SEC_STRIPES].offset);
	stripe_log = (uint32_t)__builtin_ctz(sec[YM_SEC_STRIPES].capacity);
	per_log = (uint32_t)__builtin_ctz(sec[YM_SEC_LIVE].capacity) - stripe_log;
	stripe_shift = AGENT_FILTER_BITS - stripe_log;
	table_on_counted(live_counted);
	/* A head for every two entries, within what live_init_private
	 * mapped for a table of max_live entries. */
	heads_log = per_log ? per_log - 1 : 0;
	head_jmask = per_log < HEAD_JBITS ? (1u << HEAD_JBITS) - 1 : UINT32_MAX;
	while (heads_log > 0 &&
	       ((size_t)1 << (stripe_log + heads_log)) > live_heads_cap)
		heads_log--;
	/* Parts of at least 4 stripes, in exact mode only: elsewhere a
	 * stripe owns the filter words of its addresses (live_filter_off). */
	part_log = exact && filter_all && stripe_log >= 4 ? 2 : 0;
	heads_init();
}

int live_init_segment(void)
{
	return backing_get(stripes, sizeof *stripes << stripe_log);
}

uint32_t live_part_log(void)
{
	return part_log;
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
 * for none; a head also holds its chain's marks (chain_mark) above the
 * entry number.  New entries go in front.  Writers hold the stripe;
 * live_has reads without it, so links and addresses are written with
 * atomic stores. */

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
	uint32_t mask = (1u << part_log) - 1;
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
	if (part_log == 0)
		return &stripes[agent_filter_slot((void *)addr) >>
				      stripe_shift];
	/* Within the part: the top bits of a hash that is not the chains'. */
	uint32_t in = stripe_log - part_log;
	uint32_t h = mul_hash(addr >> 4, HASH_PART);
	return &stripes[region_part(addr) << in | h >> (32 - in)];
}

void live_counted(uint64_t addr)
{
	if (stripes)
		__atomic_fetch_add(&stripe_of(addr)->counted, 1, __ATOMIC_RELEASE);
}

static uint32_t stripe_no(const struct ym_stripe *st)
{
	return (uint32_t)(st - stripes);
}

static uint32_t stripe_capacity(void)
{
	return 1u << per_log;
}

/* Entry j of stripe s. */
static struct ym_live *live_at(uint32_t s, uint32_t j)
{
	return &live[ym_live_index(s, j, 1u << stripe_log)];
}

static uint32_t live_hash(uint64_t addr)
{
	return mul_hash(addr >> 4, HASH_CHAIN);
}

static uint32_t *heads_of(uint32_t s)
{
	return &live_heads[(size_t)s << heads_log];
}

static uint32_t hlog_load(uint32_t s)
{
	return __atomic_load_n(&hlog[s], __ATOMIC_RELAXED);
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

/* A chain's marks: one bit of HEAD_MARKS for each entry on it, chosen by
 * its address hash's top bits (the head's index takes the low ones), set
 * in the head when the entry is linked and left there when it goes (a
 * superset), made exact again by an insert that walked the whole chain
 * and by heads_grow.  An insert whose mark is clear in the head knows
 * without reading an entry that its address is on no entry of the chain
 * (so no stale entry of it waits there), and links the new entry in
 * front: at 0.4 entries a head, four inserts in ten read an entry of
 * another block otherwise, a cache miss each in exact mode.  0: no
 * marks (head_jmask all ones). */
static uint32_t chain_mark(uint64_t addr)
{
	if (head_jmask == UINT32_MAX)
		return 0;
	return 1u << (HEAD_JBITS + (live_hash(addr) >> (32 - HEAD_MARK_LOG)));
}

/* The entry (j + 1) link l holds; h is its chain's head. */
static uint32_t link_entry(const uint32_t *l, const uint32_t *h)
{
	uint32_t v = link_load(l);
	return l == h ? v & head_jmask : v;
}

/* Point link l (the head h, or an entry's next) at entry j + 1; a head
 * keeps its marks. */
static void link_point(uint32_t *l, const uint32_t *h, uint32_t j)
{
	if (l == h)
		j |= link_load(l) & ~head_jmask;
	link_store(l, j);
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
		agent_backoff(i);
	}
	return 0;
}

static void stripe_unlock(struct ym_stripe *st, uint64_t odd)
{
	YM_ASSERT((odd & 1) && __atomic_load_n(&st->seq, __ATOMIC_RELAXED) == odd);
	__atomic_store_n(&st->seq, odd + 1, __ATOMIC_RELEASE);
}

/* Split every chain of stripe s in two: entries whose hash has bit hlog
 * set move to the new head hlog + 2^hlog.  live_has may walk a
 * chain meanwhile: the stripe's seq is odd, so it answers "maybe". */
static void heads_grow(const struct ym_stripe *st)
{
	uint32_t s = stripe_no(st), lg = hlog[s];
	if (lg >= heads_log || st->count << 2 < (1u << lg))
		return;
	uint32_t *heads = heads_of(s), half = 1u << lg, used = (uint32_t)st->used;
	for (uint32_t b = 0; b < half; b++) {
		uint32_t j = heads[b] & head_jmask, lo = 0, hi = 0;
		uint32_t lo_marks = 0, hi_marks = 0;
		uint32_t *lo_end = &lo, *hi_end = &hi;
		for (uint32_t n = 0; j != 0 && j <= used && n < used; n++) {
			struct ym_live *e = live_at(s, j - 1);
			uint32_t next = *ym_live_next(e);
			if (live_hash(e->addr) & half) {
				*hi_end = j;
				hi_end = ym_live_next(e);
				hi_marks |= chain_mark(e->addr);
			} else {
				*lo_end = j;
				lo_end = ym_live_next(e);
				lo_marks |= chain_mark(e->addr);
			}
			j = next;
		}
		link_store(lo_end, 0);
		link_store(hi_end, 0);
		link_store(&heads[b], lo | lo_marks);
		link_store(&heads[b + half], hi | hi_marks);
	}
	__atomic_store_n(&hlog[s], lg + 1, __ATOMIC_RELAXED);
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
	return exact;
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

int live_has(uint64_t addr)
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
	uint32_t j = link_load(live_head(s, addr)) & head_jmask;
	/* Bounded: a concurrent writer may relink what we walk. */
	for (uint32_t n = 0; j != 0 && j <= used && n < used; n++) {
		const struct ym_live *e = live_at(s, j - 1);
		if (__atomic_load_n(&e->addr, __ATOMIC_RELAXED) == addr) {
			found = 1;
			break;
		}
		j = link_load(ym_live_next_c(e));
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	/* A concurrent writer may have moved the chain under us. */
	return found || __atomic_load_n(&st->seq, __ATOMIC_RELAXED) != s1;
}

void live_prefetch(uint64_t addr)
{
	if (!stripes)
		return;
	struct ym_stripe *st = stripe_of(addr);
	__builtin_prefetch(live_head(stripe_no(st), addr), 1, 3);
}

#ifdef YM_AGENT_TEST
/* Entries of other addresses a walk passed (the unit tests'). */
static uint64_t links_passed;

uint64_t live_test_links_passed(void)
{
	return links_passed;
}
#endif

/* Stripe held: the link that holds addr's entry (its chain's head h or
 * an entry's next), or the one that ends its chain, which holds 0; NULL
 * when the chain is longer than the stripe has entries (never, unless
 * the segment was written by someone else: then the address is treated
 * as not there).  *marks: the chain marks of the entries it passed. */
static uint32_t *live_link(const struct ym_stripe *st, uint32_t *h,
			   uint64_t addr, uint32_t *marks)
{
	YM_ASSERT(__atomic_load_n(&st->seq, __ATOMIC_RELAXED) & 1);
	uint32_t s = stripe_no(st), used = (uint32_t)st->used, m = 0;
	uint32_t *l = h;
	for (uint32_t n = 0; n <= used; n++) {
		uint32_t j = link_entry(l, h);
		if (j > used)
			return NULL;
		if (j == 0 || live_at(s, j - 1)->addr == addr) {
			*marks = m;
			return l;
		}
		struct ym_live *e = live_at(s, j - 1);
		m |= chain_mark(e->addr);
		l = ym_live_next(e);
#ifdef YM_AGENT_TEST
		links_passed++;
#endif
	}
	return NULL;
}

/* A stripe's free list is split in lanes, one per thread (mod the lanes):
 * an entry a thread freed goes to its own lane, and it takes from there
 * first.  Entries are cache lines; with one list, the entry a thread took
 * was most often the one another thread had just written, and two threads
 * in exact mode paid a line transfer per event. */
static uint32_t lane_of(uint32_t tid)
{
	return tid & (YM_STRIPE_LANES - 1);
}

static uint32_t lane_pop(struct ym_stripe *st, uint32_t lane)
{
	uint32_t j = link_load(ym_stripe_free(st, lane));
	if (j == 0)
		return 0;
	if (j > st->used) {   /* not ours (a damaged segment): drop the list */
		link_store(ym_stripe_free(st, lane), 0);
		return 0;
	}
	uint32_t next = *ym_live_next(live_at(stripe_no(st), j - 1));
	/* Atomic: live_prefetch_insert reads the lanes without the lock. */
	link_store(ym_stripe_free(st, lane), next);
	/* The next pop reads that entry's link: freed entries are taken
	 * back long after (a program frees in bursts), out of the cache. */
	if (next != 0 && next <= st->used)
		__builtin_prefetch(live_at(stripe_no(st), next - 1), 1, 3);
	return j;
}

/* Stripe held: a free entry's j + 1, 0 when none is left or /dev/shm is
 * full.  Its own lane first; then a new entry, unless more than half of
 * what the stripe handed out lies free in other lanes (threads that
 * exited, or that free what others allocate): then theirs. */
static uint32_t live_take(struct ym_stripe *st, uint32_t tid)
{
	uint32_t own = lane_of(tid), j = lane_pop(st, own);
	if (j != 0)
		return j;
	uint32_t used = (uint32_t)st->used;
	if (used < stripe_capacity() && (used - st->count) * 2 <= used) {
		j = used + 1;
		/* A page at a time: a stripe's blocks of entries are
		 * interleaved with the other stripes' (ym_live_index), so
		 * the bytes ahead are mostly other parts' entries, which a
		 * single-threaded program never uses. */
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

void live_prefetch_insert(uint64_t addr, uint32_t tid)
{
	if (!stripes)
		return;
	struct ym_stripe *st = stripe_of(addr);
	uint32_t s = stripe_no(st);
	__builtin_prefetch(live_head(s, addr), 1, 3);
	/* The entry live_take will hand out: the lane's first, else the
	 * next new one.  Read without the lock: a hint, bounded by used. */
	uint32_t used = (uint32_t)__atomic_load_n(&st->used, __ATOMIC_RELAXED);
	uint32_t j = link_load(ym_stripe_free(st, lane_of(tid)));
	if (j == 0 && used < stripe_capacity())
		j = used + 1;
	if (j != 0 && j <= used + 1 && j <= stripe_capacity())
		__builtin_prefetch(live_at(s, j - 1), 1, 3);
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

int live_remove(uint64_t addr, uint32_t tid, struct ym_live *out, uint32_t spins)
{
	struct ym_stripe *st = stripe_of(addr);
	if (__atomic_load_n(&st->used, __ATOMIC_ACQUIRE) == 0)
		return 0;   /* never inserted into: nothing to lock */
	uint64_t seq = stripe_lock(st, spins);
	if (!seq)
		return 0;
	uint32_t *h = live_head(stripe_no(st), addr), marks;
	uint32_t *l = live_link(st, h, addr, &marks);
	uint32_t j = l ? link_entry(l, h) : 0;
	if (j != 0) {
		struct ym_live *e = live_at(stripe_no(st), j - 1);
		*out = *e;
		link_point(l, h, *ym_live_next(e));
		__atomic_store_n(&e->addr, 0, __ATOMIC_RELAXED);
		uint32_t lane = lane_of(tid);
		link_store(ym_live_next(e), link_load(ym_stripe_free(st, lane)));
		link_store(ym_stripe_free(st, lane), j);
		__atomic_store_n(&st->count, st->count - 1, __ATOMIC_RELAXED);
		filter_dec(addr);
	}
	stripe_unlock(st, seq);
	return j != 0;
}

/* Returns 1 when inserted, 0 when the stripe is full, -1 when the stripe
 * stayed busy. */
int live_insert(const struct ym_live *e, uint32_t tid, uint32_t spins)
{
	YM_ASSERT(e->addr != 0);   /* 0 marks a free entry */
	struct ym_stripe *st = stripe_of(e->addr);
	uint64_t seq = stripe_lock(st, spins);
	if (!seq)
		return -1;
	uint32_t s = stripe_no(st), *h = live_head(s, e->addr);
	uint32_t mark = chain_mark(e->addr), marks = 0, *l = h;
	/* Marked (or no marks): walk the chain for a stale entry of this
	 * address; its marks are then exactly those walked.  Unmarked: no
	 * entry of it there, and nothing to read. */
	int walk = mark == 0 || (link_load(h) & mark);
	if (walk)
		l = live_link(st, h, e->addr, &marks);
	else
		marks = link_load(h) & ~head_jmask;
	int ok = l != NULL;
	if (l && walk && link_entry(l, h) != 0) {
		/* A stale entry: we missed its free.  Count it freed now
		 * rather than leave it retained forever; the new entry takes
		 * its place (same address: same filter bit). */
		struct ym_live *old = live_at(s, link_entry(l, h) - 1);
		table_count_free(old, e->birth_mono_ns, NULL);
		live_fill(old, e);
	} else if (l) {
		uint32_t j = live_take(st, tid);
		if (j == 0) {
			ok = 0;
		} else {
			/* In front, the chain's marks and its own in the head. */
			struct ym_live *d = live_at(s, j - 1);
			link_store(ym_live_next(d), link_load(h) & head_jmask);
			live_fill(d, e);
			link_store(h, j | marks | mark);
			__atomic_store_n(&st->count, st->count + 1, __ATOMIC_RELAXED);
			filter_inc(e->addr);
			heads_grow(st);
		}
	}
	stripe_unlock(st, seq);
	return ok;
}

/* ymtop asked to forget every sample: every stripe is taken, in order
 * (their holders never wait for anything), and emptied. */
int live_reset(void)
{
	uint32_t n = 1u << stripe_log, taken;
	uint64_t seq[YM_LIMIT_STRIPES];
	for (taken = 0; taken < n; taken++)
		if (!(seq[taken] = stripe_lock(&stripes[taken], AGENT_SPINS_LONG)))
			break;
	int all = taken == n;
	if (all) {
		for (uint32_t i = 0; i < n; i++) {
			struct ym_stripe *st = &stripes[i];
			/* What the stripe used, and no more: the rest are
			 * holes (entries) or untouched pages (heads). */
			if (st->used == 0)
				continue;
			for (uint32_t j = 0; j < st->used; j++)
				memset(live_at(i, j), 0, sizeof *live);
			memset(heads_of(i), 0, sizeof *live_heads << hlog[i]);
			__atomic_store_n(&st->count, 0, __ATOMIC_RELAXED);
			memset(st->agent_private, 0, sizeof st->agent_private);
			__atomic_store_n(&st->used, 0, __ATOMIC_RELEASE);
		}
		filter_clear();
		heads_init();
	}
	while (taken > 0) {
		taken--;
		stripe_unlock(&stripes[taken], seq[taken]);
	}
	return all;
}
