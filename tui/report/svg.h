/*
 * svg: a flame graph of the model in one self-contained SVG file that a
 * browser opens: root at the bottom, callers below callees, box width =
 * the report's weight (retained bytes by default), siblings in name order,
 * inlined frames in blue.  Hovering a box shows its full name and value
 * (<title>); clicking it zooms to its subtree (an inline script), clicking
 * "Reset zoom" or the root goes back.  Names are escaped: the file is
 * valid XML whatever the symbols contain.
 */
#ifndef YMTOP_SVG_H
#define YMTOP_SVG_H

#include <stdio.h>

#include "common.h"

/* 0, or -1 when writing failed or memory ran out (errno set). */
int svg_write(FILE *f, struct model *m, struct sym *s,
	      const struct report_opts *o);

#endif
