/*
 * budget: the cost budget (YM_MAX_OVERHEAD, control.max_overhead;
 * segment.h, Budget).  The time the agent spends on its sampled paths,
 * read with agent_now_ns at their entry and exit while a budget is set,
 * is summed per thread and, at a thread's look at the control block (at
 * most once a millisecond), added to a process-wide sum; every
 * BUDGET_WINDOW_NS of wall time (BUDGET_FIRST_WINDOW_NS for the
 * first window) the first thread past it reads
 * CLOCK_PROCESS_CPUTIME_ID (one system call), and once the window holds
 * BUDGET_MIN_CPU_NS of the process's CPU time or more, compares: over the budget, the mean
 * sampling interval grows so that the next window spends about
 * BUDGET_AIM of it; under half of it, the interval shrinks towards the
 * rate asked for (at most 4x a window).  The fast paths pay nothing: what
 * no budget removes (their own cost) is outside it.
 *
 * budget.c is the only writer of header.budget (requested_rate and
 * max_rate as sampling.c tells it).
 */
#ifndef YMTOP_AGENT_BUDGET_H
#define YMTOP_AGENT_BUDGET_H

#include <stdint.h>

#include "base.h"
#include "threads.h"
#include "ymtop/segment.h"

#define BUDGET_WINDOW_NS  100000000ULL   /* 100 ms of wall time ... */
#define BUDGET_MIN_CPU_NS 10000000ULL    /* ... and 10 ms of CPU time */
/* The first windows of a budget (YM_MAX_OVERHEAD at start, a reader's
 * request) or of a segment (a fork child's), up to the first that wants
 * the rate changed by BUDGET_SHORT_STEP or less: 10 ms of wall time and BUDGET_MIN_CPU_NS of CPU
 * time, the least any window is judged on.  The first runs at the rate
 * asked for, which may cost many times the budget (YM_SAMPLE_RATE=1k on
 * an allocation-bound thread: half its CPU time in the sampled paths),
 * and its time is short of its one-off costs (a path counts
 * BUDGET_SAMPLE_MAX_NS at most), so the rate may take a few windows to
 * climb: the shorter they are, the less the budget is overrun (a few
 * ms of a thread's time, not the 50 ms of one 100 ms window). */
#define BUDGET_FIRST_WINDOW_NS 10000000ULL
/* The last steps are judged on long windows, whose counts are steadier:
 * short ones set the rate up to twice as long as the budget needs. */
#define BUDGET_SHORT_STEP 4
#define BUDGET_AIM        0.6            /* of the budget, after a change */
#define BUDGET_PPM_MAX    1000000u       /* 100 % */
/* The paths are timed by the wall clock (agent_now_ns: no system call),
 * which also runs while the thread waits for a CPU.  A path of a few
 * microseconds is seldom preempted, so its wall time is its CPU time (a
 * thread's CPU share would be no better a scale: the thread runs while
 * it samples, however rarely it runs otherwise); but a path that was
 * preempted (or met a one-off cost: a module's unwind rules, a table's
 * first page) would count milliseconds, and a few such in a window of
 * few samples would drive the rate up by orders of magnitude, which only
 * samples, rare by then, could bring down again.  So a path counts this
 * long at most.  A sample takes 1-10 us. */
#define BUDGET_SAMPLE_MAX_NS 50000ULL

/* The budget in force, in millionths of the process's CPU time; 0: none
 * (nothing is measured). */
extern uint32_t budget_ppm AGENT_HIDDEN;

static inline uint32_t budget_get(void)
{
	return __atomic_load_n(&budget_ppm, __ATOMIC_RELAXED);
}

static inline int budget_on(void)
{
	return budget_get() != 0;
}

/* A sampled path that began at start (agent_now_ns) ends now: its time is
 * the thread's (guard held or not: only the thread's own TLS is touched). */
static inline void budget_spent(struct agent_tls *t, uint64_t start)
{
	if (unlikely(budget_on())) {
		uint64_t d = agent_now_ns() - start;
		t->budget_ns += d < BUDGET_SAMPLE_MAX_NS ? d : BUDGET_SAMPLE_MAX_NS;
	}
}

/* The segment's header: budget fields as at creation (requested the rate
 * asked for, rate the one in force), the window restarted. */
void budget_map_segment(struct ym_header *h, uint64_t requested,
			uint64_t rate) AGENT_HIDDEN;
/* A new budget in ppm (1..BUDGET_PPM_MAX; a reader's request), or 0
 * none; refused in exact mode. */
void budget_set(uint32_t ppm) AGENT_HIDDEN;
/* sampling.c's rates changed (a request, a reset: reset 1 forgets the
 * longest rate in force). */
void budget_note_rates(uint64_t requested, uint64_t rate, int reset) AGENT_HIDDEN;
/* The thread's look at the control block, at now: its time joins the
 * process's; when a window is over, the rate the budget wants instead of
 * rate (requested its floor), else 0. */
uint64_t budget_poll(struct agent_tls *t, uint64_t now, uint64_t rate,
		     uint64_t requested) AGENT_HIDDEN;

#endif
