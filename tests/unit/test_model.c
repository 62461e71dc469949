/* The curses-free model: estimates, rates, mark and growth, sorting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/memory.h"
#include "model/model.h"
#include "model/shortlived.h"
#include "resident.h"

#define NST 4

/* What the session would say of a running process (session.c reads it
 * from /proc; the model takes it as given). */
static const struct model_facts live = { .alive = 1, .name = "redis-server" };

#define DEPTH 4

#include "snap.h"

/* A snapshot with NST stacks; stack i holds retained[i] bytes and has
 * allocated alloc[i] bytes (objects of 100 bytes, each a sample: well
 * sampled), at time t seconds (tests/lib/snap.h), with two live entries
 * and totals. */
static void snap_make(struct shm_snapshot *s, const double *retained,
		      const double *alloc, double t)
{
	snap_fake(s, NST, DEPTH, retained, alloc, t);
	for (uint32_t i = 0; i < NST; i++) {
		struct ym_stack *st = snap_stack(s, i);
		st->alloc_objects_fx = (uint64_t)(alloc[i] / 100) * YM_FX_ONE;
		st->free_objects_fx = (uint64_t)((alloc[i] - retained[i]) / 100) * YM_FX_ONE;
		st->alloc_samples = (uint64_t)(alloc[i] / 100);
		st->free_samples = (uint64_t)((alloc[i] - retained[i]) / 100);
	}
	s->live = calloc(2, sizeof *s->live);
	s->nlive = 2;
	s->live[0] = (struct ym_live){ .addr = 1, .stack = 2, .birth_mono_ns = 500000000ULL };
	s->live[1] = (struct ym_live){ .addr = 2, .stack = 2, .birth_mono_ns = 700000000ULL };
	s->totals.alloc_bytes = (uint64_t)(1000 * t);
	s->totals.alloc_objects = (uint64_t)(10 * t);
}

static void estimates_and_order(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000, 1000, 2000 };
	const double a[NST] = { 0, 5000, 9000, 2000 };
	model_init(&m);
	snap_make(&s, r, a, 0);
	assert_int_equal(model_update(&m, &s), 0);
	assert_null(s.stacks);   /* ownership moved */
	assert_int_equal(m.norder, 3);   /* stack 0 never sampled: hidden */
	assert_int_equal(m.order[0], 1);
	assert_int_equal(m.order[1], 3);
	assert_int_equal(m.order[2], 2);
	assert_true(m.retained_bytes == 6000);
	assert_true(m.stacks[1].retained_objects == 30);
	model_sort(&m, SORT_ALLOCATED, 0, NULL, NULL, NULL);
	assert_int_equal(m.order[0], 2);
	model_sort(&m, SORT_ALLOCATED, 1, NULL, NULL, NULL);
	assert_int_equal(m.order[0], 3);
	/* Oldest live sample of stack 2 was born at 0.5 s; snapshot at 1 s. */
	assert_int_equal(model_oldest_age(&m, &m.stacks[2]), 500000000ULL);
	/* The samples behind the retained bytes: 90 allocated, 80 freed. */
	assert_int_equal(m.stacks[2].live_samples, 10);
	assert_string_equal(model_state(&m), "exited");
	model_free(&m);
}

static int keep_odd(void *ctx, const struct model_stack *s)
{
	(void)ctx;
	return s->id % 2 == 1;
}

static void rates_mark_growth_filter(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r1[NST] = { 0, 3000, 1000, 2000 };
	const double a1[NST] = { 0, 5000, 9000, 2000 };
	const double r2[NST] = { 0, 3000, 5000, 1000 };
	const double a2[NST] = { 0, 5000, 19000, 2000 };
	model_init(&m);
	snap_make(&s, r1, a1, 0);
	model_update_facts(&m, &s, &live);   /* alive: rates are measured */
	model_mark(&m);
	snap_make(&s, r2, a2, 2);
	model_update_facts(&m, &s, &live);
	assert_true(m.interval_s == 2.0);
	assert_true(m.stacks[2].alloc_rate == 5000.0);   /* 10000 B in 2 s */
	assert_true(m.alloc_bytes_rate == 1000.0);
	assert_true(m.stacks[2].growth == 4000.0);
	assert_true(m.stacks[3].growth == -1000.0);
	model_sort(&m, SORT_GROWTH, 0, NULL, NULL, NULL);
	assert_int_equal(m.order[0], 2);
	assert_int_equal(m.order[m.norder - 1], 3);
	model_sort(&m, SORT_RETAINED, 0, keep_odd, NULL, NULL);
	assert_int_equal(m.norder, 2);
	assert_int_equal(m.order[0], 1);
	assert_int_equal(m.order[1], 3);
	model_free(&m);
}

/* A sampling agent counts no allocated usable bytes (YM_FLAG_NO_ALLOC_BYTES):
 * the allocation rate is that of the requested bytes. */
static void rates_of_requested_bytes_when_sampling(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000, 1000, 2000 };
	model_init(&m);
	snap_make(&s, r, r, 0);
	s.hdr.flags |= YM_FLAG_NO_ALLOC_BYTES;
	s.totals.req_bytes = 1000;
	model_update_facts(&m, &s, &live);
	assert_false(model_alloc_bytes_counted(&m));
	snap_make(&s, r, r, 2);
	s.hdr.flags |= YM_FLAG_NO_ALLOC_BYTES;
	s.totals.req_bytes = 8000;
	model_update_facts(&m, &s, &live);
	assert_true(m.alloc_bytes_rate == 3500.0);       /* 7000 B in 2 s */
	snap_make(&s, r, r, 4);                           /* exact mode */
	model_update_facts(&m, &s, &live);
	assert_true(model_alloc_bytes_counted(&m));
	assert_true(m.alloc_bytes_rate == 1000.0);       /* 2000 B in 2 s */
	model_free(&m);
}

/* The first snapshot's rates are averages since the agent started (they
 * were 0: a report taken once, sorted by rate, had no order); once the
 * target is gone the rates drop to 0 instead of keeping the last ones, and
 * a thread slot still marked live reads "exited". */
static void rates_first_and_after_exit(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000, 1000, 2000 };
	const double a1[NST] = { 0, 5000, 9000, 2000 };
	const double a2[NST] = { 0, 5000, 19000, 2000 };
	struct ym_thread th = { .tid = 1, .state = YM_THREAD_LIVE };
	model_init(&m);
	snap_make(&s, r, a1, 1);          /* taken 2 s after the agent started */
	model_update_facts(&m, &s, &live);
	assert_true(m.alive);
	assert_true(m.stacks[2].alloc_rate == 4500.0);   /* 9000 B in 2 s */
	assert_true(m.alloc_bytes_rate == 500.0);        /* 1000 B in 2 s */
	assert_string_equal(model_thread_state(&m, &th), "live");
	snap_make(&s, r, a2, 3);          /* the process is gone */
	model_update(&m, &s);
	assert_false(m.alive);
	assert_true(m.stacks[2].alloc_rate == 0);
	assert_true(m.alloc_bytes_rate == 0 && m.alloc_calls_rate == 0);
	assert_true(m.free_bytes_rate == 0 && m.free_calls_rate == 0);
	assert_string_equal(model_thread_state(&m, &th), "exited");
	model_free(&m);
}

/* The name shown is the one the process was started as (the facts' name,
 * from its comm), not the basename of header.exe, which the agent took
 * from /proc/self/exe and is a symlink's target (redis-server ->
 * redis-check-rdb); it is kept after the process is gone. */
static void name_is_comm_not_exe_target(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000, 1000, 2000 };
	model_init(&m);
	snap_make(&s, r, r, 0);
	assert_int_equal(model_update(&m, &s), 0);   /* never alive: exe */
	snprintf(m.snap.hdr.exe, sizeof m.snap.hdr.exe, "/usr/bin/resolved-target");
	assert_string_equal(model_name(&m), "resolved-target");
	model_free(&m);
	model_init(&m);
	snap_make(&s, r, r, 0);
	snprintf(s.hdr.exe, sizeof s.hdr.exe, "/usr/bin/resolved-target");
	model_update_facts(&m, &s, &live);
	assert_string_equal(model_name(&m), "redis-server");
	snap_make(&s, r, r, 1);           /* gone: the name stays */
	snprintf(s.hdr.exe, sizeof s.hdr.exe, "/usr/bin/resolved-target");
	model_update(&m, &s);
	assert_string_equal(model_name(&m), "redis-server");
	model_free(&m);
}

/* A copy of n thread slots for snapshot s (which owns it). */
static void give_threads(struct shm_snapshot *s, const struct ym_thread *th,
			 uint32_t n)
{
	s->threads = malloc(n * sizeof *th);
	assert_non_null(s->threads);
	memcpy(s->threads, th, n * sizeof *th);
	s->nthreads = n;
}

/* A thread's name: the one its slot kept at exit, else the facts' while the
 * process runs, else none; facts with the EXITED flag set are not alive. */
static void thread_names_from_facts(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000, 1000, 2000 };
	struct ym_thread th[2] = {
		{ .tid = 7, .state = YM_THREAD_LIVE },
		{ .tid = 8, .state = YM_THREAD_EXITED, .name = "gone-worker" },
	};
	const char names[2][MODEL_THREAD_NAME] = { "io-worker", "" };
	struct model_facts f = live;
	f.thread_names = names;
	f.nthread_names = 2;
	char buf[64];
	model_init(&m);
	snap_make(&s, r, r, 0);
	give_threads(&s, th, 2);
	model_update_facts(&m, &s, &f);
	assert_string_equal(model_thread_name(&m, &m.snap.threads[0], buf, sizeof buf),
			    "io-worker");
	assert_string_equal(model_thread_name(&m, &m.snap.threads[1], buf, sizeof buf),
			    "gone-worker");
	assert_string_equal(model_thread_name(&m, &th[0], buf, sizeof buf), "");
	snap_make(&s, r, r, 1);
	give_threads(&s, th, 2);
	s.hdr.flags = YM_FLAG_EXITED;     /* the agent saw its exit */
	model_update_facts(&m, &s, &f);
	assert_false(m.alive);
	assert_string_equal(model_thread_name(&m, &m.snap.threads[0], buf, sizeof buf), "");
	assert_string_equal(model_state(&m), "exited");
	model_free(&m);
}

/* How the process ended: kept from the first facts that knew it (a
 * zombie's status is gone once reaped), in words for the reports. */
static void exit_kept_and_told(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000, 1000, 2000 };
	char buf[64];
	model_init(&m);
	snap_make(&s, r, r, 0);
	model_update_facts(&m, &s, &live);
	assert_false(model_exited(&m));
	struct model_facts gone = { .exit_how = PROC_EXIT_SIGNAL, .exit_value = 9 };
	snap_make(&s, r, r, 1);
	model_update_facts(&m, &s, &gone);
	assert_true(model_exited(&m));
	assert_string_equal(model_exit_text(&m, buf, sizeof buf),
			    "killed by signal 9 (SIGKILL)");
	struct model_facts reaped = { 0 };
	snap_make(&s, r, r, 2);
	model_update_facts(&m, &s, &reaped);
	assert_int_equal(m.exit_how, PROC_EXIT_SIGNAL);   /* kept */
	model_free(&m);
	model_init(&m);
	m.exit_how = PROC_EXIT_STATUS;
	m.exit_value = 3;
	assert_string_equal(model_exit_text(&m, buf, sizeof buf), "exit status 3");
	m.exit_how = PROC_EXIT_UNKNOWN;
	assert_string_equal(model_exit_text(&m, buf, sizeof buf), "unknown");
	model_free(&m);
}

/* Exact mode after an attach: frees of blocks from before it count, their
 * allocations do not, so allocated minus freed is a net change since the
 * attach (here -40 MiB): flagged, never an in use, never the heap that
 * explains RSS (the retained estimate stands for it without the
 * allocator's figures). */
static void counted_net_after_attach(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000, 1000, 2000 };
	struct model_facts f = live;
	f.proc.mem = (struct proc_mem){ .have_status = 1, .rss_anon = 70 << 20 };
	model_init(&m);
	snap_make(&s, r, r, 1);
	s.totals.alloc_bytes = 1 << 20;
	s.totals.free_bytes = 41 << 20;
	model_update_facts(&m, &s, &f);
	struct model_memory mm;
	double in_use = 0;
	model_memory(&m, &mm);
	assert_false(mm.counted_net || model_counted_net(&m));
	assert_true(model_in_use(&m, &in_use) && in_use == -(40 << 20));
	m.snap.hdr.flags |= YM_FLAG_INJECTED;
	model_memory(&m, &mm);
	assert_true(model_counted_net(&m));
	assert_true(mm.have_counted && mm.counted_net && mm.counted_in_use == -(40 << 20));
	assert_false(model_in_use(&m, &in_use));
	assert_true(mm.unexplained == (70 << 20) - 6000);
	model_free(&m);
}

/* RSS explained: smaps_rollup's figures when there, status's otherwise;
 * the unexplained part subtracts the allocator's in use and free when
 * known, else the counted in use, and tracked mmap; nothing once gone. */
static void memory_explained(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000, 1000, 2000 };
	struct model_facts f = live;
	f.proc.rss_bytes = 100 << 20;
	f.proc.mem = (struct proc_mem){
		.have_status = 1, .rss_anon = 70 << 20, .rss_file = 20 << 20,
		.rss_shmem = 10 << 20, .vm_swap = 1 << 20,
	};
	model_init(&m);
	snap_make(&s, r, r, 1);
	s.totals.alloc_bytes = 50 << 20;
	s.totals.free_bytes = 10 << 20;
	model_update_facts(&m, &s, &f);
	struct model_memory mm;
	model_memory(&m, &mm);
	assert_true(mm.have_rss);
	assert_string_equal(mm.rss_source, "status");
	assert_true(mm.rss == 100 << 20 && mm.anon == 70 << 20 && mm.swap == 1 << 20);
	assert_true(mm.pss < 0);
	assert_true(mm.have_counted && mm.counted_in_use == 40 << 20);
	assert_true(mm.retained == 6000);
	assert_false(mm.have_heap);
	assert_false(mm.have_mmap);
	assert_true(mm.unexplained == 30 << 20);   /* 70 - 40 */
	m.proc.mem.have_rollup = 1;
	m.proc.mem.rss = 101 << 20;
	m.proc.mem.anonymous = 71 << 20;
	m.proc.mem.pss = 90 << 20;
	m.snap.hdr.heap.allocator = YM_HEAP_GLIBC;
	m.snap.hdr.heap.present = YM_HEAP_IN_USE | YM_HEAP_FREE;
	m.snap.hdr.heap.in_use_bytes = 45 << 20;
	m.snap.hdr.heap.free_bytes = 5 << 20;
	m.snap.hdr.heap.taken_mono_ns = m.snap.taken_mono_ns - 1500000000ull;
	m.snap.hdr.abi_version = 6;
	/* Taken after the process's last allocator call (the agent's call
	 * count then is the snapshot's): current, whatever its age. */
	m.snap.hdr.heap.present |= YM_HEAP_CALLS;
	m.snap.hdr.heap.calls = m.snap.totals.alloc_objects + m.snap.totals.free_objects;
	m.mmap_retained_bytes = 16 << 20;
	model_memory(&m, &mm);
	assert_string_equal(mm.rss_source, "smaps_rollup");
	assert_true(mm.rss == 101 << 20 && mm.file == 20 << 20 && mm.pss == 90 << 20);
	assert_true(mm.have_heap && mm.heap_in_use == 45 << 20);
	assert_false(mm.heap_old);
	assert_true(mm.unexplained == 5 << 20);    /* 71 - (45 + 5) - 16 */
	/* A call since they were taken, and no answer to this reader's
	 * request: shown, old, and the next source explains RSS. */
	m.snap.hdr.heap.taken_mono_ns = m.snap.taken_mono_ns - 2000000000ull;
	m.snap.totals.free_objects++;
	model_memory(&m, &mm);
	assert_true(mm.have_heap && mm.heap_old && mm.heap_age == 2.0);
	assert_true(mm.unexplained == (31 << 20) - (16 << 20));   /* 71 - 40 - 16 */
	m.snap.hdr.heap.taken_mono_ns = m.snap.taken_mono_ns;
	/* A sampling agent (ABI 6) counts no freed bytes: no counted in use;
	 * without the allocator's figures the estimate stands for the heap. */
	m.snap.hdr.flags |= YM_FLAG_NO_FREED_BYTES;
	m.snap.hdr.heap.present = 0;
	model_memory(&m, &mm);
	assert_false(mm.have_counted);
	assert_false(mm.have_heap);
	assert_true(mm.unexplained == (71 << 20) - 6000 - (16 << 20));
	assert_string_equal(mm.unexplained_why, "anonymous RSS minus heap and tracked "
			    "mmap: thread stacks, allocator overhead, other mappings");
	assert_false(mm.have_gap);
	/* In use (usable bytes) beside retained (requested bytes): the gap
	 * and what it is made of, memory from before an attach included
	 * when the agent was injected. */
	m.snap.hdr.heap.present = YM_HEAP_IN_USE | YM_HEAP_FREE | YM_HEAP_CALLS;
	m.snap.hdr.heap.calls = m.snap.totals.alloc_objects + m.snap.totals.free_objects;
	model_memory(&m, &mm);
	assert_true(mm.have_gap && mm.gap == (45 << 20) - 6000);
	assert_non_null(strstr(mm.gap_why, "size-class slack"));
	assert_null(strstr(mm.gap_why, "attach"));
	m.snap.hdr.flags |= YM_FLAG_INJECTED;
	model_memory(&m, &mm);
	assert_non_null(strstr(mm.gap_why, "before the attach"));
	/* More heap than is resident: said in words, not as a share. */
	m.proc.mem.anonymous = 30 << 20;
	model_memory(&m, &mm);
	assert_true(mm.unexplained < 0);
	assert_non_null(strstr(mm.unexplained_why, "negative: "));
	assert_non_null(strstr(mm.unexplained_why, "allocated but never touched"));
	assert_non_null(strstr(mm.unexplained_why, "size-class slack"));
	snap_make(&s, r, r, 2);
	model_update(&m, &s);                      /* gone */
	model_memory(&m, &mm);
	assert_false(mm.have_rss);
	model_free(&m);
}

/* Stack i of a v7 snapshot: its counters in samples of weight w each
 * (alloc samples, of which free were freed) and the agent's peak. */
static void stack_set(struct shm_snapshot *s, uint32_t i, double w, uint64_t alloc,
		      uint64_t freed, double peak, uint32_t peak_samples)
{
	struct ym_stack *st = snap_stack(s, i);
	st->alloc_samples = alloc;
	st->free_samples = freed;
	st->alloc_bytes = (uint64_t)(w * (double)alloc);
	st->free_bytes = (uint64_t)(w * (double)freed);
	struct ym_stack_ext *x = (struct ym_stack_ext *)(void *)((uint8_t *)st +
		shm_stack_stride_v5(s->hdr.max_depth));
	x->peak_bytes = (uint64_t)peak;
	x->peak_samples = peak_samples;
}

/* At the default rate a 64-byte block's sample weighs R + 32 bytes.  A
 * stack that churns such blocks has one live sample: its retained bytes
 * and peak are marked, with an error near 100%; twenty samples, or one
 * sample of a 5 MiB block (sampled almost surely), are not.  Ranks: a
 * marked figure sorts at the low end of its error. */
static void few_samples_marked_and_ranked_low(void **state)
{
	(void)state;
	const double R = 524288, zero[NST] = { 0 };
	struct model m;
	struct shm_snapshot s;
	model_init(&m);
	snap_fake(&s, NST, DEPTH, zero, zero, 0);
	s.hdr.abi_version = 7;
	s.hdr.sample_rate = (uint64_t)R;
	double w64 = 64 / (1 - exp(-64 / R));
	double w5m = 5 * R * 2 / (1 - exp(-5 * 2.0));   /* a 5 MiB block */
	double w1 = 1.2 * R / (1 - exp(-1.2));           /* a 614 KiB block */
	stack_set(&s, 1, w64, 1000, 999, w64, 1);         /* churn */
	stack_set(&s, 2, w64, 20, 0, 20 * w64, 20);       /* well sampled */
	stack_set(&s, 3, w5m, 1, 0, w5m, 1);              /* one big block */
	assert_int_equal(model_update(&m, &s), 0);
	const struct model_stack *churn = &m.stacks[1], *many = &m.stacks[2],
				 *big = &m.stacks[3];
	assert_int_equal(churn->live_samples, 1);
	assert_int_equal(churn->peak_samples, 1);
	assert_true(churn->retained_err > 0.99 && churn->retained_err <= 1);
	assert_true(model_retained_few(&m, churn));
	assert_true(model_peak_few(&m, churn));
	assert_false(model_retained_few(&m, many));
	assert_false(model_peak_few(&m, many));
	assert_true(fabs(many->retained_err - 1 / sqrt(20)) < 0.01);
	assert_false(model_retained_few(&m, big));
	assert_true(big->retained_err < 0.01);
	assert_true(model_rank(&m, churn, SORT_PEAK) < 0.01 * w64);
	assert_true(model_rank(&m, many, SORT_PEAK) == model_key(&m, many, SORT_PEAK));
	model_free(&m);

	/* Two small-block samples (2 R) and one sample of a 1.2 R block
	 * (about 1.7 R, sampled with p = 0.7): both marked; the single
	 * block's lower end is higher. */
	model_init(&m);
	snap_fake(&s, NST, DEPTH, zero, zero, 0);
	s.hdr.abi_version = 7;
	s.hdr.sample_rate = (uint64_t)R;
	stack_set(&s, 1, w64, 2, 0, 2 * w64, 2);
	stack_set(&s, 2, w1, 1, 0, w1, 1);
	assert_int_equal(model_update(&m, &s), 0);
	assert_true(model_retained_few(&m, &m.stacks[1]));
	assert_true(model_retained_few(&m, &m.stacks[2]));
	assert_true(m.stacks[1].retained_bytes > m.stacks[2].retained_bytes);
	assert_int_equal(m.order[0], 2);
	assert_int_equal(m.order[1], 1);
	model_free(&m);
}

/* Exact mode: nothing is marked, and a peak the agent has not raised
 * yet (it lags by steps, segment.h) is shown as the retained bytes: the
 * stack holding 4 KiB sorts above one that churned 64-byte blocks. */
static void peak_never_below_retained(void **state)
{
	(void)state;
	const double zero[NST] = { 0 };
	struct model m;
	struct shm_snapshot s;
	model_init(&m);
	snap_fake(&s, NST, DEPTH, zero, zero, 0);
	s.hdr.abi_version = 7;
	s.hdr.sample_rate = 1;
	stack_set(&s, 1, 64, 100000, 100000, 64, 1);   /* churn: peak 64 B */
	stack_set(&s, 2, 64, 64, 0, 0, 0);             /* 4 KiB, peak lagging */
	s.hdr.peak_retained = 64;
	assert_int_equal(model_update(&m, &s), 0);
	const struct model_stack *held = &m.stacks[2];
	assert_true(held->retained_bytes == 4096);
	assert_true(model_peak(&m, held) == 4096);
	assert_int_equal(model_peak_samples(&m, held), 64);
	assert_false(model_peak_few(&m, &m.stacks[1]));
	assert_true(m.peak_retained_bytes == 4096);
	model_sort(&m, SORT_PEAK, 0, NULL, NULL, NULL);
	assert_int_equal(m.order[0], 2);
	assert_int_equal(m.order[1], 1);
	/* After a mark, the peak since the mark carries its samples too. */
	model_mark(&m);
	assert_true(model_peak(&m, held) == 4096);
	assert_int_equal(model_peak_samples(&m, held), 64);
	model_free(&m);

	/* A writer before v7 says no peak samples: unknown, never marked. */
	model_init(&m);
	snap_fake(&s, NST, DEPTH, zero, zero, 0);
	s.hdr.abi_version = 6;
	s.hdr.sample_rate = 524288;
	stack_set(&s, 1, 524320, 3, 2, 3 * 524320.0, 0);
	assert_int_equal(model_update(&m, &s), 0);
	assert_int_equal(model_peak_samples(&m, &m.stacks[1]), -1);
	assert_false(model_peak_few(&m, &m.stacks[1]));
	assert_true(model_retained_few(&m, &m.stacks[1]));
	model_free(&m);
}

/* The allocator's figures are current when they answer this reader's
 * own request, or when the agent's call count at their taking is not
 * below the snapshot's; else old, with their age. */
static void heap_current_by_answer_or_by_calls(void **state)
{
	(void)state;
	static struct model m;
	model_init(&m);
	struct ym_heapstats *hs = &m.snap.hdr.heap;
	m.snap.taken_mono_ns = 10000000000ull;
	m.snap.totals.alloc_objects = 70;
	m.snap.totals.free_objects = 30;
	hs->allocator = YM_HEAP_GLIBC;
	hs->present = YM_HEAP_IN_USE;
	hs->taken_mono_ns = 7000000000ull;
	double age = -1;
	/* A writer before v7: no call count; current only as an answer. */
	assert_false(model_heap_current(&m));
	assert_non_null(model_heap(&m, &age));
	assert_true(age == 3.0);
	m.snap.heap_asked = 5;
	hs->answered = 4;
	assert_false(model_heap_current(&m));
	hs->answered = 5;
	assert_true(model_heap_current(&m));
	assert_non_null(model_heap(&m, &age));
	assert_true(age == 0);
	hs->answered = 6;                          /* another reader's, later */
	assert_true(model_heap_current(&m));
	/* Not an answer: the call count tells. */
	m.snap.heap_asked = 0;
	hs->present |= YM_HEAP_CALLS;
	hs->calls = 100;
	assert_true(model_heap_current(&m));
	hs->calls = 101;                           /* taken after the copy */
	assert_true(model_heap_current(&m));
	hs->calls = 99;                            /* a call since */
	assert_false(model_heap_current(&m));
	assert_non_null(model_heap(&m, &age));
	assert_true(age == 3.0);
	hs->present = 0;
	assert_false(model_heap_current(&m));
	assert_null(model_heap(&m, &age));
	model_free(&m);
}

/* The agent's peaks lag by up to a step a thread (segment.h), and the
 * process's peak is its own estimate, not the stacks' sum: a peak is
 * never shown below the retained figure read with it (redis-server in
 * exact mode showed "retained 3.05 MiB ... peak 3.00 MiB"); it keeps the
 * agent's time, or takes the snapshot's when the agent has none. */
static void peak_at_least_retained_when_read(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000000, 1000, 2000 };
	const double a[NST] = { 0, 3000000, 9000, 2000 };
	model_init(&m);
	snap_make(&s, r, a, 0);
	s.hdr.abi_version = YM_ABI_VERSION;
	for (uint32_t i = 0; i < NST; i++) {
		struct ym_stack_ext *x = (struct ym_stack_ext *)(void *)
			((uint8_t *)snap_stack(&s, i) + shm_stack_stride_v5(DEPTH));
		x->kind = YM_KIND_MALLOC;
		x->peak_bytes = i == 1 ? 2950000 : i == 3 ? 0 : 9000;
		x->peak_mono_ns = i == 3 ? 0 : 100;   /* 3: none yet */
	}
	s.hdr.peak_retained = 2990000;   /* behind the stacks' 3003000 */
	s.hdr.peak_mono_ns = 200;
	model_update(&m, &s);
	assert_true(m.stacks[1].peak_bytes == 3000000);
	assert_int_equal(m.stacks[1].peak_mono_ns, 100);   /* the step's time */
	assert_true(m.stacks[2].peak_bytes == 9000);   /* above: kept */
	assert_int_equal(m.stacks[2].peak_mono_ns, 100);
	assert_true(m.peak_retained_bytes == 3003000);
	assert_int_equal(m.peak_mono_ns, 200);
	assert_true(m.stacks[3].peak_bytes == 2000);
	assert_int_equal(m.stacks[3].peak_mono_ns, m.snap.taken_mono_ns);
	model_free(&m);
}

/* Samples that found the live table full or its lock taken are not in
 * the retained figures: one line says how many and why, none when every
 * sample counts. */
static void uncounted_samples_told(void **state)
{
	(void)state;
	struct model m;
	struct shm_snapshot s;
	const double r[NST] = { 0, 3000, 1000, 2000 };
	char buf[MODEL_UNCOUNTED_LEN];
	uint64_t nlive = 9, busy = 9;
	model_init(&m);
	snap_make(&s, r, r, 0);
	model_update(&m, &s);
	assert_null(model_uncounted(&m, buf, sizeof buf, &nlive, &busy));
	assert_int_equal(nlive, 0);
	assert_int_equal(busy, 0);
	snap_make(&s, r, r, 1);
	s.hdr.drop_live = 1477668;
	model_update(&m, &s);
	assert_non_null(model_uncounted(&m, buf, sizeof buf, &nlive, &busy));
	assert_string_equal(buf, "uncounted: 1477668 samples (the live table "
			    "was full: raise YM_MAX_LIVE); retained figures are "
			    "short of their bytes");
	assert_int_equal(nlive, 1477668);
	snap_make(&s, r, r, 2);
	s.hdr.drop_live = 5;
	s.hdr.drop_busy = 2;
	model_update(&m, &s);
	assert_non_null(model_uncounted(&m, buf, sizeof buf, NULL, &busy));
	assert_int_equal(busy, 2);
	assert_non_null(strstr(buf, "uncounted: 7 samples (5 found the live "
				    "table full (YM_MAX_LIVE), 2 its lock taken)"));
	snap_make(&s, r, r, 3);
	s.hdr.drop_busy = 1;
	model_update(&m, &s);
	assert_non_null(strstr(model_uncounted(&m, buf, sizeof buf, NULL, NULL),
			       "1 samples (the agent's lock was taken)"));
	model_free(&m);
}

/* Why the allocator's statistics are missing: the agent's reason (v8)
 * named, nothing when they are present or the reason is not known (0: a
 * v7 agent; a value past the known ones: a newer agent's). */
static void heap_missing_says_the_agents_reason(void **state)
{
	(void)state;
	const double zero[NST] = { 0 };
	struct model m;
	model_init(&m);
	snap_fake(&m.snap, NST, DEPTH, zero, zero, 0);
	struct ym_heapstats *hs = &m.snap.hdr.heap;
	const char *key = NULL;
	hs->allocator = YM_HEAP_NONE;
	hs->none_why = YM_HEAP_WHY_MUSL;
	assert_string_equal(model_heap_missing(&m, &key), "musl's allocator keeps none");
	assert_string_equal(key, "musl");
	hs->none_why = YM_HEAP_WHY_OLD_GLIBC;
	assert_non_null(strstr(model_heap_missing(&m, &key), "before 2.33"));
	assert_string_equal(key, "glibc_before_2_33");
	hs->none_why = YM_HEAP_WHY_OTHER;
	assert_non_null(model_heap_missing(&m, NULL));
	hs->none_why = YM_HEAP_WHY_UNKNOWN;
	assert_null(model_heap_missing(&m, NULL));
	hs->none_why = YM_HEAP_WHY_OTHER + 1;
	assert_null(model_heap_missing(&m, NULL));
	hs->allocator = YM_HEAP_GLIBC;
	hs->none_why = YM_HEAP_WHY_MUSL;
	assert_null(model_heap_missing(&m, NULL));
	model_free(&m);
}

/* Blocks freed within MODEL_SHORT_LIVED_NS (buckets up to 10 ms): their
 * share of the allocated objects, bytes, and the allocation rate times
 * their share of the allocated bytes; no share for a stack that allocated
 * nothing. */
static void short_lived_share_and_rate(void **state)
{
	(void)state;
	struct model_stack s;
	struct model_short sh;
	memset(&s, 0, sizeof s);
	model_short_lived(&s, &sh);
	/* The histogram is the segment's record's. */
	static struct ym_stack rec;
	s.rec = &rec;
	assert_true(sh.fraction < 0 && sh.bytes == 0 && sh.rate == 0);
	s.alloc_objects = 100;
	s.alloc_bytes = 6400;
	s.alloc_rate = 2000;
	rec.life[0].objects_fx = 30 * YM_FX_ONE, rec.life[0].bytes = 1920;   /* < 1 us */
	rec.life[4].objects_fx = 50 * YM_FX_ONE, rec.life[4].bytes = 1280;   /* < 10 ms */
	rec.life[5].objects_fx = 20 * YM_FX_ONE, rec.life[5].bytes = 3200;   /* < 100 ms: not */
	model_short_lived(&s, &sh);
	assert_true(fabs(sh.fraction - 0.8) < 1e-12);
	assert_true(sh.objects == 80 && sh.bytes == 3200);
	assert_true(fabs(sh.rate - 1000) < 1e-9);
	assert_true(model_short_rate(&s) == sh.rate);
	rec.life[11].objects_fx = (uint64_t)1e9 * YM_FX_ONE;   /* never above 1 */
	rec.life[3].objects_fx = (uint64_t)1e9 * YM_FX_ONE;
	model_short_lived(&s, &sh);
	assert_true(sh.fraction == 1);
}

/* Resident per stack (tui/resident.c) on this process's own pages: a
 * sample's weight scaled by its share of present pages; samples whose
 * range is no user-space range (a hostile segment) count nothing; an
 * exited process is "not known" with its reason, never 0. */
static void resident_of_own_pages(void **state)
{
	(void)state;
	long ps = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, (size_t)ps * 8, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 1, (size_t)ps * 2);              /* pages 0-1 written */
	struct model m;
	memset(&m, 0, sizeof m);
	m.alive = 1;
	m.snap.pid = getpid();
	m.nstacks = 2;
	struct model_stack st[2];
	memset(st, 0, sizeof st);
	st[0].retained_bytes = st[1].retained_bytes = 1e12;
	m.stacks = st;
	struct ym_live lv[5];
	memset(lv, 0, sizeof lv);
	lv[0] = (struct ym_live){ .addr = (uint64_t)(uintptr_t)p,
		.size = (uint64_t)ps * 4, .weight_bytes = 4000, .stack = 0 };
	lv[1] = (struct ym_live){ .addr = (uint64_t)(uintptr_t)(p + ps * 4),
		.size = (uint64_t)ps * 4, .weight_bytes = 1000, .stack = 1 };
	lv[2] = (struct ym_live){ .addr = UINT64_MAX - 10, .size = 100,
		.weight_bytes = 1 << 30, .stack = 1 };    /* wraps */
	lv[3] = (struct ym_live){ .addr = 1ULL << 60, .size = 1,
		.weight_bytes = 1 << 30, .stack = 1 };    /* kernel space */
	lv[4] = (struct ym_live){ .addr = (uint64_t)(uintptr_t)p, .size = 1,
		.weight_bytes = 1 << 30, .stack = 7 };    /* no such stack */
	m.snap.live = lv;
	m.snap.nlive = 5;
	struct resident r;
	resident_init(&r);
	resident_update(&r, &m);
	assert_true(m.resident_known);
	assert_true(fabs(st[0].resident_bytes - 2000) < 1e-6);   /* 2 of 4 pages */
	assert_true(st[1].resident_bytes == 0);
	assert_true(m.resident_sum[YM_KIND_MALLOC] == st[0].resident_bytes);
	m.alive = 0;
	resident_update(&r, &m);
	assert_false(m.resident_known);
	assert_true(strstr(m.resident_why, "not running") != NULL);
	resident_free(&r);
	m.stacks = NULL;
	m.snap.live = NULL;
	munmap(p, (size_t)ps * 8);
}

/* What a writer's version lacks is decided by the model, in one place:
 * report/ and screen/ ask it (model_has_peaks, model_tracks_mmap) and
 * never compare abi_version themselves. */
static void older_writers_facts_not_known(void **state)
{
	(void)state;
	static const struct { uint16_t abi; int peaks, mmap; } w[] = {
		{ 5, 0, 0 }, { 6, 1, 1 }, { 7, 1, 1 }, { YM_ABI_VERSION, 1, 1 },
	};
	const double zero[NST] = { 0 };
	for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
		struct model m;
		struct shm_snapshot s;
		model_init(&m);
		assert_false(model_tracks_mmap(&m));   /* no snapshot yet */
		snap_fake(&s, NST, DEPTH, zero, zero, 0);
		s.hdr.abi_version = w[i].abi;
		s.hdr.stacks_used = 3;
		s.hdr.drop_busy = 2;
		assert_int_equal(model_update(&m, &s), 0);
		assert_int_equal(model_has_peaks(&m), w[i].peaks);
		assert_int_equal(model_tracks_mmap(&m), w[i].mmap);
		/* The record that counts a full table's turned-away stacks is
		 * in neither figure. */
		assert_int_equal(model_stacks_used(&m), 2);
		assert_int_equal(model_stacks_capacity(&m),
				 m.snap.hdr.sections[YM_SEC_STACKS].capacity - 1);
		assert_int_equal(model_drops(&m).busy, 2);
		model_free(&m);
	}
}

/* A model that takes each snapshot over the last one's arrays holds the
 * same stacks as one that takes it into new arrays: nothing of the last
 * snapshot is left (peaks, ages without a live table, rates). */
static void snapshot_over_the_last(void **state)
{
	(void)state;
	const double r[3][NST] = { { 0, 3000, 1000, 2000 }, { 0, 100, 5000, 0 },
				   { 0, 3000, 7000, 1000 } };
	const double a[3][NST] = { { 0, 5000, 9000, 2000 }, { 0, 5000, 19000, 2000 },
				   { 0, 9000, 29000, 3000 } };
	struct model over, fresh;
	model_init(&over);
	model_init(&fresh);
	for (int k = 0; k < 3; k++) {
		struct shm_snapshot s1, s2;
		snap_make(&s1, r[k], a[k], k);
		snap_make(&s2, r[k], a[k], k);
		/* The second snapshot without the live table: ages kept. */
		s1.live_skipped = s2.live_skipped = (k == 1);
		if (k == 1) {
			s1.nlive = s2.nlive = 0;
		}
		/* The third with fewer stacks: the arrays still fit. */
		if (k == 2)
			s1.nstacks = s2.nstacks = NST - 1;
		fresh.capstacks = 0;             /* new arrays every time */
		struct model_stack *before = over.stacks;
		assert_int_equal(model_update_facts(&over, &s1, &live), 0);
		assert_int_equal(model_update_facts(&fresh, &s2, &live), 0);
		if (k > 0)
			assert_ptr_equal(over.stacks, before);
		assert_int_equal(over.nstacks, fresh.nstacks);
		/* Everything but where the frames and the record are (each
		 * its own snapshot's). */
		for (uint32_t i = 0; i < over.nstacks; i++) {
			struct model_stack x = over.stacks[i], y = fresh.stacks[i];
			assert_int_equal(memcmp(x.frames, y.frames, x.depth * sizeof *x.frames), 0);
			assert_memory_equal(x.rec->life, y.rec->life, sizeof x.rec->life);
			x.frames = y.frames = NULL;
			x.rec = y.rec = NULL;
			assert_memory_equal(&x, &y, sizeof x);
		}
		assert_int_equal(over.norder, fresh.norder);
		assert_memory_equal(over.order, fresh.order,
				    over.norder * sizeof *over.order);
	}
	assert_true(over.stacks[2].oldest_birth_ns == 500000000ULL);
	model_free(&over);
	model_free(&fresh);
}

/* model_sort's order by every figure: descending rank (a figure of few
 * samples ranks lower), then the figure, both reversed ascending; then
 * retained bytes descending, then id. */
static void sort_order_by_every_key(void **state)
{
	(void)state;
	enum { N = 600 };
	static double r[N], a[N];
	unsigned seed = 7;
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		/* Few distinct values: many ties. */
		a[i] = 100.0 * (1 + (seed >> 16) % 40);
		r[i] = 100.0 * ((seed >> 8) % 20);
		if (r[i] > a[i])
			r[i] = a[i];
	}
	struct shm_snapshot s;
	snap_fake(&s, N, DEPTH, r, a, 1);
	for (uint32_t i = 0; i < N; i++) {
		struct ym_stack *st = snap_stack(&s, i);
		st->alloc_objects_fx = (uint64_t)(a[i] / 100) * YM_FX_ONE;
		st->free_objects_fx = (uint64_t)((a[i] - r[i]) / 100) * YM_FX_ONE;
		/* Stacks of few samples among them. */
		st->alloc_samples = i % 3 ? (uint64_t)(a[i] / 100) : 1;
		st->free_samples = i % 3 ? (uint64_t)((a[i] - r[i]) / 100) : 0;
	}
	struct model m;
	model_init(&m);
	assert_int_equal(model_update_facts(&m, &s, &live), 0);
	const enum model_sort keys[] = { SORT_RETAINED, SORT_ALLOCATED, SORT_LIVE,
					 SORT_AVG, SORT_PEAK, SORT_GROWTH };
	for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
		for (int asc = 0; asc < 2; asc++) {
			model_sort(&m, keys[k], asc, NULL, NULL, NULL);
			assert_int_equal(m.norder, N);
			for (uint32_t i = 1; i < m.norder; i++) {
				const struct model_stack *x = &m.stacks[m.order[i - 1]];
				const struct model_stack *y = &m.stacks[m.order[i]];
				double rx = model_rank(&m, x, keys[k]);
				double ry = model_rank(&m, y, keys[k]);
				double kx = model_key(&m, x, keys[k]);
				double ky = model_key(&m, y, keys[k]);
				int c = rx > ry ? -1 : rx < ry ? 1 :
					kx > ky ? -1 : kx < ky ? 1 : 0;
				if (asc)
					c = -c;
				if (c == 0)
					c = x->retained_bytes > y->retained_bytes ? -1 :
					    x->retained_bytes < y->retained_bytes ? 1 :
					    x->id < y->id ? -1 : 1;
				assert_true(c < 0);
			}
		}
	}
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(short_lived_share_and_rate),
		cmocka_unit_test(resident_of_own_pages),
		cmocka_unit_test(estimates_and_order),
		cmocka_unit_test(snapshot_over_the_last),
		cmocka_unit_test(sort_order_by_every_key),
		cmocka_unit_test(rates_mark_growth_filter),
		cmocka_unit_test(rates_of_requested_bytes_when_sampling),
		cmocka_unit_test(rates_first_and_after_exit),
		cmocka_unit_test(name_is_comm_not_exe_target),
		cmocka_unit_test(thread_names_from_facts),
		cmocka_unit_test(exit_kept_and_told),
		cmocka_unit_test(memory_explained),
		cmocka_unit_test(counted_net_after_attach),
		cmocka_unit_test(few_samples_marked_and_ranked_low),
		cmocka_unit_test(peak_never_below_retained),
		cmocka_unit_test(heap_current_by_answer_or_by_calls),
		cmocka_unit_test(peak_at_least_retained_when_read),
		cmocka_unit_test(uncounted_samples_told),
		cmocka_unit_test(heap_missing_says_the_agents_reason),
		cmocka_unit_test(older_writers_facts_not_known),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
