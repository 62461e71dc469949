/* Test fixture: the monotonic clock for tests that bound their own time. */
#ifndef YM_TEST_CLOCK_H
#define YM_TEST_CLOCK_H

/* CLOCK_MONOTONIC in seconds. */
double now_s(void);

#endif
