/*
 * cli: ymtop's options, their strict parsing, and the one-line exits.
 *
 * Exit status: 0 success, 1 attach or runtime failure (with the reason and
 * the remedy), 2 usage error.  Every message is one line on stderr.
 */
#ifndef YMTOP_CLI_H
#define YMTOP_CLI_H

#include "options.h"
#include "util/err.h"

void cli_parse(int argc, char **argv, struct options *o);
void cli_free(struct options *o);

/* Print "ymtop: <message>" and exit with code. */
__attribute__((noreturn, format(printf, 2, 3)))
void cli_die(int code, const char *fmt, ...);

/* Print e's line ("ymtop: <message>", nothing when e said it already)
 * and exit with its status. */
__attribute__((noreturn))
void cli_die_err(const struct ym_err *e);

#endif
