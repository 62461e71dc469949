/*
 * outfile: report files that are never half-written and never overwrite.
 * A report goes to a temporary file in the destination's directory
 * (O_CREAT|O_EXCL, no symlinks followed), and is linked to its final name
 * only when complete; link() fails if the name exists.
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
};

/* 0, or -1 with one line in err. */
int outfile_begin(struct outfile *o, const char *path, char *err, size_t len);
int outfile_commit(struct outfile *o, char *err, size_t len);
void outfile_abort(struct outfile *o);

#endif
