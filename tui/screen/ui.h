/*
 * ui: the live screen.  ui.c and ui_draw.c are the only files that touch
 * curses: ui.c owns the terminal, maps keys to VK_* codes for view.c, runs
 * the prompts and the main loop; ui_draw.c draws what the view and model
 * say.
 */
#ifndef YMTOP_UI_H
#define YMTOP_UI_H

#include <sys/types.h>

#include "cli.h"

/* Attach to pid and run the screen until q (or a signal).  The terminal is
 * restored on every way out, fatal errors included.  Returns the exit
 * status. */
int ui_run(const struct options *o, pid_t pid);

#endif
