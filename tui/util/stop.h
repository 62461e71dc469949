/*
 * stop: the request to stop, set by main's SIGINT, SIGTERM and SIGHUP
 * handler; every loop (batch, the screen, --serve, waits) finishes its
 * step and returns when it is set.
 */
#ifndef YMTOP_UTIL_STOP_H
#define YMTOP_UTIL_STOP_H

#include <stdatomic.h>

/* Atomic (lock-free, so safe to set from a signal handler): ymtop
 * --serve's update thread reads it while the handler runs on another. */
extern atomic_int stop_asked;

#endif
