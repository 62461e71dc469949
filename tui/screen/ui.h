/*
 * ui: the live screen.  ui.c, ui_draw.c, ui_memory.c and host_ui.c are the
 * only files that touch curses: ui.c owns the terminal and the drawing
 * primitives the others share (ui_prim.h), maps keys to VK_* codes for
 * view.c, runs the prompts and the main loop; ui_draw.c draws what the view
 * and model say (ui_memory.c the Memory view); host_ui.c draws and runs the
 * host list (host.h).
 */
#ifndef YMTOP_UI_H
#define YMTOP_UI_H

#include <stdint.h>
#include <sys/types.h>

#include "options.h"

/* Attach to pid and run the screen until q (or a signal).  The terminal is
 * restored on every way out, fatal errors included.  Returns the exit
 * status. */
int ui_run(const struct options *o, pid_t pid);

/* The same from the host list (back non-zero): H returns UI_BACK with the
 * terminal left in curses; q (or a signal) UI_QUIT, terminal restored. */
enum { UI_QUIT = 0, UI_BACK = 1 };
int ui_screen(const struct options *o, pid_t pid, int back);

/* Curses on (once: colors, keypad, locale; again after an endwin). */
void ui_curses_start(void);
/* The next key (ERR when none came): waits until the monotonic time next
 * (view_now_ns), 200 ms at most. */
int ui_getch_until(uint64_t next);
/* VK_* code of a curses key (view.h). */
int ui_map_key(int ch);

/* The host list (host.h): several processes run the agent and none was
 * chosen, or -p PID --children.  Returns the exit status. */
int ui_host_run(const struct options *o, pid_t root);

#endif
