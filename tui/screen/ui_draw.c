/*
 * ui_draw: the drawing half of the live screen (ui.c has the terminal,
 * keys, prompts and the main loop).  Header, the five views' tables, one
 * stack in full, the help box; it draws what view.c and the model say and
 * decides nothing.
 *
 * Every string the target supplies (process, thread, function, file and
 * module names, paths) passes fmt_vis before it reaches curses: no escape
 * sequence of the target's reaches the terminal.  So does the status line,
 * which quotes paths made from the executable's name.
 */
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "ui_draw.h"
#include "ui_memory.h"
#include "model/shortlived.h"
#include "ui_prim.h"

/* ---- drawing helpers ---- */

/* The primitives are ui.c's (ui_prim.h). */
static attr_t attr(int pair, attr_t mono)
{
	return ui_attr(pair, mono);
}

static void fill_line(int y, attr_t a)
{
	ui_fill_line(y, a);
}

/* v[0..n) as sparkline cells into buf (NUL-terminated), scaled between
 * the smallest and largest value; with `unknown`, a negative value is not
 * known and gets a blank cell.  Returns the bytes written. */
static size_t spark_cells(const double *v, int n, int unknown, char *buf, size_t len)
{
	static const char *const blocks[8] = { "\u2581", "\u2582", "\u2583", "\u2584",
					      "\u2585", "\u2586", "\u2587", "\u2588" };
	static const char ascii[] = "_.-:=+*#";
	double lo = INFINITY, hi = -INFINITY;
	for (int i = 0; i < n; i++) {
		if (unknown && v[i] < 0)
			continue;
		lo = v[i] < lo ? v[i] : lo;
		hi = v[i] > hi ? v[i] : hi;
	}
	size_t o = 0;
	for (int i = 0; i < n && o + 4 < len; i++) {
		if (unknown && v[i] < 0) {
			buf[o++] = ' ';
			continue;
		}
		int k = hi > lo ? (int)((v[i] - lo) / (hi - lo) * 7.0 + 0.5) : 0;
		if (ui_utf8()) {
			size_t bl = strlen(blocks[k]);
			memcpy(buf + o, blocks[k], bl);
			o += bl;
		} else {
			buf[o++] = ascii[k];
		}
	}
	if (len)
		buf[o < len ? o : len - 1] = '\0';
	return o;
}

/* The last `width` of v[0..n) as a sparkline. */
static const char *spark(const double *v, int n, int width, char *buf, size_t len)
{
	if (width > n)
		width = n;
	if (width < 0)
		width = 0;
	spark_cells(v + n - width, width, 0, buf, len);
	return buf;
}

/* A stack's TREND cell: its series in TREND_SPARK cells (blank where
 * none is known), then the verdict in four letters; 13 columns. */
static const char *trend_cell(const struct model_trend *t, char *buf, size_t len)
{
	static const char *const word[] = {
		[TREND_UNKNOWN] = "   ?", [TREND_FLAT] = "flat", [TREND_GROWING] = "grow",
		[TREND_PLATEAU] = "plat", [TREND_SHRINKING] = "shrk",
	};
	size_t o = spark_cells(t->spark, TREND_SPARK, 1, buf, len);
	int v = t->verdict >= 0 && t->verdict <= TREND_SHRINKING ? t->verdict : 0;
	snprintf(buf + o, len - o, " %s", word[v]);
	return buf;
}

/* ---- header ---- */

/* The view tabs, then the sort and filter, on one line that never wraps:
 * positions are counted, not read back from curses (whose cursor wraps
 * at the last column).  Where the full names do not fit, the other tabs
 * take their abbreviations, then the selected one too; the sort text is
 * cut at the edge. */
static void draw_tabs(struct view *v, int y)
{
	char sort[64 + sizeof v->filter], vis[FMT_VIS_SIZE(sizeof sort)];
	snprintf(sort, sizeof sort, "sort: %s%s%s%s", view_sort_name(v->sort),
		 v->asc ? " asc" : "", v->filter[0] ? "  filter: " : "", v->filter);
	fmt_vis(sort, vis, sizeof vis);
	int room = COLS - 1 - (int)strlen(vis), level;
	for (level = 0; level < 2; level++) {   /* 0: full names; 1: others short */
		int w = 0;
		for (int k = 0; k < VIEW_COUNT; k++)
			w += (int)strlen(level == 0 || k == (int)v->kind ?
					 view_kind_name((enum view_kind)k) :
					 view_kind_abbrev((enum view_kind)k)) + 3;
		if (w <= room)
			break;
	}
	int x = 0;
	for (int k = 0; k < VIEW_COUNT; k++) {
		int sel = k == (int)v->kind;
		const char *name = level == 0 || (level == 1 && sel) ?
			view_kind_name((enum view_kind)k) : view_kind_abbrev((enum view_kind)k);
		ui_put(y, x, sel ? attr(C_SEL, A_REVERSE) | A_BOLD : attr(C_DIM, 0), " %s ", name);
		x += (int)strlen(name) + 3;
	}
	ui_put(y, x + 1, attr(C_DIM, 0), "%s", vis);
}

static int draw_header(struct view *v)
{
	struct model *m = v->m;
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32];
	char exe[FMT_VIS_SIZE(MODEL_EXE_SIZE)];
	fmt_vis(model_name(m), exe, sizeof exe);
	const char *state = model_state(m);
	int y = 0;
	ui_put(y, 0, attr(C_HEAD, A_BOLD), "ymtop - pid %ld %s  up %s  ", (long)model_pid(m), exe,
	    fmt_duration(model_uptime(m), a, sizeof a));
	int x = getcurx(stdscr);
	int bad = strcmp(state, "sampling") != 0;
	ui_put(y, x, bad ? attr(C_ALARM, A_REVERSE) | A_BOLD : A_BOLD, "%s%s",
	    state, v->frozen ? " (frozen)" : "");
	x = getcurx(stdscr);
	if (model_exited(m)) {   /* how it ended */
		char how[64];
		ui_put(y, x, A_BOLD, " (%s)", model_exit_text(m, how, sizeof how));
		x = getcurx(stdscr);
	}
	ui_put(y, x, 0, "  rate %s",
	    model_sample_rate(m) == 1 ? "exact" :
	    fmt_bytes((double)model_sample_rate(m), a, sizeof a));
	/* A cost budget: the rate asked for beside the one in force. */
	struct model_sampling sm = model_sampling(m);
	if (sm.known && sm.budget_percent > 0) {
		char q[32];
		x = getcurx(stdscr);
		ui_put(y, x, sm.effective > sm.requested ? A_BOLD : 0,
		    " (asked %s, budget %g%%, %llu change%s)",
		    fmt_bytes((double)sm.requested, q, sizeof q), sm.budget_percent,
		    (unsigned long long)sm.adjustments, sm.adjustments == 1 ? "" : "s");
	}
	y++;
	const struct ym_totals *t = &m->totals;
	/* Injected: the exact counters started at the attach, unlike RSS and
	 * what the program held before, and frees of older blocks count:
	 * allocated minus freed is a net change (can be negative), labelled
	 * so, never "in use". */
	/* Beside RSS: the estimate, and what the allocator itself says is
	 * in use and free (its statistics, with their age when stale); the
	 * exact in use only where frees count bytes (exact mode). */
	double age = 0;
	const struct ym_heapstats *hs = model_heap(m, &age);
	char heap[128] = "", hu[32], hf[32];
	if (hs && (hs->present & YM_HEAP_IN_USE))
		snprintf(heap, sizeof heap, "  heap %s%s%s%s", fmt_bytes((double)hs->in_use_bytes, hu, sizeof hu),
		    (hs->present & YM_HEAP_FREE) ? " +free " : "",
		    (hs->present & YM_HEAP_FREE) ? fmt_bytes((double)hs->free_bytes, hf, sizeof hf) : "",
		    !model_heap_current(m) ? " (old)" : "");
	else if (model_heap_missing(m, NULL))
		snprintf(heap, sizeof heap, "  heap - (%s)", model_heap_missing(m, NULL));
	char inuse[64] = "";
	if (model_freed_bytes_counted(m))
		snprintf(inuse, sizeof inuse, "  %s %s",
		    model_counted_net(m) ? "net since attach" : "in use",
		    fmt_sbytes((double)t->alloc_bytes - (double)t->free_bytes, c, sizeof c));
	ui_put(y, 0, 0, "RSS %s  %s~ %s%s%s  alloc %s/s %s/s  free %s%s%s/s",
	    m->alive ? fmt_bytes((double)m->proc.rss_bytes, a, sizeof a) : "-",
	    model_exited(m) ? "still held at exit" : "retained",
	    fmt_bytes(m->retained_bytes, b, sizeof b), heap, inuse,
	    fmt_bytes(m->alloc_bytes_rate, d, sizeof d),
	    fmt_count(m->alloc_calls_rate, e, sizeof e),
	    model_freed_bytes_counted(m) ? fmt_bytes(m->free_bytes_rate, f, sizeof f) : "",
	    model_freed_bytes_counted(m) ? "/s " : "",
	    fmt_count(m->free_calls_rate, g, sizeof g));
	y++;
	char sp[256];
	struct model_drops dr = model_drops(m);
	uint64_t dropped = dr.stacks + dr.live + dr.busy;
	ui_put(y, 0, 0, "stacks %llu/%u  dropped %llu  mark %s  ",
	    (unsigned long long)model_stacks_used(m),
	    model_stacks_capacity(m), (unsigned long long)dropped,
	    m->marked ? fmt_sbytes(m->retained_bytes - m->mark_total, a, sizeof a) : "-");
	if (m->ngrowing)   /* the stacks whose trend is growing hold this */
		ui_put(y, getcurx(stdscr), attr(C_UP, A_BOLD), "growing %s in %u  ",
		    fmt_bytes(m->growing_bytes, a, sizeof a), m->ngrowing);
	if (model_modules_at_fork(m))   /* frames there show as ? */
		ui_put(y, getcurx(stdscr), attr(C_ALARM, 0), "modules as at fork  ");
	x = getcurx(stdscr);
	int w = COLS - x - 12;
	if (w > 8 && v->nhist > 1) {
		ui_put(y, x, attr(C_HEAD, 0), "%s",
		    spark(v->hist + VIEW_HISTORY - v->nhist, (int)v->nhist, w, sp, sizeof sp));
		ui_put(y, getcurx(stdscr), attr(C_DIM, 0), " retained");
	}
	y++;
	char unseen[MODEL_UNSEEN_LEN], vunseen[FMT_VIS_SIZE(sizeof unseen)];
	if (model_unseen(m, unseen, sizeof unseen, NULL, NULL)) {
		ui_put(y, 0, attr(C_ALARM, 0), "%s",
		    fmt_vis(unseen, vunseen, sizeof vunseen));
		y++;
	}
	/* An allocator the agent cannot see (tui/unseen.h): one line. */
	if (m->unseen[0]) {
		ui_put(y, 0, attr(C_ALARM, 0), "cannot see: %s", m->unseen);
		y++;
	}
	char uncounted[MODEL_UNCOUNTED_LEN];
	if (model_uncounted(m, uncounted, sizeof uncounted, NULL, NULL)) {
		ui_put(y, 0, attr(C_ALARM, 0), "%s", uncounted);
		y++;
	}
	char pynote[MODEL_PYTHON_LEN];
	if (model_python_note(m, pynote, sizeof pynote)) {
		ui_put(y, 0, attr(C_ALARM, 0), "%s", pynote);
		y++;
	}
	const struct ym_alarm *al = view_alarm(v);
	if (al) {
		char lab[256] = "?";
		struct stack_view sv;
		if (al->depth && frames_view(v->sym, v->rules, al->frames, al->depth, &sv) == 0) {
			if (sv.n) {
				char fb[128];
				fmt_vis(frames_name(&sv.f[sv.display], fb, sizeof fb),
					lab, sizeof lab);
			}
			frames_view_free(&sv);
		}
		double ago = ((double)m->snap.taken_mono_ns - (double)al->mono_ns) / 1e9;
		fill_line(y, attr(C_ALARM, A_REVERSE) | A_BOLD);
		ui_put(y, 0, attr(C_ALARM, A_REVERSE) | A_BOLD,
		    " ALARM %s in %s() %s ago%s  (a: dismiss, Tab: Alarms view)",
		    fmt_bytes((double)al->size, a, sizeof a), lab,
		    fmt_duration(ago, b, sizeof b),
		    (al->flags & YM_ALARM_FAILED) ? ", refused" : "");
		y++;
	}
	draw_tabs(v, y);
	return y + 1;
}

/* ---- tables ---- */

struct col {
	const char *name;
	int width;
	enum model_sort key;
	int min_cols;   /* shown when the terminal is at least this wide */
};

static const struct col stack_cols[] = {
	{ "RETAINED", 9, SORT_RETAINED, 0 },
	{ "%", 5, SORT_PERCENT, 0 },
	{ "GROWTH", 9, SORT_GROWTH, 0 },
	{ "PEAK", 9, SORT_PEAK, 110 },
	{ "RES", 9, SORT_RESIDENT, 150 },
	{ "TOTAL", 9, SORT_ALLOCATED, 0 },
	{ "RATE/s", 9, SORT_RATE, 90 },
	{ "LIVE", 7, SORT_LIVE, 0 },
	{ "AVG", 8, SORT_AVG, 110 },
	{ "AGE", 7, SORT_AGE, 100 },
	{ "SHORT/s", 9, SORT_SHORT, 170 },
	{ "TREND", 13, SORT_TREND, 120 },
};
#define NCOLS ((int)(sizeof stack_cols / sizeof *stack_cols))

/* A column the terminal is wide enough for, or the one sorted by; TREND
 * only where rows are stacks (a function has no trend of its own). */
static int col_on(const struct view *v, int i)
{
	if (stack_cols[i].key == SORT_TREND && v->kind == VIEW_FUNCTIONS)
		return 0;
	return COLS >= stack_cols[i].min_cols || v->sort == stack_cols[i].key;
}

static int draw_col_header(int y, const struct view *v, const char *last)
{
	fill_line(y, attr(C_COLS, A_REVERSE));
	int x = 0;
	for (int i = 0; i < NCOLS; i++) {
		if (!col_on(v, i))
			continue;
		const struct col *c = &stack_cols[i];
		int sorted = v->sort == c->key;
		ui_put(y, x, attr(C_COLS, A_REVERSE) | (sorted ? A_BOLD | A_UNDERLINE : 0),
		    "%*s", c->width, c->name);
		x += c->width + 1;
	}
	ui_put(y, x, attr(C_COLS, A_REVERSE) | (v->sort == SORT_FUNCTION ? A_BOLD | A_UNDERLINE : 0),
	    "%s", last);
	return x;
}

/* A figure in bytes, after MODEL_FEW_MARK when few samples carry it. */
static void few_bytes(double bytes, int few, char *buf, size_t len)
{
	char b[32];
	snprintf(buf, len, "%s%s", few ? MODEL_FEW_MARK : "", fmt_bytes(bytes, b, sizeof b));
}

/* A row's cells: a stack's (s), or a function's (s NULL); few: its
 * retained bytes are carried by one or two samples (model_few). */
static void stack_cells(struct view *v, const struct model_stack *s, int few,
			double growth, double retained, double objects, double alloc,
			double rate, double avg, uint64_t age, double short_rate,
			double resident, int y, attr_t base)
{
	struct model *m = v->m;
	char buf[48];
	int x = 0;
	for (int i = 0; i < NCOLS; i++) {
		if (!col_on(v, i))
			continue;
		const struct col *c = &stack_cols[i];
		attr_t a = base;
		switch (c->key) {
		case SORT_RETAINED:   /* marked when carried by few samples */
			few_bytes(retained, few, buf, sizeof buf);
			break;
		case SORT_PERCENT: {   /* of its own kind's retained bytes */
			double all = s && s->kind == YM_KIND_MMAP ?
				     m->mmap_retained_bytes : m->retained_bytes;
			snprintf(buf, sizeof buf, "%.1f", all > 0 ?
				 100.0 * retained / all : 0.0);
			break;
		}
		case SORT_GROWTH:
			if (!m->marked) {
				snprintf(buf, sizeof buf, "-");
			} else {
				fmt_sbytes(growth, buf, sizeof buf);
				if (!base && fabs(growth) >= 0.5)
					a = attr(growth > 0 ? C_UP : C_DOWN, A_BOLD);
			}
			break;
		case SORT_PEAK:   /* a stack's, not a function's (no sum of peaks) */
			if (s)
				few_bytes(model_peak(m, s), model_peak_few(m, s),
					  buf, sizeof buf);
			else
				snprintf(buf, sizeof buf, "-");
			break;
		case SORT_ALLOCATED: fmt_bytes(alloc, buf, sizeof buf); break;
		case SORT_RATE: fmt_bytes(rate, buf, sizeof buf); break;
		case SORT_SHORT: fmt_bytes(short_rate, buf, sizeof buf); break;
		case SORT_RESIDENT:   /* "-": pagemap not read (Memory view: why) */
			if (m->resident_known)
				fmt_bytes(resident, buf, sizeof buf);
			else
				snprintf(buf, sizeof buf, "-");
			break;
		case SORT_LIVE: fmt_count(objects, buf, sizeof buf); break;
		case SORT_AVG: fmt_bytes(avg, buf, sizeof buf); break;
		case SORT_AGE:
			if (age)
				fmt_duration((double)age / 1e9, buf, sizeof buf);
			else
				snprintf(buf, sizeof buf, "-");
			break;
		case SORT_TREND:   /* a stack's (col_on: not on functions) */
			if (s) {
				trend_cell(&s->trend, buf, sizeof buf);
				if (!base && s->trend.verdict == TREND_GROWING)
					a = attr(C_UP, A_BOLD);
			} else {
				snprintf(buf, sizeof buf, "-");
			}
			break;
		default: buf[0] = '\0';
		}
		if (c->key == SORT_TREND) {   /* multibyte: padded by hand */
			ui_put(y, x, a, "%s", buf);
			x += c->width + 1;
			continue;
		}
		ui_put(y, x, a, "%*s", c->width, buf);
		x += c->width + 1;
	}
}

static int label_x(const struct view *v)
{
	int x = 0;
	for (int i = 0; i < NCOLS; i++)
		if (col_on(v, i))
			x += stack_cols[i].width + 1;
	return x;
}

/* ---- names in the lists ----
 * A row's label is fitted into the columns left for it (frames_fit_label:
 * template arguments, parameters and middle scopes elided, the function's
 * own name and location kept); key t (v->full_names) shows labels whole,
 * cut at the edge.  The stack detail always shows names whole. */

/* label as the lists show it in width columns, escaped. */
static const char *shown_name(const struct view *v, const char *label, int width,
			      char *buf, size_t len)
{
	char tmp[FRAMES_NAME_MAX], fit[FRAMES_NAME_MAX];
	if (!v->full_names) {
		const char *ell = MB_CUR_MAX > 1 ? "\u2026" : "...";
		label = frames_fit_label(frames_short_name(label, FRAMES_SHORT_DEPTH, ell,
							   tmp, sizeof tmp),
					 width, ell, fit, sizeof fit);
	}
	return fmt_vis(label, buf, len);
}

/* The attributes of a table row at screen line y: the selection's, drawn
 * across the whole line, or none. */
static attr_t row_attr(const struct view *v, int row, int y)
{
	attr_t base = row == v->selected ? attr(C_SEL, A_REVERSE) : 0;
	if (base)
		fill_line(y, base);
	return base;
}

static void draw_stacks(struct view *v, int y0, int rows)
{
	struct model *m = v->m;
	draw_col_header(y0, v, "FUNCTION (FILE:LINE)");
	v->page = rows;
	int lx = label_x(v);
	for (int r = 0; r < rows; r++) {
		int row = v->top + r;
		if (row >= (int)m->norder)
			break;
		const struct model_stack *s = &m->stacks[m->order[row]];
		attr_t base = row_attr(v, row, y0 + 1 + r);
		double avg = s->alloc_objects > 0 ? s->alloc_bytes / s->alloc_objects : 0;
		stack_cells(v, s, model_retained_few(m, s), s->growth,
			    s->retained_bytes, s->retained_objects,
			    s->alloc_bytes, s->alloc_rate, avg, model_oldest_age(m, s),
			    model_short_rate(s), s->resident_bytes, y0 + 1 + r, base);
		char nb[FMT_VIS_SIZE(FRAMES_NAME_MAX)];
		/* Memory the program mapped itself: tagged, its own kind. */
		const char *tag = s->kind == YM_KIND_MMAP ? "[mmap] " : "";
		ui_put(y0 + 1 + r, lx, base, "%s%s", tag,
		       shown_name(v, view_label(v, s->id), COLS - lx - (int)strlen(tag),
				  nb, sizeof nb));
	}
	if (m->norder == 0)
		ui_put(y0 + 2, 2, attr(C_DIM, 0), "%s", v->filter[0] ?
		    "no stack matches the filter (Esc clears it)" :
		    "no samples yet: the process has not allocated enough since the start");
}

static void draw_functions(struct view *v, int y0, int rows)
{
	draw_col_header(y0, v, "FUNCTION (FILE:LINE)  [stacks]");
	v->page = rows;
	int lx = label_x(v);
	for (int r = 0; r < rows; r++) {
		int row = v->top + r;
		if (row >= (int)v->nfns)
			break;
		const struct view_fn *f = &v->fns[row];
		attr_t base = row_attr(v, row, y0 + 1 + r);
		stack_cells(v, NULL, f->few, f->growth, f->retained, f->retained_objects,
			    f->alloc, f->rate, view_fn_avg(f), view_fn_age(v, f),
			    f->short_rate, f->resident, y0 + 1 + r, base);
		char nb[FMT_VIS_SIZE(FRAMES_NAME_MAX)], count[16];
		const char *kind = f->kind == YM_KIND_MMAP ? "[mmap] " : "";
		int cl = snprintf(count, sizeof count, "  [%u]", f->nstacks);
		ui_put(y0 + 1 + r, lx, base, "%s%s%s", kind,
		       shown_name(v, f->name, COLS - lx - cl - (int)strlen(kind),
				  nb, sizeof nb), count);
	}
}

static void draw_threads(struct view *v, int y0, int rows)
{
	struct model *m = v->m;
	fill_line(y0, attr(C_COLS, A_REVERSE));
	/* Sampling: allocations count requested sizes, not usable ones,
	 * and frees count objects (man/ymagent.7). */
	int freed = model_freed_bytes_counted(m);
	ui_put(y0, 0, attr(C_COLS, A_REVERSE), "%8s %-16s %-7s %10s %10s %10s %9s %9s",
	    "TID", "NAME", "STATE",
	    model_alloc_bytes_counted(m) ? "ALLOCATED" : "REQUESTED", "FREED",
	    "IN USE", "MALLOCS", "FREES");
	v->page = rows;
	char a[32], b[32], c[32], d[32], e[32], name[64], vis[FMT_VIS_SIZE(sizeof name)];
	for (int r = 0; r < rows; r++) {
		int row = v->top + r;
		const struct ym_thread *t = view_row_thread(v, row);
		if (!t)
			break;
		attr_t base = row_attr(v, row, y0 + 1 + r);
		const char *nm = t->state == YM_THREAD_SHARED ? "(other threads)" :
				 fmt_vis(model_thread_name(m, t, name, sizeof name),
					 vis, sizeof vis);
		ui_put(y0 + 1 + r, 0, base, "%8u %-16.16s %-7s %10s %10s %10s %9s %9s", t->tid,
		    nm, model_thread_state(m, t),
		    fmt_bytes((double)model_alloc_bytes(m, &t->t), a, sizeof a),
		    freed ? fmt_bytes((double)t->t.free_bytes, b, sizeof b) : "-",
		    freed ? fmt_sbytes((double)t->t.alloc_bytes - (double)t->t.free_bytes, c, sizeof c) : "-",
		    fmt_count((double)t->t.alloc_objects, d, sizeof d),
		    fmt_count((double)t->t.free_objects, e, sizeof e));
	}
}

static const char *bucket_name(int b, char *buf, size_t len)
{
	static const char *const n[YM_LIFE_BUCKETS] = {
		"< 1 us", "< 10 us", "< 100 us", "< 1 ms", "< 10 ms", "< 100 ms",
		"< 1 s", "< 10 s", "< 100 s", "< 17 min", "< 1 h", ">= 1 h"
	};
	snprintf(buf, len, "%s", n[b]);
	return buf;
}

static void draw_histogram(struct view *v, int y0, int rows,
			   const double *objects, const double *bytes)
{
	double max = 0;
	for (int b = 0; b < YM_LIFE_BUCKETS; b++)
		if (objects[b] > max)
			max = objects[b];
	char a[32], c[32], nm[32];
	int barw = COLS - 34;
	for (int b = 0; b < YM_LIFE_BUCKETS && b < rows; b++) {
		attr_t base = v && b == v->selected && !v->detail ? attr(C_SEL, A_REVERSE) : 0;
		ui_put(y0 + b, 0, base, "%-9s %9s %10s ", bucket_name(b, nm, sizeof nm),
		    fmt_count(objects[b], a, sizeof a), fmt_bytes(bytes[b], c, sizeof c));
		int n = max > 0 && barw > 0 ? (int)(objects[b] / max * barw + 0.5) : 0;
		attron(attr(C_HEAD, A_BOLD));
		for (int i = 0; i < n; i++)
			addstr(ui_utf8() ? "\u2588" : "#");
		attroff(attr(C_HEAD, A_BOLD));
	}
}

static void draw_lifetimes(struct view *v, int y0, int rows)
{
	double o[YM_LIFE_BUCKETS], b[YM_LIFE_BUCKETS];
	for (int i = 0; i < YM_LIFE_BUCKETS; i++) {
		o[i] = v->m->life[i].objects;
		b[i] = v->m->life[i].bytes;
	}
	fill_line(y0, attr(C_COLS, A_REVERSE));
	ui_put(y0, 0, attr(C_COLS, A_REVERSE), "%-9s %9s %10s  lifetimes of freed sampled allocations (estimated)",
	    "LIFETIME", "OBJECTS", "BYTES");
	v->page = rows;
	draw_histogram(v, y0 + 1, rows, o, b);
}

static void draw_alarms(struct view *v, int y0, int rows)
{
	struct model *m = v->m;
	fill_line(y0, attr(C_COLS, A_REVERSE));
	ui_put(y0, 0, attr(C_COLS, A_REVERSE), "%10s %9s %8s %-8s %s", "SIZE", "AGO", "TID",
	    "ACTION", "FUNCTION (FILE:LINE)");
	v->page = rows;
	char a[32], b[32], lab[FMT_VIS_SIZE(512)], fl[512];
	for (int r = 0; r < rows; r++) {
		int row = v->top + r;
		if (row >= (int)m->snap.nalarms)
			break;
		const struct ym_alarm *al = shm_alarm(&m->snap, (uint32_t)row);
		attr_t base = row_attr(v, row, y0 + 1 + r);
		snprintf(lab, sizeof lab, "?");
		struct stack_view sv;
		if (al->depth && frames_view(v->sym, v->rules, al->frames, al->depth, &sv) == 0) {
			if (sv.n)
				fmt_vis(frames_label(&sv.f[sv.display], fl, sizeof fl),
					lab, sizeof lab);
			frames_view_free(&sv);
		}
		double ago = ((double)m->snap.taken_mono_ns - (double)al->mono_ns) / 1e9;
		ui_put(y0 + 1 + r, 0, base, "%10s %9s %8u %-8s %s",
		    fmt_bytes((double)al->size, a, sizeof a), fmt_duration(ago, b, sizeof b),
		    al->tid, (al->flags & YM_ALARM_FAILED) ? "refused" : "reported", lab);
	}
	if (m->snap.nalarms == 0)
		ui_put(y0 + 2, 2, attr(C_DIM, 0), "no giant allocations (YM_GIANT_BYTES = %s)",
		    fmt_bytes((double)model_giant_bytes(m), a, sizeof a));
}

/* The stack detail's location column: "file:line" (the file's base
 * name), or "" when the frame has none; at most DETAIL_LOC_MAX columns
 * are shown. */
#define DETAIL_LOC_MAX 40
static const char *detail_location(const struct sym_frame *f, char *buf, size_t len)
{
	buf[0] = '\0';
	if (f->file && f->line > 0) {
		const char *base = strrchr(f->file, '/');
		snprintf(buf, len, "%s:%d", base ? base + 1 : f->file, f->line);
	}
	return buf;
}

/* The rest of a detail row: the whole name, then the module's base name. */
static const char *detail_text(const struct sym_frame *f, char *buf, size_t len)
{
	char fb[128];
	const char *mod = f->module ? strrchr(f->module, '/') : NULL;
	mod = mod ? mod + 1 : (f->module ? f->module : "?");
	snprintf(buf, len, "%s  %s", frames_name(f, fb, sizeof fb), mod);
	return buf;
}

static void draw_detail(struct view *v, int y0, int rows)
{
	struct model *m = v->m;
	if (v->detail_stack >= m->nstacks) {
		v->detail = 0;
		return;
	}
	const struct model_stack *s = &m->stacks[v->detail_stack];
	char a[32], b[32], c[32], d[32], sp[256];
	int y = y0;
	fill_line(y, attr(C_COLS, A_REVERSE));
	ui_put(y++, 0, attr(C_COLS, A_REVERSE), "Stack %u  (Enter or Esc: back; Left/Right: "
	    "long names)", s->id);
	ui_put(y++, 0, 0, "retained %s in %s objects  allocated %s in %s objects  rate %s/s",
	    fmt_bytes(s->retained_bytes, a, sizeof a), fmt_count(s->retained_objects, b, sizeof b),
	    fmt_bytes(s->alloc_bytes, c, sizeof c), fmt_count(s->alloc_objects, d, sizeof d),
	    fmt_bytes(s->alloc_rate, sp, sizeof sp));
	uint64_t age = model_oldest_age(m, s);
	ui_put(y++, 0, 0, "samples %llu allocated, %llu freed, %u live; oldest live %s; growth %s",
	    (unsigned long long)s->alloc_samples, (unsigned long long)s->free_samples,
	    s->live_samples, age ? fmt_duration((double)age / 1e9, a, sizeof a) : "-",
	    m->marked ? fmt_sbytes(s->growth, b, sizeof b) : "- (m sets a mark)");
	int64_t pn = model_peak_samples(m, s);
	if (pn >= 0)
		snprintf(d, sizeof d, "%lld", (long long)pn);
	else
		snprintf(d, sizeof d, "?");
	ui_put(y++, 0, 0, "peak %s in %s samples; standard error: retained %.0f%%, peak %.0f%%",
	    fmt_bytes(model_peak(m, s), c, sizeof c), d,
	    100 * s->retained_err, 100 * s->peak_err);
	if (v->stack_hist && s->id < v->nstack_hist && v->nhist > 1) {
		double h[VIEW_HISTORY];
		const float *src = v->stack_hist + (size_t)s->id * VIEW_HISTORY;
		for (int i = 0; i < VIEW_HISTORY; i++)
			h[i] = src[i];
		ui_put(y++, 0, 0, "retained history: ");
		ui_put(y - 1, 18, attr(C_HEAD, 0), "%s",
		    spark(h + VIEW_HISTORY - v->nhist, (int)v->nhist, COLS - 20, sp, sizeof sp));
	}
	y++;
	struct stack_view sv;
	int frames_rows = rows - (y - y0) - YM_LIFE_BUCKETS - 2;
	if (frames_rows < 3)
		frames_rows = rows - (y - y0);
	if (s->depth && frames_view(v->sym, v->rules, s->frames, s->depth, &sv) == 0) {
		/* More frames than rows: one row says where we are, the
		 * movement keys scroll (view.c, detail_scroll). */
		int fit = (int)sv.n > frames_rows ? frames_rows - 1 : frames_rows;
		if (fit < 1)
			fit = 1;
		int top = view_detail_frames(v, (int)sv.n, fit);
		int end = (int)sv.n < top + fit ? (int)sv.n : top + fit;
		/* file:line in a column of its own before the name, so that a
		 * long C++ name never pushes it off the screen; the names,
		 * whole, scroll sideways (Left/Right). */
		int lw = 0, widest = 0;
		for (int i = top; i < end; i++) {
			char loc[FRAMES_NAME_MAX], nm[FRAMES_NAME_MAX];
			int l = (int)strlen(detail_location(&sv.f[i], loc, sizeof loc));
			lw = l > lw ? l : lw;
			int w = (int)strlen(detail_text(&sv.f[i], nm, sizeof nm));
			widest = w > widest ? w : widest;
		}
		lw = lw > DETAIL_LOC_MAX ? DETAIL_LOC_MAX : lw;
		int room = COLS - (3 + 15 + 10 + lw + 1);
		int left = view_detail_sideways(v, widest, room);
		for (int i = top; i < end; i++) {
			const struct sym_frame *f = &sv.f[i];
			char loc[FRAMES_NAME_MAX], nm[FRAMES_NAME_MAX], fb[32];
			char vloc[FMT_VIS_SIZE(sizeof loc)], vnm[FMT_VIS_SIZE(sizeof nm)];
			attr_t at = (uint32_t)i == sv.display ? A_BOLD :
				    ((uint32_t)i < sv.display ? attr(C_DIM, 0) : 0);
			snprintf(fb, sizeof fb, "0x%llx", (unsigned long long)f->addr);
			fmt_vis(detail_location(f, loc, sizeof loc), vloc, sizeof vloc);
			fmt_vis(detail_text(f, nm, sizeof nm), vnm, sizeof vnm);
			size_t skip = (size_t)left < strlen(vnm) ? (size_t)left : strlen(vnm);
			ui_put(y++, 0, at, "%s %-14s %-9s %-*.*s %s%s",
			    (uint32_t)i == sv.display ? "=>" : "  ", fb,
			    f->inlined ? "[inlined]" : "", lw, lw, vloc,
			    left ? (MB_CUR_MAX > 1 ? "\u2026" : "<") : "", vnm + skip);
		}
		if ((int)sv.n > fit) {
			int below = (int)sv.n - top - fit;
			ui_put(y++, 3, attr(C_DIM, 0), "... frames %d-%d of %u; %d more %s (Up/Down, PgUp/PgDn scroll)",
			    top + 1, top + fit, sv.n, below > 0 ? below : top,
			    below > 0 ? "below" : "above");
		}
		frames_view_free(&sv);
	}
	if (y - y0 + YM_LIFE_BUCKETS + 1 <= rows) {
		y++;
		ui_put(y++, 0, A_BOLD, "lifetimes of this stack's freed samples:");
		double o[YM_LIFE_BUCKETS], bb[YM_LIFE_BUCKETS];
		for (int i = 0; i < YM_LIFE_BUCKETS; i++) {
			struct model_life l = model_life(s, i);
			o[i] = l.objects;
			bb[i] = l.bytes;
		}
		draw_histogram(NULL, y, rows - (y - y0), o, bb);
	}
}

static void draw_help(void)
{
	int h = VIEW_HELP_LINES + 2, w = 72;
	int y0 = (LINES - h) / 2, x0 = (COLS - w) / 2;
	if (y0 < 0)
		y0 = 0;
	if (x0 < 0)
		x0 = 0;
	for (int i = 0; i < h && y0 + i < LINES; i++) {
		attron(A_REVERSE);
		mvhline(y0 + i, x0, ' ', w < COLS ? w : COLS);
		attroff(A_REVERSE);
		if (i > 0 && i - 1 < VIEW_HELP_LINES)
			ui_put(y0 + i, x0 + 2, A_REVERSE | (i == 1 ? A_BOLD : 0), "%s", view_help_text[i - 1]);
	}
}

void ui_draw(struct view *v)
{
	erase();
	if (!v->m->have_snap) {
		ui_put(0, 0, 0, "ymtop: waiting for data...");
		refresh();
		return;
	}
	int y = draw_header(v);
	int rows = LINES - y - 2;   /* column header and status line */
	if (rows < 1)
		rows = 1;
	if (v->detail)
		draw_detail(v, y, LINES - y - 1);
	else switch (v->kind) {
	case VIEW_STACKS:    draw_stacks(v, y, rows); break;
	case VIEW_FUNCTIONS: draw_functions(v, y, rows); break;
	case VIEW_THREADS:   draw_threads(v, y, rows); break;
	case VIEW_LIFETIMES: draw_lifetimes(v, y, rows); break;
	case VIEW_ALARMS:    draw_alarms(v, y, rows); break;
	case VIEW_MEMORY:    ui_draw_memory(v, y, rows, attr(C_COLS, A_REVERSE)); break;
	default: break;
	}
	const char *st = view_status(v, view_now_ns());
	char vst[FMT_VIS_SIZE(sizeof v->status)];
	if (*st)
		ui_put(LINES - 1, 0, attr(C_STATUS, A_BOLD), "%s", fmt_vis(st, vst, sizeof vst));
	else
		ui_put(LINES - 1, 0, attr(C_DIM, 0),
		    "%s", view_key_line);
	if (v->help)
		draw_help();
	refresh();
}
