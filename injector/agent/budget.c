/*
 * budget: the cost budget's window and its decision (budget.h).
 *
 * State, this file's: the budget in force, the process-wide sum of the
 * threads' time not yet judged, the current window's start (wall and
 * CPU), whether it is the first window of a budget (or of a segment), a
 * flag that lets one thread judge at a time, and header.budget.
 */
#include <time.h>

#include "budget.h"
#include "config.h"

uint32_t budget_ppm;                 /* atomic */
static uint64_t pending_ns;          /* atomic: threads' time, this window */
static uint64_t win_start_ns;        /* atomic: CLOCK_MONOTONIC; 0: none */
static uint64_t win_cpu_ns;          /* the process's CPU time then */
static uint32_t first_win;           /* atomic: no window judged within
					the budget yet */
static uint32_t judging;             /* atomic: one judge at a time */
static struct ym_budget *out;        /* header.budget, or NULL */

static void store(uint64_t *f, uint64_t v)
{
	__atomic_store_n(f, v, __ATOMIC_RELAXED);
}

/* Only the judge adds (judging held): a load and a store. */
static void add(uint64_t *f, uint64_t v)
{
	store(f, __atomic_load_n(f, __ATOMIC_RELAXED) + v);
}

void budget_map_segment(struct ym_header *h, uint64_t requested, uint64_t rate)
{
	static int configured;   /* YM_MAX_OVERHEAD taken; kept across fork */
	if (!configured) {
		configured = 1;
		if (!agent_exact())
			__atomic_store_n(&budget_ppm, agent_cfg.budget_ppm,
					 __ATOMIC_RELAXED);
	}
	out = &h->budget;
	/* A fork child's copy of the flag may be its parent's judge's. */
	__atomic_store_n(&judging, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&win_start_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&pending_ns, 0, __ATOMIC_RELAXED);
	store(&out->requested_rate, requested);
	store(&out->max_rate, rate);
	__atomic_store_n(&out->budget_ppm, budget_ppm, __ATOMIC_RELAXED);
	__atomic_store_n(&out->window_ms, (uint32_t)(BUDGET_WINDOW_NS / 1000000u),
			 __ATOMIC_RELAXED);
}

void budget_set(uint32_t ppm)
{
	if (ppm > BUDGET_PPM_MAX || agent_exact())
		return;
	__atomic_store_n(&budget_ppm, ppm, __ATOMIC_RELAXED);
	__atomic_store_n(&win_start_ns, 0, __ATOMIC_RELAXED);
	if (out)
		__atomic_store_n(&out->budget_ppm, ppm, __ATOMIC_RELAXED);
}

void budget_note_rates(uint64_t requested, uint64_t rate, int reset)
{
	if (!out)
		return;
	store(&out->requested_rate, requested);
	if (reset || rate > __atomic_load_n(&out->max_rate, __ATOMIC_RELAXED))
		store(&out->max_rate, rate);
}

static uint64_t cpu_now(clockid_t id)
{
	struct timespec ts;
	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}


/* The rate for the next window, given the last one spent `spent` of the
 * `cpu` ns the process ran at `rate`: the sampled paths' time goes as
 * 1/rate, so rate * spent / (BUDGET_AIM * limit) spends about BUDGET_AIM
 * of the budget.  Between half the budget and all of it: unchanged. */
static uint64_t decide(uint64_t spent, uint64_t cpu, uint64_t rate,
		       uint64_t requested, uint32_t ppm)
{
	double limit = (double)cpu * ppm / 1e6;
	double want = (double)rate;
	if ((double)spent > limit)
		want = (double)rate * (double)spent / (BUDGET_AIM * limit);
	else if ((double)spent < limit / 2 && rate > requested) {
		want = (double)rate * (double)spent / (BUDGET_AIM * limit);
		if (want < (double)rate / 4)
			want = (double)rate / 4;
	}
	if (want < (double)requested)
		want = (double)requested;
	if (want > (double)(1ULL << 40))
		want = (double)(1ULL << 40);
	return (uint64_t)want;
}

/* The current window's wall time: BUDGET_FIRST_WINDOW_NS until one was
 * judged (budget.h), BUDGET_WINDOW_NS after. */
static uint64_t window_ns(void)
{
	return __atomic_load_n(&first_win, __ATOMIC_RELAXED) ?
	       BUDGET_FIRST_WINDOW_NS : BUDGET_WINDOW_NS;
}

uint64_t budget_poll(struct agent_tls *t, uint64_t now, uint64_t rate,
		     uint64_t requested)
{
	uint32_t ppm = __atomic_load_n(&budget_ppm, __ATOMIC_RELAXED);
	if (!ppm)
		return 0;
	if (t->budget_ns) {
		__atomic_fetch_add(&pending_ns, t->budget_ns, __ATOMIC_RELAXED);
		t->budget_ns = 0;
	}
	uint64_t start = __atomic_load_n(&win_start_ns, __ATOMIC_RELAXED);
	if (start && now - start < window_ns())
		return 0;
	if (__atomic_exchange_n(&judging, 1, __ATOMIC_ACQUIRE))
		return 0;
	uint64_t next = 0;
	uint64_t cpu = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
	start = __atomic_load_n(&win_start_ns, __ATOMIC_RELAXED);
	if (!cpu || (start && now - start < window_ns()))
		goto done;
	/* No window yet (a new budget or segment), or the clock went back
	 * (a fork child's CPU time starts again): this one starts now, a
	 * first window. */
	if (!start || cpu < win_cpu_ns) {
		win_cpu_ns = cpu;
		__atomic_store_n(&first_win, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&pending_ns, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&win_start_ns, now, __ATOMIC_RELAXED);
		goto done;
	}
	uint64_t dcpu = cpu - win_cpu_ns;
	if (dcpu < BUDGET_MIN_CPU_NS) {
		/* Too little to judge: the window goes on, its time and CPU
		 * kept, and the CPU clock is read again a wall window later. */
		__atomic_store_n(&win_start_ns, now, __ATOMIC_RELAXED);
		goto done;
	}
	uint64_t spent = __atomic_exchange_n(&pending_ns, 0, __ATOMIC_RELAXED);
	win_cpu_ns = cpu;
	__atomic_store_n(&win_start_ns, now, __ATOMIC_RELAXED);
	uint64_t want = decide(spent, dcpu, rate, requested, ppm);
	/* Short windows while the rate climbs from the start (the first
	 * window's time is short of its one-off costs: a path counts
	 * BUDGET_SAMPLE_MAX_NS at most, so its rate may still be far over),
	 * and long ones once the step wanted is within BUDGET_SHORT_STEP:
	 * the last steps are judged on a long window's samples, whose count
	 * is steadier than a short one's, so the rate is not set longer
	 * than the budget needs (and the error ymtop states, which is the
	 * longest rate's, no wider). */
	if (want <= rate * BUDGET_SHORT_STEP)
		__atomic_store_n(&first_win, 0, __ATOMIC_RELAXED);
	if (out) {
		store(&out->window_spent_ns, spent);
		store(&out->window_cpu_ns, dcpu);
		add(&out->spent_ns, spent);
		add(&out->cpu_ns, dcpu);
		if (want != rate)
			add(&out->adjustments, 1);
	}
	if (want != rate)
		next = want;
done:
	__atomic_store_n(&judging, 0, __ATOMIC_RELEASE);
	return next;
}
