/*
 * host_ui: the host list on the terminal (host.h has its data and keys):
 * a header, one row per process, a key line; Enter opens the process's
 * screen (ui_screen), whose H comes back here.
 */
#include <curses.h>
#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "host.h"
#include "ui.h"
#include "ui_draw.h"
#include "view.h"

static void draw(const struct host *h)
{
	erase();
	int rows = LINES, cols = COLS;
	char a[32], b[32], c[32], d[32];
	ui_put(0, 0, A_BOLD, "ymtop - %d process%s running the agent%s  sort: %s%s%s",
	       h->n, h->n == 1 ? "" : "es", h->f.root ? " (--children)" : "",
	       host_sort_name(h->sort), h->asc ? " ascending" : "",
	       h->merge ? "  merged by executable" : "");
	attron(A_REVERSE);
	mvhline(2, 0, ' ', cols);
	ui_put(2, 0, A_REVERSE, "%7s %-10s %9s %9s %9s %9s %6s %-8s %s", "PID", "USER",
	       "RSS", "IN USE", "RETAINED", "ALLOC/s", "ALARMS", "STATE", "COMMAND");
	attroff(A_REVERSE);
	int list = rows - 4;
	int top = h->sel < list ? 0 : h->sel - list + 1;
	for (int i = top, y = 3; i < h->n && y < rows - 1; i++, y++) {
		const struct host_row *r = &h->rows[i];
		char user[FMT_VIS_SIZE(sizeof r->user)];
		char cmd[FMT_VIS_SIZE(sizeof r->command)];
		attr_t at = i == h->sel ? A_REVERSE : 0;
		if (at)
			mvchgat(y, 0, -1, A_REVERSE, 0, NULL);
		ui_put(y, 0, at, "%7ld %-10.10s %9s %9s %9s %9s %6llu %-8.8s %s",
		       (long)r->pid, fmt_vis(r->user, user, sizeof user),
		       r->rss > 0 ? fmt_bytes(r->rss, a, sizeof a) : "-",
		       r->inuse_known ? fmt_bytes(r->inuse > 0 ? r->inuse : 0, b, sizeof b) : "-",
		       fmt_bytes(r->retained, c, sizeof c),
		       fmt_bytes(r->rate, d, sizeof d),
		       (unsigned long long)r->alarms, r->state,
		       fmt_vis(r->command, cmd, sizeof cmd));
	}
	if (!h->n)
		ui_put(3, 0, 0, "no process runs the agent (any more)");
	ui_put(rows - 1, 0, A_BOLD, "Enter open  P U C M I R A W S sort  < > next  i invert"
	       "  e merge by executable  q quit");
	refresh();
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
		if (cli_stop)
			break;
		int r = ch == ERR ? HOST_NONE : host_key(&h, ui_map_key(ch), LINES - 4);
		if (r == HOST_QUIT)
			break;
		if (r == HOST_OPEN) {
			pid_t pid = h.sel_pid;
			if (ui_screen(o, pid, 1) != UI_BACK)
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
