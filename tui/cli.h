/*
 * cli: ymtop's options, their strict parsing, and the one-line exits.
 *
 * Exit status: 0 success, 1 attach or runtime failure (with the reason and
 * the remedy), 2 usage error.  Every message is one line on stderr.
 */
#ifndef YMTOP_CLI_H
#define YMTOP_CLI_H

#include <signal.h>
#include <sys/types.h>

#include "sym/frames.h"
#include "report/report.h"

struct options {
	pid_t    pid;
	double   delay;          /* -d: screen refresh, seconds */
	double   interval;       /* -i: batch period (default: delay) */
	int      interval_set;
	int      batch;          /* -b */
	long     iterations;     /* -n; -1 when not given */
	int      top;            /* --top */
	int      format_set;
	enum report_format format;
	enum report_weight weight; /* --weight: folded and svg */
	double   on_change;      /* --on-change PCT; < 0 when not given */
	/* --snapshot-on (batch): write a report only when the process
	 * reaches a new peak of at least snap_peak bytes (peak:SIZE), or
	 * when its cgroup's memory.events high, max or oom_kill move
	 * (pressure); and the final one. */
	int      snap_on;        /* CLI_SNAP_* bits; 0 not given */
	uint64_t snap_peak;
	enum model_sort sort;    /* --sort: reports and the screen's first */
	uint64_t rate;           /* --rate: asked of the agent; 0 not given */
	const char *output;      /* -o pattern, or NULL */
	const char *serve;       /* --serve [ADDR:]PORT, or NULL */
	const char *web_config;  /* --web-config FILE (with --serve), or NULL */
	int      children;       /* --children: -p PID and its forked children */
	struct frames_rules rules;
};

#define CLI_SNAP_PEAK     1u
#define CLI_SNAP_PRESSURE 2u

/* Set by SIGINT, SIGTERM and SIGHUP: loops finish their step and return. */
extern volatile sig_atomic_t cli_stop;

void cli_parse(int argc, char **argv, struct options *o);
void cli_free(struct options *o);

/* Print "ymtop: <message>" and exit with code. */
__attribute__((noreturn, format(printf, 2, 3)))
void cli_die(int code, const char *fmt, ...);

#endif
