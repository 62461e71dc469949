/*
 * view_rows: the rows of the screen's views, from the model (view_rows.c);
 * used by view.c only.  The accessors the screen reads are declared in
 * view.h.
 */
#ifndef YMTOP_VIEW_ROWS_H
#define YMTOP_VIEW_ROWS_H

#include "view.h"

/* Sort and filter the model's stacks under v's sort and filter
 * (model_sort), then the rows of the Functions and Threads views. */
void view_rows_build(struct view *v);
/* Forget the cached labels: new modules may name unknown frames. */
void view_rows_relabel(struct view *v);
/* Free all the rows and labels (view_free). */
void view_rows_free(struct view *v);

#endif
