/*
 * text: the report for people.  A header (pid, name and executable,
 * state, uptime, RSS, sample rate, exact totals, estimates, table use and
 * drops, symbolization warnings), the top o->top stacks by o->sort with
 * their frames (=> marks the display frame), the lifetimes of freed
 * samples, the threads and the giant allocations.
 *
 * Every string that comes from the target (executable path, process and
 * thread names, function, file and module names) is written through
 * fmt_vis: no control character of the target's reaches a terminal that
 * shows the report.
 */
#ifndef YMTOP_TEXT_H
#define YMTOP_TEXT_H

#include <stdio.h>

#include "common.h"

/* 0, or -1 when writing failed or memory ran out (errno set). */
int text_write(FILE *f, struct model *m, struct sym *s,
	       const struct report_opts *o);

#endif
