/*
 * report: the model written out for people (text) and programs (JSON).
 * Writers take an open FILE and return 0, or -1 when writing failed.
 */
#ifndef YMTOP_REPORT_H
#define YMTOP_REPORT_H

#include <stdio.h>

#include "frames.h"
#include "model.h"
#include "sym.h"

enum report_format { REPORT_TEXT, REPORT_JSON };

struct report_opts {
	enum report_format format;
	int top;                      /* stacks in the text report */
	const struct frames_rules *rules;
};

/* Parse "text" or "json"; -1 when unknown. */
int report_format_parse(const char *s, enum report_format *out);

/* The symbolizer must know the snapshot's modules (sym_set_modules). */
int report_write(FILE *f, struct model *m, struct sym *s,
		 const struct report_opts *o);

#endif
