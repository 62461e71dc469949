/*
 * The agent's tables: stacks (in the segment, found through a private hash
 * index), live sampled allocations (in the segment, open-addressed by
 * address, with a counting filter in front) and the one lock.
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

uint64_t agent_filter[AGENT_FILTER_WORDS] __attribute__((aligned(64)));
uint64_t agent_filter_live[AGENT_FILTER_WORDS] __attribute__((aligned(64)));
/* Bits that stay set in agent_filter: NULL and bootstrap blocks (those
 * are pinned before the agent is resolved, so before any sample). */
static uint64_t filter_pin[AGENT_FILTER_WORDS];
/* Live samples per bit (lock held); the bit is set while non-zero.  A
 * saturated count stays set until a reset. */
static uint16_t filter_count[1u << AGENT_FILTER_BITS];

/* Stripes whose entries are backed (backing.h).  Until its first insert a
 * stripe is a hole in the segment, which lookups must not read (a read
 * fault on a tmpfs hole allocates): nothing was ever put there anyway. */
static uint64_t stripe_backed[YM_LIMIT_STRIPES / 64];

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

static size_t index_bytes(void)
{
	return ((size_t)agent.index_mask + 1) * sizeof *agent.index;
}

int table_init_private(void)
{
	uint32_t n = 1;
	while (n < agent.max_stacks * 2u)
		n <<= 1;
	agent.index_mask = n - 1;
	if (!agent.index && !(agent.index = map_private(index_bytes())))
		return -1;
	filter_clear();
	return 0;
}

/* After fork: the child starts from empty tables (zero-filled pages). */
void table_reset_private(void)
{
	if (agent.index)
		madvise(agent.index, index_bytes(), MADV_DONTNEED);
	memset(stripe_backed, 0, sizeof stripe_backed);
	filter_clear();
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

/* ---- Live table: stripes of linear probing with backward-shift
 * deletion.  Each stripe's seq is its lock and its seqcount (segment.h):
 * threads sampling at different addresses never share a line.  A stripe
 * owns its filter words (the stripe is the filter slot's high bits), so
 * filter_count, agent_filter_live and the gate have one writer per word. */

static struct ym_stripe *stripe_of(uint64_t addr)
{
	return &agent.stripes[agent_filter_slot((void *)addr) >> agent.stripe_shift];
}

static uint32_t stripe_base(const struct ym_stripe *st)
{
	return (uint32_t)(st - agent.stripes) << agent.per_log;
}

/* Entries per stripe - 1: positions within a stripe. */
static uint32_t per_mask(void)
{
	return (1u << agent.per_log) - 1;
}

static struct ym_live *stripe_entries(const struct ym_stripe *st)
{
	return &agent.live[stripe_base(st)];
}

static int stripe_is_backed(const struct ym_stripe *st)
{
	uint32_t n = (uint32_t)(st - agent.stripes);
	return (int)(__atomic_load_n(&stripe_backed[n / 64], __ATOMIC_ACQUIRE) >>
		     (n % 64)) & 1;
}

/* Stripe held: back its entries before the first insert. */
static int stripe_back(const struct ym_stripe *st)
{
	if (stripe_is_backed(st))
		return 1;
	if (backing_get(stripe_entries(st),
			(size_t)(per_mask() + 1) * sizeof *agent.live) != 0)
		return 0;
	uint32_t n = (uint32_t)(st - agent.stripes);
	__atomic_fetch_or(&stripe_backed[n / 64], 1ULL << (n % 64), __ATOMIC_RELEASE);
	return 1;
}

static uint32_t live_home(const struct ym_stripe *st, uint64_t addr)
{
	uint32_t h = (uint32_t)((addr >> 4) * 0x9E3779B97F4A7C15ULL >> 32);
	return stripe_base(st) | (h & per_mask());
}

static uint32_t live_next(uint32_t i)
{
	return (i & ~per_mask()) | ((i + 1) & per_mask());
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

static uint32_t stripe_capacity(void)
{
	return per_mask() + 1;
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
	if (!stripe_is_backed(st))
		return 0;
	uint64_t s1 = __atomic_load_n(&st->seq, __ATOMIC_ACQUIRE);
	if (s1 & 1)
		return 1;
	uint32_t i = live_home(st, addr), found = 0;
	for (uint32_t n = 0; n < stripe_capacity(); n++) {
		uint64_t a = __atomic_load_n(&agent.live[i].addr, __ATOMIC_RELAXED);
		if (a == 0)
			break;
		if (a == addr) {
			found = 1;
			break;
		}
		i = live_next(i);
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	/* A concurrent deletion may have shifted the entry past us. */
	return found || __atomic_load_n(&st->seq, __ATOMIC_RELAXED) != s1;
}

static uint32_t live_find(const struct ym_stripe *st, uint64_t addr)
{
	if (!stripe_is_backed(st))
		return UINT32_MAX;
	uint32_t i = live_home(st, addr);
	for (uint32_t n = 0; n < stripe_capacity(); n++) {
		uint64_t a = __atomic_load_n(&agent.live[i].addr, __ATOMIC_RELAXED);
		if (a == 0)
			return UINT32_MAX;
		if (a == addr)
			return i;
		i = live_next(i);
	}
	return UINT32_MAX;
}

/* Stripe held.  A reader may copy the entry meanwhile: it checks the
 * stripe's seq afterwards and copies again. */
static void live_put(uint32_t i, const struct ym_live *e)
{
	agent.live[i] = *e;
}

static void live_delete_at(struct ym_stripe *st, uint32_t i)
{
	uint32_t j = i, m = per_mask();
	for (;;) {
		j = live_next(j);
		uint64_t a = agent.live[j].addr;
		if (a == 0)
			break;
		uint32_t k = live_home(st, a) & m;
		uint32_t ii = i & m, jj = j & m;
		/* Move j back to i unless its home lies cyclically in (i, j]. */
		int stays = (ii <= jj) ? (ii < k && k <= jj) : (ii < k || k <= jj);
		if (!stays) {
			live_put(i, &agent.live[j]);
			i = j;
		}
	}
	agent.live[i].addr = 0;
	__atomic_store_n(&st->count, st->count - 1, __ATOMIC_RELAXED);
}

int table_live_remove(uint64_t addr, struct ym_live *out, uint32_t spins)
{
	struct ym_stripe *st = stripe_of(addr);
	uint64_t seq = stripe_lock(st, spins);
	if (!seq)
		return 0;
	uint32_t i = live_find(st, addr);
	if (i != UINT32_MAX) {
		*out = agent.live[i];
		live_delete_at(st, i);
		filter_dec(addr);
		live_probe_update(st);
	}
	stripe_unlock(st, seq);
	return i != UINT32_MAX;
}

/* Returns 1 when inserted, 0 when the stripe is full (kept under 3/4 so
 * that probes stay short), -1 when the stripe stayed busy. */
int table_live_insert(const struct ym_live *e, uint32_t spins)
{
	struct ym_stripe *st = stripe_of(e->addr);
	uint64_t seq = stripe_lock(st, spins);
	if (!seq)
		return -1;
	if (!stripe_back(st)) {
		stripe_unlock(st, seq);
		return 0;
	}
	/* One walk: to the entry of this address, or to the empty bucket
	 * where it goes (there is one: the stripe stays under 3/4). */
	uint32_t i = live_home(st, e->addr);
	while (agent.live[i].addr != 0 && agent.live[i].addr != e->addr)
		i = live_next(i);
	int ok = 1;
	if (agent.live[i].addr == e->addr) {
		/* A stale entry: we missed its free.  Count it freed now
		 * rather than leave it retained forever; the new entry takes
		 * its bucket (same address: same filter bit). */
		table_count_free(&agent.live[i], e->birth_mono_ns, NULL);
		live_put(i, e);
	} else if (st->count >= (uint64_t)stripe_capacity() / 4 * 3) {
		ok = 0;
	} else {
		live_put(i, e);
		__atomic_store_n(&st->count, st->count + 1, __ATOMIC_RELAXED);
		filter_inc(e->addr);
		live_probe_update(st);
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
			if (stripe_is_backed(st))
				memset(stripe_entries(st), 0,
				       (size_t)(per_mask() + 1) * sizeof *agent.live);
			__atomic_store_n(&st->count, 0, __ATOMIC_RELAXED);
		}
		filter_clear();
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
