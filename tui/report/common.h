/*
 * common: what every report writer shares, and nothing that knows a
 * writer.  The options a report is written with, the weights and sort keys
 * and their names, the order stacks come out in, the wall-clock time of an
 * alarm.  The writers (text, json, folded, pprof, sqlout, svg) and their
 * helpers (flame, pb, outfile) include this header and never report.h;
 * report.c, the registry, sits on top of them all:
 *
 *   report.c (registry, dispatch, report_save)
 *     -> text json folded pprof sqlout svg prometheus  (one file per format)
 *        -> flame pb                            (trees, protobuf)
 *           -> common                           (this module)
 *
 * The writers read the model and never change it: stacks come out in
 * their own order (report_order_by: o->sort, descending), whatever the
 * screen's sort or filter is.  The symbolizer must know the snapshot's
 * modules (sym_set_modules).
 */
#ifndef YMTOP_REPORT_COMMON_H
#define YMTOP_REPORT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sym/frames.h"
#include "model/model.h"
#include "sym/sym.h"

/* The formats, in the registry's order (report.c holds one row each). */
enum report_format {
	REPORT_TEXT = 0,
	REPORT_JSON,
	REPORT_FOLDED,
	REPORT_PPROF,
	REPORT_SQLITE,
	REPORT_SVG,
	REPORT_PROMETHEUS,
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

/* A writer to a stream (every format but sqlite): 0, or -1 when writing
 * failed or memory ran out (errno set). */
typedef int (*report_write_fn)(FILE *f, struct model *m, struct sym *s,
			       const struct report_opts *o);
/* A writer that fills a file by its path, which exists and is empty
 * (sqlite): 0, or -1 with one line in err. */
typedef int (*report_fill_fn)(const char *path, struct model *m, struct sym *s,
			      const struct report_opts *o, char *err, size_t errlen);

/* Parse a report sort key ("retained", "allocated", "rate"); -1 when
 * unknown. */
int report_sort_parse(const char *s, enum model_sort *out);
/* "retained bytes", "allocated bytes", "allocation rate". */
const char *report_sort_name(enum model_sort k);

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

/* The threads reports list (model_thread_listed), in slot order: *it
 * starts at 0; NULL after the last. */
const struct ym_thread *report_next_thread(const struct model *m, uint32_t *it);
/* A listed thread's name as reports give it: "(shared)" for slot 0 (the
 * threads that had no slot of their own), else model_thread_name (may be
 * ""; raw: a text writer escapes it). */
const char *report_thread_name(const struct model *m, const struct ym_thread *th,
			       char *buf, size_t len);

/* An alarm's wall-clock time in seconds since the epoch, from the
 * segment's start times (the alarm carries only CLOCK_MONOTONIC). */
double report_alarm_time(const struct model *m, const struct ym_alarm *a);
/* The same for any CLOCK_MONOTONIC time of the segment's writer. */
double report_mono_time(const struct model *m, uint64_t mono_ns);
/* A stack's kind as reports name it: "malloc" or "mmap". */
const char *report_kind_name(uint32_t kind);

#endif
