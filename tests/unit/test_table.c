/* The agent's tables (injector/agent/table.c, live.c), white-box, on a
 * segment laid out as the agent's: a sparse shared file whose pages the
 * tables back as they touch them (injector/agent/backing.c).  Through
 * their contracts (table.h, live.h) and the segment itself, as a reader
 * sees it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/backing.h"
#include "agent/live.h"
#include "agent/sample.h"
#include "agent/segpriv.h"
#include "agent/table.h"
#include "shm.h"

static uint8_t *seg;
static struct ym_header *hdr;
static struct ym_section sec[YM_SEC_COUNT];
static uint64_t seg_size;
static int seg_fd = -1;

static uint32_t max_live = 64;
static const uint32_t caps_depth = 8;
static int exact_mode;

static int setup(void **state)
{
	(void)state;
	struct shm_caps caps = { caps_depth, 16, max_live, 4 };
	uint64_t size;
	assert_int_equal(shm_layout(&caps, sec, &size), 0);
	seg_fd = memfd_create("ymtop-test-table", MFD_CLOEXEC);
	assert_true(seg_fd >= 0);
	assert_int_equal(ftruncate(seg_fd, (off_t)size), 0);
	seg = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, seg_fd, 0);
	assert_true(seg != MAP_FAILED);
	seg_size = size;
	backing_init(seg, size, 0);
	assert_int_equal(backing_get(seg, YM_HEADER_SIZE), 0);
	hdr = (struct ym_header *)seg;
	memcpy(hdr->sections, sec, sizeof sec);
	/* As the agent: private tables first (as after a fork: empty), then
	 * the segment's. */
	assert_int_equal(table_init_private(16), 0);
	assert_int_equal(live_init_private(max_live, exact_mode, 1), 0);
	table_reset_private();
	live_reset_private();
	table_map_segment(seg, sec);
	live_map_segment(seg, sec);
	assert_int_equal(table_init_segment(), 0);
	assert_int_equal(live_init_segment(), 0);
	return 0;
}

/* The segment's sections, as a reader finds them. */
static struct ym_stripe *stripe(uint32_t k)
{
	return (struct ym_stripe *)(seg + sec[YM_SEC_STRIPES].offset) + k;
}

static const struct ym_live *live_entry(uint64_t i)
{
	return (const struct ym_live *)(seg + sec[YM_SEC_LIVE].offset) + i;
}

static const struct ym_stack *stack_rec(uint32_t i)
{
	return (const struct ym_stack *)(seg + sec[YM_SEC_STACKS].offset +
					 (size_t)i * sec[YM_SEC_STACKS].stride);
}

/* A reset, as the agent makes it: under the agent's lock. */
static int reset(void)
{
	assert_int_equal(table_lock(10), 1);
	int r = live_reset();
	if (r)
		table_reset_counters();
	table_unlock();
	return r;
}

/* setup() with a live table of `live` entries, sampling or exact. */
static int setup_sized(void **state, uint32_t live, int exact)
{
	max_live = live;
	exact_mode = exact;
	setup(state);
	max_live = 64;
	exact_mode = 0;
	return 0;
}

/* 1024 entries: 16 stripes of 64. */
static int setup_striped(void **state)
{
	return setup_sized(state, 1024, 0);
}

/* 1024 entries in exact mode: 4 parts of 4 stripes of 64. */
static int setup_exact(void **state)
{
	return setup_sized(state, 1024, 1);
}

/* 65536 entries: 64 stripes of 1024 (64 KiB each), as the agent's. */
static int setup_large(void **state)
{
	return setup_sized(state, 65536, 0);
}

/* The same in exact mode: 4 parts of 16 stripes. */
static int setup_large_exact(void **state)
{
	return setup_sized(state, 65536, 1);
}

static int teardown(void **state)
{
	(void)state;
	munmap(seg, seg_size);
	close(seg_fd);
	return 0;
}

/* Bytes of the segment's file that have memory. */
static uint64_t file_bytes(void)
{
	struct stat st;
	assert_int_equal(fstat(seg_fd, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

static uint32_t stripes(void)
{
	return hdr->sections[YM_SEC_STRIPES].capacity;
}

static uint64_t live_count(void)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < stripes(); i++)
		n += stripe(i)->count;
	return n;
}

static int seqs_even(void)
{
	for (uint32_t i = 0; i < stripes(); i++)
		if (stripe(i)->seq % 2)
			return 0;
	return 1;
}

static void intern_finds_and_adds(void **state)
{
	(void)state;
	uint64_t a[3] = { 0x1000, 0x2000, 0x3000 };
	uint64_t b[3] = { 0x1000, 0x2000, 0x3001 };
	uint32_t ia = table_intern(a, 3, 7, 100);
	uint32_t ib = table_intern(b, 3, 7, 100);
	assert_int_equal(ia, 1);   /* 0 is the overflow stack */
	assert_int_equal(ib, 2);
	assert_int_equal(table_intern(a, 3, 9, 200), ia);
	assert_int_equal(table_intern(a, 2, 9, 200), 3);   /* prefix: distinct */
	assert_int_equal(hdr->stacks_used, 4);
	const struct ym_stack *s = stack_rec(ia);
	assert_int_equal(s->depth, 3);
	assert_int_equal(s->frames[2], 0x3000);
	assert_int_equal(s->tid, 7);
	assert_true(s->hash > 1);
}

static void full_stack_table_overflows(void **state)
{
	(void)state;
	for (uint64_t i = 0; i < 40; i++) {
		uint64_t f[1] = { 0x5000 + i };
		uint32_t k = table_intern(f, 1, 1, 1);
		assert_true(k < 16);
	}
	assert_int_equal(hdr->stacks_used, 16);
	assert_int_equal(hdr->drop_stacks, 40 - 15);
	assert_true(hdr->flags & YM_FLAG_OVERFLOWED);
}

static struct ym_live entry(uint64_t addr, uint32_t stack)
{
	struct ym_live e = { .addr = addr, .size = 100, .weight_bytes = 1000,
			     .weight_fx = 10 * YM_FX_ONE, .stack = stack };
	return e;
}

static void live_insert_remove_with_collisions(void **state)
{
	(void)state;
	uint64_t f[1] = { 0x42 };
	uint32_t st = table_intern(f, 1, 1, 1);
	/* Addresses 16 * 2^k apart tend to share homes; use many. */
	uint64_t addr[40];
	for (int i = 0; i < 40; i++) {
		addr[i] = 0x10000 + (uint64_t)i * 0x100000;
		struct ym_live e = entry(addr[i], st);
		assert_int_equal(live_insert(&e, 0, 10), 1);
		table_count_alloc(&e, NULL);
		assert_true(agent_filter_maybe((void *)addr[i]));
	}
	assert_int_equal(live_count(), 40);
	/* Remove every other one; the rest must still be found. */
	for (int i = 0; i < 40; i += 2) {
		struct ym_live out;
		assert_int_equal(live_remove(addr[i], 0, &out, 10), 1);
		assert_int_equal(out.addr, addr[i]);
		table_count_free(&out, 5000, NULL);
	}
	for (int i = 0; i < 40; i++)
		assert_int_equal(live_has(addr[i]), i % 2);
	struct ym_live out;
	assert_int_equal(live_remove(0xdead0, 0, &out, 10), 0);
	assert_int_equal(live_count(), 20);
	assert_true(seqs_even());
	const struct ym_stack *s = stack_rec(st);
	assert_int_equal(s->alloc_samples, 40);
	assert_int_equal(s->free_samples, 20);
	assert_int_equal(s->alloc_bytes - s->free_bytes, 20 * 1000);
	/* Lifetime 5000 - 0 ns: bucket "< 10 us". */
	assert_int_equal(s->life[1].objects_fx, 20 * 10 * YM_FX_ONE);
}

/* Inserts of fresh addresses into long chains (64 entries on 32 heads at
 * most) read no entry of another address unless their chain's marks say
 * one of theirs may be there; the old walk read every chain to its end. */
static void fresh_inserts_skip_their_chains(void **state)
{
	(void)state;
	uint64_t before = live_test_links_passed();
	for (uint64_t i = 1; i <= 64; i++) {
		struct ym_live e = entry(i * 16, 1);
		assert_int_equal(live_insert(&e, 0, 10), 1);
	}
	uint64_t passed = live_test_links_passed() - before;
	/* Walked to the end, these 64 inserts pass 32 entries; with the
	 * marks, 6. */
	assert_true(passed <= 12);
	for (uint64_t i = 1; i <= 64; i++)
		assert_int_equal(live_has(i * 16), 1);
}

/* Inserts, removals, missed frees and head growth in random order, against
 * a model: the marks a chain keeps must never hide an entry of the address
 * being inserted (a stale one stays found and is replaced, never doubled). */
static void chains_match_a_model(void **state)
{
	(void)state;
	enum { N = 200 };
	int live[N] = { 0 };
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	uint32_t model = 0;
	for (int step = 0; step < 20000; step++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint32_t k = (uint32_t)(x % N);
		uint64_t a = 0x100000 + (uint64_t)k * 0x1230;
		struct ym_live out;
		if (live[k] && (x >> 40) % 3 == 0) {
			assert_int_equal(live_remove(a, 0, &out, 10), 1);
			assert_int_equal(out.addr, a);
			live[k] = 0;
			model--;
		} else if (live[k] || model < 900) {
			/* A second insert of a live address: a missed free. */
			struct ym_live e = entry(a, 1);
			assert_int_equal(live_insert(&e, 0, 10), 1);
			if (!live[k])
				model++;
			live[k] = 1;
		}
		assert_int_equal(live_count(), model);
	}
	for (uint32_t k = 0; k < N; k++) {
		uint64_t a = 0x100000 + (uint64_t)k * 0x1230;
		assert_int_equal(live_has(a), live[k]);
	}
	assert_true(seqs_even());
}

static void live_table_bounded(void **state)
{
	(void)state;
	int ok = 0;
	for (uint64_t i = 1; i <= 100; i++) {
		struct ym_live e = entry(i * 16, 1);
		ok += live_insert(&e, 0, 10);
	}
	assert_int_equal(ok, 64);   /* every entry */
}

static void reinserting_an_address_repairs(void **state)
{
	(void)state;
	uint64_t f[1] = { 0x77 };
	uint32_t st = table_intern(f, 1, 1, 1);
	struct ym_live e = entry(0x9990, st);
	assert_int_equal(live_insert(&e, 0, 10), 1);
	table_count_alloc(&e, NULL);
	/* A missed free: the same address sampled again. */
	assert_int_equal(live_insert(&e, 0, 10), 1);
	table_count_alloc(&e, NULL);
	assert_int_equal(live_count(), 1);
	const struct ym_stack *s = stack_rec(st);
	assert_int_equal(s->alloc_bytes - s->free_bytes, 1000);
}

static void resize_and_reset(void **state)
{
	(void)state;
	uint64_t f[1] = { 0x88 };
	uint32_t st = table_intern(f, 1, 1, 1);
	struct ym_live e = entry(0x4440, st);
	live_insert(&e, 0, 10);
	table_count_alloc(&e, NULL);
	table_count_resize(&e, 3000, 2 * YM_FX_ONE, NULL);
	const struct ym_stack *s = stack_rec(st);
	assert_int_equal(s->alloc_bytes - s->free_bytes, 3000);
	assert_int_equal(s->alloc_objects_fx - s->free_objects_fx, 2 * YM_FX_ONE);
	assert_int_equal(reset(), 1);
	assert_int_equal(live_count(), 0);
	assert_int_equal(s->alloc_bytes, 0);
	assert_int_equal(s->frames[0], 0x88);   /* frames survive */
	assert_int_equal(live_has(0x4440), 0);
	assert_int_equal(hdr->reset_count, 1);
}

/* Addresses spread over the stripes by their filter slot: each stripe is
 * a table of its own (bounded at its 64 entries), and a stripe a
 * writer holds refuses (busy) without touching the others. */
static void stripes_are_independent(void **state)
{
	(void)state;
	assert_int_equal(stripes(), 16);
	uint64_t f[1] = { 0x99 };
	uint32_t st = table_intern(f, 1, 1, 1);
	/* Stripe k: filter slot (addr >> 4) & 0x7fff in [k * 2048, (k+1) * 2048). */
	for (uint64_t k = 0; k < 16; k++) {
		uint64_t a = (k * 2048 + 1) << 4;
		assert_int_equal(ym_live_stripe_of(a, 16), k);
		struct ym_live e = entry(a, st);
		assert_int_equal(live_insert(&e, 0, 10), 1);
		assert_int_equal(stripe(k)->count, 1);
	}
	/* Fill stripe 3: 64 entries at most, the others still accept. */
	int ok = 1;
	for (uint64_t i = 2; i < 200; i++) {
		struct ym_live e = entry((3 * 2048 + i % 2048) << 4, st);
		ok += live_insert(&e, 0, 10) == 1;
	}
	assert_int_equal(ok, 64);
	assert_int_equal(stripe(3)->count, 64);
	struct ym_live e5 = entry((5 * 2048 + 7) << 4, st);
	assert_int_equal(live_insert(&e5, 0, 10), 1);
	/* Stripe 5 held by another writer: busy, found "maybe" by the
	 * lock-free probe; stripe 6 unaffected; reset gives up. */
	stripe(5)->seq |= 1;
	struct ym_live e5b = entry((5 * 2048 + 9) << 4, st);
	assert_int_equal(live_insert(&e5b, 0, 10), -1);
	struct ym_live out;
	assert_int_equal(live_remove(e5.addr, 0, &out, 10), 0);
	assert_int_equal(live_has(e5b.addr), 1);
	struct ym_live e6 = entry((6 * 2048 + 9) << 4, st);
	assert_int_equal(live_insert(&e6, 0, 10), 1);
	assert_int_equal(live_remove(e6.addr, 0, &out, 10), 1);
	assert_int_equal(reset(), 0);
	assert_int_equal(live_count(), 16 + 63 + 1);
	stripe(5)->seq++;   /* released */
	assert_int_equal(live_remove(e5.addr, 0, &out, 10), 1);
	assert_true(seqs_even());
	assert_int_equal(reset(), 1);
	assert_int_equal(live_count(), 0);
}

/* Entry j of stripe k holding addr, -1 when none does. */
static int entry_of(uint32_t k, uint64_t addr)
{
	for (uint32_t j = 0; j < stripe(k)->used; j++)
		if (live_entry(ym_live_index(k, j, stripes()))->addr == addr)
			return (int)j;
	return -1;
}

static void insert_as(uint32_t tid, uint64_t addr, uint32_t stack)
{
	struct ym_live e = entry(addr, stack);
	assert_int_equal(live_insert(&e, tid, 10), 1);
}

static void remove_as(uint32_t tid, uint64_t addr)
{
	struct ym_live out;
	assert_int_equal(live_remove(addr, tid, &out, 10), 1);
}

/* An entry a thread freed is taken again by that thread, not by the next
 * thread that samples in the stripe (a cache line moving between CPUs at
 * each event); the stripe's whole capacity stays usable by any thread. */
static void free_entries_stay_with_their_thread(void **state)
{
	(void)state;
	uint64_t f[1] = { 0x5a };
	uint32_t st = table_intern(f, 1, 1, 1);
	uint64_t a = (3 * 2048) << 4;   /* stripe 3 */
	for (uint64_t i = 0; i < 4; i++)
		insert_as(1, a + 16 * i, st);
	int j1 = entry_of(3, a + 16);
	remove_as(1, a + 16);
	insert_as(2, a + 16 * 10, st);   /* thread 2: a new entry */
	assert_int_not_equal(entry_of(3, a + 16 * 10), j1);
	assert_int_equal(stripe(3)->used, 5);
	insert_as(1, a + 16 * 11, st);   /* thread 1: the one it freed */
	assert_int_equal(entry_of(3, a + 16 * 11), j1);
	assert_int_equal(stripe(3)->used, 5);
	assert_int_equal(stripe(3)->count, 5);
	/* Thread 1 exits and leaves 4 of 5 entries free: thread 2 takes
	 * them while more than half the stripe is free (2 of them), then new
	 * ones (2): a stripe holds at most twice its live entries, plus one. */
	for (uint64_t i = 0; i < 4; i++)
		remove_as(1, a + 16 * (i == 1 ? 11 : i));
	for (uint64_t i = 0; i < 4; i++)
		insert_as(2, a + 16 * (20 + i), st);
	assert_int_equal(stripe(3)->count, 5);
	assert_int_equal(stripe(3)->used, 7);
	/* The stripe full, its entries all freed by thread 1: thread 2 still
	 * gets all 64. */
	for (uint64_t i = 0; i < 4; i++)
		remove_as(2, a + 16 * (20 + i));
	remove_as(2, a + 16 * 10);
	for (uint64_t i = 0; i < 64; i++)
		insert_as(1, a + 16 * (100 + i), st);
	assert_int_equal(stripe(3)->used, 64);
	for (uint64_t i = 0; i < 64; i++)
		remove_as(1, a + 16 * (100 + i));
	for (uint64_t i = 0; i < 64; i++)
		insert_as(2, a + 16 * (200 + i), st);
	assert_int_equal(stripe(3)->count, 64);
	assert_int_equal(stripe(3)->used, 64);
}

/* The part whose stripes hold the live entries, -1 if several. */
static int part_in_use(void)
{
	int part = -1;
	uint32_t per_part = stripes() >> live_part_log();
	for (uint32_t k = 0; k < stripes(); k++) {
		if (stripe(k)->count == 0)
			continue;
		if (part >= 0 && part != (int)(k / per_part))
			return -1;
		part = (int)(k / per_part);
	}
	return part;
}

/* Exact mode: each 64 MiB region of addresses (a glibc arena's heap) is
 * given a part of the stripes, in turn, so threads in arenas of their
 * own never share a stripe; any address is still found, and a region
 * fills at most its part. */
static void exact_mode_gives_regions_parts(void **state)
{
	(void)state;
	assert_int_equal(live_part_log(), 2);
	uint64_t f[1] = { 0x66 };
	uint32_t st = table_intern(f, 1, 1, 1);
	struct ym_live out;
	int part[6];
	for (uint64_t r = 0; r < 6; r++) {
		uint64_t base = (0x1000 + r) << 26;
		for (uint64_t i = 0; i < 40; i++) {
			struct ym_live e = entry(base + 4096 * i + 16, st);
			assert_int_equal(live_insert(&e, 0, 10), 1);
		}
		part[r] = part_in_use();
		assert_true(part[r] >= 0);
		for (uint64_t i = 0; i < 40; i++)
			assert_int_equal(live_remove(base + 4096 * i + 16, 0,
						     &out, 10), 1);
		assert_int_equal(live_count(), 0);
	}
	for (int r = 1; r < 4; r++)
		for (int q = 0; q < r; q++)
			assert_int_not_equal(part[r], part[q]);
	assert_int_equal(part[4], part[0]);   /* the fifth: in turn */
	assert_int_equal(part[5], part[1]);
	/* A region fills its part: 4 stripes of 64. */
	uint64_t base = (uint64_t)0x2000 << 26;
	int ok = 0;
	for (uint64_t i = 0; i < 2000; i++) {
		struct ym_live e = entry(base + 16 * i, st);
		ok += live_insert(&e, 0, 10) == 1;
	}
	assert_int_equal(ok, 256);
	assert_true(part_in_use() >= 0);
	for (uint64_t i = 0; i < 2000; i++)
		live_remove(base + 16 * i, 0, &out, 10);
	assert_int_equal(live_count(), 0);
}

/* A part's stripes use one page-sized slice of each row of the pool (16
 * stripes x 8 entries x 64 bytes), so a region's entries back their own
 * size in the segment: the table starts on a page. */
static void exact_part_backs_its_entries_only(void **state)
{
	(void)state;
	assert_int_equal(live_part_log(), 2);
	uint64_t f[1] = { 0x67 };
	uint32_t st = table_intern(f, 1, 1, 1);
	uint64_t before = file_bytes(), base = (uint64_t)0x3000 << 26;
	for (uint64_t i = 0; i < 8192; i++) {
		struct ym_live e = entry(base + 16 * i, st);
		assert_int_equal(live_insert(&e, 0, 10), 1);
	}
	assert_true(part_in_use() >= 0);
	uint64_t grown = file_bytes() - before;
	/* 8192 entries: 512 KiB, and a row or two more where the stripes'
	 * shares differ.  Off a page boundary it would be 768 KiB. */
	assert_true(grown >= 512 * 1024 && grown <= 512 * 1024 + 64 * 1024);
}

/* The segment gets memory where the tables write, and nowhere else: not
 * where a lookup only looked (a read fault on a hole would allocate). */
static void sparse_segment_backs_what_it_touches(void **state)
{
	(void)state;
	uint64_t start = file_bytes();
	assert_true(start > 0);
	assert_true(start <= 4 * (1u << BACKING_CHUNK_LOG));
	assert_int_equal(start, backing_bytes());
	uint64_t f[1] = { 0x77 };
	uint32_t st = table_intern(f, 1, 1, 1);
	/* Lookups in stripes never inserted into: answered, nothing backed. */
	struct ym_live out;
	for (uint64_t k = 0; k < 64; k++) {
		uint64_t a = (k * 512 + 3) << 4;
		assert_int_equal(live_has(a), 0);
		assert_int_equal(live_remove(a, 0, &out, 10), 0);
	}
	assert_int_equal(file_bytes(), backing_bytes());
	uint64_t before = file_bytes();
	/* Samples in every stripe, each freed before the next comes: the
	 * entries stripes take first share pages, and freed ones are taken
	 * again, so the 4 MiB table backs its first 32 KiB (64 stripes' first
	 * blocks), not every stripe's 64 KiB. */
	for (uint64_t round = 0; round < 500; round++) {
		for (uint64_t k = 0; k < 64; k++) {
			uint64_t a = (k * 512 + 5 + round) << 4;
			assert_int_equal(ym_live_stripe_of(a, 64), k);
			struct ym_live e = entry(a, st);
			assert_int_equal(live_insert(&e, 0, 10), 1);
			assert_int_equal(live_has(a), 1);
			if (round % 2 == 0) {   /* and one more live for a while */
				struct ym_live e2 = entry(a + 16, st);
				assert_int_equal(live_insert(&e2, 0, 10), 1);
				assert_int_equal(live_remove(a + 16, 0, &out, 10), 1);
			}
			assert_int_equal(live_remove(a, 0, &out, 10), 1);
			assert_int_equal(live_has(a), 0);
		}
	}
	uint64_t grown = file_bytes() - before;
	assert_true(grown <= 64 * 1024);
	assert_int_equal(file_bytes(), backing_bytes());
	/* A hundred live in one stripe, all found; then a reset. */
	uint64_t a9 = (9 * 512) << 4;
	for (uint64_t i = 0; i < 100; i++) {
		struct ym_live e = entry(a9 + 16 * i, st);
		assert_int_equal(live_insert(&e, 0, 10), 1);
	}
	for (uint64_t i = 0; i < 100; i++)
		assert_int_equal(live_has(a9 + 16 * i), 1);
	assert_int_equal(stripe(9)->count, 100);
	assert_int_equal(stripe(9)->used, 100);
	assert_int_equal(file_bytes(), backing_bytes());
	/* A reset clears what the stripes used only. */
	assert_int_equal(reset(), 1);
	assert_int_equal(live_has(a9), 0);
	assert_int_equal(file_bytes(), backing_bytes());
	assert_int_equal(stripe(9)->used, 0);
}

/* A thread's counts go to its plane entry, plain stores, and leave the
 * record alone; without a plane they go to the record. */
static void counts_go_to_the_plane(void **state)
{
	(void)state;
	uint64_t f[1] = { 0x55 };
	uint32_t st = table_intern(f, 1, 1, 1);
	struct ym_counts *own = table_plane_entry(2, st);
	assert_int_equal(backing_get(own, sizeof *own), 0);
	struct ym_live e = entry(0x9990, st);
	table_count_alloc(&e, own);
	table_count_free(&e, 5000, own);
	table_count_alloc(&e, NULL);
	const struct ym_stack *s = stack_rec(st);
	assert_int_equal(own->alloc_samples, 1);
	assert_int_equal(own->alloc_bytes, 1000);
	assert_int_equal(own->free_bytes, 1000);
	assert_int_equal(own->life[sample_life_bucket(5000)].bytes, 1000);
	assert_int_equal(s->alloc_samples, 1);
	assert_int_equal(s->free_samples, 0);
	/* Entries of one stack are STACKS.capacity apart, plane by plane. */
	assert_ptr_equal(table_plane_entry(2, st) - table_plane_entry(1, st),
			 hdr->sections[YM_SEC_STACKS].capacity);
}

/* The v6 fields after a record's frames (segment.h). */
static const struct ym_stack_ext *ext_rec(uint32_t i)
{
	return (const struct ym_stack_ext *)(const void *)((const uint8_t *)stack_rec(i) +
		shm_stack_stride_v5(caps_depth));
}

/* Peaks: a stack's rises with its retained estimate (record and planes
 * of the current reset) and stays when it falls; the process's is its
 * own sum, not the stacks' peaks; mmap stacks are a kind of their own,
 * counted apart; a reset restarts them all.  Weights of 64 KiB and more
 * (a step: table.c, PEAK_STEP) count at once. */
#define KI 1024
static void peaks_rise_stay_and_reset(void **state)
{
	(void)state;
	uint64_t f[1] = { 0x66 }, g[1] = { 0x77 };
	uint32_t st = table_intern(f, 1, 1, 1);
	uint32_t other = table_intern(g, 1, 1, 1);
	struct ym_live a = entry(0x1000, st), b = entry(0x2000, st);
	struct ym_live c = entry(0x3000, other);
	a.weight_bytes = 1000 * KI;
	b.weight_bytes = 500 * KI;
	c.weight_bytes = 300 * KI;
	table_count_alloc(&a, NULL);
	table_count_alloc(&b, NULL);
	assert_int_equal(ext_rec(st)->peak_bytes, 1500 * KI);
	assert_true(ext_rec(st)->peak_mono_ns > 0);
	table_count_free(&a, 10, NULL);          /* 500 left */
	table_count_alloc(&c, NULL);             /* the process: 800 */
	assert_int_equal(ext_rec(st)->peak_bytes, 1500 * KI);
	assert_int_equal(ext_rec(other)->peak_bytes, 300 * KI);
	assert_int_equal(hdr->retained_est, 800 * KI);
	assert_int_equal(hdr->peak_retained, 1500 * KI);   /* not 1500 + 300 */
	/* A plane of the current reset counts in the stack's estimate; one
	 * of an older reset does not. */
	struct ym_counts *own = table_plane_entry(0, st);
	hdr->planes_used = 1;
	hdr->plane_epoch[0] = 0;
	struct table_plane tp = { 1, 0, 0 };
	assert_ptr_equal(table_own_counts(&tp, st), own);   /* backs it */
	struct ym_live big = entry(0x6000, st);
	big.weight_bytes = 4000 * KI;
	table_count_alloc(&big, own);            /* 500 + 4000 */
	assert_int_equal(ext_rec(st)->peak_bytes, 4500 * KI);
	table_count_alloc(&c, NULL);             /* another stack: no change */
	assert_int_equal(ext_rec(st)->peak_bytes, 4500 * KI);
	table_count_alloc(&b, NULL);             /* 500 + 500 + 4000 */
	assert_int_equal(ext_rec(st)->peak_bytes, 5000 * KI);
	/* Small moves count by steps: 100 blocks of 1 KiB raise the peak
	 * once they cross a step, and the process's estimate within one. */
	struct ym_live small = entry(0x5000, other);
	small.weight_bytes = KI;
	uint64_t before = ext_rec(other)->peak_bytes;
	for (int i = 0; i < 100; i++)
		table_count_alloc(&small, NULL);
	assert_true(ext_rec(other)->peak_bytes > before);
	assert_true(ext_rec(other)->peak_bytes <= before + 100 * KI);
	assert_true(ext_rec(other)->peak_bytes + 64 * KI > before + 100 * KI);
	assert_true(hdr->retained_est + 64 * KI > (1600 + 100) * KI);
	/* mmap: the same frames, another record, the other totals. */
	uint32_t m = table_intern_kind(f, 1, 1, 1, YM_KIND_MMAP);
	assert_int_not_equal(m, st);
	assert_int_equal(table_intern_kind(f, 1, 1, 1, YM_KIND_MMAP), m);
	assert_int_equal(table_intern(f, 1, 1, 1), st);
	assert_int_equal(ext_rec(m)->kind, YM_KIND_MMAP);
	assert_int_equal(ext_rec(st)->kind, YM_KIND_MALLOC);
	struct ym_live d = entry(0x4000, m);
	d.weight_bytes = 1000 * KI;
	table_count_alloc(&d, NULL);
	assert_int_equal(hdr->mmap_retained_est, 1000 * KI);
	assert_int_equal(hdr->mmap_peak_retained, 1000 * KI);
	assert_int_equal(reset(), 1);
	assert_int_equal(ext_rec(st)->peak_bytes, 0);
	assert_int_equal(hdr->peak_retained, 0);
	assert_int_equal(hdr->retained_est, 0);
	assert_int_equal(hdr->mmap_peak_retained, 0);
	assert_int_equal(ext_rec(m)->kind, YM_KIND_MMAP);   /* kinds stay */
}

/* Exact mode: every allocation is a sample of its own size.  A stack
 * that never allocated a step (64 KiB) in all has its exact peak, and so
 * has any stack whose counts are in one place (the record, or one
 * thread's plane); a stack counted in several is exact within each
 * thread's first step, then by steps.  Each peak carries the live
 * samples behind it. */
static void exact_mode_peaks_of_small_stacks(void **state)
{
	(void)state;
	uint64_t f[1] = { 0x88 }, g[1] = { 0x99 }, h[1] = { 0xaa };
	uint32_t st = table_intern(f, 1, 1, 1);
	struct ym_live e[64];
	for (int i = 0; i < 64; i++) {   /* 64 blocks of 64 bytes: 4 KiB */
		e[i] = entry(0x10000 + 64 * (uint64_t)i, st);
		e[i].size = e[i].weight_bytes = 64;
		e[i].weight_fx = YM_FX_ONE;
		table_count_alloc(&e[i], NULL);
	}
	for (int i = 0; i < 64; i++)
		table_count_free(&e[i], 10, NULL);
	assert_int_equal(ext_rec(st)->peak_bytes, 4 * KI);
	assert_int_equal(ext_rec(st)->peak_samples, 64);
	/* One thread, a stack past many steps: churn of one block, then 100
	 * blocks held, freed, 30 held: the peak is 100 blocks exactly. */
	uint32_t big = table_intern(h, 1, 1, 1);
	struct ym_live b = entry(0x20000, big);
	b.weight_bytes = 4 * KI;
	b.weight_fx = YM_FX_ONE;
	for (int i = 0; i < 1000; i++) {
		table_count_alloc(&b, NULL);
		table_count_free(&b, 10, NULL);
	}
	for (int i = 0; i < 100; i++)
		table_count_alloc(&b, NULL);
	for (int i = 0; i < 70; i++)
		table_count_free(&b, 10, NULL);
	assert_int_equal(ext_rec(big)->peak_bytes, 400 * KI);
	assert_int_equal(ext_rec(big)->peak_samples, 100);
	/* Another thread counts in a plane: small stacks stay exact. */
	uint32_t other = table_intern(g, 1, 1, 1);
	struct table_plane tp = { 0, 0, 0 };
	assert_null(table_own_counts(&tp, other));   /* the first: records */
	struct table_plane tq = { 0, 0, 0 };
	struct ym_counts *own = table_own_counts(&tq, other);
	assert_non_null(own);
	assert_int_equal(hdr->planes_used, 1);
	struct ym_live o = entry(0x30000, other);
	o.weight_bytes = 64;
	for (int i = 0; i < 10; i++)
		table_count_alloc(&o, own);
	for (int i = 0; i < 5; i++)
		table_count_alloc(&o, NULL);
	assert_int_equal(ext_rec(other)->peak_bytes, 15 * 64);
	assert_int_equal(ext_rec(other)->peak_samples, 15);
	/* A stack only that thread counts, past many steps: exact too. */
	uint64_t k[1] = { 0xbb };
	uint32_t solo = table_intern(k, 1, 1, 1);
	struct ym_counts *mine = table_own_counts(&tq, solo);
	assert_non_null(mine);
	struct ym_live q = entry(0x40000, solo);
	q.weight_bytes = 4 * KI;
	for (int i = 0; i < 1000; i++) {
		table_count_alloc(&q, mine);
		table_count_free(&q, 10, mine);
	}
	for (int i = 0; i < 100; i++)
		table_count_alloc(&q, mine);
	for (int i = 0; i < 70; i++)
		table_count_free(&q, 10, mine);
	assert_int_equal(ext_rec(solo)->peak_bytes, 400 * KI);
	assert_int_equal(ext_rec(solo)->peak_samples, 100);
	/* Once the first thread frees there too (into the record), the
	 * stack has two writers: its peak goes by steps, within one. */
	table_count_free(&q, 10, NULL);
	for (int i = 0; i < 120; i++)
		table_count_alloc(&q, mine);
	uint64_t p = ext_rec(solo)->peak_bytes;
	assert_true(p <= (29 + 120) * 4 * KI);
	assert_true(p + 64 * KI > (29 + 120) * 4 * KI);
}

static void lock_is_bounded(void **state)
{
	(void)state;
	assert_int_equal(table_lock(10), 1);
	assert_int_equal(table_lock(10), 0);   /* held: gives up */
	table_unlock();
	assert_int_equal(table_lock(10), 1);
	table_unlock();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(intern_finds_and_adds, setup, teardown),
		cmocka_unit_test_setup_teardown(full_stack_table_overflows, setup, teardown),
		cmocka_unit_test_setup_teardown(live_insert_remove_with_collisions, setup, teardown),
		cmocka_unit_test_setup_teardown(live_table_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(fresh_inserts_skip_their_chains, setup, teardown),
		cmocka_unit_test_setup_teardown(chains_match_a_model, setup_striped, teardown),
		cmocka_unit_test_setup_teardown(reinserting_an_address_repairs, setup, teardown),
		cmocka_unit_test_setup_teardown(resize_and_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(stripes_are_independent, setup_striped, teardown),
		cmocka_unit_test_setup_teardown(free_entries_stay_with_their_thread,
						setup_striped, teardown),
		cmocka_unit_test_setup_teardown(exact_mode_gives_regions_parts,
						setup_exact, teardown),
		cmocka_unit_test_setup_teardown(exact_part_backs_its_entries_only,
						setup_large_exact, teardown),
		cmocka_unit_test_setup_teardown(lock_is_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(counts_go_to_the_plane, setup, teardown),
		cmocka_unit_test_setup_teardown(peaks_rise_stay_and_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(exact_mode_peaks_of_small_stacks, setup, teardown),
		cmocka_unit_test_setup_teardown(sparse_segment_backs_what_it_touches,
						setup_large, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
