/*
 * batch: reports on a schedule (-b), for scripts and cron.
 */
#ifndef YMTOP_BATCH_H
#define YMTOP_BATCH_H

#include <sys/types.h>

#include "options.h"
#include "shm.h"

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

/* Several -p (o->pids, -f prometheus): attach to each as -p does
 * (injecting the agent where it has none) and write every o->interval
 * seconds, o->iterations times (0: until every process exited), one
 * exposition of every process's series, labelled pid and exe as
 * --serve's /metrics?per_pid=1 labels them.  A process that exited is
 * left out of the later reports.  Returns the exit status. */
int batch_run_many(const struct options *o);

/* How long a report waits after an attach for its data: the first report
 * of a freshly injected agent is taken once the agent has run this many
 * seconds (-i when given, else BATCH_SETTLE_S), not at the attach, when it
 * would be empty. */
#define BATCH_SETTLE_S 3.0
double batch_settle(const struct options *o, const struct ym_header *h,
		    uint64_t now_mono_ns);

#endif
