/*
 * outfile: report files that are never half-written and never overwrite
 * (see outfile.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outfile.h"

int outfile_expand(const char *pat, pid_t pid, const char *exe,
		   uint64_t unix_time, unsigned counter, char *buf, size_t len)
{
	size_t n = 0;
	const char *base = exe ? strrchr(exe, '/') : NULL;
	base = base ? base + 1 : (exe && *exe ? exe : "unknown");
	for (const char *p = pat; *p; p++) {
		char tmp[256];
		const char *add = tmp;
		if (*p != '%') {
			tmp[0] = *p;
			tmp[1] = '\0';
		} else {
			switch (*++p) {
			case 'p': snprintf(tmp, sizeof tmp, "%ld", (long)pid); break;
			case 't': snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)unix_time); break;
			case 'n': snprintf(tmp, sizeof tmp, "%u", counter); break;
			case '%': snprintf(tmp, sizeof tmp, "%%"); break;
			case 'e':
				/* The name comes from the target: no path
				 * separators may come with it. */
				snprintf(tmp, sizeof tmp, "%s", base);
				for (char *c = tmp; *c; c++)
					if (*c == '/' || (unsigned char)*c < 0x20)
						*c = '_';
				break;
			default:
				return -1;
			}
		}
		size_t k = strlen(add);
		if (n + k >= len)
			return -1;
		memcpy(buf + n, add, k);
		n += k;
	}
	buf[n] = '\0';
	return n ? 0 : -1;
}

static int begin(struct outfile *o, const char *path, int replace, char *err,
		 size_t len)
{
	memset(o, 0, sizeof *o);
	o->replace = replace;
	if (snprintf(o->path, sizeof o->path, "%s", path) >= (int)sizeof o->path) {
		snprintf(err, len, "output path too long");
		return -1;
	}
	if (!replace && (access(path, F_OK) == 0 || errno != ENOENT)) {
		snprintf(err, len, "%s already exists; not overwriting", path);
		return -1;
	}
	const char *slash = strrchr(path, '/');
	int dl = slash ? (int)(slash - path + 1) : 0;
	for (int tries = 0; tries < 100; tries++) {
		snprintf(o->tmp, sizeof o->tmp, "%.*s.ymtop-tmp-%ld-%d", dl, path,
			 (long)getpid(), tries);
		int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				      O_CLOEXEC, 0644);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0) {
			snprintf(err, len, "cannot write %s: %s", path, strerror(errno));
			return -1;
		}
		o->f = fdopen(fd, "w");
		if (!o->f) {
			close(fd);
			unlink(o->tmp);
			snprintf(err, len, "cannot write %s: %s", path, strerror(errno));
			return -1;
		}
		return 0;
	}
	snprintf(err, len, "cannot create a temporary file beside %s", path);
	return -1;
}

int outfile_begin(struct outfile *o, const char *path, char *err, size_t len)
{
	return begin(o, path, 0, err, len);
}

int outfile_begin_replace(struct outfile *o, const char *path, char *err, size_t len)
{
	return begin(o, path, 1, err, len);
}

int outfile_commit(struct outfile *o, char *err, size_t len)
{
	int bad = fflush(o->f) != 0 || ferror(o->f) || fsync(fileno(o->f)) != 0;
	int e = errno;
	if (fclose(o->f) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	o->f = NULL;
	/* Test hook (tests/integration/test_faults.py): die at the worst
	 * moment, the report written in full but not yet under its name. */
	const char *fault = getenv("YM_TEST_FAULT");
	if (fault && !strcmp(fault, "report-commit"))
		raise(SIGKILL);
	if (bad) {
		unlink(o->tmp);
		snprintf(err, len, "writing %s failed: %s", o->path, strerror(e));
		return -1;
	}
	if (o->replace) {
		if (rename(o->tmp, o->path) != 0) {
			e = errno;
			unlink(o->tmp);
			snprintf(err, len, "cannot replace %s: %s", o->path, strerror(e));
			return -1;
		}
		return 0;
	}
	if (link(o->tmp, o->path) != 0) {
		e = errno;
		unlink(o->tmp);
		snprintf(err, len, e == EEXIST ? "%s already exists; not overwriting"
			 : "cannot create %s: %s", o->path, strerror(e));
		return -1;
	}
	unlink(o->tmp);
	return 0;
}

void outfile_abort(struct outfile *o)
{
	if (o->f)
		fclose(o->f);
	o->f = NULL;
	if (o->tmp[0])
		unlink(o->tmp);
}
