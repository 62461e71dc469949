/*
 * ui_memory: the Memory view ("RSS explained", model/memory.h): RSS as the
 * kernel splits it beside the allocator's figures, the agent's counted in
 * use, the retained estimate and tracked mmap, each with its share of RSS.
 * Curses code, called by ui_draw.c; draws with ui.c's primitives
 * (ui_prim.h).
 */
#ifndef YMTOP_UI_MEMORY_H
#define YMTOP_UI_MEMORY_H

#include <curses.h>

#include "view.h"

/* Draw from row y0, at most rows rows plus the column header; head: the
 * column header's attribute. */
void ui_draw_memory(struct view *v, int y0, int rows, attr_t head);

#endif
