/*
 * base: messages, numbers and clocks for guest code (base.h).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

void agent_warn(const char *a, const char *b, const char *c)
{
	char buf[256];
	size_t n = 0;
	const char *parts[] = { "ymagent: ", a, b, c, "\n" };
	for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
		for (const char *s = parts[i]; s && *s && n < sizeof buf - 1; s++)
			buf[n++] = *s;
	ssize_t w = write(STDERR_FILENO, buf, n);
	(void)w;
}

#ifdef YM_ASSERTS
/* Check builds only: a release agent has no abort to call. */
void agent_assert_fail(const char *file, int line, const char *cond)
{
	char num[21];
	agent_utoa((uint64_t)line, num);
	char where[300];
	size_t n = 0;
	for (const char *s = file; *s && n < sizeof where - 24; s++)
		where[n++] = *s;
	where[n++] = ':';
	for (const char *s = num; *s; s++)
		where[n++] = *s;
	where[n] = '\0';
	agent_warn(where, ": assertion failed: ", cond);
	abort();
}
#endif

void agent_utoa(uint64_t v, char *buf)
{
	char tmp[21];
	int n = 0;
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	for (int i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = '\0';
}

uint64_t agent_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t agent_real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void agent_backoff(uint32_t i)
{
	if (i < 1024)
		__builtin_ia32_pause();
	else
		sched_yield();
}
