/*
 * trend: verdicts on the stacks' retained bytes over time (trend.h).
 *
 * The series of a stack: its points in the slots written (the agent's
 * or ymtop's own), then its estimate at the snapshot.  Read on a regular
 * grid of one slot: at each grid time the stack's value is its point in
 * the last slot written by then; a slot written without it (it was not
 * among the largest) leaves the value unknown there; no slot written
 * since its last point (no sample was taken or freed) leaves it unchanged
 * (segment.h, Trend).
 *
 * The fit: least squares over the grid.  Growth counts only when it
 * stands above both the scatter of the points about the line (its t
 * statistic) and the sampling noise of the estimates: at mean rate R a
 * stack's estimate of B bytes has a variance of at most B x R, and a
 * change G of the estimate between the window's ends, at most (|G| + 2 x
 * min(start, end)) x R (the samples added, and those of the level
 * replaced by churn).  A series that never fell saw no sample freed: no
 * churn replaced its level, so the second term is 0 there (a leak's
 * series; a churning stack's falls between its points).  Steady growth
 * is also a line: its R^2 is high and the last third of the window still
 * grows at half the overall rate or more; growth that stopped there is a
 * plateau.
 *
 * At the default rate (512 KiB) a 1 MiB/min leak has about 20 samples
 * after 10 minutes: the 3-sigma test needs about 10 of them, which a
 * Poisson count of mean 20 falls short of in 0.5 % of runs.  The
 * stopped test is a veto on growing, so it takes 3 noise units as well:
 * at 2 it vetoed 1 % of such leaks whose last third drew few samples.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "trend.h"

/* Significance in standard errors: the points of a series are not
 * independent (consecutive estimates share their samples), so the
 * textbook t of 2 would see trends in noise. */
#define TREND_T      4.0
#define TREND_SIGMA  3.0
#define TREND_R2     0.6
/* A last third short of the overall rate by this many noise units has
 * stopped (plateau, not growing). */
#define TREND_STOP   3.0
/* Grid points at most (a longer window is read more coarsely). */
#define TREND_GRID   720u

const char *trend_verdict_name(int v)
{
	switch (v) {
	case TREND_FLAT:      return "flat";
	case TREND_GROWING:   return "growing";
	case TREND_PLATEAU:   return "plateau";
	case TREND_SHRINKING: return "shrinking";
	default:              return "unknown";
	}
}

struct line {
	double slope, r2, t;   /* t: slope / its standard error */
};

static struct line fit_line(const double *t, const double *y, uint32_t n)
{
	struct line l = { 0, 0, 0 };
	if (n < 3)
		return l;
	double mt = 0, my = 0;
	for (uint32_t i = 0; i < n; i++) {
		mt += t[i];
		my += y[i];
	}
	mt /= n;
	my /= n;
	double sxx = 0, sxy = 0, syy = 0;
	for (uint32_t i = 0; i < n; i++) {
		sxx += (t[i] - mt) * (t[i] - mt);
		sxy += (t[i] - mt) * (y[i] - my);
		syy += (y[i] - my) * (y[i] - my);
	}
	if (sxx <= 0)
		return l;
	l.slope = sxy / sxx;
	double ssr = syy - l.slope * sxy;   /* residual sum of squares */
	if (ssr < 0)
		ssr = 0;
	l.r2 = syy > 0 ? 1 - ssr / syy : 0;
	double se = sqrt(ssr / (n - 2) / sxx);
	l.t = se > 0 ? l.slope / se : l.slope != 0 ? copysign(INFINITY, l.slope) : 0;
	return l;
}

static double mean(const double *y, uint32_t n)
{
	double sum = 0;
	for (uint32_t i = 0; i < n; i++)
		sum += y[i];
	return n ? sum / n : 0;
}

/* Whether the series never fell: no sample of it was freed within the
 * window (or none that a slot saw: one freed and one taken between two
 * points hide each other, which is why this is only about the churn
 * term, not the growth's own noise). */
static int never_fell(const double *y, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++)
		if (y[i] < y[i - 1])
			return 0;
	return 1;
}

/* The sampling noise of a change d of a stack's estimate from a level
 * `level` (the lower end), at mean rate R: the samples added carry at
 * most |d| x R of variance, those of the level replaced by churn at most
 * 2 x level x R (segment.h, the weights; see the top of this file). */
static double noise(double d, double level, double rate)
{
	return sqrt((fabs(d) + 2 * level) * rate);
}

void trend_fit(const double *t, const double *y, uint32_t n, double rate,
	       struct model_trend *out)
{
	memset(out, 0, sizeof *out);
	for (int c = 0; c < TREND_SPARK; c++)
		out->spark[c] = -1;
	if (n == 0)
		return;
	double span = t[n - 1] - t[0];
	out->window_s = span;
	double cell_sum[TREND_SPARK] = { 0 };
	uint32_t cell_n[TREND_SPARK] = { 0 };
	for (uint32_t i = 0; i < n; i++) {
		int c = span > 0 ? (int)((t[i] - t[0]) / span * TREND_SPARK) : 0;
		if (c >= TREND_SPARK)
			c = TREND_SPARK - 1;
		cell_sum[c] += y[i] > 0 ? y[i] : 0;
		cell_n[c]++;
	}
	for (int c = 0; c < TREND_SPARK; c++)
		if (cell_n[c])
			out->spark[c] = cell_sum[c] / cell_n[c];
	if (n < TREND_MIN_POINTS || span <= 0)
		return;
	if (rate < 1)
		rate = 1;
	struct line all = fit_line(t, y, n);
	/* The last third (at least 3 points), and the first sixth (at least
	 * one): a plateau rose between them and not in the last. */
	uint32_t k = n;
	while (k > 0 && t[k - 1] >= t[n - 1] - span / 3)
		k--;
	if (n - k < 3)
		k = n - 3;
	struct line last = fit_line(t + k, y + k, n - k);
	uint32_t h = 1;
	while (h < n && t[h] <= t[0] + span / 6)
		h++;
	double first_y = mean(y, h), last_y = mean(y + k, n - k);
	double growth = all.slope * span, rise = last_y - first_y;
	double floor_y = first_y < last_y ? first_y : last_y;
	if (floor_y < 0 || never_fell(y, n))
		floor_y = 0;
	/* Stopped: the last third grew less than half what the overall
	 * rate gives it, by more than TREND_STOP x the noise of that
	 * growth. */
	double span3 = t[n - 1] - t[k], want3 = all.slope * span3;
	double got3 = last.slope * span3;
	int stopped = got3 < 0.5 * want3 &&
		      want3 - got3 > TREND_STOP * noise(want3, 0, rate);
	out->bytes_per_s = all.slope;
	if (growth > TREND_SIGMA * noise(growth, floor_y, rate) && all.t > TREND_T &&
	    all.r2 >= TREND_R2 && !stopped) {
		out->verdict = TREND_GROWING;
	} else if (rise > TREND_SIGMA * noise(rise, floor_y, rate) && stopped) {
		out->verdict = TREND_PLATEAU;
		out->bytes_per_s = last.slope;
	} else if (growth < -TREND_SIGMA * noise(growth, floor_y, rate) &&
		   all.t < -TREND_T) {
		out->verdict = TREND_SHRINKING;
	} else {
		out->verdict = TREND_FLAT;
	}
}

/* ---- Series from the slots ---- */

struct pt {
	uint32_t stack;
	uint32_t slot;    /* index into the sorted slots */
	double   y;
};

static int cmp_pt(const void *a, const void *b)
{
	const struct pt *p = a, *q = b;
	if (p->stack != q->stack)
		return p->stack < q->stack ? -1 : 1;
	return p->slot < q->slot ? -1 : p->slot > q->slot;
}

struct slot_ref {
	uint64_t seq;
	uint64_t mono_ns;
	const struct ym_trend_slot *rec;
};

static int cmp_slot(const void *a, const void *b)
{
	const struct slot_ref *p = a, *q = b;
	return p->seq < q->seq ? -1 : p->seq > q->seq;
}

/* ymtop's own slots, for an agent that keeps none: a ring like the
 * agent's, filled at the snapshots when a slot is due. */
struct trend_own {
	uint8_t *ring;
	uint32_t cap, stride, stacks;
	uint64_t written;     /* slots written */
	uint64_t next_ns;     /* the snapshot time the next one is due */
};

void model_trend_free(struct model *m)
{
	if (m->trend_own) {
		free(m->trend_own->ring);
		free(m->trend_own);
	}
	m->trend_own = NULL;
}

static int own_note(struct model *m)
{
	struct trend_own *o = m->trend_own;
	if (!o) {
		o = calloc(1, sizeof *o);
		if (!o)
			return -1;
		o->cap = YM_TREND_SLOTS;
		o->stacks = YM_TREND_STACKS;
		o->stride = shm_trend_stride(o->stacks);
		o->ring = calloc(o->cap, o->stride);
		if (!o->ring) {
			free(o);
			return -1;
		}
		m->trend_own = o;
	}
	uint64_t now = m->snap.taken_mono_ns;
	if (o->written && now < o->next_ns)
		return 0;
	o->next_ns = now + m->trend_own_slot_ns;
	struct ym_trend_slot *rec = (struct ym_trend_slot *)(void *)(o->ring +
		(size_t)(o->written % o->cap) * o->stride);
	rec->mono_ns = now;
	rec->count = 0;
	/* The largest, in the agent's order (descending, ties to the lower
	 * index): insertion into a short sorted list. */
	for (uint32_t i = 0; i < m->nstacks; i++) {
		double b = m->stacks[i].retained_bytes;
		/* A hostile segment's figures can be above what a point holds
		 * (or not a number): held at its largest, never converted
		 * out of range. */
		if (!(b > 0) || (rec->count == o->stacks &&
			       b <= (double)rec->points[o->stacks - 1].retained))
			continue;
		uint32_t j = rec->count < o->stacks ? rec->count++ : o->stacks - 1;
		while (j > 0 && (double)rec->points[j - 1].retained < b) {
			rec->points[j] = rec->points[j - 1];
			j--;
		}
		rec->points[j] = (struct ym_trend_point){
			.stack = i, .samples = m->stacks[i].live_samples,
			.retained = b < 0x1p63 ? (int64_t)b : INT64_MAX,
		};
	}
	o->written++;
	rec->seq = 2 * o->written;
	return 0;
}

static void unknown_all(struct model *m)
{
	for (uint32_t i = 0; i < m->nstacks; i++)
		trend_fit(NULL, NULL, 0, 1, &m->stacks[i].trend);
}

/* Stack s's series on the grid: its points pts[0..np) (slots ascending)
 * among slots sl[0..ns), then its estimate now. */
static uint32_t series(const struct slot_ref *sl, uint32_t ns,
		       const struct pt *pts, uint32_t np, double now_y,
		       uint64_t now, uint64_t step, double *t, double *y)
{
	uint64_t start = sl[pts[0].slot].mono_ns;
	if (now <= start)
		return 0;
	/* Grid times start + k x step, k < ng, then now: no sum overflows
	 * (k x step <= span), at most TREND_GRID + 2 points.  A coarser
	 * step is span / (TREND_GRID - 1) rounded up: rounded down, a
	 * short span (a step of a few ns, the writer's word) keeps up to
	 * twice as many grid times. */
	uint64_t span = now - start;
	if (span / step >= TREND_GRID)
		step = span / (TREND_GRID - 1) + 1;
	uint64_t ng = span / step + 1;
	uint32_t n = 0, si = pts[0].slot, pi = 0;
	for (uint64_t k = 0; k <= ng; k++) {
		uint64_t g = k < ng ? start + k * step : now;
		if (g > now)
			g = now;
		while (si + 1 < ns && sl[si + 1].mono_ns <= g)
			si++;
		while (pi + 1 < np && pts[pi + 1].slot <= si)
			pi++;
		if (g == now) {
			t[n] = (double)(g - start) / 1e9;
			y[n++] = now_y;
			break;
		}
		if (pts[pi].slot == si) {   /* in the last slot written */
			t[n] = (double)(g - start) / 1e9;
			y[n++] = pts[pi].y;
		}
	}
	return n;
}

int model_trend_update(struct model *m)
{
	const struct shm_snapshot *s = &m->snap;
	m->growing_bytes = 0;
	m->ngrowing = 0;
	const uint8_t *ring;
	uint32_t nrec, stride;
	uint64_t slot_ns;
	if (s->trend_skipped) {   /* a reader that shows no trend */
		m->trend_source = MODEL_TREND_AGENT;
		unknown_all(m);
		return 0;
	}
	if (s->trend_kept) {
		m->trend_source = MODEL_TREND_AGENT;
		ring = s->trend;
		nrec = s->ntrend;
		stride = s->trend_stride;
		slot_ns = s->hdr.trend_slot_ns;
	} else {
		m->trend_source = MODEL_TREND_OWN;
		if (!m->trend_own_slot_ns)
			m->trend_own_slot_ns = TREND_OWN_SLOT_NS;
		if (own_note(m) < 0) {
			unknown_all(m);
			return -1;
		}
		ring = m->trend_own->ring;
		nrec = m->trend_own->written < m->trend_own->cap ?
			(uint32_t)m->trend_own->written : m->trend_own->cap;
		stride = m->trend_own->stride;
		slot_ns = m->trend_own_slot_ns;
	}
	unknown_all(m);
	if (nrec == 0 || slot_ns == 0)
		return 0;
	struct slot_ref *sl = calloc(nrec, sizeof *sl);
	uint64_t npts = 0;
	for (uint32_t i = 0; i < nrec; i++)
		npts += ((const struct ym_trend_slot *)(const void *)(ring +
			 (size_t)i * stride))->count;
	struct pt *pts = calloc(npts ? npts : 1, sizeof *pts);
	uint32_t grid = TREND_GRID + 4;
	double *t = calloc(grid, sizeof *t), *y = calloc(grid, sizeof *y);
	int rc = -1;
	if (!sl || !pts || !t || !y)
		goto out;
	for (uint32_t i = 0; i < nrec; i++) {
		const struct ym_trend_slot *r = (const void *)(ring + (size_t)i * stride);
		sl[i] = (struct slot_ref){ r->seq, r->mono_ns, r };
	}
	qsort(sl, nrec, sizeof *sl, cmp_slot);
	/* Slots from the future of the snapshot (clocks apart) or out of
	 * order in time are not used. */
	uint32_t ns = 0;
	for (uint32_t i = 0; i < nrec; i++)
		if (sl[i].mono_ns <= s->taken_mono_ns &&
		    (ns == 0 || sl[i].mono_ns >= sl[ns - 1].mono_ns))
			sl[ns++] = sl[i];
	npts = 0;
	for (uint32_t i = 0; i < ns; i++)
		for (uint32_t j = 0; j < sl[i].rec->count; j++) {
			const struct ym_trend_point *p = &sl[i].rec->points[j];
			if (p->stack < m->nstacks)
				pts[npts++] = (struct pt){ p->stack, i, (double)p->retained };
		}
	qsort(pts, npts, sizeof *pts, cmp_pt);
	double rate = (double)shm_snapshot_error_rate(s);
	for (uint64_t a = 0; a < npts;) {
		uint64_t b = a;
		while (b < npts && pts[b].stack == pts[a].stack)
			b++;
		struct model_stack *st = &m->stacks[pts[a].stack];
		uint32_t n = series(sl, ns, pts + a, (uint32_t)(b - a),
				    st->retained_bytes, s->taken_mono_ns,
				    slot_ns, t, y);
		trend_fit(t, y, n, rate, &st->trend);
		if (st->trend.verdict == TREND_GROWING) {
			m->growing_bytes += st->retained_bytes;
			m->ngrowing++;
		}
		a = b;
	}
	rc = 0;
out:
	free(sl);
	free(pts);
	free(t);
	free(y);
	return rc;
}
