/*
 * err: a failure that code below main returns instead of exiting: the
 * exit status ymtop(1) gives it and the one line that says why, with the
 * remedy.  Only main, batch and the screen decide to exit (cli_die_err).
 */
#ifndef YMTOP_UTIL_ERR_H
#define YMTOP_UTIL_ERR_H

#include <limits.h>

struct ym_err {
	int  code;                   /* exit status: 1 runtime, 2 usage */
	/* The line without "ymtop: " and the newline; "" when what went
	 * wrong is on stderr already (a list of candidates). */
	char msg[PATH_MAX + 1024];   /* room for a path and its reason */
};

/* Set e (code and the formatted line) and return -1. */
__attribute__((format(printf, 3, 4)))
int ym_err_set(struct ym_err *e, int code, const char *fmt, ...);

#endif
