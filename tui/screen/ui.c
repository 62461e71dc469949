/*
 * ui: the live screen's terminal, keys (mapped to VK_* codes for view.c),
 * prompts and main loop; one of the three files that touch curses (see ui.h).
 */
#include <curses.h>
#include <langinfo.h>
#include <malloc.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "detach.h"
#include "fmt.h"
#include "session.h"
#include "ui.h"
#include "ui_draw.h"
#include "ui_prim.h"
#include "view.h"
#include "util/stop.h"

static int curses_on;

static void restore(void)
{
	if (curses_on) {
		endwin();
		curses_on = 0;
	}
}

/* ---- drawing primitives (ui_prim.h) ---- */

static int colors;
static int utf8;

void ui_prim_start(void)
{
	utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
	const char *nc = getenv("NO_COLOR");
	colors = has_colors() && !(nc && *nc);
	if (colors) {
		start_color();
		use_default_colors();
		init_pair(C_HEAD, COLOR_CYAN, -1);
		init_pair(C_COLS, COLOR_BLACK, COLOR_GREEN);
		init_pair(C_SEL, COLOR_BLACK, COLOR_CYAN);
		init_pair(C_ALARM, COLOR_WHITE, COLOR_RED);
		init_pair(C_UP, COLOR_RED, -1);
		init_pair(C_DOWN, COLOR_GREEN, -1);
		init_pair(C_STATUS, COLOR_YELLOW, -1);
		init_pair(C_DIM, COLOR_BLUE, -1);
	}
}

attr_t ui_attr(int pair, attr_t mono)
{
	return colors ? (attr_t)COLOR_PAIR(pair) : mono;
}

int ui_utf8(void)
{
	return utf8;
}

void ui_put(int y, int x, attr_t a, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (y < 0 || y >= LINES || x >= COLS)
		return;
	/* addnstr counts bytes: cut at COLS - x characters instead. */
	int n = 0, room = COLS - x;
	for (int c = 0; buf[n]; n++)
		if (((unsigned char)buf[n] & 0xc0) != 0x80 && ++c > room)
			break;
	attron(a);
	mvaddnstr(y, x, buf, n);
	attroff(a);
}

void ui_fill_line(int y, attr_t a)
{
	attron(a);
	mvhline(y, 0, ' ', COLS);
	attroff(a);
}

/* ---- the terminal ---- */

void ui_curses_start(void)
{
	static int once;
	if (curses_on)
		return;
	if (once++) {
		refresh();   /* back from endwin: curses resumes */
		curses_on = 1;
		return;
	}
	setlocale(LC_ALL, "");
	atexit(restore);
	if (!initscr())
		cli_die(1, "cannot initialize the terminal (TERM=%s)",
			getenv("TERM") ? getenv("TERM") : "");
	curses_on = 1;
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	curs_set(0);
	set_escdelay(25);
	ui_prim_start();
}

int ui_map_key(int ch)
{
	switch (ch) {
	case KEY_UP:    return VK_UP;
	case KEY_DOWN:  return VK_DOWN;
	case KEY_PPAGE: return VK_PGUP;
	case KEY_NPAGE: return VK_PGDN;
	case KEY_HOME:  return VK_HOME;
	case KEY_END:   return VK_END;
	case KEY_LEFT:  return VK_LEFT;
	case KEY_RIGHT: return VK_RIGHT;
	case KEY_ENTER: case '\n': case '\r': return VK_ENTER;
	case 27:        return VK_ESC;
	case '\t':      return VK_TAB;
	case KEY_BTAB:  return VK_BTAB;
	case KEY_F(6):  return VK_F6;
	case KEY_RESIZE: return VK_RESIZE;
	case 12:        return VK_REDRAW;   /* ^L */
	case KEY_BACKSPACE: case 127: case 8: return VK_BACKSPACE;
	default:        return ch;
	}
}

/* ---- prompts ---- */

/* Read a line on the bottom row after `label`, editing buf (of size len,
 * which holds the initial text): 1 when Enter applies it, 0 on Esc. */
static int prompt_line(struct view *v, const char *label, char *buf, size_t len)
{
	int applied = 0;
	curs_set(1);
	timeout(-1);
	for (;;) {
		move(LINES - 1, 0);
		clrtoeol();
		ui_put(LINES - 1, 0, A_BOLD, "%s", label);
		addnstr(buf, COLS - getcurx(stdscr) - 1);
		refresh();
		int r = view_prompt_key(ui_map_key(getch()), buf, len);
		if (r == PROMPT_APPLY)
			applied = 1;
		if (r == PROMPT_APPLY || r == PROMPT_CANCEL)
			break;
		if (r == PROMPT_REDRAW)
			ui_draw(v);
	}
	curs_set(0);
	return applied;
}

static void prompt_filter(struct view *v)
{
	char buf[sizeof v->filter];
	snprintf(buf, sizeof buf, "%s", v->filter);
	if (prompt_line(v, "filter (function, file, module; Enter applies, Esc cancels): ",
			buf, sizeof buf))
		view_set_filter(v, buf);
}

static void prompt_rate(struct view *v)
{
	char buf[32] = "", a[32], label[160];
	snprintf(label, sizeof label, "sample rate in bytes, k/M/G suffixes (now %s; "
		 "Enter applies, Esc cancels): ",
		 fmt_bytes((double)model_sample_rate(v->m), a, sizeof a));
	if (prompt_line(v, label, buf, sizeof buf))
		view_set_rate(v, buf);
}

/* X: detach once confirmed (y); the final data stays on the screen. 1
 * when the agent was detached. */
static int confirm_detach(struct view *v, pid_t pid)
{
	char buf[8] = "", label[160], msg[600];
	snprintf(label, sizeof label, "detach the agent from process %ld: sampling "
		 "stops, it is unloaded if it can be (y, then Enter; Esc cancels): ",
		 (long)pid);
	if (!prompt_line(v, label, buf, sizeof buf) || (buf[0] != 'y' && buf[0] != 'Y'))
		return 0;
	int rc = detach_target(pid, msg, sizeof msg);
	view_set_status(v, "%s", msg);
	return rc == 0;
}

static void sort_menu(struct view *v)
{
	static const enum model_sort keys[] = { SORT_RETAINED, SORT_GROWTH, SORT_ALLOCATED,
		SORT_RATE, SORT_LIVE, SORT_AVG, SORT_AGE, SORT_PEAK, SORT_SHORT, SORT_RESIDENT, SORT_FUNCTION };
	int n = (int)(sizeof keys / sizeof *keys), sel = 0;
	for (int i = 0; i < n; i++)
		if (keys[i] == v->sort)
			sel = i;
	timeout(-1);
	for (;;) {
		ui_draw(v);
		int y0 = 3, x0 = 2;
		for (int i = -1; i < n; i++) {
			attr_t a = A_REVERSE | (i == sel ? A_BOLD | A_UNDERLINE : 0);
			mvhline(y0 + 1 + i, x0, ' ', 22);
			ui_put(y0 + 1 + i, x0 + 1, a, "%s",
			    i < 0 ? "Sort by (Enter)" : view_sort_name(keys[i]));
		}
		refresh();
		int r = view_menu_key(ui_map_key(getch()), &sel, n);
		if (r == MENU_PICK) {
			if (keys[sel] != v->sort)
				view_set_sort(v, keys[sel]);
			break;
		}
		if (r == MENU_CLOSE)
			break;
	}
}

/* ---- main loop ---- */

/* A large live table (exact mode: 48 MiB) is copied once every few
 * refreshes; in between the model keeps the last ages.  Its cost is then
 * about that of a 4 MiB table per refresh. */
static int take(struct session *ss, struct view *v)
{
	static unsigned tick;
	char err[512];
	const struct model *m = &ss->model;
	uint64_t live = m->have_snap ? model_live_bytes(m) : 0;
	unsigned every = (unsigned)(live / (4u << 20)) + 1;
	int skip = (v->detail || v->kind == VIEW_STACKS) ? (tick++ % every) != 0
							 : (tick++ % (every * 4)) != 0;
	int rc = session_refresh(ss, skip, err, sizeof err);
	if (rc == SESSION_ENOMEM) {
		view_set_status(v, "%s", err);   /* "out of memory" */
		return -1;
	}
	if (rc != 0) {
		view_set_status(v, "cannot read the segment: %s", err);
		return -1;
	}
	view_refresh(v);
	return 0;
}

int ui_getch_until(uint64_t next)
{
	uint64_t now = view_now_ns();
	int wait_ms = next > now ? (int)((next - now) / 1000000) : 0;
	timeout(wait_ms < 200 ? wait_ms : 200);
	return getch();
}

int ui_screen(const struct options *o, pid_t pid, int back)
{
	struct session ss;
	struct view v;
	/* Snapshot buffers of many MiB come and go every refresh: keep them
	 * on the heap rather than mmap'ing and faulting them in each time. */
	mallopt(M_MMAP_THRESHOLD, 256 << 20);
	mallopt(M_TRIM_THRESHOLD, 512 << 20);
	static struct ym_err e;
	if (session_open(&ss, o, pid, &e) != 0)
		cli_die_err(&e);
	char outdir[4096] = ".";
	if (o->output) {
		const char *slash = strrchr(o->output, '/');
		if (slash)
			snprintf(outdir, sizeof outdir, "%.*s", (int)(slash - o->output),
				 o->output);
		if (!outdir[0])
			snprintf(outdir, sizeof outdir, "/");
	}
	view_init(&v, &ss.model, ss.sym, &o->rules, &ss.reader, outdir);
	v.sort = o->sort;
	v.back = back;
	take(&ss, &v);
	ui_curses_start();
	if (back)
		view_set_status(&v, "H: back to the process list");
	int ret = UI_QUIT;
	uint64_t delay = (uint64_t)(o->delay * 1e9);
	uint64_t next = view_now_ns() + delay;
	int exited_seen = 0, fetching = 0, detached = 0;
	for (;;) {
		/* debuginfod lookups run in child processes (sym/fetch.h): a
		 * progress line while they do, new names when a file came. */
		char line[256];
		if (sym_pending(ss.sym, line, sizeof line)) {
			view_set_status(&v, "%s", line);
			fetching = 1;
		} else if (fetching) {
			fetching = 0;
			view_set_status(&v, "debuginfod: lookups finished");
		}
		if (sym_poll(ss.sym))
			view_symbols_changed(&v);
		ui_draw(&v);
		int ch = ui_getch_until(next);
		if (stop_asked)
			break;
		int react = REACT_NONE;
		if (ch != ERR)
			react = view_key(&v, ui_map_key(ch));
		if (react & REACT_BACK) {
			ret = UI_BACK;   /* to the host list (host_ui.c) */
			break;
		}
		if (react & REACT_QUIT)
			break;
		if (react & REACT_FILTER)
			prompt_filter(&v);
		if (react & REACT_SORTMENU)
			sort_menu(&v);
		if (react & REACT_RATE) {
			prompt_rate(&v);
			react |= REACT_RELOAD;
		}
		if ((react & REACT_DETACH) && !detached && !exited_seen &&
		    confirm_detach(&v, pid))
			detached = 1;   /* no segment now: the last data stays */
		uint64_t now = view_now_ns();
		if (((react & REACT_RELOAD) || now >= next) && !v.frozen && !exited_seen &&
		    !detached) {
			take(&ss, &v);
			next = now + delay;
			if (!ss.model.alive) {
				exited_seen = 1;   /* keep the final data on screen */
				char how[64];
				view_set_status(&v, "the process has exited (%s): what it still "
						"held at exit is shown (s and f still work)",
						model_exit_text(&ss.model, how, sizeof how));
			}
		}
	}
	if (ret == UI_QUIT)
		restore();
	view_free(&v);
	session_close(&ss);
	return ret;
}

int ui_run(const struct options *o, pid_t pid)
{
	ui_screen(o, pid, 0);
	return 0;
}
