/*
 * ui_draw: the live screen drawn with curses (see ui_draw.c).  Only ui.c
 * calls it; curses is initialized there.
 */
#ifndef YMTOP_UI_DRAW_H
#define YMTOP_UI_DRAW_H

#include <curses.h>

#include "view.h"

/* The whole screen for v, then refresh(). */
void ui_draw(struct view *v);

#endif
