/*
 * The agent's tables under ThreadSanitizer, with a concurrent reader.
 *
 * The agent itself cannot run under TSan (it replaces malloc, which the
 * TSan runtime owns), so this program links injector/agent/table.c and live.c with the
 * segment layout and the reader, builds a segment in a memfd the way
 * seg.c does, and runs what the agent's sampled path runs — table_intern
 * (lock-free probe, locked insert, release publication), live insert and
 * remove under their stripes' locks, the per-stack counters, the single-writer
 * per-thread slots — from several writer threads at once, while a reader
 * thread takes validated snapshots through shm_snapshot_take_since, as
 * ymtop does (each from the one before: what did not change is kept).  TSan checks every access made by the writers against each other;
 * the reader copies with pread, which TSan does not see, so on that side
 * the check is that every snapshot validates and is consistent.
 *
 * Built with -fsanitize=thread whatever SANITIZER says (make check builds
 * it as $(B)/unit/test_tsan_tables); a TSan report makes it fail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/backing.h"
#include "agent/config.h"
#include "agent/live.h"
#include "agent/table.h"
#include "agent/trend.h"
#include "shm.h"

/* The agent's configuration as config.c leaves it with no environment:
 * the tables' sampling-mode paths (table.c reads agent_exact). */
struct agent_config agent_cfg = { .rate = 512 << 10 };

/* The segment, as the agent's seg.c lays it out. */
static struct ym_header *hdr;
static struct ym_thread *threads;
static struct ym_stripe *stripes;

const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "halt_on_error=1:exitcode=66";
}

#define WRITERS   4
#define ROUNDS    50000
#define SITES     48          /* distinct stacks per writer */
#define HELD      32          /* live samples a writer keeps at most */

static int seg_fd = -1;
static int writers_done;
static int thread_failures;

/* cmocka's asserts longjmp, which only works on the test's own thread:
 * the other threads count failures, which the test then asserts on. */
#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
			__atomic_fetch_add(&thread_failures, 1,            \
					   __ATOMIC_RELAXED);              \
		}                                                          \
	} while (0)

/* The trend's clock (make_segment). */
static uint64_t trend_clock;

/* Exact mode: the live table in parts by address region (table.c), each
 * writer's addresses in a 64 MiB region of their own, or (shared) all of
 * them in one region, whose part they race to be given. */
static int exact, shared;

static void make_segment(void)
{
	writers_done = 0;
	thread_failures = 0;
	struct shm_caps caps = { 8, 4096, 1024, WRITERS + 1 };
	struct ym_section sec[YM_SEC_COUNT];
	uint64_t size;
	assert_int_equal(shm_layout(&caps, sec, &size), 0);
	/* The trend: a ring of 16 slots of 8 stacks, a slot every tick of
	 * a shared counter (trend_clock), so that writers lap it and race
	 * for its records while the reader copies them. */
	struct ym_section trend;
	shm_layout_trend(&size, 16, 8, &trend);
	seg_fd = memfd_create("ymtop-tsan", MFD_CLOEXEC);
	assert_true(seg_fd >= 0);
	assert_int_equal(fchmod(seg_fd, 0600), 0);   /* memfds are 0777 */
	assert_int_equal(ftruncate(seg_fd, (off_t)size), 0);
	uint8_t *b = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, seg_fd, 0);
	assert_true(b != MAP_FAILED);
	struct ym_header *h = (struct ym_header *)b;
	h->abi_version = YM_ABI_VERSION;
	h->compat_version = YM_ABI_COMPAT;
	h->header_size = YM_HEADER_SIZE;
	h->total_size = size;
	h->pid = (uint32_t)getpid();
	h->sample_rate = 4096;
	h->max_depth = 8;
	memcpy(h->sections, sec, sizeof sec);
	h->trend = trend;
	h->trend_slot_ns = 1;
	h->trend_stacks = 8;
	h->threads_used = WRITERS + 1;
	hdr = h;
	threads = (struct ym_thread *)(b + sec[YM_SEC_THREADS].offset);
	stripes = (struct ym_stripe *)(b + sec[YM_SEC_STRIPES].offset);
	/* Sparse, as the agent's: the tables back what they touch. */
	backing_init(b, size, 0);
	/* As the agent: private tables (emptied, as after a fork), then the
	 * segment's. */
	assert_int_equal(table_init_private(4096), 0);
	assert_int_equal(live_init_private(1024, exact, 1), 0);
	table_reset_private();
	live_reset_private();
	table_map_segment(b, sec);
	live_map_segment(b, sec);
	assert_int_equal(table_init_segment(), 0);
	assert_int_equal(live_init_segment(), 0);
	h->planes_used = WRITERS - 1;
	trend_clock = 0;
	trend_map_segment(b);
	__atomic_store_n(&h->magic, YM_MAGIC, __ATOMIC_RELEASE);
}

/* Single writer per slot, as hooks.c: a relaxed load and store. */
static void bump(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v,
			 __ATOMIC_RELAXED);
}

static struct ym_counts *own(uint32_t id, uint32_t stack)
{
	return id ? table_plane_entry(id - 1, stack) : NULL;
}

static void *writer(void *arg)
{
	uint32_t id = (uint32_t)(uintptr_t)arg;
	struct ym_thread *slot = &threads[id + 1];
	struct ym_live held[HELD];
	int nheld = 0;
	uint64_t base = shared ? (1ULL << 40) + ((uint64_t)id << 24)
			       : ((uint64_t)id + 1) << 40;
	uint32_t tid = id + 100;   /* free-list lanes: one each */
	/* As in the agent: the first writer counts into the stack records
	 * (atomic adds), the others each into a counter plane of their own
	 * (plain stores), which the reader sums. */
	uint32_t cap = hdr->sections[YM_SEC_STACKS].capacity;
	if (id > 0)
		CHECK(backing_get(table_plane_entry(id - 1, 0),
				  cap * sizeof(struct ym_counts)) == 0);
	for (uint32_t i = 0; i < ROUNDS; i++) {
		/* Half the sites are shared by every writer: they race to
		 * insert the same stack. */
		uint32_t site = (i * 7u) % SITES;
		uint64_t frames[4] = { 0x400000 + site, 0x500000,
				       site % 2 ? 0x600000 + id : 0x600000, 0x700000 };
		/* Distinct addresses spread over the live table's stripes
		 * (i * odd is a bijection mod 2^32), every writer in all of
		 * them: the stripes' locks are contended too. */
		uint64_t off = (uint64_t)(i * 2654435761u) << 4;
		if (exact)
			off &= (shared ? 1u << 24 : 1u << 26) - 16;
		struct ym_live e = {
			.addr = base + off,
			.size = 100 + site,
			.weight_bytes = 4096,
			.weight_fx = 1u << 16,
			.birth_mono_ns = i,
			.tid = tid,
		};
		e.stack = table_intern(frames, 4, e.tid, i);
		CHECK(e.stack != UINT32_MAX);
		bump(&slot->t.alloc_objects, 1);
		bump(&slot->t.alloc_bytes, e.size);
		int ok = live_insert(&e, tid, 1000000) > 0;
		if (ok)
			table_count_alloc(&e, own(id, e.stack));
		if (i % 8 == 0)   /* as sampling.c: a sample, a tick */
			trend_tick(__atomic_add_fetch(&trend_clock, 1, __ATOMIC_RELAXED));
		if (ok && nheld < HELD) {
			held[nheld++] = e;
			continue;
		}
		/* Free the oldest held sample. */
		if (nheld > 0) {
			struct ym_live out;
			CHECK(live_remove(held[0].addr, tid, &out, 1000000));
			table_count_free(&out, i + 1, own(id, out.stack));
			bump(&slot->t.free_objects, 1);
			bump(&slot->t.free_bytes, out.size);
			memmove(held, held + 1, (size_t)(nheld - 1) * sizeof *held);
			nheld--;
		}
		if (ok) {
			held[nheld++] = e;
		}
	}
	for (int k = 0; k < nheld; k++) {
		struct ym_live out;
		CHECK(live_remove(held[k].addr, tid, &out, 1000000));
		table_count_free(&out, ROUNDS + 1, own(id, out.stack));
		bump(&slot->t.free_objects, 1);
		bump(&slot->t.free_bytes, out.size);
	}
	return NULL;
}

static void check_snapshot(const struct shm_snapshot *s)
{
	CHECK(s->nstacks <= 4096);
	for (uint32_t i = 0; i < s->nstacks; i++) {
		const struct ym_stack *st = shm_stack(s, i);
		CHECK(st->depth <= 8);
		/* A published record is complete: its frames are there. */
		if (i > 0 && st->depth == 4)
			CHECK((st->frames[1]) == (0x500000));
	}
	CHECK(s->nlive <= 1024);
	for (uint32_t i = 0; i < s->nlive; i++)
		CHECK(s->live[i].stack < s->nstacks);
	/* Trend slots kept are whole: the writer's order (the largest
	 * first: all but the last 8 / 4 points), positive estimates, known
	 * stacks, each once (a torn one is left out). */
	CHECK(s->trend_kept && s->ntrend <= 16);
	for (uint32_t i = 0; i < s->ntrend; i++) {
		const struct ym_trend_slot *t = shm_trend_slot(s, i);
		CHECK(t->count <= 8);
		for (uint32_t j = 0; j < t->count; j++) {
			CHECK(t->points[j].stack < s->nstacks);
			CHECK(t->points[j].retained > 0);
			if (j > 0 && j < 8 - 8 / 4)
				CHECK(t->points[j].retained <= t->points[j - 1].retained);
			for (uint32_t k = 0; k < j; k++)
				CHECK(t->points[k].stack != t->points[j].stack);
		}
	}
}

/* The reader's last snapshot, taken after the writers ended, from the
 * ones before: its samples, and its stacks whose samples were not all
 * freed (none: a kept copy that missed a change would show some). */
static uint64_t last_samples, last_unbalanced;

static void *reader(void *arg)
{
	long *snaps = arg;
	struct shm_reader r;
	struct shm_snapshot prev;
	char err[256];
	memset(&prev, 0, sizeof prev);
	/* Our own descriptor, closed below. */
	if (shm_reader_open_fd(&r, dup(seg_fd), 0, (uid_t)-1, err, sizeof err)) {
		fprintf(stderr, "open failed: %s\n", err);
		CHECK(0);
		return NULL;
	}
	for (;;) {
		int last = __atomic_load_n(&writers_done, __ATOMIC_ACQUIRE);
		struct shm_snapshot s;
		int rc = shm_snapshot_take_since(&r, &s, *snaps ? &prev : NULL,
						 err, sizeof err);
		if (rc != 0) {
			fprintf(stderr, "snapshot failed: %s\n", err);
			CHECK(rc == 0);
			break;
		}
		check_snapshot(&s);
		shm_snapshot_free(&prev);
		prev = s;
		++*snaps;
		if (last)
			break;
	}
	last_samples = last_unbalanced = 0;
	for (uint32_t i = 0; i < prev.nstacks; i++) {
		const struct ym_stack *st = shm_stack(&prev, i);
		last_samples += st->alloc_samples;
		last_unbalanced += st->alloc_samples != st->free_samples;
	}
	shm_snapshot_free(&prev);
	shm_reader_close(&r);
	return NULL;
}

static void writers_and_reader(void **state)
{
	(void)state;
	make_segment();
	pthread_t w[WRITERS], rd;
	long snaps = 0;
	assert_int_equal(pthread_create(&rd, NULL, reader, &snaps), 0);
	for (uintptr_t i = 0; i < WRITERS; i++)
		assert_int_equal(pthread_create(&w[i], NULL, writer, (void *)i), 0);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	__atomic_store_n(&writers_done, 1, __ATOMIC_RELEASE);
	pthread_join(rd, NULL);
	assert_int_equal(thread_failures, 0);
	assert_true(snaps >= 1);
	assert_int_equal(last_samples, (uint64_t)WRITERS * ROUNDS);
	assert_int_equal(last_unbalanced, 0);
	printf("reader: %ld snapshots during the writes\n", snaps);

	/* The final state is exact: every stack once, nothing live, and as
	 * many samples freed as taken on every stack. */
	struct shm_reader r;
	struct shm_snapshot s;
	char err[256];
	assert_int_equal(shm_reader_open_fd(&r, dup(seg_fd), 0, (uid_t)-1, err,
					    sizeof err), 0);
	assert_int_equal(shm_snapshot_take(&r, &s, err, sizeof err), 0);
	/* Overflow record + SITES/2 shared + SITES/2 per writer. */
	assert_int_equal(s.nstacks, 1 + SITES / 2 + (SITES / 2) * WRITERS);
	assert_int_equal(s.nlive, 0);
	/* Quiet now: every trend slot is complete. */
	assert_int_equal(s.ntrend, 16);
	uint64_t samples = 0, in_planes = 0;
	for (uint32_t i = 0; i < s.nstacks; i++) {
		const struct ym_stack *st = shm_stack(&s, i);
		assert_int_equal(st->alloc_samples, st->free_samples);
		samples += st->alloc_samples;
		in_planes += table_plane_entry(1, i)->alloc_samples;
	}
	/* Every insert was counted once (none failed here), and a plane
	 * really took its writer's share. */
	assert_int_equal(samples, (uint64_t)WRITERS * ROUNDS);
	assert_int_equal(in_planes, ROUNDS);
	assert_int_equal(s.totals.alloc_objects, s.totals.free_objects);
	assert_int_equal(s.totals.alloc_objects, (uint64_t)WRITERS * ROUNDS);
	shm_snapshot_free(&s);
	shm_reader_close(&r);
}

static void writers_and_reader_exact(void **state)
{
	exact = 1;
	writers_and_reader(state);
	exact = 0;
	/* Four regions, four parts: every stripe had a writer. */
	assert_int_equal(live_part_log(), 2);
	for (uint32_t k = 0; k < 16; k++)
		assert_true(stripes[k].used > 0);
}

static void writers_and_reader_exact_one_region(void **state)
{
	exact = shared = 1;
	writers_and_reader(state);
	exact = shared = 0;
	/* One region, one part: the other stripes never had a writer. */
	uint32_t in_use = 0;
	for (uint32_t k = 0; k < 16; k++)
		in_use += stripes[k].used > 0;
	assert_int_equal(in_use, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(writers_and_reader),
		cmocka_unit_test(writers_and_reader_exact),
		cmocka_unit_test(writers_and_reader_exact_one_region),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
