/*
 * view: the state of the live screen and what keys do to it (see view.h);
 * the rows each view shows are built in view_rows.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"
#include "report/outfile.h"
#include "report/report.h"
#include "util/clock.h"
#include "view.h"
#include "view_rows.h"

uint64_t view_now_ns(void)
{
	return clock_mono_ns();
}

void view_set_status(struct view *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->status, sizeof v->status, fmt, ap);
	va_end(ap);
	v->status_until_ns = view_now_ns() + 5000000000ULL;
}

const char *view_status(const struct view *v, uint64_t now_ns)
{
	return now_ns < v->status_until_ns ? v->status : "";
}

const char *view_kind_name(enum view_kind k)
{
	static const char *const n[VIEW_COUNT] = {
		"Stacks", "Functions", "Threads", "Lifetimes", "Alarms", "Memory"
	};
	return k < VIEW_COUNT ? n[k] : "?";
}

const char *view_kind_abbrev(enum view_kind k)
{
	static const char *const n[VIEW_COUNT] = {
		"Stk", "Fn", "Thr", "Life", "Alrm", "Mem"
	};
	return k < VIEW_COUNT ? n[k] : "?";
}

const char *view_sort_name(enum model_sort k)
{
	static const char *const n[SORT_COUNT] = {
		"retained", "%", "growth", "total", "rate", "live", "avg size",
		"age", "peak", "short-lived/s", "resident", "function", "trend"
	};
	return k < SORT_COUNT ? n[k] : "?";
}

void view_init(struct view *v, struct model *m, struct sym *s,
	       const struct frames_rules *rules, struct shm_reader *r,
	       const char *outdir)
{
	memset(v, 0, sizeof *v);
	v->m = m;
	v->sym = s;
	v->rules = rules;
	v->reader = r;
	v->outdir = outdir ? outdir : ".";
	v->sort = SORT_RETAINED;
	v->page = 20;
	v->cache_modules = UINT32_MAX;
}

void view_free(struct view *v)
{
	view_rows_free(v);
	free(v->stack_hist);
	memset(v, 0, sizeof *v);
}

static void clamp(struct view *v)
{
	int rows = view_rows(v);
	int page = v->page > 0 ? v->page : 1;
	if (v->selected >= rows)
		v->selected = rows - 1;
	if (v->selected < 0)
		v->selected = 0;
	if (v->top > v->selected)
		v->top = v->selected;
	if (v->selected >= v->top + page)
		v->top = v->selected - page + 1;
	if (v->top < 0)
		v->top = 0;
}

static void resort(struct view *v)
{
	uint32_t keep_id = view_row_stack(v, v->selected);
	view_rows_build(v);
	/* Keep the selection on the same stack when it is still shown. */
	if (keep_id != UINT32_MAX && v->kind == VIEW_STACKS)
		for (uint32_t k = 0; k < v->m->norder; k++)
			if (v->m->order[k] == keep_id) {
				v->selected = (int)k;
				break;
			}
	clamp(v);
}

static void push_history(struct view *v)
{
	struct model *m = v->m;
	memmove(v->hist, v->hist + 1, (VIEW_HISTORY - 1) * sizeof *v->hist);
	v->hist[VIEW_HISTORY - 1] = m->retained_bytes;
	if (v->nhist < VIEW_HISTORY)
		v->nhist++;
	if (m->nstacks > v->nstack_hist) {
		float *h = realloc(v->stack_hist,
				   (size_t)m->nstacks * VIEW_HISTORY * sizeof *h);
		if (!h)
			return;
		memset(h + (size_t)v->nstack_hist * VIEW_HISTORY, 0,
		       (size_t)(m->nstacks - v->nstack_hist) * VIEW_HISTORY * sizeof *h);
		v->stack_hist = h;
		v->nstack_hist = m->nstacks;
	}
	for (uint32_t i = 0; i < m->nstacks; i++) {
		float *h = v->stack_hist + (size_t)i * VIEW_HISTORY;
		memmove(h, h + 1, (VIEW_HISTORY - 1) * sizeof *h);
		h[VIEW_HISTORY - 1] = (float)m->stacks[i].retained_bytes;
	}
}

void view_refresh(struct view *v)
{
	if (v->m->snap.nmodules != v->cache_modules) {
		/* New modules may name frames that were unknown: relabel. */
		view_rows_relabel(v);
		v->cache_modules = v->m->snap.nmodules;
	}
	push_history(v);
	resort(v);
}

void view_symbols_changed(struct view *v)
{
	view_rows_relabel(v);
	resort(v);
}

void view_set_filter(struct view *v, const char *s)
{
	snprintf(v->filter, sizeof v->filter, "%s", s ? s : "");
	v->selected = v->top = 0;
	resort(v);
	if (v->filter[0])
		view_set_status(v, "filter \"%s\": %d rows", v->filter, view_rows(v));
	else
		view_set_status(v, "filter cleared");
}

void view_set_sort(struct view *v, enum model_sort key)
{
	if (key >= SORT_COUNT)
		return;
	if (key == v->sort)
		v->asc = !v->asc;
	else
		v->asc = key == SORT_FUNCTION;
	v->sort = key;
	resort(v);
	view_set_status(v, "sorted by %s%s", view_sort_name(key),
			v->asc ? " (ascending)" : "");
}

const struct ym_alarm *view_alarm(const struct view *v)
{
	const struct shm_snapshot *s = &v->m->snap;
	if (model_alarms_written(v->m) <= v->alarms_seen || s->nalarms == 0)
		return NULL;
	const struct ym_alarm *best = NULL;
	for (uint32_t i = 0; i < s->nalarms; i++) {
		const struct ym_alarm *a = shm_alarm(s, i);
		if (!best || a->seq > best->seq)
			best = a;
	}
	return best;
}

/* ---- files ---- */

int view_write_file(struct view *v, int kind)
{
	struct model *m = v->m;
	if (!m->have_snap)
		return -1;
	char stamp[32], path[4096], err[512];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
	char pattern[4096];
	enum report_format format = kind == 'f' ? REPORT_FOLDED : REPORT_TEXT;
	const char *ext = report_format_ext(format);
	/* Never overwrite: a second file within the same second gets -2... */
	int found = 0;
	for (int n = 1; n < 100 && !found; n++) {
		if (n == 1)
			snprintf(pattern, sizeof pattern, "%s/ymtop-%%p-%%e-%s.%s",
				 v->outdir, stamp, ext);
		else
			snprintf(pattern, sizeof pattern, "%s/ymtop-%%p-%%e-%s-%d.%s",
				 v->outdir, stamp, n, ext);
		if (outfile_expand(pattern, model_pid(m), model_name(m),
				   (uint64_t)now, 0, path, sizeof path) != 0) {
			view_set_status(v, "output path too long");
			return -1;
		}
		found = access(path, F_OK) != 0;
	}
	struct report_opts ro = { format, 20,
				  v->rules, WEIGHT_RETAINED, SORT_RETAINED };
	if (report_save(path, m, v->sym, &ro, err, sizeof err) != 0) {
		view_set_status(v, "%s", err);
		return -1;
	}
	view_set_status(v, "wrote %s", path);
	return 0;
}

/* ---- keys ---- */

typedef int (*view_action)(struct view *v, int key);

int view_detail_frames(struct view *v, int nframes, int page)
{
	v->detail_frames = nframes > 0 ? nframes : 0;
	v->detail_page = page > 0 ? page : 1;
	int most = v->detail_frames - v->detail_page;
	if (v->detail_top > most)
		v->detail_top = most;
	if (v->detail_top < 0)
		v->detail_top = 0;
	return v->detail_top;
}

int view_detail_sideways(struct view *v, int widest, int room)
{
	v->detail_room = room;
	int most = widest - (room > 10 ? room : 10);
	if (v->detail_left > most)
		v->detail_left = most > 0 ? most : 0;
	return v->detail_left;
}

/* In the detail view the movement keys scroll its frames. */
static int detail_scroll(struct view *v, int key)
{
	int page = v->detail_page > 1 ? v->detail_page - 1 : 1;
	switch (key) {
	case VK_UP:   v->detail_top--; break;
	case VK_DOWN: v->detail_top++; break;
	case VK_PGUP: v->detail_top -= page; break;
	case VK_PGDN: v->detail_top += page; break;
	case VK_HOME: v->detail_top = 0; break;
	case VK_END:  v->detail_top = v->detail_frames; break;
	}
	if (v->detail_frames)   /* known once drawn */
		view_detail_frames(v, v->detail_frames, v->detail_page);
	else if (v->detail_top < 0)
		v->detail_top = 0;
	return REACT_REDRAW;
}

static int act_move(struct view *v, int key)
{
	if (v->detail)
		return detail_scroll(v, key);
	int rows = view_rows(v), page = v->page > 1 ? v->page - 1 : 1;
	switch (key) {
	case VK_UP:   v->selected--; break;
	case VK_DOWN: v->selected++; break;
	case VK_PGUP: v->selected -= page; break;
	case VK_PGDN: v->selected += page; break;
	case VK_HOME: v->selected = 0; break;
	case VK_END:  v->selected = rows - 1; break;
	}
	clamp(v);
	return REACT_REDRAW;
}

static int act_enter(struct view *v, int key)
{
	(void)key;
	if (v->detail) {
		v->detail = 0;
		return REACT_REDRAW;
	}
	uint32_t id = view_row_stack(v, v->selected);
	if (id == UINT32_MAX)
		return REACT_NONE;
	v->detail = 1;
	v->detail_stack = id;
	v->detail_top = v->detail_frames = v->detail_left = 0;
	return REACT_REDRAW;
}

static int act_escape(struct view *v, int key)
{
	(void)key;
	if (v->help) {
		v->help = 0;
		return REACT_REDRAW;
	}
	if (v->detail) {
		v->detail = 0;
		return REACT_REDRAW;
	}
	if (v->filter[0]) {
		view_set_filter(v, "");
		return REACT_REDRAW;
	}
	return REACT_NONE;
}

static int act_tab(struct view *v, int key)
{
	int d = key == VK_BTAB ? VIEW_COUNT - 1 : 1;
	v->kind = (enum view_kind)((v->kind + d) % VIEW_COUNT);
	v->detail = 0;
	v->selected = v->top = 0;
	resort(v);
	return REACT_REDRAW;
}

static int act_sort_step(struct view *v, int key)
{
	int k = (int)v->sort + (key == '<' ? -1 : 1);
	if (k == SORT_PERCENT)   /* same order as retained: skip it */
		k += key == '<' ? -1 : 1;
	k = (k + SORT_COUNT) % SORT_COUNT;
	if (k == SORT_PERCENT)
		k = (k + (key == '<' ? -1 : 1) + SORT_COUNT) % SORT_COUNT;
	view_set_sort(v, (enum model_sort)k);
	return REACT_REDRAW;
}

static int act_sort_key(struct view *v, int key)
{
	enum model_sort k = SORT_RETAINED;
	switch (key) {
	case 'R': k = SORT_RETAINED; break;
	case 'T': k = SORT_ALLOCATED; break;
	case 'A': k = SORT_RATE; break;
	case 'L': k = SORT_LIVE; break;
	case 'G': k = SORT_GROWTH; break;
	case 'N': k = SORT_FUNCTION; break;
	case 'P': k = SORT_PEAK; break;
	case 'S': k = SORT_SHORT; break;
	case 'D': k = SORT_TREND; break;
	}
	view_set_sort(v, k);
	return REACT_REDRAW;
}

static int act_growing(struct view *v, int key)
{
	(void)key;
	v->growing_only = !v->growing_only;
	resort(v);
	view_set_status(v, v->growing_only ?
			"only growing stacks (g: all)" : "all stacks");
	return REACT_REDRAW;
}

static int act_mark(struct view *v, int key)
{
	(void)key;
	model_mark(v->m);
	resort(v);
	view_set_status(v, "mark set: growth and peak are measured from now");
	return REACT_REDRAW;
}

static int act_freeze(struct view *v, int key)
{
	(void)key;
	v->frozen = !v->frozen;
	view_set_status(v, v->frozen ? "display frozen (space to resume)" : "display live");
	return v->frozen ? REACT_REDRAW : REACT_RELOAD | REACT_REDRAW;
}

static int act_pause(struct view *v, int key)
{
	(void)key;
	if (!v->reader || !v->m->alive) {
		view_set_status(v, "the process has exited");
		return REACT_REDRAW;
	}
	int want = !v->m->snap.ctl.pause;
	if (shm_control_pause(v->reader, want) != 0) {
		view_set_status(v, "cannot write the control block (read-only segment)");
		return REACT_REDRAW;
	}
	v->paused = want;
	view_set_status(v, want ? "sampling paused in the agent" : "sampling resumed");
	return REACT_RELOAD | REACT_REDRAW;
}

int view_set_rate(struct view *v, const char *text)
{
	uint64_t rate;
	char a[32];
	if (!v->reader || !v->m->alive) {
		view_set_status(v, "the process has exited");
		return -1;
	}
	if (model_sample_rate(v->m) <= 1) {
		view_set_status(v, "exact mode (YM_SAMPLE_RATE=1) is chosen at the "
				"program's start: the rate cannot change");
		return -1;
	}
	if (fmt_parse_bytes(text, SHM_RATE_MIN, SHM_RATE_MAX, &rate) != 0) {
		view_set_status(v, "the sample rate must be a number of bytes from 2 to "
				"1099511627776 (k, M, G: KiB, MiB, GiB), not '%.40s'", text);
		return -1;
	}
	if (shm_control_rate(v->reader, rate) != 0) {
		view_set_status(v, "cannot write the control block (read-only segment)");
		return -1;
	}
	view_set_status(v, "sample rate %s asked: each thread takes it at its next sample",
			fmt_bytes((double)rate, a, sizeof a));
	return 0;
}

static int act_rate(struct view *v, int key)
{
	(void)key;
	if (!v->reader || !v->m->alive) {
		view_set_status(v, "the process has exited");
		return REACT_REDRAW;
	}
	return REACT_RATE;
}

static int act_write(struct view *v, int key)
{
	view_write_file(v, key);
	return REACT_REDRAW;
}

static int act_help(struct view *v, int key)
{
	(void)key;
	v->help = !v->help;
	return REACT_REDRAW;
}

/* t: the lists show names fitted to the screen (template arguments,
 * parameters and middle scopes elided) or whole, cut at the edge. */
static int act_full_names(struct view *v, int key)
{
	(void)key;
	v->full_names = !v->full_names;
	view_set_status(v, v->full_names ? "names in full (t: fit them to the screen)"
					 : "names fitted to the screen (t: names in full)");
	return REACT_REDRAW;
}

/* Left/Right: the stack detail's frames sideways, for names longer than
 * the screen. */
static int act_sideways(struct view *v, int key)
{
	if (!v->detail)
		return REACT_NONE;
	/* Half of what was shown: any word up to that long is seen whole
	 * at one of the steps. */
	int step = v->detail_room / 2 > VIEW_SIDEWAYS_STEP ? v->detail_room / 2
							   : VIEW_SIDEWAYS_STEP;
	v->detail_left += key == VK_LEFT ? -step : step;
	if (v->detail_left < 0)
		v->detail_left = 0;
	return REACT_REDRAW;
}

static int act_dismiss(struct view *v, int key)
{
	(void)key;
	v->alarms_seen = model_alarms_written(v->m);
	return REACT_REDRAW;
}

static int act_quit(struct view *v, int key)
{
	(void)key;
	if (v->help || v->detail)
		return act_escape(v, VK_ESC);
	return REACT_QUIT;
}

/* Keys that need a line typed or a menu: the main loop asks (ui.c). */
static int act_ask(struct view *v, int key)
{
	(void)v;
	return key == '/' ? REACT_FILTER : REACT_SORTMENU;
}

/* H: back to the host list the screen was opened from (else nothing). */
static int act_back(struct view *v, int key)
{
	(void)key;
	return v->back ? REACT_BACK : REACT_NONE;
}

/* X: take the agent out of the process (ymtop(1) --detach); ui.c asks
 * for a confirmation first. */
static int act_detach(struct view *v, int key)
{
	(void)v;
	(void)key;
	return REACT_DETACH;
}

static int act_redraw(struct view *v, int key)
{
	(void)key;
	clamp(v);
	return REACT_REDRAW;
}

static const struct {
	int key;
	view_action fn;
} key_table[] = {
	{ VK_UP, act_move }, { VK_DOWN, act_move }, { VK_PGUP, act_move },
	{ VK_PGDN, act_move }, { VK_HOME, act_move }, { VK_END, act_move },
	{ 'k', act_move }, { 'j', act_move },
	{ VK_ENTER, act_enter }, { VK_ESC, act_escape },
	{ VK_TAB, act_tab }, { VK_BTAB, act_tab },
	{ '<', act_sort_step }, { '>', act_sort_step }, { VK_F6, act_ask },
	{ 'R', act_sort_key }, { 'T', act_sort_key }, { 'A', act_sort_key },
	{ 'L', act_sort_key }, { 'G', act_sort_key }, { 'N', act_sort_key },
	{ 'P', act_sort_key }, { 'S', act_sort_key }, { 'D', act_sort_key },
	{ 'g', act_growing },
	{ 'm', act_mark }, { ' ', act_freeze }, { 'p', act_pause },
	{ 's', act_write }, { 'f', act_write }, { '?', act_help }, { 'h', act_help },
	{ 'a', act_dismiss }, { 'q', act_quit }, { '/', act_ask },
	{ 'r', act_rate }, { 't', act_full_names }, { 'H', act_back },
	{ 'X', act_detach },
	{ VK_LEFT, act_sideways }, { VK_RIGHT, act_sideways },
	{ VK_RESIZE, act_redraw }, { VK_REDRAW, act_redraw },
};

int view_key(struct view *v, int key)
{
	if (key == 'k')
		key = VK_UP;
	else if (key == 'j')
		key = VK_DOWN;
	if (v->help && key != '?' && key != 'h' && key != 'q' && key != VK_ESC &&
	    key != VK_RESIZE && key != VK_REDRAW && !(key == 'H' && v->back)) {
		v->help = 0;   /* any key closes help */
		return REACT_REDRAW;
	}
	for (size_t i = 0; i < sizeof key_table / sizeof *key_table; i++)
		if (key_table[i].key == key)
			return key_table[i].fn(v, key);
	return REACT_NONE;
}

/* The help screen (?) and the status line's key hint: they name only keys
 * of key_table (test_view). */
const char *const view_help_text[VIEW_HELP_LINES] = {
	"ymtop keys",
	"",
	"  Up/Down, PgUp/PgDn, Home/End   move",
	"  Enter         the selected stack in full (Enter/Esc: back)",
	"  Tab/S-Tab     views: Stacks, Functions, Threads, Lifetimes, Alarms,",
	"                Memory (RSS explained)",
	"  < >  F6       sort column (again: reverse)",
	"  R T A L G P S N  sort: retained, total, rate, live, growth, peak,",
	"                short-lived bytes/s, name",
	"  D             sort by TREND's growth rate;  g  only growing stacks",
	"  /             filter by function, file or module (Esc clears)",
	"  m             set the mark: GROWTH and PEAK are measured from now",
	"  space         freeze the display",
	"  p             pause or resume sampling in the agent",
	"  r             ask the agent for another sample rate",
	"  s             write a text report;  f  folded stacks (flame graphs)",
	"  a             dismiss the alarm banner",
	"  t             long names: fitted (the method kept) or whole",
	"  X             detach the agent from the process, once confirmed",
	"  ^L            redraw;  ?  this help;  q  quit",
	"",
	"RETAINED, LIVE: estimated from samples (injected: since the attach);",
	"? marks one carried by 1-2 samples, sorted at the low end of its error",
	"Units: retained counts requested bytes; heap and in use usable bytes",
	"In a stack: Up/Down scroll frames, Left/Right long names sideways",
};

const char view_key_line[] =
	"?:help q:quit Tab:views Enter:stack /:filter <>:sort m:mark s:report f:folded";

int view_key_known(int key)
{
	for (size_t i = 0; i < sizeof key_table / sizeof *key_table; i++)
		if (key_table[i].key == key)
			return 1;
	return 0;
}

/* The sort menu's keys (F6, ui.c): Up and Down move, Enter picks, Esc, q
 * and F6 again close it. */
static int menu_up(int *sel, int n)
{
	(void)n;
	if (*sel > 0)
		--*sel;
	return MENU_MOVE;
}

static int menu_down(int *sel, int n)
{
	if (*sel < n - 1)
		++*sel;
	return MENU_MOVE;
}

static int menu_pick(int *sel, int n)
{
	(void)sel;
	(void)n;
	return MENU_PICK;
}

static int menu_close(int *sel, int n)
{
	(void)sel;
	(void)n;
	return MENU_CLOSE;
}

static const struct {
	int key;
	int (*fn)(int *sel, int n);
} menu_table[] = {
	{ VK_UP, menu_up }, { VK_DOWN, menu_down }, { VK_ENTER, menu_pick },
	{ VK_ESC, menu_close }, { 'q', menu_close }, { VK_F6, menu_close },
};

int view_menu_key(int key, int *sel, int n)
{
	for (size_t i = 0; i < sizeof menu_table / sizeof *menu_table; i++)
		if (menu_table[i].key == key)
			return menu_table[i].fn(sel, n);
	return MENU_NONE;
}

/* A prompt's editing keys. */
static int prompt_apply(char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return PROMPT_APPLY;
}

static int prompt_cancel(char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return PROMPT_CANCEL;
}

static int prompt_erase(char *buf, size_t len)
{
	size_t n = strnlen(buf, len);
	if (n)
		buf[n - 1] = '\0';
	return PROMPT_MORE;
}

static int prompt_kill(char *buf, size_t len)
{
	if (len)
		buf[0] = '\0';
	return PROMPT_MORE;
}

static int prompt_redraw(char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return PROMPT_REDRAW;
}

static const struct {
	int key;
	int (*fn)(char *buf, size_t len);
} prompt_table[] = {
	{ VK_ENTER, prompt_apply }, { VK_ESC, prompt_cancel },
	{ VK_BACKSPACE, prompt_erase }, { 21 /* ^U */, prompt_kill },
	{ VK_RESIZE, prompt_redraw },
};

int view_prompt_key(int key, char *buf, size_t len)
{
	for (size_t i = 0; i < sizeof prompt_table / sizeof *prompt_table; i++)
		if (prompt_table[i].key == key)
			return prompt_table[i].fn(buf, len);
	size_t n = strnlen(buf, len);
	if (key >= 32 && key < 127 && n + 1 < len) {
		buf[n] = (char)key;
		buf[n + 1] = '\0';
	}
	return PROMPT_MORE;
}
