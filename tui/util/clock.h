/*
 * clock: ymtop's monotonic clock, for deadlines, waits and durations
 * (session waits, debuginfod time limits, the status line's expiry, the
 * injector's timeouts), and the one place ymtop reads CLOCK_MONOTONIC.
 * (shm/reader.c reads it beside CLOCK_REALTIME for a snapshot's times:
 * shm/ sits below tui/ and keeps its own.)
 */
#ifndef YMTOP_UTIL_CLOCK_H
#define YMTOP_UTIL_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC, in seconds. */
double clock_mono_s(void);

/* CLOCK_MONOTONIC, in ns: the agent's clock (segment times are on it). */
uint64_t clock_mono_ns(void);

#endif
