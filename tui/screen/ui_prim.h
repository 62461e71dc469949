/*
 * ui_prim: the drawing primitives of the screen, defined in ui.c (which
 * owns the terminal, as htop's CRT.c) and shared by ui_draw.c,
 * ui_memory.c and host_ui.c, which do not reach into each other: color
 * pairs, UTF-8 or ASCII, clipped printf, filled lines.
 */
#ifndef YMTOP_UI_PRIM_H
#define YMTOP_UI_PRIM_H

#include <curses.h>

enum { C_HEAD = 1, C_COLS, C_SEL, C_ALARM, C_UP, C_DOWN, C_STATUS, C_DIM };

/* After initscr: colors (unless NO_COLOR or none), UTF-8 or ASCII bars. */
void ui_prim_start(void);

/* Color pair's attribute, or mono when there are no colors. */
attr_t ui_attr(int pair, attr_t mono);

/* The terminal takes UTF-8 (block characters), else ASCII. */
int ui_utf8(void);

/* printf at (y, x) with attributes a, clipped to the screen. */
void ui_put(int y, int x, attr_t a, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Row y blank across the screen with attributes a. */
void ui_fill_line(int y, attr_t a);

#endif
