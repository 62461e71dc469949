/*
 * clock: the agent's CLOCK_MONOTONIC (agent_now_ns, base.h), read from
 * the CPU's time-stamp counter where the kernel itself keeps time with
 * it.
 *
 * Every sample reads the clock twice (its birth, and its free for the
 * lifetime), and exact mode at every call.  clock_gettime costs ~23 ns
 * here when its data page is in cache, ~60 ns a read in an allocation-
 * heavy program that evicts it between samples (perf: 3.3% of mixed2's
 * cycles, the largest item of the agent's).  rdtsc costs ~10 ns and
 * reads no memory but the thread's anchor, 32 bytes of TLS.
 *
 * Each thread anchors the counter to clock_gettime (a pair read
 * together) and converts within 50 ms of its anchor with a rate
 * calibrated process-wide against clock_gettime (first over 100 ms,
 * then over each second or more); past that span, or if the counter
 * went backwards, it anchors again.  The counter is used only where
 * CLOCK_MONOTONIC is itself the counter scaled: the kernel's clocksource
 * is "tsc" (it found the counter synchronized across CPUs), or it is
 * "kvm-clock" and the CPU's flags (/proc/cpuinfo) are constant_tsc,
 * nonstop_tsc and tsc_reliable (an invariant counter the hypervisor
 * vouches for across vCPUs: clock.c says why these).  The two agree to
 * the calibration's error, a few microseconds at worst at a re-anchor;
 * otherwise, and on other architectures, every read is clock_gettime.
 */
#ifndef YMTOP_AGENT_CLOCK_H
#define YMTOP_AGENT_CLOCK_H

#include <stdint.h>

#include "base.h"

/* A thread's anchor (TLS): span == 0 until anchored. */
struct agent_clock {
	uint64_t tsc;    /* the anchor: counter ... */
	uint64_t ns;     /* ... and CLOCK_MONOTONIC read with it */
	uint64_t mult;   /* ns per count, 32.32 fixed point */
	uint64_t span;   /* counts the anchor stays valid for */
};

/* For the tests: the file that names the kernel's clocksource (NULL: the
 * real one; resets the calibration and the CPU flags' file to the real
 * one), the file read for the CPU's flags (NULL: /proc/cpuinfo), and
 * whether the counter is in use (1), refused (-1) or not decided yet
 * (0). */
void agent_clock_test_source(const char *path) AGENT_HIDDEN;
void agent_clock_test_cpuinfo(const char *path) AGENT_HIDDEN;
/* A function called between the two reads of a pair (a preemption
 * there); the unit tests' build of the agent's modules only
 * (YM_AGENT_TEST). */
void agent_clock_test_pair_hook(void (*fn)(void)) AGENT_HIDDEN;
int  agent_clock_tsc_state(void) AGENT_HIDDEN;

#endif
