/* The live screen's state without curses (tui/screen/view.c): keys, views, sort,
 * filter, selection, mark, freeze, detail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "keynames.h"
#include "screen/view.h"

#define NST 5

#include "snap.h"

/* Stack i holds retained[i] bytes, allocated alloc[i]; frame 0x1000 + i
 * (tests/lib/snap.h). */
static void snap_make(struct shm_snapshot *s, const double *retained,
		      const double *alloc, double t)
{
	snap_fake(s, NST, 2, retained, alloc, t);
}

struct fixture {
	struct model m;
	struct view v;
	struct sym *sym;
	struct frames_rules rules;
};

static const double R1[NST] = { 0, 100, 300, 200, 50 };
static const double A1[NST] = { 0, 1000, 300, 900, 50 };

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	struct shm_snapshot s;
	model_init(&f->m);
	f->sym = sym_new(NULL);
	view_init(&f->v, &f->m, f->sym, &f->rules, NULL, "/nonexistent");
	snap_make(&s, R1, A1, 0);
	model_update(&f->m, &s);
	view_refresh(&f->v);
	f->v.page = 2;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	view_free(&f->v);
	model_free(&f->m);
	sym_free(f->sym);
	free(f);
	return 0;
}

static void navigation_and_scroll(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	assert_int_equal(view_rows(v), 4);   /* stack 0 never sampled */
	assert_int_equal(view_row_stack(v, 0), 2);   /* most retained first */
	assert_int_equal(view_key(v, VK_DOWN), REACT_REDRAW);
	assert_int_equal(view_key(v, VK_DOWN), REACT_REDRAW);
	assert_int_equal(v->selected, 2);
	assert_int_equal(v->top, 1);   /* page of 2 scrolled */
	view_key(v, VK_END);
	assert_int_equal(v->selected, 3);
	view_key(v, VK_DOWN);
	assert_int_equal(v->selected, 3);   /* clamped */
	view_key(v, VK_HOME);
	assert_int_equal(v->selected, 0);
	assert_int_equal(v->top, 0);
	view_key(v, 'j');
	assert_int_equal(v->selected, 1);
}

static void views_cycle_and_keys_react(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	for (int k = 1; k <= VIEW_COUNT; k++) {
		view_key(v, VK_TAB);
		assert_int_equal(v->kind, k % VIEW_COUNT);
	}
	view_key(v, VK_BTAB);
	assert_int_equal(v->kind, VIEW_MEMORY);   /* the last view */
	view_key(v, VK_TAB);
	assert_int_equal(view_key(v, 'q'), REACT_QUIT);
	assert_int_equal(view_key(v, '/'), REACT_FILTER);
	assert_int_equal(view_key(v, VK_F6), REACT_SORTMENU);
	assert_int_equal(view_key(v, 'x'), REACT_NONE);
	view_key(v, '?');
	assert_true(v->help);
	assert_int_equal(view_key(v, 'z'), REACT_REDRAW);   /* any key closes */
	assert_false(v->help);
}

static void sorting(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	view_key(v, 'T');
	assert_int_equal(v->sort, SORT_ALLOCATED);
	assert_int_equal(view_row_stack(v, 0), 1);
	view_key(v, 'T');   /* again: reversed */
	assert_true(v->asc);
	assert_int_equal(view_row_stack(v, 0), 4);
	view_key(v, 'R');
	assert_int_equal(view_row_stack(v, 0), 2);
	view_key(v, '>');
	assert_int_equal(v->sort, SORT_GROWTH);   /* % skipped: same order */
	view_key(v, '<');
	assert_int_equal(v->sort, SORT_RETAINED);
}

/* S sorts by bytes a second allocated in blocks freed within 10 ms
 * (model/shortlived.h): the stack whose every byte is short-lived first,
 * whatever it retains. */
static void short_lived_sort_key(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	struct model *m = &f->m;
	for (uint32_t i = 1; i < NST; i++)
		m->stacks[i].alloc_rate = 1000;
	/* The histograms are the snapshot's records'. */
	struct ym_stack *r4 = (struct ym_stack *)m->stacks[4].rec;
	struct ym_stack *r1 = (struct ym_stack *)m->stacks[1].rec;
	struct ym_stack *r3 = (struct ym_stack *)m->stacks[3].rec;
	r4->life[0].bytes = 50;               /* all of its 50 allocated bytes */
	r4->life[0].objects_fx = YM_FX_ONE;
	r1->life[4].bytes = 100;              /* 100 of 1000, under 10 ms */
	r1->life[4].objects_fx = YM_FX_ONE;
	r3->life[5].bytes = 900;              /* under 100 ms: not short */
	r3->life[5].objects_fx = YM_FX_ONE;
	view_key(v, 'S');
	assert_int_equal(v->sort, SORT_SHORT);
	assert_int_equal(view_row_stack(v, 0), 4);
	assert_int_equal(view_row_stack(v, 1), 1);
	assert_true(model_key(m, &m->stacks[4], SORT_SHORT) == 1000);
	assert_true(model_key(m, &m->stacks[1], SORT_SHORT) == 100);
	assert_true(model_key(m, &m->stacks[3], SORT_SHORT) == 0);
}

static void filter_and_escape(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	view_set_filter(v, "0x1003");   /* fallback labels are searchable */
	assert_int_equal(view_rows(v), 1);
	assert_int_equal(view_row_stack(v, 0), 3);
	view_key(v, VK_ESC);
	assert_int_equal(view_rows(v), 4);
	assert_string_equal(v->filter, "");
	view_set_filter(v, "no-such-function");
	assert_int_equal(view_rows(v), 0);
	assert_int_equal(view_row_stack(v, 0), UINT32_MAX);
}

static void mark_growth_freeze_detail(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	view_key(v, 'm');
	assert_true(f->m.marked);
	const double r2[NST] = { 0, 100, 300, 900, 50 };
	const double a2[NST] = { 0, 1000, 300, 1600, 50 };
	struct shm_snapshot s;
	snap_make(&s, r2, a2, 1);
	model_update(&f->m, &s);
	view_refresh(v);
	view_key(v, 'G');
	assert_int_equal(view_row_stack(v, 0), 3);
	assert_true(f->m.stacks[3].growth == 700);
	assert_int_equal(v->nhist, 2);
	assert_int_equal(view_key(v, ' '), REACT_REDRAW);
	assert_true(v->frozen);
	assert_int_equal(view_key(v, ' '), REACT_RELOAD | REACT_REDRAW);
	view_key(v, VK_ENTER);
	assert_true(v->detail);
	assert_int_equal(v->detail_stack, 3);
	view_key(v, 'q');   /* q leaves the detail first */
	assert_false(v->detail);
}

static void functions_view_groups(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	view_key(v, VK_TAB);
	assert_int_equal(v->kind, VIEW_FUNCTIONS);
	assert_int_equal(view_rows(v), 4);   /* distinct frames: no grouping */
	assert_int_equal(view_row_stack(v, 0), 2);
	assert_true(v->fns[0].retained == 300);
}

/* A function whose stacks allocate and map memory is two rows: the
 * kinds are never summed, as in every report. */
static void functions_view_keeps_kinds_apart(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	const double r[NST] = { 0, 100, 300, 200, 50 };
	struct shm_snapshot s;
	snap_make(&s, r, r, 10);
	((struct ym_stack *)(s.stacks + 2 * s.stack_stride))->frames[0] = 0x1001;
	model_update(&f->m, &s);
	f->m.stacks[2].kind = YM_KIND_MMAP;      /* stack 1's function, mapped */
	view_refresh(v);
	view_key(v, VK_TAB);
	assert_int_equal(v->kind, VIEW_FUNCTIONS);
	assert_int_equal(view_rows(v), 4);
	assert_int_equal(v->fns[0].kind, YM_KIND_MMAP);
	assert_true(v->fns[0].retained == 300);
	assert_int_equal(v->fns[0].nstacks, 1);
	/* 300 (mmap), 200, 100 (the same function's malloc stack), 50. */
	assert_string_equal(v->fns[0].name, v->fns[2].name);
	assert_int_equal(v->fns[2].kind, YM_KIND_MALLOC);
	assert_true(v->fns[2].retained == 100);
}

static struct ym_stack *stack_of(struct shm_snapshot *s, uint32_t i)
{
	return (struct ym_stack *)(s->stacks + i * s->stack_stride);
}

/* A function over several stacks: AVG is its allocated bytes over its
 * allocated objects (it was a hard-coded 0 B), AGE its oldest live sample
 * in any of its stacks (it was the top stack's only). */
static void functions_avg_and_age_span_stacks(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	const double r[NST] = { 0, 100, 300, 200, 50 };
	const double a[NST] = { 0, 1000, 3000, 900, 50 };
	struct shm_snapshot s;
	snap_make(&s, r, a, 10);                 /* taken at 11 s */
	stack_of(&s, 2)->frames[0] = 0x1001;     /* stacks 1, 2: one function */
	stack_of(&s, 1)->alloc_objects_fx = 10 * YM_FX_ONE;   /* 100 B each */
	stack_of(&s, 2)->alloc_objects_fx = 10 * YM_FX_ONE;   /* 300 B each */
	stack_of(&s, 3)->alloc_objects_fx = 3 * YM_FX_ONE;
	s.live = calloc(2, sizeof *s.live);
	s.nlive = 2;
	/* The oldest sample is in stack 1, which retains less than stack 2. */
	s.live[0] = (struct ym_live){ .addr = 1, .stack = 1, .birth_mono_ns = 2000000000ULL };
	s.live[1] = (struct ym_live){ .addr = 2, .stack = 2, .birth_mono_ns = 5000000000ULL };
	model_update(&f->m, &s);
	view_refresh(v);
	view_key(v, VK_TAB);
	assert_int_equal(v->kind, VIEW_FUNCTIONS);
	assert_int_equal(view_rows(v), 3);
	const struct view_fn *fn = &v->fns[0];
	assert_int_equal(fn->nstacks, 2);
	assert_int_equal(fn->top_stack, 2);
	assert_true(fn->retained == 400);
	assert_true(view_fn_avg(fn) == 200.0);             /* 4000 B / 20 */
	assert_int_equal(view_fn_age(v, fn), 9000000000ULL);   /* born at 2 s */
	assert_true(view_fn_avg(&v->fns[1]) == 300.0);     /* stack 3: 900 / 3 */
	view_set_sort(v, SORT_AGE);
	assert_int_equal(v->fns[0].top_stack, 2);
	view_set_sort(v, SORT_AVG);
	assert_true(view_fn_avg(&v->fns[0]) == 300.0);
}

/* The Functions view sums its stacks' live samples: a function carried
 * by two small-block samples is marked and ranks at the low end of its
 * error, below one of three well-sampled stacks' worth that retains
 * less; neither is marked once it has three samples. */
static void functions_of_few_samples_marked_and_ranked(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	const double R = 524288, w = R + 32;   /* a 64-byte block's sample */
	const double r[NST] = { 0, w, w, 0, 1.5 * w };
	struct shm_snapshot s;
	snap_make(&s, r, r, 10);
	s.hdr.sample_rate = (uint64_t)R;
	stack_of(&s, 2)->frames[0] = 0x1001;     /* stacks 1, 2: one function */
	stack_of(&s, 4)->alloc_samples = 3;      /* 3 samples, some resized */
	model_update(&f->m, &s);
	view_refresh(v);
	view_key(v, VK_TAB);
	assert_int_equal(v->kind, VIEW_FUNCTIONS);
	assert_int_equal(view_rows(v), 2);
	assert_true(v->fns[0].retained == 1.5 * w);
	assert_false(v->fns[0].few);
	assert_int_equal(v->fns[0].live_samples, 3);
	assert_true(v->fns[1].retained == 2 * w);
	assert_true(v->fns[1].few);
	assert_int_equal(v->fns[1].live_samples, 2);
}

/* The Threads view shows the shared slot ("other threads") only when it
 * counted something, as reports do; it was always there, empty. */
static void threads_view_hides_empty_shared_slot(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	struct shm_snapshot s;
	snap_make(&s, R1, A1, 1);
	s.threads = calloc(3, sizeof *s.threads);
	s.nthreads = 3;
	s.threads[0] = (struct ym_thread){ .state = YM_THREAD_SHARED };
	s.threads[1] = (struct ym_thread){ .tid = 42, .state = YM_THREAD_LIVE,
					   .t = { .alloc_objects = 5 } };
	s.threads[2] = (struct ym_thread){ .tid = 43, .state = YM_THREAD_EXITED };
	model_update(&f->m, &s);
	view_refresh(v);
	view_key(v, VK_TAB);
	view_key(v, VK_TAB);
	assert_int_equal(v->kind, VIEW_THREADS);
	assert_int_equal(view_rows(v), 2);
	assert_int_equal(view_row_thread(v, 0)->tid, 42);
	assert_int_equal(view_row_thread(v, 1)->tid, 43);
	assert_null(view_row_thread(v, 2));
	/* The process is gone (pid 0x7fffffff): its live thread is exited. */
	assert_string_equal(model_thread_state(&f->m, view_row_thread(v, 0)), "exited");
	snap_make(&s, R1, A1, 2);
	s.threads = calloc(2, sizeof *s.threads);
	s.nthreads = 2;
	s.threads[0] = (struct ym_thread){ .state = YM_THREAD_SHARED,
					   .t = { .alloc_objects = 1 } };
	s.threads[1] = (struct ym_thread){ .tid = 42, .state = YM_THREAD_LIVE };
	model_update(&f->m, &s);
	view_refresh(v);
	assert_int_equal(view_rows(v), 2);
	assert_int_equal(view_row_thread(v, 0)->state, YM_THREAD_SHARED);
}

/* In a stack's detail the movement keys scroll its frames, within range
 * (it stopped at "... N more frames"); the selection stays. */
static void detail_frames_scroll(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	view_key(v, VK_ENTER);
	assert_true(v->detail);
	int sel = v->selected;
	assert_int_equal(view_detail_frames(v, 30, 10), 0);
	view_key(v, VK_DOWN);
	assert_int_equal(view_detail_frames(v, 30, 10), 1);
	view_key(v, VK_END);
	assert_int_equal(view_detail_frames(v, 30, 10), 20);
	view_key(v, VK_DOWN);
	assert_int_equal(v->detail_top, 20);
	view_key(v, VK_PGUP);
	assert_int_equal(v->detail_top, 11);
	view_key(v, VK_HOME);
	assert_int_equal(v->detail_top, 0);
	view_key(v, VK_UP);
	assert_int_equal(v->detail_top, 0);
	assert_int_equal(v->selected, sel);
	/* A stack that fits never scrolls. */
	view_key(v, VK_DOWN);
	assert_int_equal(view_detail_frames(v, 5, 10), 0);
	/* Leaving and entering again starts at the top. */
	view_key(v, VK_END);
	view_key(v, VK_ESC);
	view_key(v, VK_ENTER);
	assert_int_equal(v->detail_top, 0);
}

/* 't' is a key of the table like the others: names whole or fitted.
 * Left/Right move the stack detail sideways, by half the columns its
 * names had, never before the start nor past the end of the widest. */
static void names_key_and_detail_sideways(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	assert_int_equal(v->full_names, 0);
	assert_int_equal(view_key(v, 't'), REACT_REDRAW);
	assert_int_equal(v->full_names, 1);
	view_key(v, 't');
	assert_int_equal(v->full_names, 0);
	assert_int_equal(view_key(v, VK_RIGHT), REACT_NONE);   /* lists: nothing */
	view_key(v, VK_ENTER);
	assert_int_equal(view_detail_sideways(v, 300, 60), 0);
	view_key(v, VK_RIGHT);
	assert_int_equal(view_detail_sideways(v, 300, 60), 30);
	for (int i = 0; i < 20; i++)
		view_key(v, VK_RIGHT);
	assert_int_equal(view_detail_sideways(v, 300, 60), 240);
	view_key(v, VK_LEFT);
	assert_int_equal(view_detail_sideways(v, 300, 60), 210);
	for (int i = 0; i < 20; i++)
		view_key(v, VK_LEFT);
	assert_int_equal(view_detail_sideways(v, 300, 60), 0);
	view_key(v, VK_RIGHT);
	assert_int_equal(view_detail_sideways(v, 40, 60), 0);   /* all fits */
	/* Entering a stack again starts at its left. */
	view_key(v, VK_RIGHT);
	view_key(v, VK_ESC);
	view_key(v, VK_ENTER);
	assert_int_equal(v->detail_left, 0);
}

/* 'r' asks for a rate; the text is parsed strictly. */
static void rate_key_and_parse(void **state)
{
	struct fixture *f = *state;
	uint64_t r;
	/* No reader (and no live process): refused with a status. */
	assert_int_equal(view_key(&f->v, 'r'), REACT_REDRAW);
	assert_int_equal(view_set_rate(&f->v, "4096"), -1);
	assert_int_equal(fmt_parse_bytes("4096", 2, 1ULL << 40, &r), 0);
	assert_true(r == 4096);
	assert_int_equal(fmt_parse_bytes("64k", 2, 1ULL << 40, &r), 0);
	assert_true(r == 65536);
	assert_int_equal(fmt_parse_bytes("2MiB", 2, 1ULL << 40, &r), 0);
	assert_true(r == 2 << 20);
	assert_int_equal(fmt_parse_bytes("1", 2, 1ULL << 40, &r), -1);
	assert_int_equal(fmt_parse_bytes("2T", 2, 1ULL << 40, &r), -1);
	assert_int_equal(fmt_parse_bytes("4096 ", 2, 1ULL << 40, &r), -1);
	assert_int_equal(fmt_parse_bytes("-4096", 2, 1ULL << 40, &r), -1);
	assert_int_equal(fmt_parse_bytes("", 2, 1ULL << 40, &r), -1);
	assert_int_equal(fmt_parse_bytes("99999999999999999999", 2, 1ULL << 40, &r), -1);
	assert_int_equal(fmt_parse_bytes("2048G", 2, 1ULL << 40, &r), -1);
	assert_int_equal(fmt_parse_bytes("1024G", 2, 1ULL << 40, &r), 0);
}

static void write_failure_is_a_status(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(view_write_file(&f->v, 's'), -1);
	assert_non_null(strstr(f->v.status, "/nonexistent"));
}

/* H goes back to the host list through the key table, also over the help
 * screen; without a host list it is an ordinary key (help closes). */
static void back_key_in_the_table(void **state)
{
	struct fixture *f = *state;
	struct view *v = &f->v;
	assert_int_equal(view_key(v, 'H'), REACT_NONE);
	v->help = 1;
	assert_int_equal(view_key(v, 'H'), REACT_REDRAW);
	assert_int_equal(v->help, 0);
	v->back = 1;
	assert_int_equal(view_key(v, 'H'), REACT_BACK);
	v->help = 1;
	assert_int_equal(view_key(v, 'H'), REACT_BACK);
}

/* Every key the help screen and the status line name is a row of the key
 * table: a key read outside it (a loop or a switch of its own) fails here. */
static void help_names_only_table_keys(void **state)
{
	(void)state;
	int named = 0;
	for (int i = 0; i < VIEW_HELP_LINES; i++) {
		int r = keynames_check(view_help_text[i], 0, view_key_known);
		if (r < 0)
			fail_msg("help line '%s': word %d names a key the table lacks",
				 view_help_text[i], -r - 1);
		named += r;
	}
	assert_true(named >= 40);
	/* ? q Tab Enter / < > m s f */
	assert_int_equal(keynames_check(view_key_line, 1, view_key_known), 10);
	assert_false(view_key_known('x'));
}

/* X asks the screen to detach the agent (ui.c confirms first); x is no
 * key. */
static void detach_key(void **state)
{
	(void)state;
	struct view v;
	memset(&v, 0, sizeof v);
	assert_true(view_key_known('X'));
	assert_int_equal(view_key(&v, 'X'), REACT_DETACH);
}

/* The sort menu's keys go through a table too. */
static void sort_menu_keys(void **state)
{
	(void)state;
	int sel = 0;
	assert_int_equal(view_menu_key(VK_UP, &sel, 3), MENU_MOVE);
	assert_int_equal(sel, 0);
	assert_int_equal(view_menu_key(VK_DOWN, &sel, 3), MENU_MOVE);
	assert_int_equal(view_menu_key(VK_DOWN, &sel, 3), MENU_MOVE);
	assert_int_equal(view_menu_key(VK_DOWN, &sel, 3), MENU_MOVE);
	assert_int_equal(sel, 2);
	assert_int_equal(view_menu_key(VK_UP, &sel, 3), MENU_MOVE);
	assert_int_equal(sel, 1);
	assert_int_equal(view_menu_key(VK_ENTER, &sel, 3), MENU_PICK);
	assert_int_equal(view_menu_key(VK_ESC, &sel, 3), MENU_CLOSE);
	assert_int_equal(view_menu_key('q', &sel, 3), MENU_CLOSE);
	assert_int_equal(view_menu_key(VK_F6, &sel, 3), MENU_CLOSE);
	assert_int_equal(view_menu_key('R', &sel, 3), MENU_NONE);
	assert_int_equal(sel, 1);
}

/* A prompt's editing keys go through a table; other printable keys are
 * text, cut at the buffer's size. */
static void prompt_keys(void **state)
{
	(void)state;
	char buf[4] = "";
	assert_int_equal(view_prompt_key('a', buf, sizeof buf), PROMPT_MORE);
	assert_int_equal(view_prompt_key('b', buf, sizeof buf), PROMPT_MORE);
	assert_int_equal(view_prompt_key('c', buf, sizeof buf), PROMPT_MORE);
	assert_int_equal(view_prompt_key('d', buf, sizeof buf), PROMPT_MORE);
	assert_string_equal(buf, "abc");
	assert_int_equal(view_prompt_key(VK_BACKSPACE, buf, sizeof buf), PROMPT_MORE);
	assert_string_equal(buf, "ab");
	assert_int_equal(view_prompt_key(VK_TAB, buf, sizeof buf), PROMPT_MORE);
	assert_int_equal(view_prompt_key(VK_REDRAW, buf, sizeof buf), PROMPT_MORE);
	assert_string_equal(buf, "ab");
	assert_int_equal(view_prompt_key(VK_RESIZE, buf, sizeof buf), PROMPT_REDRAW);
	assert_int_equal(view_prompt_key(21, buf, sizeof buf), PROMPT_MORE);   /* ^U */
	assert_string_equal(buf, "");
	assert_int_equal(view_prompt_key(VK_BACKSPACE, buf, sizeof buf), PROMPT_MORE);
	assert_string_equal(buf, "");
	assert_int_equal(view_prompt_key(VK_ENTER, buf, sizeof buf), PROMPT_APPLY);
	assert_int_equal(view_prompt_key(VK_ESC, buf, sizeof buf), PROMPT_CANCEL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(help_names_only_table_keys),
		cmocka_unit_test(sort_menu_keys),
		cmocka_unit_test(detach_key),
		cmocka_unit_test(prompt_keys),
		cmocka_unit_test_setup_teardown(navigation_and_scroll, setup, teardown),
		cmocka_unit_test_setup_teardown(views_cycle_and_keys_react, setup, teardown),
		cmocka_unit_test_setup_teardown(sorting, setup, teardown),
		cmocka_unit_test_setup_teardown(short_lived_sort_key, setup, teardown),
		cmocka_unit_test_setup_teardown(filter_and_escape, setup, teardown),
		cmocka_unit_test_setup_teardown(mark_growth_freeze_detail, setup, teardown),
		cmocka_unit_test_setup_teardown(functions_view_groups, setup, teardown),
		cmocka_unit_test_setup_teardown(functions_view_keeps_kinds_apart, setup, teardown),
		cmocka_unit_test_setup_teardown(write_failure_is_a_status, setup, teardown),
		cmocka_unit_test_setup_teardown(functions_avg_and_age_span_stacks, setup, teardown),
		cmocka_unit_test_setup_teardown(threads_view_hides_empty_shared_slot, setup, teardown),
		cmocka_unit_test_setup_teardown(detail_frames_scroll, setup, teardown),
		cmocka_unit_test_setup_teardown(back_key_in_the_table, setup, teardown),
		cmocka_unit_test_setup_teardown(rate_key_and_parse, setup, teardown),
		cmocka_unit_test_setup_teardown(names_key_and_detail_sideways, setup, teardown),
		cmocka_unit_test_setup_teardown(functions_of_few_samples_marked_and_ranked,
						setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
