/*
 * outfile: report files that are never half-written and never overwrite.
 * A report goes to a temporary file in the destination's directory
 * (O_CREAT|O_EXCL, no symlinks followed), and is linked to its final name
 * only when complete; link() fails if the name exists.  A file that is
 * meant to be replaced (outfile_begin_replace: -f prometheus, read by
 * node_exporter's textfile collector) is renamed over the name instead:
 * readers see the old file or the new one, never half of one; the
 * temporary name (".ymtop-tmp-PID-N") never ends in the destination's
 * extension.
 */
#ifndef YMTOP_OUTFILE_H
#define YMTOP_OUTFILE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Expand %p (pid), %e (executable name), %t (unix time), %n (counter) and
 * %% in pattern.  0, or -1 when the result does not fit or a % is unknown. */
int outfile_expand(const char *pattern, pid_t pid, const char *exe,
		   uint64_t unix_time, unsigned counter, char *buf, size_t len);

struct outfile {
	FILE *f;
	char  tmp[4096];
	char  path[4096];
	int   replace;   /* commit renames over path */
};

/* 0, or -1 with one line in err. */
int outfile_begin(struct outfile *o, const char *path, char *err, size_t len);
int outfile_begin_replace(struct outfile *o, const char *path, char *err, size_t len);
int outfile_commit(struct outfile *o, char *err, size_t len);
void outfile_abort(struct outfile *o);

#endif
