/*
 * util: what every module of the ptrace injector uses: the one-line error
 * message, the monotonic clock its deadlines are counted on, a nap.
 * Runs in ymtop.
 */
#ifndef YMTOP_INJECT_UTIL_H
#define YMTOP_INJECT_UTIL_H

#include <stddef.h>

/* Write the message into err (len bytes, always terminated). */
void inject_fail(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Milliseconds on CLOCK_MONOTONIC (ymtop's clock, tui/util/clock.h). */
double inject_now_ms(void);

/* Sleep us microseconds (an interrupted sleep is not resumed). */
void inject_nap_us(long us);

#endif
