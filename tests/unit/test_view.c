/* The live screen's state without curses (tui/view.c): keys, views, sort,
 * filter, selection, mark, freeze, detail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

#define NST 5

/* Stack i holds retained[i] bytes, allocated alloc[i]; frame 0x1000 + i. */
static void snap_make(struct shm_snapshot *s, const double *retained,
		      const double *alloc, double t)
{
	memset(s, 0, sizeof *s);
	s->hdr.pid = 0x7fffffff;
	s->hdr.sample_rate = 4096;
	s->hdr.max_depth = 2;
	s->taken_mono_ns = (uint64_t)(t * 1e9) + 1000000000ULL;
	s->stack_stride = shm_stack_stride(2);
	s->nstacks = NST;
	s->stacks = calloc(NST, s->stack_stride);
	for (uint32_t i = 0; i < NST; i++) {
		struct ym_stack *st = (struct ym_stack *)(s->stacks + i * s->stack_stride);
		st->hash = 10 + i;
		st->depth = 1;
		st->frames[0] = 0x1000 + i;
		st->alloc_samples = alloc[i] > 0;
		st->alloc_bytes = (uint64_t)alloc[i];
		st->free_bytes = (uint64_t)(alloc[i] - retained[i]);
	}
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
	assert_int_equal(v->kind, VIEW_ALARMS);
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

static void write_failure_is_a_status(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(view_write_file(&f->v, 's'), -1);
	assert_non_null(strstr(f->v.status, "/nonexistent"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(navigation_and_scroll, setup, teardown),
		cmocka_unit_test_setup_teardown(views_cycle_and_keys_react, setup, teardown),
		cmocka_unit_test_setup_teardown(sorting, setup, teardown),
		cmocka_unit_test_setup_teardown(filter_and_escape, setup, teardown),
		cmocka_unit_test_setup_teardown(mark_growth_freeze_detail, setup, teardown),
		cmocka_unit_test_setup_teardown(functions_view_groups, setup, teardown),
		cmocka_unit_test_setup_teardown(write_failure_is_a_status, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
