/*
 * ui_memory: the Memory view (ui_memory.h).
 */
#include <math.h>
#include <string.h>

#include "fmt.h"
#include "model/memory.h"
#include "ui_draw.h"
#include "ui_memory.h"

struct mem_row {
	const char *what;
	int have;
	double bytes;
	int share;          /* show its share of RSS */
	const char *note;
};

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
		    "(counted in use %s, retained~ %s at the end)",
		    mm.have_counted ? fmt_sbytes(mm.counted_in_use, (char[32]){0}, 32) : "-",
		    fmt_bytes(mm.retained, (char[32]){0}, 32));
		return;
	}
	const struct mem_row r[] = {
		{ "RSS", 1, mm.rss, 1, "resident: what top's RES shows" },
		{ "  anonymous", 1, mm.anon, 1, "heap, mmap, thread stacks" },
		{ "  file", 1, mm.file, 1, "program, libraries, mapped files" },
		{ "  shmem", 1, mm.shmem, 1, "shared memory (the ymtop segment too)" },
		{ "swap", 1, mm.swap, 0, "not in RSS" },
		{ "allocator in use", mm.have_heap, mm.heap_in_use, 1,
		  !mm.have_heap ? "the allocator's statistics are not available"
		  : mm.heap_old ? "the allocator's own statistics, old: not below"
				: "the allocator's own statistics" },
		{ "allocator free", mm.have_heap, mm.heap_free, 1,
		  "free in its arenas, still resident or mapped" },
		{ "counted in use", mm.have_counted, mm.counted_in_use, 1,
		  mm.have_counted ? "malloc family, the agent's exact counters"
				  : "sampling: frees count objects, not bytes" },
		{ "retained~", 1, mm.retained, 1, "estimated from samples (Stacks view)" },
		{ "tracked mmap", mm.have_mmap, mm.mmap_retained, 1,
		  mm.have_mmap ? "anonymous mmap by the program" : "not tracked" },
		{ "anonymous unexplained", 1, mm.unexplained, 1,
		  "anonymous minus heap and tracked mmap" },
	};
	int n = (int)(sizeof r / sizeof *r);
	for (int i = 0; i < n && i < rows; i++) {
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
		ui_put(y0 + 1 + i, 0, i == 0 ? A_BOLD : 0, "%-24s %10s %6s  %-20s %s",
		    r[i].what,
		    !r[i].have ? "-" : i == n - 1 || r[i].bytes < 0 ?
			fmt_sbytes(r[i].bytes, a, sizeof a) : fmt_bytes(r[i].bytes, a, sizeof a),
		    pct, bar, r[i].note);
	}
}
