/*
 * pprof: the model as a gzip-compressed profile.proto, the format of
 * go tool pprof, Grafana Pyroscope and Parca.
 *
 * Sample types alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes (the default), one sample per stack with the model's
 * estimates (already unbiased, so no scaling is left to the reader);
 * period_type space/bytes with period = the agent's sample rate.  One
 * location per return address, with one Line per function in its inline
 * chain, innermost first (the last line is the out-of-line caller); one
 * mapping per module with its build id in hex; string_table[0] is "".
 * drop_frames and keep_frames carry the allocator tier of the display-
 * frame rules (frames_drop_regex) so that pprof's leaves are the
 * wrappers' callers.
 */
#ifndef YMTOP_PPROF_H
#define YMTOP_PPROF_H

#include <stdio.h>

#include "common.h"

/* 0, or -1 when writing failed or memory ran out (errno set). */
int pprof_write(FILE *f, struct model *m, struct sym *s,
		const struct report_opts *o);

#endif
