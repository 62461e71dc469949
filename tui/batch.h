/*
 * batch: reports on a schedule (-b), for scripts and cron.
 */
#ifndef YMTOP_BATCH_H
#define YMTOP_BATCH_H

#include <sys/types.h>

#include "cli.h"

/* Attach to pid and take a snapshot every o->interval seconds,
 * o->iterations times (0: until the process exits).  Every snapshot is
 * written as a report, or with --on-change (o->on_change >= 0) only the
 * first, those whose retained estimate moved by o->on_change percent since
 * the last report written, and the final one when the process exits.
 * Reports go to o->output (placeholders expanded, %n = reports written,
 * through report_save: never overwriting) or to standard output.  A
 * report that cannot be written ends the run with status 1.  Returns the
 * exit status. */
int batch_run(const struct options *o, pid_t pid);

#endif
