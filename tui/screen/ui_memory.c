/*
 * ui_memory: the Memory view (ui_memory.h).
 */
#include <math.h>
#include <string.h>

#include "fmt.h"
#include "model/memory.h"
#include "ui_memory.h"
#include "ui_prim.h"

struct mem_row {
	const char *what;
	int have;
	double bytes;
	int share;          /* show its share of RSS */
	const char *note;
	int wrap;           /* the note explains a figure: continued on the
			       next lines where it does not fit, never cut */
};

/* A row's note from column x of line y, continued on the next lines at
 * the same column where it does not fit (the explanations are sentences);
 * returns the line after it.  end: the first line not to draw on. */
static int note(int y, int x, int end, const char *text)
{
	int w = COLS - x;
	size_t len = strlen(text);
	if (w < 30 && (int)len > w && y + 1 < end) {
		/* A narrow terminal: the note under its row, indented. */
		y++;
		x = 4;
		w = COLS - x;
	}
	if (w < 1)
		return y + 1;
	while (y < end) {
		size_t k = len;
		if ((int)len > w) {     /* break at the last space that fits */
			k = (size_t)w;
			while (k > 0 && text[k] != ' ')
				k--;
			if (k == 0)
				k = (size_t)w;
		}
		ui_put(y++, x, 0, "%.*s", (int)k, text);
		text += k;
		len -= k;
		while (*text == ' ')
			text++, len--;
		if (!len)
			break;
	}
	return y;
}

void ui_draw_memory(struct view *v, int y0, int rows, attr_t head)
{
	struct model_memory mm;
	model_memory(v->m, &mm);
	attron(head);
	mvhline(y0, 0, ' ', COLS);
	attroff(head);
	ui_put(y0, 0, head, "%-24s %10s %6s  %s", "RSS EXPLAINED", "BYTES", "OF RSS",
	    mm.have_rss ? (strcmp(mm.rss_source, "status") ? "from /proc/PID/smaps_rollup"
						       : "from /proc/PID/status")
			: "");
	v->page = rows;
	if (!mm.have_rss) {
		ui_put(y0 + 1, 0, 0, "no RSS: the process is not running "
		    "(counted %s %s, retained~ %s at the end)",
		    mm.counted_net ? "net change since the attach" : "in use",
		    mm.have_counted ? fmt_sbytes(mm.counted_in_use, (char[32]){0}, 32) : "-",
		    fmt_bytes(mm.retained, (char[32]){0}, 32));
		return;
	}
	/* The cgroup beside the process (model/cgroup.h): its charge, limit
	 * and split, then its events and pressure, in the notes. */
	const struct model_cgroup *c = &v->m->cgroup;
	char cg1[192], cg2[192], b1[32], b2[32], b3[32], b4[32];
	if (c->known) {
		snprintf(cg1, sizeof cg1, "cgroup v%d: of max %s; anon %s, file %s; "
			 "%u processes, RSS %s", c->v1 ? 1 : 2,
			 !c->have_max ? "-" : c->max_unlimited ? "unlimited" :
			 fmt_bytes((double)c->max, b1, sizeof b1),
			 c->have_stat ? fmt_bytes((double)c->anon, b2, sizeof b2) : "-",
			 c->have_stat ? fmt_bytes((double)c->file, b3, sizeof b3) : "-",
			 c->nprocs, fmt_bytes((double)c->procs_rss, b4, sizeof b4));
		int k = !c->have_events ? snprintf(cg2, sizeof cg2, "events: -") :
			c->v1 ? snprintf(cg2, sizeof cg2, "events: max (failcnt) %llu, "
					 "oom_kill %llu", (unsigned long long)c->ev_max,
					 (unsigned long long)c->ev_oom_kill) :
			snprintf(cg2, sizeof cg2, "events: high %llu, max %llu, oom_kill %llu",
				 (unsigned long long)c->ev_high, (unsigned long long)c->ev_max,
				 (unsigned long long)c->ev_oom_kill);
		if (k > 0 && (size_t)k < sizeof cg2)
			snprintf(cg2 + k, sizeof cg2 - (size_t)k, c->have_psi ?
				 "; pressure some %.2f%%, full %.2f%% (10 s)" :
				 "; pressure: -", c->some10, c->full10);
	} else {
		snprintf(cg1, sizeof cg1, "cgroup: %s", c->why[0] ? c->why : "not read");
		cg2[0] = '\0';
	}
	/* Each figure's unit in its note: in use counts usable bytes,
	 * estimates requested bytes; the row after them says what the gap
	 * is made of.  A negative unexplained is explained in words, never
	 * as a share of RSS. */
	const struct mem_row r[] = {
		{ "RSS", 1, mm.rss, 1, "resident: what top's RES shows", 0 },
		{ "  anonymous", 1, mm.anon, 1, "heap, mmap, thread stacks", 0 },
		{ "  file", 1, mm.file, 1, "program, libraries, mapped files", 0 },
		{ "  shmem", 1, mm.shmem, 1, "shared memory (the ymtop segment too)", 0 },
		{ "swap", 1, mm.swap, 0, "not in RSS", 0 },
		{ "allocator in use", mm.have_heap, mm.heap_in_use, 1,
		  !mm.have_heap ? (model_heap_missing(v->m, NULL) ?
				   model_heap_missing(v->m, NULL) :
				   "the allocator's statistics are not available")
		  : mm.heap_old ? "usable bytes, the allocator's own statistics; old: not below"
				: "usable bytes, the allocator's own statistics", 0 },
		{ "allocator free", mm.have_heap, mm.heap_free, 1,
		  "free in its arenas, still resident or mapped", 0 },
		{ mm.counted_net ? "counted net change" : "counted in use", mm.have_counted,
		  mm.counted_in_use, !mm.counted_net,
		  !mm.have_counted ? "sampling: frees count objects, not bytes" :
		  mm.counted_net ? "allocated minus freed since the attach (frees of older "
				   "blocks count): not in use" :
		  "usable bytes, malloc family, the agent's exact counters", 0 },
		{ "retained~", 1, mm.retained, 1,
		  "requested bytes, estimated from samples (Stacks view)", 0 },
		{ "  resident", mm.have_resident, mm.retained_resident, 1,
		  mm.have_resident ? "of retained: pages in RAM (pagemap of the live samples)"
				   : mm.resident_why, !mm.have_resident },
		{ "  never touched", mm.have_resident, mm.retained_untouched, 0,
		  "of retained: allocated, no page yet (not in RSS)", 0 },
		{ "  swapped", mm.have_resident, mm.retained_swapped, 0,
		  "of retained: in swap (not in RSS)", 0 },
		{ "  in use - retained", mm.have_gap, mm.gap, 0,
		  mm.have_gap ? mm.gap_why : "usable minus requested bytes", mm.have_gap },
		{ "tracked mmap", mm.have_mmap, mm.mmap_retained, 1,
		  mm.have_mmap ? "requested bytes, anonymous mmap by the program"
			       : "not tracked", 0 },
		{ "  mmap not resident", mm.have_mmap && mm.have_resident,
		  mm.mmap_untouched + mm.mmap_swapped, 0,
		  "of tracked mmap: never touched or swapped (not in RSS)", 0 },
		{ "anonymous unexplained", 1, mm.unexplained, mm.unexplained >= 0,
		  mm.unexplained_why, mm.unexplained < 0 },
		{ "cgroup memory", c->known, (double)c->current, 0, cg1, 1 },
		{ "  cgroup events", 0, 0, 0, cg2, 1 },
	};
	int n = (int)(sizeof r / sizeof *r);
	int y = y0 + 1;
	for (int i = 0; i < n && y < y0 + 1 + rows; i++) {
		char a[32], pct[16] = "", bar[32] = "";
		if (r[i].have && r[i].share && mm.rss > 0) {
			double p = 100.0 * r[i].bytes / mm.rss;
			snprintf(pct, sizeof pct, "%.0f%%", p);
			int w = p > 0 ? (int)lround(p / 5.0) : 0;
			if (w > 20)
				w = 20;
			memset(bar, '#', (size_t)w);
			bar[w] = '\0';
		}
		ui_put(y, 0, i == 0 ? A_BOLD : 0, "%-24s %10s %6s  %-20s ",
		    r[i].what,
		    !r[i].have ? "-" : r[i].bytes < 0 ?
			fmt_sbytes(r[i].bytes, a, sizeof a) : fmt_bytes(r[i].bytes, a, sizeof a),
		    pct, bar);
		if (r[i].wrap)
			y = note(y, getcurx(stdscr), y0 + 1 + rows, r[i].note);
		else
			ui_put(y++, getcurx(stdscr), 0, "%s", r[i].note);
	}
}