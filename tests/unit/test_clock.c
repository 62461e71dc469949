/* The agent's clock (injector/agent/clock.c): CLOCK_MONOTONIC from the
 * time-stamp counter where the kernel's clocksource is "tsc", or
 * "kvm-clock" with an invariant counter the hypervisor vouches for
 * (constant_tsc, nonstop_tsc, tsc_reliable), from clock_gettime
 * otherwise; agrees with clock_gettime either way. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/base.h"
#include "agent/clock.h"

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* For `ms` milliseconds: every agent_now_ns lies between the
 * clock_gettime before and after it (give or take `slack` ns), and a
 * thread's readings go back by at most `slack` (a re-anchor). */
static void agrees(int ms, uint64_t slack)
{
	uint64_t end = mono() + (uint64_t)ms * 1000000ULL, last = 0;
	uint64_t worst = 0, back = 0;
	while (1) {
		uint64_t a = mono(), v = agent_now_ns(), b = mono();
		if (v + slack < a || v > b + slack) {
			uint64_t off = v < a ? a - v : v - b;
			worst = off > worst ? off : worst;
		}
		if (last > v && last - v > back)
			back = last - v;
		last = v;
		if (b > end)
			break;
	}
	if (worst || back > slack)
		fail_msg("off by %llu ns, back by %llu ns",
			 (unsigned long long)worst, (unsigned long long)back);
}

/* A file holding text; two at a time (which: 0 or 1). */
static const char *fake_n(int which, const char *text)
{
	static char paths[2][64];
	char *path = paths[which];
	snprintf(path, sizeof paths[0], "/tmp/ymtop-test-clock-%d-%d",
		 (int)getpid(), which);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static const char *fake(const char *text)
{
	return fake_n(0, text);
}

static int has_flag(const char *line, const char *flag)
{
	size_t n = strlen(flag);
	for (const char *p = strstr(line, flag); p; p = strstr(p + 1, flag))
		if (p[-1] == ' ' && (p[n] == ' ' || p[n] == '\n'))
			return 1;
	return 0;
}

/* What the agent should decide on this machine: "tsc", or "kvm-clock"
 * with the three flags in /proc/cpuinfo's first flags line. */
static int machine_counter(void)
{
	char buf[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/"
			"current_clocksource", "r");
	if (f) {
		if (!fgets(buf, sizeof buf, f))
			buf[0] = '\0';
		fclose(f);
	}
	if (strcmp(buf, "tsc\n") == 0)
		return 1;
	if (strcmp(buf, "kvm-clock\n") != 0)
		return 0;
	static char line[8192];
	int ok = 0;
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "flags", 5) == 0) {
			ok = has_flag(line, "constant_tsc") &&
			     has_flag(line, "nonstop_tsc") &&
			     has_flag(line, "tsc_reliable");
			break;
		}
	if (f)
		fclose(f);
	return ok;
}

/* The machine's own clocksource decides, within ~100 ms of the first
 * reads; the readings agree with clock_gettime to 50 us throughout
 * (anchors live 50 ms: several re-anchors in 300 ms). */
static void follows_the_kernel(void **state)
{
	(void)state;
	agent_clock_test_source(NULL);
	assert_int_equal(agent_clock_tsc_state(), 0);
	agrees(300, 50000);
#if defined(__x86_64__)
	assert_int_equal(agent_clock_tsc_state(), machine_counter() ? 1 : -1);
#endif
}

/* A kernel that keeps time otherwise: the counter is never used, and
 * every reading is clock_gettime's; Xen's and Hyper-V's clocksources
 * too, whatever the CPU flags (the real ones here). */
static void other_clocksource_is_clock_gettime(void **state)
{
	(void)state;
	static const char *const others[] = {
		"acpi_pm\n", "xen\n", "hyperv_clocksource_tsc_page\n",
	};
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
		const char *p = fake(others[i]);
		agent_clock_test_source(p);
		agrees(150, 0);
#if defined(__x86_64__)
		assert_int_equal(agent_clock_tsc_state(), -1);
#endif
		unlink(p);
	}
	agent_clock_test_source(NULL);
}

/* No such file (a container without /sys): the same. */
static void unknown_clocksource_is_clock_gettime(void **state)
{
	(void)state;
	agent_clock_test_source("/nonexistent/ymtop-clocksource");
	agrees(150, 0);
#if defined(__x86_64__)
	assert_int_equal(agent_clock_tsc_state(), -1);
#endif
	agent_clock_test_source(NULL);
}

/* The first processor's block of a KVM guest's /proc/cpuinfo, its flags
 * line `flags` (an AMD EPYC under kvm-clock). */
static char *cpuinfo_text(const char *flags)
{
	static char text[8192];
	snprintf(text, sizeof text,
		 "processor\t: 0\n"
		 "vendor_id\t: AuthenticAMD\n"
		 "cpu family\t: 25\n"
		 "model name\t: AMD EPYC\n"
		 "cpu MHz\t\t: 2445.406\n"
		 "fpu\t\t: yes\n"
		 "cpuid level\t: 16\n"
		 "flags\t\t: %s\n"
		 "bugs\t\t: sysret_ss_attrs spectre_v1\n"
		 "\n"
		 "processor\t: 1\n"
		 "flags\t\t: fpu constant_tsc nonstop_tsc tsc_reliable\n",
		 flags);
	return text;
}

#define GUEST_FLAGS "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr " \
	"pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx " \
	"mmxext fxsr_opt pdpe1gb rdtscp lm rep_good nopl cpuid " \
	"extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 " \
	"sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx " \
	"f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a " \
	"misalignsse 3dnowprefetch osvw topoext"

/* With clocksource `source` and /proc/cpuinfo `info` (text), the counter
 * is in use (1) or refused (-1); every reading agrees with
 * clock_gettime meanwhile. */
static void decides(const char *source, const char *info, int want)
{
	const char *ps = fake_n(0, source);
	const char *pc = fake_n(1, info);
	agent_clock_test_source(ps);
	agent_clock_test_cpuinfo(pc);
	agrees(150, want > 0 ? 50000 : 0);
#if defined(__x86_64__)
	assert_int_equal(agent_clock_tsc_state(), want);
#else
	(void)want;
#endif
	unlink(ps);
	unlink(pc);
	agent_clock_test_source(NULL);
}

/* kvm-clock on an invariant counter the hypervisor vouches for (this
 * machine's flags): the counter. */
static void kvm_clock_vouched_is_the_counter(void **state)
{
	(void)state;
	decides("kvm-clock\n", cpuinfo_text(GUEST_FLAGS " constant_tsc "
		"nonstop_tsc tsc_reliable"), 1);
	/* The words in any order, the last at the line's end. */
	decides("kvm-clock\n", cpuinfo_text("tsc_reliable fpu nonstop_tsc "
		"constant_tsc"), 1);
}

/* kvm-clock without one of the three: clock_gettime.  tsc_known_freq
 * says where the rate came from, not that the vCPUs agree. */
static void kvm_clock_unvouched_is_clock_gettime(void **state)
{
	(void)state;
	decides("kvm-clock\n", cpuinfo_text(GUEST_FLAGS " constant_tsc "
		"nonstop_tsc"), -1);
	decides("kvm-clock\n", cpuinfo_text(GUEST_FLAGS " constant_tsc "
		"tsc_reliable"), -1);
	decides("kvm-clock\n", cpuinfo_text(GUEST_FLAGS " nonstop_tsc "
		"tsc_reliable"), -1);
	/* Words that only begin or end like the flags. */
	decides("kvm-clock\n", cpuinfo_text("constant_tsc nonstop_tsc "
		"tsc_reliable_not xconstant_tsc"), -1);
	decides("kvm-clock\n", cpuinfo_text("constant_tsc nonstop_tsc_x "
		"tsc_reliable"), -1);
}

/* "tsc": the counter, whatever the CPU flags say (none here). */
static void tsc_clocksource_is_the_counter(void **state)
{
	(void)state;
	decides("tsc\n", "processor\t: 0\n", 1);
}

/* A thread preempted between the reads of its first pair (6 ms here,
 * as on a loaded machine): that pair must not start the calibration,
 * or the first rate is some 6% off and every reading milliseconds off
 * for an anchor's life. */
static int preempted;

static void preempt_once(void)
{
	if (preempted++ == 0) {
		struct timespec ts = { 0, 6000000 };
		nanosleep(&ts, NULL);
	}
}

static void preempted_pair_is_not_used(void **state)
{
	(void)state;
	preempted = 0;
	agent_clock_test_pair_hook(preempt_once);
	decides("tsc\n", "processor\t: 0\n", 1);
	agent_clock_test_pair_hook(NULL);
	assert_true(preempted > 1);
}

/* hpet (or any other): clock_gettime even with the flags. */
static void hpet_is_clock_gettime(void **state)
{
	(void)state;
	decides("hpet\n", cpuinfo_text(GUEST_FLAGS " constant_tsc "
		"nonstop_tsc tsc_reliable"), -1);
	decides("kvm-clock-x\n", cpuinfo_text(GUEST_FLAGS " constant_tsc "
		"nonstop_tsc tsc_reliable"), -1);
}

/* A cpuinfo without a flags line, one cut inside it, one whose flags
 * line lies past the bounded read, an empty one and none at all:
 * clock_gettime. */
static void cpuinfo_unread_is_clock_gettime(void **state)
{
	(void)state;
	decides("kvm-clock\n", "processor\t: 0\nvendor_id\t: AMD\n\n", -1);
	decides("kvm-clock\n", "processor\t: 0\nflags\t\t: constant_tsc "
		"nonstop_tsc tsc_reliable", -1);
	decides("kvm-clock\n", "", -1);

	static char big[16384];
	size_t n = 0;
	while (n < 8192) {
		memcpy(big + n, "power management: x\n", 20);
		n += 20;
	}
	snprintf(big + n, sizeof big - n, "flags\t\t: constant_tsc "
		 "nonstop_tsc tsc_reliable\n");
	decides("kvm-clock\n", big, -1);

	const char *ps = fake_n(0, "kvm-clock\n");
	agent_clock_test_source(ps);
	agent_clock_test_cpuinfo("/nonexistent/ymtop-cpuinfo");
	agrees(150, 0);
#if defined(__x86_64__)
	assert_int_equal(agent_clock_tsc_state(), -1);
#endif
	unlink(ps);
	agent_clock_test_source(NULL);
}

/* Two threads, the machine's own clocksource: each reading follows the
 * other thread's last (to 50 us), as a lifetime born on one thread and
 * ended on another needs, whichever CPU each runs on.  They take turns
 * 20,000 times. */
#define TURNS 20000
static uint64_t turn_last;
static int turn;

static void *turn_taker(void *arg)
{
	int me = (int)(intptr_t)arg;
	uint64_t worst = 0;
	for (int i = 0; i < TURNS; i++) {
		while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != me)
			sched_yield();
		uint64_t prev = __atomic_load_n(&turn_last, __ATOMIC_RELAXED);
		uint64_t v = agent_now_ns();
		if (v < prev && prev - v > worst)
			worst = prev - v;
		__atomic_store_n(&turn_last, v, __ATOMIC_RELAXED);
		__atomic_store_n(&turn, !me, __ATOMIC_RELEASE);
	}
	return (void *)(uintptr_t)worst;
}

static void threads_agree(void **state)
{
	(void)state;
	agent_clock_test_source(NULL);
	agrees(150, 50000);     /* decided */
	pthread_t t;
	turn = 0;
	turn_last = 0;
	assert_int_equal(pthread_create(&t, NULL, turn_taker, (void *)1), 0);
	uint64_t w0 = (uint64_t)(uintptr_t)turn_taker((void *)0);
	void *r;
	assert_int_equal(pthread_join(t, &r), 0);
	uint64_t w1 = (uint64_t)(uintptr_t)r;
	if (w0 > 50000 || w1 > 50000)
		fail_msg("a reading %llu ns before the other thread's",
			 (unsigned long long)(w0 > w1 ? w0 : w1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(follows_the_kernel),
		cmocka_unit_test(threads_agree),
		cmocka_unit_test(other_clocksource_is_clock_gettime),
		cmocka_unit_test(unknown_clocksource_is_clock_gettime),
		cmocka_unit_test(kvm_clock_vouched_is_the_counter),
		cmocka_unit_test(kvm_clock_unvouched_is_clock_gettime),
		cmocka_unit_test(tsc_clocksource_is_the_counter),
		cmocka_unit_test(preempted_pair_is_not_used),
		cmocka_unit_test(hpet_is_clock_gettime),
		cmocka_unit_test(cpuinfo_unread_is_clock_gettime),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
