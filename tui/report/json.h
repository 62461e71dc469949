/*
 * json: the report for programs, one JSON object: pid (and ns_pid when the
 * target's namespace numbers it otherwise), exe, name, sort, time, state,
 * totals, table use and drops, warnings, every stack with a sample in
 * o->sort order with its frames and display frame, lifetimes, threads and
 * alarms.  Strings go through fmt_json_string: escaped, valid UTF-8.
 */
#ifndef YMTOP_JSON_H
#define YMTOP_JSON_H

#include <stdio.h>

#include "common.h"

/* 0, or -1 when writing failed or memory ran out (errno set). */
int json_write(FILE *f, struct model *m, struct sym *s,
	       const struct report_opts *o);

#endif
