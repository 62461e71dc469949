/*
 * host: the host list, top's process list for the processes running the
 * agent (fleet.h): PID, USER, COMMAND (the process title from
 * /proc/PID/cmdline, so a postmaster, a backend and an nginx worker are
 * told apart), RSS, IN USE (exact, "-" for an injected agent whose counters
 * start at the attach), RETAINED (estimated), ALLOC/s, ALARMS, STATE.
 * Pure data and keys; host_ui.c draws it and runs its loop.
 *
 * `ymtop` with several agent processes and none chosen opens it; Enter
 * opens the selected process's screen, H there comes back.  With
 * --children (-p PID) the list holds PID and the processes forked from it,
 * and `e` merges the rows of one executable into one (a prefork server
 * reads as one program); Enter on such a row shows their stacks merged by
 * display frame (host_merged).
 */
#ifndef YMTOP_HOST_H
#define YMTOP_HOST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fleet.h"

enum host_sort {
	HOST_PID = 0, HOST_USER, HOST_COMMAND, HOST_RSS, HOST_INUSE, HOST_RETAINED,
	HOST_RATE, HOST_ALARMS, HOST_STATE, HOST_NSORT
};

struct host_row {
	pid_t    pid;
	int      nprocs;          /* processes merged into the row (e) */
	char     user[32];
	char     command[256];    /* raw: the drawer escapes it */
	char     exe[64];         /* base name of the executable */
	double   rss, inuse, retained, rate;
	int      inuse_known;
	int      inuse_old;       /* the allocator's figure is not current
				     (model_heap_current): shown marked */
	uint64_t alarms;
	char     state[16];
};

struct host {
	struct fleet f;
	struct host_row *rows;
	int      n;
	enum host_sort sort;
	int      asc;
	int      merge;           /* e: one row per executable */
	int      sel, top;        /* selected row, first row shown */
	pid_t    sel_pid;         /* kept across refreshes */
};

/* root: 0 for every agent process, else --children's root. */
void host_init(struct host *h, pid_t root);
/* fleet_update, then the rows again, sorted; the selection follows its
 * pid.  -1 when out of memory. */
int host_refresh(struct host *h);
/* Sort names for the header ("retained", ...). */
const char *host_sort_name(enum host_sort k);

/* A key (VK_* codes of view.h, or a character): HOST_OPEN (h->sel_pid is
 * the process to open), HOST_QUIT, HOST_REDRAW or HOST_NONE.  rows: lines
 * the list has on screen (for page keys). */
enum { HOST_NONE = 0, HOST_REDRAW, HOST_OPEN, HOST_QUIT, HOST_BACK };
int host_key(struct host *h, int key, int rows);
/* A key in the merged stacks of an executable (host_ui.c): HOST_BACK (H,
 * Esc: the list again), HOST_QUIT (q) or HOST_NONE. */
int host_merged_key(struct host *h, int key);
/* 1 when the list's (merged 0) or the merged view's (merged 1) key table
 * holds key: every key goes through these two tables. */
int host_key_known(int merged, int key);
/* The key lines host_ui.c shows under the list and the merged view; they
 * name only keys of the tables. */
extern const char host_key_line[];
extern const char host_merged_key_line[];

/* The stacks of every process of executable exe (a row's exe) merged by
 * display frame, top o->top by retained (prometheus_merge).  0 with *out
 * (prometheus_merge_free), -1 when out of memory. */
struct prom_group;
struct report_opts;
int host_merged(const struct host *h, const char *exe, const struct report_opts *o,
		struct prom_group **out, size_t *n);

void host_free(struct host *h);

#endif
