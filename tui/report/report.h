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
 * The registry: one row per format in report.c (name, extension, whether
 * it needs a file, its writer), one file per format (text, json, folded,
 * pprof, sqlout, svg).  What the writers share (options, weights, sort
 * keys, stack order) is common.h, which this header includes: callers
 * need only report.h.
 */
#ifndef YMTOP_REPORT_H
#define YMTOP_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"

/* Parse a format name ("text", "json", "folded", "pprof", "sqlite", "svg",
 * "prometheus");
 * -1 when unknown. */
int report_format_parse(const char *s, enum report_format *out);
const char *report_format_name(enum report_format f);
/* Usual file name extension, without the dot ("txt", "pb.gz", ...). */
const char *report_format_ext(enum report_format f);
/* Non-zero for formats that are never written to standard output
 * (pprof, sqlite, svg): they need a file name. */
int report_format_needs_file(enum report_format f);

/* Write the report to f.  0, or -1 when writing failed (errno set; EINVAL
 * for REPORT_SQLITE, which needs report_save). */
int report_write(FILE *f, struct model *m, struct sym *s,
		 const struct report_opts *o);

/* Write the report to a new file at path (any format).  0, or -1 with one
 * line in err; then no file is left behind, neither path nor a temporary. */
int report_save(const char *path, struct model *m, struct sym *s,
		const struct report_opts *o, char *err, size_t errlen);

#endif
