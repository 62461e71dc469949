/*
 * clock: ymtop's monotonic clock in seconds, for deadlines and waits
 * (session waits, debuginfod time limits).
 */
#ifndef YMTOP_UTIL_CLOCK_H
#define YMTOP_UTIL_CLOCK_H

/* CLOCK_MONOTONIC, in seconds. */
double clock_mono_s(void);

#endif
