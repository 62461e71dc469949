/*
 * folded: Brendan Gregg's folded stacks, the input of flamegraph.pl,
 * inferno and speedscope: one line per distinct path, root first,
 *
 *   main;run;hold_big 67108864
 *
 * with the path's own value under the report's weight (retained bytes by
 * default), rounded to a whole number; lines whose value rounds to zero
 * are left out, so the values add up to the total within rounding.
 * Inlined functions carry the suffix "_[i]" (flamegraph.pl colors them);
 * ';' and line breaks inside names become ':' and ' '.
 *
 * Folded stacks are data, but they go to standard output by default, a
 * terminal as often as a pipe: names are written through fmt_vis, like
 * the text report's, so a hostile symbol puts no control character on
 * either.  Names with a backslash, a control character or invalid UTF-8
 * come out in vis(3) form ("\\", "\033"); every other name is unchanged.
 */
#ifndef YMTOP_FOLDED_H
#define YMTOP_FOLDED_H

#include <stdio.h>

#include "common.h"

/* 0, or -1 when writing failed or memory ran out (errno set). */
int folded_write(FILE *f, struct model *m, struct sym *s,
		 const struct report_opts *o);

#endif
