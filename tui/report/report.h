/*
 * report: the model written out for people and programs.  One entry point
 * per destination, whatever the format:
 *
 *   report_write(FILE *)   text, json, folded, pprof, svg (every format but
 *                          sqlite, which needs a file of its own)
 *   report_save(path)      every format, into a new file: written beside
 *                          path under a temporary name, linked to path only
 *                          when complete; an existing path is never
 *                          overwritten
 *
 * The writers read the model and never change it: stacks come out in their
 * own order (report_order_by: o->sort, descending), whatever the screen's
 * sort or filter is.  The symbolizer must know the snapshot's modules
 * (sym_set_modules).  The format modules (folded, flame, svg, pprof,
 * sqlout) are reached through here.
 */
#ifndef YMTOP_REPORT_H
#define YMTOP_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sym/frames.h"
#include "model/model.h"
#include "sym/sym.h"

enum report_format {
	REPORT_TEXT = 0,
	REPORT_JSON,
	REPORT_FOLDED,
	REPORT_PPROF,
	REPORT_SQLITE,
	REPORT_SVG,
	REPORT_NFORMATS
};

/* What a folded line or a flame-graph box measures. */
enum report_weight {
	WEIGHT_RETAINED = 0,   /* estimated live bytes (default) */
	WEIGHT_ALLOCATED,      /* estimated bytes allocated since start */
	WEIGHT_OBJECTS,        /* estimated live objects */
};

/* The first three fields keep their order: callers initialize them
 * positionally ({ format, top, rules }); the rest default to zero. */
struct report_opts {
	enum report_format format;
	int top;                      /* stacks in the text report (<= 0: 20) */
	const struct frames_rules *rules;
	enum report_weight weight;    /* folded and svg */
	enum model_sort sort;         /* text and json: SORT_RETAINED (0),
					 SORT_ALLOCATED or SORT_RATE */
};

/* Parse a report sort key ("retained", "allocated", "rate"); -1 when
 * unknown. */
int report_sort_parse(const char *s, enum model_sort *out);
/* "retained bytes", "allocated bytes", "allocation rate". */
const char *report_sort_name(enum model_sort k);

/* Parse a format name ("text", "json", "folded", "pprof", "sqlite", "svg");
 * -1 when unknown. */
int report_format_parse(const char *s, enum report_format *out);
const char *report_format_name(enum report_format f);
/* Usual file name extension, without the dot ("txt", "pb.gz", ...). */
const char *report_format_ext(enum report_format f);
/* Non-zero for formats that are never written to standard output
 * (pprof, sqlite, svg): they need a file name. */
int report_format_needs_file(enum report_format f);

/* Parse "retained", "allocated" or "objects"; -1 when unknown. */
int report_weight_parse(const char *s, enum report_weight *out);
const char *report_weight_name(enum report_weight w);
/* The value of a stack under a weight (never negative). */
double report_weight_value(const struct model_stack *s, enum report_weight w);
/* The model's total under a weight: the sum of report_weight_value over
 * every stack. */
double report_weight_total(const struct model *m, enum report_weight w);

/* The stacks a report shows (every stack with a sample, also those that
 * retain nothing: churn), retained bytes descending then allocated bytes
 * descending then id ascending, as a new array of stack ids that the
 * caller frees; *n gets the count.  NULL when out of memory. */
uint32_t *report_order(const struct model *m, uint32_t *n);
/* The same stacks by key (SORT_RETAINED, SORT_ALLOCATED or SORT_RATE)
 * descending, then by the others in that order, then id ascending. */
uint32_t *report_order_by(const struct model *m, enum model_sort key, uint32_t *n);

/* Write the report to f.  0, or -1 when writing failed (errno set; EINVAL
 * for REPORT_SQLITE, which needs report_save). */
int report_write(FILE *f, struct model *m, struct sym *s,
		 const struct report_opts *o);

/* Write the report to a new file at path (any format).  0, or -1 with one
 * line in err; then no file is left behind, neither path nor a temporary. */
int report_save(const char *path, struct model *m, struct sym *s,
		const struct report_opts *o, char *err, size_t errlen);

#endif
