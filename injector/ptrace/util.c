/* util: see util.h. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "ptrace/util.h"
#include "util/clock.h"

void inject_fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

double inject_now_ms(void)
{
	return clock_mono_s() * 1e3;
}

void inject_nap_us(long us)
{
	struct timespec ts = { us / 1000000, us % 1000000 * 1000 };
	nanosleep(&ts, NULL);
}
