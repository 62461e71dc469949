/*
 * trend: a verdict per stack on how its retained bytes moved over the
 * last hour (man ymtop(1), TREND), from the agent's trend section
 * (segment.h, Trend: a point a slot for its largest stacks) or, for an
 * agent that keeps none (before ABI v8, or YM_TREND_SLOT_MS=0), from the
 * snapshots this ymtop took itself.  Pure data, like the rest of model/.
 */
#ifndef YMTOP_TREND_H
#define YMTOP_TREND_H

#include <stdint.h>

enum trend_verdict {
	TREND_UNKNOWN = 0,   /* too few points to say */
	TREND_FLAT,
	TREND_GROWING,       /* steady growth over the window */
	TREND_PLATEAU,       /* grew, then stopped (a cache) */
	TREND_SHRINKING,
};

/* Points a series needs at least (and a window of as many slots). */
#define TREND_MIN_POINTS 6
/* The sparkline's cells. */
#define TREND_SPARK 8
/* ymtop's own slots when the agent keeps no trend. */
#define TREND_OWN_SLOT_NS 10000000000ull

struct model_trend {
	int      verdict;        /* enum trend_verdict */
	double   bytes_per_s;    /* the fit's slope (plateau: of its last
				    third); 0 when unknown */
	double   window_s;       /* the span the verdict covers */
	/* The series in TREND_SPARK cells over the window, oldest first
	 * (the mean of the cell's points; < 0: none there). */
	double   spark[TREND_SPARK];
};

/* The verdict on the series (t[i] seconds ascending, y[i] bytes) of n
 * points regularly spaced, from estimates drawn at the mean sampling
 * rate `rate` (1: exact).  Fills *out (spark included). */
void trend_fit(const double *t, const double *y, uint32_t n, double rate,
	       struct model_trend *out);

/* "growing", "plateau", "shrinking", "flat", "unknown". */
const char *trend_verdict_name(int verdict);

struct model;
/* Every stack's trend (model_stack.trend), the model's growing_bytes and
 * trend_source, from m's snapshot and, when its agent keeps no trend,
 * from m's own history (a point added when a slot is due).  0, or -1
 * when out of memory (then every verdict is unknown). */
int model_trend_update(struct model *m);
/* The model's own history (model_free). */
void model_trend_free(struct model *m);

#endif
