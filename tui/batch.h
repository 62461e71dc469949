/*
 * batch: reports on a schedule (-b), for scripts and cron.
 */
#ifndef YMTOP_BATCH_H
#define YMTOP_BATCH_H

#include <sys/types.h>

#include "cli.h"

/* Attach to pid and write reports every o->interval seconds, o->iterations
 * times (0: until the process exits; a final report is written then).
 * Returns the exit status. */
int batch_run(const struct options *o, pid_t pid);

#endif
