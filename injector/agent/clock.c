/*
 * clock: CLOCK_MONOTONIC from the time-stamp counter (clock.h).
 *
 * State, this file's: the process-wide calibration (the counter's rate
 * against clock_gettime, and whether the counter may be used), and each
 * thread's anchor (TLS).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "clock.h"

#define CLOCK_SPAN_NS   50000000ULL     /* an anchor's life */
/* The first rate over 100 ms: a pair is read to within ~30 ns, so the
 * rate is good to 6e-7, 30 ns over an anchor's 50 ms (over 20 ms it was
 * 150 ns: enough to move a cross-thread lifetime across the 1 us bucket). */
#define CAL_FIRST_NS    100000000ULL
#define CAL_WINDOW_NS   1000000000ULL   /* then over a second or more */
/* A pair (counter, clock_gettime) read further apart than this (the
 * thread was preempted between them) is not used. */
#define PAIR_MAX_NS     20000ULL

static const char default_source[] =
	"/sys/devices/system/clocksource/clocksource0/current_clocksource";
static const char *source = default_source;

static __thread struct agent_clock anchor
	AGENT_TLS_MODEL;
static int tsc_state;                /* 0 undecided, 1 in use, -1 refused */
static uint64_t tsc_mult, tsc_span;  /* the current calibration */
static uint64_t cal_tsc, cal_ns;     /* its start (cal_lock held) */
static uint32_t cal_lock;

#if defined(__x86_64__)

/* The kernel keeps CLOCK_MONOTONIC with the counter (and found it
 * synchronized across CPUs): then so may we. */
static int source_is_tsc(void)
{
	int saved = errno;
	char buf[16];
	ssize_t n = -1;
	int fd = open(source, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof buf);
		close(fd);
	}
	errno = saved;
	return n == 4 && memcmp(buf, "tsc\n", 4) == 0;
}

/* A new pair: start, or after long enough finish, a calibration.  One
 * thread at a time; the others go on with the previous rate. */
static void calibrate(uint64_t tsc, uint64_t ns)
{
	/* Read-only until a calibration is due: no line bounces between
	 * the threads that anchor meanwhile. */
	uint64_t since = __atomic_load_n(&cal_ns, __ATOMIC_RELAXED);
	if (since && ns > since &&
	    ns - since < (__atomic_load_n(&tsc_state, __ATOMIC_RELAXED) ?
			  CAL_WINDOW_NS : CAL_FIRST_NS))
		return;
	if (__atomic_exchange_n(&cal_lock, 1, __ATOMIC_ACQUIRE))
		return;
	int st = __atomic_load_n(&tsc_state, __ATOMIC_RELAXED);
	if (st < 0)
		goto out;
	if (cal_ns == 0 || tsc <= cal_tsc || ns <= cal_ns) {
		cal_tsc = tsc;
		__atomic_store_n(&cal_ns, ns, __ATOMIC_RELAXED);
		goto out;
	}
	uint64_t dn = ns - cal_ns, dt = tsc - cal_tsc;
	if (dn < (st == 0 ? CAL_FIRST_NS : CAL_WINDOW_NS))
		goto out;
	if (st == 0 && !source_is_tsc()) {
		__atomic_store_n(&tsc_state, -1, __ATOMIC_RELEASE);
		goto out;
	}
	uint64_t mult = (uint64_t)(((unsigned __int128)dn << 32) / dt);
	/* 100 MHz to 20 GHz, or the counter is not what we think. */
	if (mult < (1ULL << 32) / 20 || mult > (10ULL << 32)) {
		__atomic_store_n(&tsc_state, -1, __ATOMIC_RELEASE);
		goto out;
	}
	__atomic_store_n(&tsc_mult, mult, __ATOMIC_RELAXED);
	__atomic_store_n(&tsc_span,
			 (uint64_t)(((unsigned __int128)CLOCK_SPAN_NS << 32) / mult),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&tsc_state, 1, __ATOMIC_RELEASE);
	cal_tsc = tsc;
	__atomic_store_n(&cal_ns, ns, __ATOMIC_RELAXED);
out:
	__atomic_store_n(&cal_lock, 0, __ATOMIC_RELEASE);
}

/* The thread's anchor is missing or spent: read the clock, and anchor
 * again when the counter may be used. */
static __attribute__((noinline)) uint64_t clock_anchor(struct agent_clock *c)
{
	c->span = 0;
	if (__atomic_load_n(&tsc_state, __ATOMIC_ACQUIRE) < 0)
		return agent_mono_ns();
	uint64_t t0 = __rdtsc();
	uint64_t ns = agent_mono_ns();
	uint64_t t1 = __rdtsc();
	uint64_t mult = __atomic_load_n(&tsc_mult, __ATOMIC_RELAXED);
	uint64_t pair = t1 - t0;
	/* Preempted between the reads (or the counter went backwards):
	 * the next read tries again. */
	if (t1 < t0 || (mult && (uint64_t)(((unsigned __int128)pair * mult) >> 32) >
			PAIR_MAX_NS))
		return ns;
	uint64_t tsc = t0 + pair / 2;
	calibrate(tsc, ns);
	if (__atomic_load_n(&tsc_state, __ATOMIC_ACQUIRE) > 0) {
		c->tsc = tsc;
		c->ns = ns;
		c->mult = __atomic_load_n(&tsc_mult, __ATOMIC_RELAXED);
		c->span = __atomic_load_n(&tsc_span, __ATOMIC_RELAXED);
	}
	return ns;
}

uint64_t agent_now_ns(void)
{
	struct agent_clock *c = &anchor;
	if (likely(c->span)) {
		uint64_t d = __rdtsc() - c->tsc;
		if (likely(d < c->span))
			return c->ns + (uint64_t)(((unsigned __int128)d * c->mult) >> 32);
	}
	return clock_anchor(c);
}

#else

uint64_t agent_now_ns(void)
{
	return agent_mono_ns();
}

#endif

void agent_clock_test_source(const char *path)
{
	source = path ? path : default_source;
	tsc_state = 0;
	tsc_mult = tsc_span = 0;
	cal_tsc = cal_ns = 0;
	anchor.span = 0;
}

int agent_clock_tsc_state(void)
{
	return __atomic_load_n(&tsc_state, __ATOMIC_ACQUIRE);
}
