/*
 * kmsg: OOM kills in the kernel log (kmsg.h).
 *
 * /dev/kmsg gives one record a read (EAGAIN after the newest, EPIPE for
 * one overwritten while read); a regular file ($YM_KMSG) gives lines.
 * Both are split into lines; continuation lines (" KEY=value") are not
 * records.  At most KMSG_MAX_BYTES are read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kmsg.h"

#define KMSG_MAX_BYTES (32u << 20)
#define KMSG_RECORD    8192u      /* a record's longest read */

/* Whether text[0..len) holds "Killed process PID (" or "oom-kill:"
 * with ",pid=PID," (or at the end). */
static int names_kill(const char *text, size_t len, pid_t pid)
{
	char a[48], b[48];
	int na = snprintf(a, sizeof a, "Killed process %ld (", (long)pid);
	int nb = snprintf(b, sizeof b, ",pid=%ld", (long)pid);
	for (size_t i = 0; i + (size_t)na <= len; i++)
		if (!memcmp(text + i, a, (size_t)na))
			return 1;
	const char *oom = NULL;
	for (size_t i = 0; i + 9 <= len && !oom; i++)
		if (!memcmp(text + i, "oom-kill:", 9))
			oom = text + i;
	if (!oom)
		return 0;
	for (const char *p = oom; p + nb <= text + len; p++)
		if (!memcmp(p, b, (size_t)nb) &&
		    (p + nb == text + len || p[nb] == ','))
			return 1;
	return 0;
}

int kmsg_parse(const char *line, size_t len, pid_t pid, uint64_t *us)
{
	/* PRIO,SEQ,US,FLAGS[,...];TEXT */
	const char *semi = memchr(line, ';', len);
	if (!semi || len == 0 || line[0] < '0' || line[0] > '9')
		return -1;
	const char *c1 = memchr(line, ',', (size_t)(semi - line));
	const char *c2 = c1 ? memchr(c1 + 1, ',', (size_t)(semi - c1 - 1)) : NULL;
	if (!c2)
		return -1;
	uint64_t v = 0;
	const char *p = c2 + 1;
	if (p >= semi || *p < '0' || *p > '9')
		return -1;
	for (; p < semi && *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p < semi && *p != ',')
		return -1;
	*us = v;
	return names_kill(semi + 1, len - (size_t)(semi + 1 - line), pid);
}

enum kmsg_oom kmsg_oom_killed(pid_t pid, uint64_t start_us, uint64_t *at_us,
			      char *why, size_t whylen)
{
	const char *env = getenv("YM_KMSG");
	const char *path = env && env[0] ? env : "/dev/kmsg";
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(why, whylen, "the kernel log is unreadable (%s: %s)", path,
			 strerror(errno));
		return KMSG_OOM_UNKNOWN;
	}
	char *buf = malloc(KMSG_RECORD * 2);
	if (!buf) {
		close(fd);
		snprintf(why, whylen, "out of memory");
		return KMSG_OOM_UNKNOWN;
	}
	enum kmsg_oom res = KMSG_OOM_NO;
	size_t have = 0, total = 0;
	int records = 0, err = 0;
	uint64_t oldest = UINT64_MAX;
	for (;;) {
		ssize_t r = read(fd, buf + have, KMSG_RECORD * 2 - have);
		if (r < 0 && (errno == EINTR || errno == EPIPE))
			continue;
		if (r < 0 && errno == EAGAIN)
			break;
		if (r < 0) {
			err = errno;
			break;
		}
		if (r == 0 && have == 0)
			break;
		total += (size_t)r;
		have += (size_t)r;
		/* Whole lines; the rest (a file's cut line) waits for more,
		 * or is the last line at the end. */
		size_t start = 0;
		for (size_t i = 0; i < have; i++) {
			if (buf[i] != '\n' && !(r == 0 && i + 1 == have))
				continue;
			size_t end = buf[i] == '\n' ? i : i + 1;
			uint64_t us;
			int k = kmsg_parse(buf + start, end - start, pid, &us);
			if (k >= 0) {
				records++;
				if (us < oldest)
					oldest = us;
				if (k == 1 && us >= start_us && res != KMSG_OOM_YES) {
					res = KMSG_OOM_YES;
					*at_us = us;
				}
			}
			start = i + 1;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
		if (have == KMSG_RECORD * 2)   /* a line longer than a record */
			have = 0;
		if (r == 0 || total >= KMSG_MAX_BYTES)
			break;
	}
	free(buf);
	close(fd);
	if (res == KMSG_OOM_YES)
		return res;
	if (err) {
		snprintf(why, whylen, "the kernel log is unreadable (%s: %s)", path,
			 strerror(err));
		return KMSG_OOM_UNKNOWN;
	}
	if (!records) {
		snprintf(why, whylen, "the kernel log (%s) is empty", path);
		return KMSG_OOM_UNKNOWN;
	}
	if (oldest > start_us) {
		snprintf(why, whylen, "the kernel log starts %.0f s after it did",
			 (double)(oldest - start_us) / 1e6);
		return KMSG_OOM_UNKNOWN;
	}
	if (total >= KMSG_MAX_BYTES) {
		snprintf(why, whylen, "the kernel log is longer than ymtop reads (%u MiB)",
			 KMSG_MAX_BYTES >> 20);
		return KMSG_OOM_UNKNOWN;
	}
	return KMSG_OOM_NO;
}
