/*
 * stop: the request to stop, set by main's SIGINT, SIGTERM and SIGHUP
 * handler; every loop (batch, the screen, --serve, waits) finishes its
 * step and returns when it is set.
 */
#ifndef YMTOP_UTIL_STOP_H
#define YMTOP_UTIL_STOP_H

#include <signal.h>

extern volatile sig_atomic_t stop_asked;

#endif
