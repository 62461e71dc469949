/*
 * ui_draw: the live screen drawn with curses (see ui_draw.c).  Only ui.c
 * calls it; curses is initialized there.
 */
#ifndef YMTOP_UI_DRAW_H
#define YMTOP_UI_DRAW_H

#include <curses.h>

#include "view.h"

/* After initscr: colors (unless NO_COLOR or none), UTF-8 or ASCII bars. */
void ui_draw_start(void);

/* The whole screen for v, then refresh(). */
void ui_draw(struct view *v);

/* printf at (y, x) with attributes a, clipped to the screen. */
void ui_put(int y, int x, attr_t a, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
