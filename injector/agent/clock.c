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
#include "os.h"

#define CLOCK_SPAN_NS   50000000ULL     /* an anchor's life */
/* The first rate over 100 ms: a pair (below) is usually good to some
 * 100 ns, so the rate to 2e-6, 100 ns over an anchor's 50 ms (over 20 ms
 * it was five times that: enough to move a cross-thread lifetime across
 * the 1 us bucket). */
#define CAL_FIRST_NS    100000000ULL
#define CAL_WINDOW_NS   1000000000ULL   /* then over a second or more */
/* A pair is the counter read between two clock_gettime calls, and taken
 * at their midpoint; one whose calls lie further apart than this (the
 * thread was preempted or interrupted between them: milliseconds on a
 * loaded machine) is not used, so a pair is good to half of it: the
 * first rate to 2e-5, 1 us over an anchor's 50 ms.  The clock brackets
 * the counter itself, so the bound holds before the first rate is known
 * (a bound in counts, which needs the rate, let the first calibration
 * start from a pair preempted for 6 ms: the rate 5% off and readings 3
 * ms off for the anchors' life, tests/unit/test_clock.c under load). */
#define PAIR_MAX_NS     2000ULL

static const char default_source[] =
	"/sys/devices/system/clocksource/clocksource0/current_clocksource";
static const char *source = default_source;
static const char default_cpuinfo[] = "/proc/cpuinfo";
static const char *cpuinfo = default_cpuinfo;

static __thread struct agent_clock anchor
	AGENT_TLS_MODEL;
static int tsc_state;                /* 0 undecided, 1 in use, -1 refused */
static uint64_t tsc_mult, tsc_span;  /* the current calibration */
static uint64_t cal_tsc, cal_ns;     /* its start (cal_lock held) */
static uint32_t cal_lock;

#if defined(__x86_64__)

/* The first "flags" line of /proc/cpuinfo, in the first processor's
 * block, starts within its first few hundred bytes and is some 700 to
 * 1,500 long; a line not ended within this many bytes is not read, and
 * the counter is refused. */
#define CPUINFO_MAX     4096

static char cpuinfo_buf[CPUINFO_MAX];    /* cal_lock held */

/* Whether the space-separated list [p, end) holds the word w, len
 * bytes. */
static int has_word(const char *p, const char *end, const char *w,
		    size_t len)
{
	while (p < end) {
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		const char *q = p;
		while (q < end && *q != ' ' && *q != '\t')
			q++;
		if ((size_t)(q - p) == len && memcmp(p, w, len) == 0)
			return 1;
		p = q;
	}
	return 0;
}

/* The TSC of a guest under kvm-clock may stand in for it.  kvm-clock is
 * the counter scaled by parameters the host publishes; when the host
 * vouches for one counter synchronized across vCPUs (its stable bit) the
 * vDSO serves CLOCK_MONOTONIC from the first vCPU's parameters and the
 * TSC of whichever vCPU it runs on, which is what this file does.  The
 * CPU flags that say so to the guest's own kernel:
 *   constant_tsc   the counter's rate does not follow the core's clock;
 *   nonstop_tsc    it counts through deep C-states;
 *   tsc_reliable   the kernel skips its check that the vCPUs' counters
 *                  agree and its clocksource watchdog: the hypervisor
 *                  vouches for the counter (the guest's kernel sets it
 *                  where its hypervisor does: Hyper-V with an invariant
 *                  TSC, VMware, TDX, SNP Secure TSC, KVM hosts that
 *                  enumerate it).
 * tsc_known_freq is not enough: it says only that the rate came from
 * CPUID or the hypervisor rather than a measurement (kvm-clock sets it
 * on every guest), nothing of synchronization; the rate is calibrated
 * here anyway.  Xen's and Hyper-V's clocksources are left alone: with an
 * invariant TSC Hyper-V's kernel rates its TSC page below "tsc" and
 * keeps time with the counter itself, and for Xen's pvclock no flag says
 * as clearly that the vCPUs' counters agree.  Decided once: a host that later withdraws its
 * stable bit (a migration to a host whose counters differ) is not seen;
 * the rate is recalibrated every second and an anchor lives 50 ms, a
 * counter that went back anchors again. */
static int cpu_tsc_vouched(void)
{
	ssize_t n = os_read_file(cpuinfo, cpuinfo_buf, sizeof cpuinfo_buf);
	if (n <= 0)
		return 0;
	const char *p = cpuinfo_buf, *end = cpuinfo_buf + n;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			return 0;        /* a line cut at the bound */
		if (eol - p > 5 && memcmp(p, "flags", 5) == 0 &&
		    (p[5] == ' ' || p[5] == '\t' || p[5] == ':')) {
			const char *colon = memchr(p, ':', (size_t)(eol - p));
			if (!colon)
				return 0;
			colon++;
#define HAS(w) has_word(colon, eol, w, sizeof w - 1)
			return HAS("constant_tsc") && HAS("nonstop_tsc") &&
			       HAS("tsc_reliable");
#undef HAS
		}
		p = eol + 1;
	}
	return 0;
}

/* The kernel keeps CLOCK_MONOTONIC with the counter (and found it
 * synchronized across CPUs), or it runs under kvm-clock on a counter the
 * hypervisor vouches for: then so may we. */
static int counter_usable(void)
{
	int saved = errno;
	char buf[16];
	ssize_t n = os_read_file(source, buf, sizeof buf);
	int ok = 0;
	if (n == 4 && memcmp(buf, "tsc\n", 4) == 0)
		ok = 1;
	else if (n == 10 && memcmp(buf, "kvm-clock\n", 10) == 0)
		ok = cpu_tsc_vouched();
	errno = saved;
	return ok;
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
	if (st == 0 && !counter_usable()) {
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

#ifdef YM_AGENT_TEST
/* Called between a pair's reads (the unit tests': a preemption there). */
static void (*pair_hook)(void);

void agent_clock_test_pair_hook(void (*fn)(void))
{
	pair_hook = fn;
}
#endif

/* The thread's anchor is missing or spent: read the clock, and anchor
 * again when the counter may be used. */
static __attribute__((noinline)) uint64_t clock_anchor(struct agent_clock *c)
{
	c->span = 0;
	if (__atomic_load_n(&tsc_state, __ATOMIC_ACQUIRE) < 0)
		return agent_mono_ns();
	uint64_t n0 = agent_mono_ns();
#ifdef YM_AGENT_TEST
	if (pair_hook)
		pair_hook();
#endif
	uint64_t tsc = __rdtsc();
	uint64_t n1 = agent_mono_ns();
	/* Preempted between the reads: the next read tries again. */
	if (n1 < n0 || n1 - n0 > PAIR_MAX_NS)
		return n1;
	uint64_t ns = n0 + (n1 - n0) / 2;
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
	cpuinfo = default_cpuinfo;
	tsc_state = 0;
	tsc_mult = tsc_span = 0;
	cal_tsc = cal_ns = 0;
	anchor.span = 0;
}

void agent_clock_test_cpuinfo(const char *path)
{
	cpuinfo = path ? path : default_cpuinfo;
}

int agent_clock_tsc_state(void)
{
	return __atomic_load_n(&tsc_state, __ATOMIC_ACQUIRE);
}
