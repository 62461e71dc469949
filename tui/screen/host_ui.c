/*
 * host_ui: the host list on the terminal (host.h has its data and keys):
 * a header, one row per process, a key line; Enter opens the process's
 * screen (ui_screen), whose H comes back here.
 */
#include <curses.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fmt.h"
#include "host.h"
#include "report/prometheus.h"
#include "ui.h"
#include "ui_prim.h"
#include "view.h"
#include "util/stop.h"

static void draw(const struct host *h)
{
	erase();
	int rows = LINES, cols = COLS;
	char a[32], b[32], c[32], d[32];
	ui_put(0, 0, A_BOLD, "ymtop - %d process%s running the agent%s  sort: %s%s%s",
	       h->f.n, h->f.n == 1 ? "" : "es", h->f.root ? " (--children)" : "",
	       host_sort_name(h->sort), h->asc ? " ascending" : "",
	       h->merge ? "  merged by executable" : "");
	/* Processes running the agent that are not in the list, and why. */
	char note[256] = "";
	int o = 0;
	if (h->f.skipped)
		o = snprintf(note, sizeof note, "%d more process%s running the agent "
			     "not watched: %s", h->f.skipped,
			     h->f.skipped == 1 ? "" : "es", h->f.skip_why);
	if (h->f.unstarted && o >= 0 && (size_t)o < sizeof note)
		snprintf(note + o, sizeof note - (size_t)o, "%s%d process%s running the "
			 "agent sampled nothing yet (no segment; ymtop -p PID starts it)",
			 o ? "; " : "", h->f.unstarted, h->f.unstarted == 1 ? "" : "es");
	if (note[0])
		ui_put(1, 0, A_BOLD, "%s", note);
	attron(A_REVERSE);
	mvhline(2, 0, ' ', cols);
	ui_put(2, 0, A_REVERSE, "%7s %-10s %9s %9s %9s %9s %6s %-8s %s", "PID", "USER",
	       "RSS", "IN USE", "RETAINED", "ALLOC/s", "ALARMS", "STATE", "COMMAND");
	attroff(A_REVERSE);
	int list = rows - 4;
	int top = h->sel < list ? 0 : h->sel - list + 1;
	int old = 0;
	for (int i = 0; i < h->n; i++)
		old |= h->rows[i].inuse_known && h->rows[i].inuse_old;
	for (int i = top, y = 3; i < h->n && y < rows - 1 - old; i++, y++) {
		const struct host_row *r = &h->rows[i];
		/* An allocator figure older than this refresh: marked. */
		char inuse[40] = "-";
		if (r->inuse_known)
			snprintf(inuse, sizeof inuse, "%s%s",
				 fmt_bytes(r->inuse > 0 ? r->inuse : 0, b, sizeof b),
				 r->inuse_old ? "*" : "");
		char user[FMT_VIS_SIZE(sizeof r->user)];
		char cmd[FMT_VIS_SIZE(sizeof r->command)];
		attr_t at = i == h->sel ? A_REVERSE : 0;
		if (at)
			mvchgat(y, 0, -1, A_REVERSE, 0, NULL);
		ui_put(y, 0, at, "%7ld %-10.10s %9s %9s %9s %9s %6llu %-8.8s %s",
		       (long)r->pid, fmt_vis(r->user, user, sizeof user),
		       r->rss > 0 ? fmt_bytes(r->rss, a, sizeof a) : "-",
		       inuse,
		       fmt_bytes(r->retained, c, sizeof c),
		       fmt_bytes(r->rate, d, sizeof d),
		       (unsigned long long)r->alarms, r->state,
		       fmt_vis(r->command, cmd, sizeof cmd));
	}
	if (!h->n)
		ui_put(3, 0, 0, "no process runs the agent (any more)");
	else if (old && rows > 5)
		ui_put(rows - 2, 0, 0, "* IN USE older than this refresh: the process "
		       "answered no request since its last allocator call");
	ui_put(rows - 1, 0, A_BOLD, "%s", host_key_line);
	refresh();
}

/* The merged stacks of the row's executable until H or Esc (UI_BACK) or
 * q (UI_QUIT); refreshed with the list. */
static int merged_view(const struct options *o, struct host *h, const char *exe)
{
	struct report_opts ro = { REPORT_PROMETHEUS, o->top, &o->rules,
				  WEIGHT_RETAINED, SORT_RETAINED };
	char name[64];
	snprintf(name, sizeof name, "%s", exe);
	uint64_t next = 0;
	struct prom_group *g = NULL;
	size_t n = 0;
	for (;;) {
		uint64_t now = view_now_ns();
		if (now >= next) {
			prometheus_merge_free(g, n);
			g = NULL;
			n = 0;
			if (host_refresh(h) != 0 || host_merged(h, name, &ro, &g, &n) != 0)
				break;
			next = now + (uint64_t)(o->delay * 1e9);
		}
		int procs = 0;   /* the merged row's count */
		for (int i = 0; i < h->n; i++)
			if (!strcmp(h->rows[i].exe, name))
				procs = h->rows[i].nprocs;
		erase();
		char vis[FMT_VIS_SIZE(sizeof name)], a[32], b[32];
		ui_put(0, 0, A_BOLD, "ymtop - %s: %d process%s, stacks merged by display frame",
		       fmt_vis(name, vis, sizeof vis), procs, procs == 1 ? "" : "es");
		mvhline(2, 0, ' ', COLS);
		ui_put(2, 0, A_REVERSE, "%9s %9s %s", "RETAINED", "ALLOCATED",
		       "FUNCTION (LOCATION)");
		mvchgat(2, 0, -1, A_REVERSE, 0, NULL);
		for (size_t i = 0; i < n && (int)i + 3 < LINES - 1; i++) {
			char fn[FMT_VIS_SIZE(PROM_LABEL_BUF)], loc[FMT_VIS_SIZE(PROM_LABEL_BUF)];
			ui_put((int)i + 3, 0, 0, "%9s %9s %s%s (%s)",
			       fmt_bytes(g[i].retained, a, sizeof a),
			       fmt_bytes(g[i].allocated, b, sizeof b),
			       g[i].kind == YM_KIND_MMAP ? "[mmap] " : "",
			       fmt_vis(g[i].function, fn, sizeof fn),
			       fmt_vis(g[i].location, loc, sizeof loc));
		}
		ui_put(LINES - 1, 0, A_BOLD, "%s", host_merged_key_line);
		refresh();
		int ch = ui_getch_until(next);
		int r = ch == ERR ? HOST_NONE : host_merged_key(h, ui_map_key(ch));
		if (stop_asked || r == HOST_QUIT) {
			prometheus_merge_free(g, n);
			return UI_QUIT;
		}
		if (r == HOST_BACK)
			break;
	}
	prometheus_merge_free(g, n);
	return UI_BACK;
}

int ui_host_run(const struct options *o, pid_t root)
{
	struct host h;
	host_init(&h, root);
	if (host_refresh(&h) != 0)
		cli_die(1, "out of memory");
	ui_curses_start();
	uint64_t delay = (uint64_t)(o->delay * 1e9);
	uint64_t next = view_now_ns() + delay;
	for (;;) {
		draw(&h);
		int ch = ui_getch_until(next);
		if (stop_asked)
			break;
		int r = ch == ERR ? HOST_NONE : host_key(&h, ui_map_key(ch), LINES - 4);
		if (r == HOST_QUIT)
			break;
		if (r == HOST_OPEN) {
			const struct host_row *row = &h.rows[h.sel];
			int back = h.merge && row->nprocs > 1 ?
				merged_view(o, &h, row->exe) : ui_screen(o, h.sel_pid, 1);
			if (back != UI_BACK)
				break;
			clear();
			r = HOST_REDRAW;
			next = 0;
		}
		uint64_t now = view_now_ns();
		if (now >= next) {
			if (host_refresh(&h) != 0)
				break;
			next = now + delay;
		}
	}
	endwin();
	host_free(&h);
	return 0;
}
