/*
 * sampling: the sampled slow path and the control poll (sampling.h).
 *
 * State, this file's: the rate asked for (YM_SAMPLE_RATE, then ymtop
 * --rate) and the rate in force (the same, or longer under a cost
 * budget: budget.h), the last reset request seen, the
 * threads seeded from YM_SEED, and the segment's CONTROL section, which
 * the agent only reads.
 */
#include <errno.h>
#include <string.h>

#include "budget.h"
#include "heapstats.h"
#include "live.h"
#include "modules.h"
#include "sample.h"
#include "sampling.h"
#include "segstate.h"
#include "stale.h"
#include "table.h"
#include "trend.h"

static uint64_t rate;             /* atomic: mean bytes between samples */
static uint64_t requested;        /* atomic: the rate asked for; 0: cfg's */
static uint32_t seen_reset;       /* control.reset_seq carried out */
static uint64_t seeded;           /* threads seeded from YM_SEED so far */
static struct ym_header  *hdr;
static struct ym_control *ctl;

static uint64_t requested_rate(void)
{
	uint64_t r = __atomic_load_n(&requested, __ATOMIC_RELAXED);
	return r ? r : agent_cfg.rate;
}

void sampling_map_segment(uint8_t *base, const struct ym_section *sec)
{
	hdr = (struct ym_header *)base;
	ctl = (struct ym_control *)(base + sec[YM_SEC_CONTROL].offset);
	/* Kept across fork: a child goes on at the rate ymtop last set. */
	__atomic_store_n(&rate, sampling_rate(), __ATOMIC_RELAXED);
	budget_map_segment(hdr, requested_rate(), sampling_rate());
}

uint64_t sampling_rate(void)
{
	uint64_t r = __atomic_load_n(&rate, __ATOMIC_RELAXED);
	return r ? r : agent_cfg.rate;
}

/* The rate in force for new countdowns becomes r (taken by each thread at
 * its next sample), published in the header. */
static void set_rate(uint64_t r)
{
	__atomic_store_n(&rate, r, __ATOMIC_RELAXED);
	__atomic_store_n(&hdr->sample_rate, r, __ATOMIC_RELEASE);
	budget_note_rates(requested_rate(), r, 0);
}

void sampling_fork_child(void)
{
	seen_reset = 0;
}

void sampling_thread_start(struct agent_tls *t)
{
	t->rng = agent_cfg.seed ?
		sample_seed(agent_cfg.seed + __atomic_fetch_add(&seeded, 1,
								__ATOMIC_RELAXED)) :
		sample_seed((uint64_t)t->tid << 32 ^ agent_now_ns() ^ (uintptr_t)t);
	t->rate = sampling_rate();   /* before the segment: YM_SAMPLE_RATE's */
	t->countdown = sample_next_gap(&t->rng, t->rate);
}

static void poll_control(struct agent_tls *t, int calls_out, uint64_t now)
{
	/* First, before any lock of ours: the allocator's statistics when a
	 * reader asked (heapstats.h; the real call has returned).  Not from
	 * the mmap path (calls_out 0): its caller may hold the allocator's
	 * lock (a signal handler that interrupted malloc, an extent hook),
	 * which mallinfo2 and mallctl would wait for. */
	if (calls_out)
		heapstats_poll(0);
	/* A new rate (segment.h, Control): taken by the first thread that
	 * sees it, published in the header; every thread draws its next
	 * countdown with it (agent_sample).  Exact mode never changes: its
	 * tables and free path are laid out for it. */
	uint64_t want = __atomic_load_n(&ctl->sample_rate, __ATOMIC_ACQUIRE);
	uint64_t asked = requested_rate();
	uint64_t cur = __atomic_load_n(&rate, __ATOMIC_RELAXED);
	if (want && want != asked && cur > 1 && want >= 2 && want <= (1ULL << 40)) {
		__atomic_store_n(&requested, want, __ATOMIC_RELAXED);
		/* A budget that lengthened the rate keeps the longer one until
		 * its next window says otherwise; never below the new floor. */
		set_rate(budget_on() && cur > asked && cur > want ? cur : want);
		asked = want;
		cur = sampling_rate();
	}
	/* A cost budget asked for (budget.h), then its window. */
	uint64_t mo = __atomic_load_n(&ctl->max_overhead, __ATOMIC_ACQUIRE);
	if (mo && mo <= BUDGET_PPM_MAX && mo != budget_get() && cur > 1)
		budget_set((uint32_t)mo);
	uint64_t next = budget_poll(t, now, cur, asked);
	if (next)
		set_rate(next);
	uint32_t pause = __atomic_load_n(&ctl->pause, __ATOMIC_ACQUIRE);
	if (pause)
		__atomic_fetch_or(&hdr->flags, YM_FLAG_PAUSED, __ATOMIC_RELAXED);
	else if (__atomic_load_n(&hdr->flags, __ATOMIC_RELAXED) & YM_FLAG_PAUSED)
		__atomic_fetch_and(&hdr->flags, ~YM_FLAG_PAUSED, __ATOMIC_RELAXED);
	uint32_t reset = __atomic_load_n(&ctl->reset_seq, __ATOMIC_ACQUIRE);
	if (reset != seen_reset && table_lock(AGENT_SPINS)) {
		if (live_reset()) {
			table_reset_counters();
			seen_reset = reset;
			budget_note_rates(asked, sampling_rate(), 1);
		}
		table_unlock();
	}
}

/* A thread reads the control block at its first sample this long or
 * more after its previous look: a request (rate, pause, reset; heap
 * statistics also through fast_limit, heapstats.h) is taken within a
 * millisecond by a busy thread, at a later sample by a quiet one.
 * Reading it at every sample costs 0.02-0.06x of mixed2 (BENCHMARKS.md):
 * its lines, shared with the readers, are evicted by the program's own
 * memory traffic between two samples. */
#define POLL_INTERVAL_NS 1000000ULL

static inline __attribute__((always_inline)) uint64_t
sampling_start(struct agent_tls *t, int calls_out, uint64_t now, int *polled)
{
	/* This sample was drawn at t->rate: its weight says so, whatever the
	 * rate is now (ymtop --rate); the next countdown is drawn at now's. */
	uint64_t now_rate = sampling_rate();
	uint64_t drawn = t->rate ? t->rate : now_rate;
	t->rate = now_rate;
	t->countdown = sample_next_gap(&t->rng, t->rate);
	if (!agent_active())
		return 0;
	*polled = !t->polled_ns || now - t->polled_ns >= POLL_INTERVAL_NS;
	if (*polled) {
		t->polled_ns = now;
		poll_control(t, calls_out, now);
		t->paused = (__atomic_load_n(&hdr->flags, __ATOMIC_RELAXED) &
			     YM_FLAG_PAUSED) != 0;
	}
	stale_sampled();
	if (t->paused)
		return 0;
	trend_tick(now);
	return drawn;
}

/* Inlined into agent_sample: one frame less for the unwinder on every
 * sample (exact mode unwinds every allocation). */
static inline __attribute__((always_inline)) int
take(struct agent_tls *t, void *p, size_t n, size_t charged, uint32_t kind,
     int calls_out, uint64_t now, struct ym_live *e)
{
	int polled = 0;
	uint64_t drawn = sampling_start(t, calls_out, now, &polled);
	if (!drawn)
		return 0;
	/* Modules first: an unload seen there flushes the unwinder's rules
	 * for its addresses before this unwind.  The interpreter's hook (and
	 * an interpreter loaded since) at the thread's look at the control
	 * block only: in a process without one, python_poll counts the
	 * loader's objects (dl_iterate_phdr, its lock) each time, about 190
	 * instructions and the lock's line, a tenth of a sample. */
	if (calls_out) {   /* dl_iterate_phdr takes the loader's lock */
		modules_check(now);
		if (polled)
			python_poll();
	}
	uint64_t frames[YM_LIMIT_DEPTH];
	uint32_t depth = agent_capture(frames);
	*e = (struct ym_live){
		.addr = (uint64_t)(uintptr_t)p,
		.size = n,
		.birth_mono_ns = now,
		.tid = t->tid,
	};
	sample_weight(drawn, n, charged, &e->weight_bytes, &e->weight_fx);
	e->stack = table_intern_kind(frames, depth, t->tid, now, kind);
	return e->stack != UINT32_MAX;
}

int sampling_take(struct agent_tls *t, void *p, size_t n, size_t charged,
		  uint32_t kind, int calls_out, struct ym_live *e)
{
	uint64_t now = agent_now_ns();
	int ok = take(t, p, n, charged, kind, calls_out, now, e);
	budget_spent(t, now);
	return ok;
}

void agent_sample(struct agent_tls *t, void *p, size_t n, size_t charged)
{
	int saved = errno;
	agent_guard_enter(t);
	if (agent_exact())   /* its unwind hides the head's and entry's misses */
		live_prefetch_insert((uint64_t)(uintptr_t)p, t->tid);
	struct ym_live e;
	uint64_t now = agent_now_ns();
	if (!take(t, p, n, charged, YM_KIND_MALLOC, 1, now, &e))
		goto out;
	int ok = live_insert(&e, t->tid, AGENT_SPINS);
	if (ok > 0) {
		table_count_alloc(&e, table_own_counts(&t->plane, e.stack));
	} else if (ok < 0) {
		__atomic_fetch_add(&hdr->drop_busy, 1, __ATOMIC_RELAXED);
	} else {
		__atomic_fetch_add(&hdr->drop_live, 1, __ATOMIC_RELAXED);
		__atomic_fetch_or(&hdr->flags, YM_FLAG_OVERFLOWED,
				  __ATOMIC_RELAXED);
	}
out:
	budget_spent(t, now);
	agent_guard_leave(t);
	errno = saved;
}

/* A lock-free probe of the live table (live_has) before its lock pays
 * when most of the frees the filter lets through are false positives: it
 * settles those without taking the stripe's line from the other CPUs.
 * When most are samples (large blocks, about one in five sampled at the
 * default rate) it is a second walk of the chain right before the one
 * under the lock (about 65 instructions a sampled free on mixed2, and the
 * stripe's line read just before the lock takes it).  So each thread goes
 * by what its own recent hits were, halved every 64. */
static int probe_pays(const struct agent_tls *t)
{
	return (t->filter_hits - t->filter_found) * 2 > t->filter_hits;
}

static void filter_outcome(struct agent_tls *t, int found)
{
	t->filter_hits++;
	t->filter_found += found != 0;
	if (t->filter_hits >= 64) {
		t->filter_hits /= 2;
		t->filter_found /= 2;
	}
}

/* The filter said this address may be a live sample. */
size_t agent_free_sampled(struct agent_tls *t, void *p)
{
	if (!agent_active())
		return 0;
	/* Exact mode: nearly every free is a sample, never probed. */
	int sampling = rate > 1;
	if (sampling && probe_pays(t) && !live_has((uint64_t)(uintptr_t)p)) {
		filter_outcome(t, 0);
		return 0;
	}
	agent_guard_enter(t);
	uint64_t start = budget_on() ? agent_now_ns() : 0;
	struct ym_live e;
	/* Must not give up easily: a missed removal leaves a stale entry
	 * (repaired when the address is sampled again). */
	int found = live_remove((uint64_t)(uintptr_t)p, t->tid, &e,
				AGENT_SPINS_LONG);
	if (found) {
		uint64_t now = agent_now_ns();
		table_count_free(&e, now, table_own_counts(&t->plane, e.stack));
		trend_tick(now);
	}
	if (sampling)
		filter_outcome(t, found);
	if (start)
		budget_spent(t, start);
	agent_guard_leave(t);
	return found ? e.size : 0;
}

int agent_realloc_take(struct agent_tls *t, void *p, struct ym_live *e)
{
	if (!agent_active())
		return 0;
	int found = 0;
	agent_guard_enter(t);
	found = live_remove((uint64_t)(uintptr_t)p, t->tid, e,
			    AGENT_SPINS_LONG);
	agent_guard_leave(t);
	return found;
}

void agent_realloc_put(struct agent_tls *t, struct ym_live *e, void *q, size_t n,
		       size_t old_usable, size_t usable)
{
	agent_guard_enter(t);
	struct ym_counts *own = table_own_counts(&t->plane, e->stack);
	if (q == NULL) {
		table_count_free(e, agent_now_ns(), own);
		goto out;
	}
	/* Stays sampled, or not, by its own chance of being a sample and the
	 * rate of the countdown its growth is charged to (sample.h,
	 * sample_resize); then it is re-weighed at n/p, 1/p with p its chance
	 * after. */
	double p;
	uint64_t r = t->rate ? t->rate : rate;
	if (!sample_resize(&t->rng, r, sample_p_of_weight(e->weight_fx),
			   old_usable, usable, &p)) {
		table_count_drop(e, own);
		goto out;
	}
	uint64_t w = (uint64_t)((double)n / p + 0.5);
	uint64_t wfx = (uint64_t)((double)YM_FX_ONE / p + 0.5);
	table_count_resize(e, w, wfx, own);
	e->weight_fx = wfx;
	e->addr = (uint64_t)(uintptr_t)q;
	e->size = n;
	e->weight_bytes = w;
	int ok = live_insert(e, t->tid, AGENT_SPINS_LONG);
	if (ok <= 0) {   /* cannot track it any more: count it gone */
		table_count_free(e, agent_now_ns(), own);
		__atomic_fetch_add(&hdr->drop_live, 1, __ATOMIC_RELAXED);
	}
out:
	agent_guard_leave(t);
}

void sampling_lost(int busy)
{
	if (!hdr)
		return;
	if (busy) {
		__atomic_fetch_add(&hdr->drop_busy, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_fetch_add(&hdr->drop_live, 1, __ATOMIC_RELAXED);
	__atomic_fetch_or(&hdr->flags, YM_FLAG_OVERFLOWED, __ATOMIC_RELAXED);
}
