/*
 * view: the state of the live screen, without curses.
 *
 * Which view is shown (Stacks, Functions, Threads, Lifetimes, Alarms), the
 * sort, the filter, the selection and scroll position, the mark, freezing,
 * the alarm banner, history for the sparklines, and the rows each view
 * shows.  Keys arrive as VK_* codes (ui.c maps curses keys to them) and go
 * through a table to actions, which return a reaction for the main loop.
 * Everything here is unit-tested; ui.c only draws what this says.
 */
#ifndef YMTOP_VIEW_H
#define YMTOP_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "sym/frames.h"
#include "model/model.h"
#include "shm.h"
#include "sym/sym.h"

enum view_kind {
	VIEW_STACKS = 0,
	VIEW_FUNCTIONS,
	VIEW_THREADS,
	VIEW_LIFETIMES,
	VIEW_ALARMS,
	VIEW_MEMORY,         /* RSS explained (ui_memory.h) */
	VIEW_COUNT
};

/* Keys, independent of curses.  Printable keys are their ASCII code. */
enum {
	VK_UP = 0x100, VK_DOWN, VK_PGUP, VK_PGDN, VK_HOME, VK_END, VK_LEFT, VK_RIGHT,
	VK_ENTER, VK_ESC, VK_TAB, VK_BTAB, VK_F6, VK_RESIZE, VK_REDRAW, VK_BACKSPACE,
	VK_MAX
};

/* Reactions: what the main loop does after a key. */
enum {
	REACT_NONE    = 0,
	REACT_REDRAW  = 1,       /* draw again */
	REACT_RELOAD  = 2,       /* take a new snapshot now */
	REACT_QUIT    = 4,
	REACT_FILTER  = 8,       /* read a filter string (ui_prompt) */
	REACT_SORTMENU = 16,     /* show the sort menu */
	REACT_RATE    = 32,      /* read a sample rate (ui prompt) */
	REACT_BACK    = 64,      /* H: back to the host list (host_ui.c) */
	REACT_DETACH  = 128      /* X: detach the agent, once confirmed (ui.c) */
};

#define VIEW_HISTORY 120     /* samples kept for sparklines */
#define VIEW_SIDEWAYS_STEP 20 /* least columns per Left/Right in the stack detail */

struct view;

/* A row of the Functions view: stacks grouped by display frame.  Sums
 * over its stacks, but for AVG (view_fn_avg: allocated bytes / allocated
 * objects, the Stacks view's average allocation size) and AGE (the oldest
 * live sample of any of its stacks). */
struct view_fn {
	const char *name;        /* display frame label (owned by the view) */
	uint32_t kind;           /* YM_KIND_*: a function's mmap and malloc
				    stacks are two rows, as in the reports */
	double retained, retained_objects, alloc, alloc_objects, rate, growth;
	double short_rate;       /* model_short_rate summed */
	double resident;         /* the stacks' resident_bytes summed */
	uint64_t oldest_birth_ns;  /* CLOCK_MONOTONIC; 0 when none live */
	uint32_t nstacks;
	uint32_t top_stack;      /* the stack retaining most */
	uint64_t live_samples;   /* the samples behind retained */
	int      few;            /* retained is marked (model_few) */
	double   rank;           /* what sorting by retained uses (model_rank) */
};

double view_fn_avg(const struct view_fn *f);
/* Age in ns of the function's oldest live sample at snapshot time. */
uint64_t view_fn_age(const struct view *v, const struct view_fn *f);

struct view {
	struct model *m;
	struct sym   *sym;
	const struct frames_rules *rules;
	struct shm_reader *reader;   /* for pause/resume; may be NULL */
	const char   *outdir;        /* where s and f write ("." default) */

	enum view_kind kind;
	enum model_sort sort;
	int      asc;
	char     filter[128];
	int      selected;           /* row index in the current view */
	int      top;                /* first row shown */
	int      page;               /* rows that fit, set by ui */
	int      frozen;
	int      detail;             /* showing one stack in full */
	uint32_t detail_stack;
	/* The detail view's frames: first shown, how many the stack has and
	 * how many fit (both set by ui when it draws), for scrolling. */
	int      detail_top;
	int      detail_frames;
	int      detail_page;
	int      help;
	int      full_names;         /* t: list rows show names whole */
	int      growing_only;       /* g: only stacks whose trend is growing */
	int      detail_left;        /* detail view: columns scrolled sideways */
	int      detail_room;        /* and the columns its names had, set by ui */
	uint64_t alarms_seen;        /* banner dismissed up to this count */
	int      paused;             /* as last requested by us */
	int      back;               /* opened from the host list: H goes back */

	/* Retained bytes over time: total and per stack (ring buffers). */
	double   hist[VIEW_HISTORY];
	uint32_t nhist;
	float   *stack_hist;         /* nstack_hist * VIEW_HISTORY */
	uint32_t nstack_hist;

	/* Per-stack display label, search text and Functions-view group
	 * (frames_group_label), cached by stack id. */
	char   **label;
	char   **search;
	char   **group;
	uint32_t ncache;
	uint32_t cache_modules;

	struct view_fn *fns;
	uint32_t nfns;

	/* Threads view rows: the slots reports list (model_thread_listed). */
	uint32_t *thr;
	uint32_t nthr;

	char     status[512];
	uint64_t status_until_ns;
};

void view_init(struct view *v, struct model *m, struct sym *s,
	       const struct frames_rules *rules, struct shm_reader *r,
	       const char *outdir);
void view_free(struct view *v);

/* After model_update: re-sort, re-filter, extend history, keep the
 * selection on the same stack when it still exists. */
void view_refresh(struct view *v);

/* Handle one key; returns REACT_* bits. */
int view_key(struct view *v, int key);
/* 1 when view_key's key table holds key: every key goes through it. */
int view_key_known(int key);
/* The help screen's lines and the status line's key hint; they name only
 * keys of the key table. */
#define VIEW_HELP_LINES 25
extern const char *const view_help_text[VIEW_HELP_LINES];
extern const char view_key_line[];
/* A key in the sort menu (ui.c), sel its selected line of n:
 * MENU_MOVE (sel moved), MENU_PICK (Enter), MENU_CLOSE (Esc, q, F6) or
 * MENU_NONE. */
enum { MENU_NONE = 0, MENU_MOVE, MENU_PICK, MENU_CLOSE };
int view_menu_key(int key, int *sel, int n);
/* A key in a prompt's line (the filter, the sample rate; ui.c) editing
 * buf of size len: PROMPT_APPLY (Enter), PROMPT_CANCEL (Esc),
 * PROMPT_REDRAW (the terminal resized) or PROMPT_MORE.  Backspace and ^U
 * erase; any other printable character is text typed. */
enum { PROMPT_MORE = 0, PROMPT_APPLY, PROMPT_CANCEL, PROMPT_REDRAW };
int view_prompt_key(int key, char *buf, size_t len);

/* Apply a filter string (empty clears) or a sort column. */
void view_set_filter(struct view *v, const char *s);
void view_set_sort(struct view *v, enum model_sort key);

/* Rows in the current view, and the stack behind a row (Stacks and
 * Functions views; UINT32_MAX otherwise). */
int view_rows(const struct view *v);
uint32_t view_row_stack(const struct view *v, int row);
/* The thread slot behind a Threads view row, or NULL. */
const struct ym_thread *view_row_thread(const struct view *v, int row);

/* The detail view's frames: ui says how many there are and how many rows
 * fit; the first frame to show comes back, within range. */
int view_detail_frames(struct view *v, int nframes, int page);

/* The detail view's sideways scroll: ui says how wide its widest name
 * text is and how many columns it has for it; the columns to skip come
 * back, within range (the end of the widest stays in view). */
int view_detail_sideways(struct view *v, int widest, int room);

/* Ask the agent for a new sample rate from text typed on the screen
 * (fmt_parse_bytes); sets the status line.  0, or -1 refused. */
int view_set_rate(struct view *v, const char *text);

/* The symbolizer has new names (a debug file arrived, sym_poll): relabel
 * the rows and sort again, without a new snapshot. */
void view_symbols_changed(struct view *v);

/* The cached "function (file:line)" label of a stack. */
const char *view_label(struct view *v, uint32_t stack);

/* Write a snapshot: text report (kind 's') or folded stacks ('f') into
 * outdir, named ymtop-<pid>-<exe>-<time>.<ext>, never overwriting.  Sets
 * the status line; returns 0 or -1. */
int view_write_file(struct view *v, int kind);

/* CLOCK_MONOTONIC in ns: the clock of the status line's expiry and of
 * the screen's refreshes. */
uint64_t view_now_ns(void);

/* Status line text (empty when expired). */
const char *view_status(const struct view *v, uint64_t now_ns);
void view_set_status(struct view *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

const char *view_kind_name(enum view_kind k);
/* The tab's name where the full names do not fit (narrow terminals). */
const char *view_kind_abbrev(enum view_kind k);
const char *view_sort_name(enum model_sort k);

/* The newest alarm not yet dismissed, or NULL. */
const struct ym_alarm *view_alarm(const struct view *v);

#endif
