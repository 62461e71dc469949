/*
 * options: what ymtop was asked to do, as plain data.  cli.c fills it from
 * the command line; the modes (batch, the screen, --serve) and the code
 * under them read it and never exit on its account.
 */
#ifndef YMTOP_OPTIONS_H
#define YMTOP_OPTIONS_H

#include <stdint.h>
#include <sys/types.h>

#include "sym/frames.h"
#include "report/report.h"

struct options {
	pid_t    pid;            /* -p: the first given */
	/* Every -p given, in order (npids > 1 only with -b -f prometheus:
	 * one exposition of every process's series, batch_run_many). */
	pid_t   *pids;
	int      npids;
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
	uint32_t max_overhead;   /* --max-overhead, in millionths of CPU
				  * time: asked of the agent; 0 not given */
	const char *output;      /* -o pattern, or NULL */
	const char *serve;       /* --serve [ADDR:]PORT, or NULL */
	const char *web_config;  /* --web-config FILE (with --serve), or NULL */
	int      children;       /* --children: -p PID and its forked children */
	int      detach;         /* --detach: with -p, detach the agent and exit */
	double   duration;       /* --duration: with -p, seconds; 0 not given */
	struct frames_rules rules;
};

#define CLI_SNAP_PEAK     1u
#define CLI_SNAP_PRESSURE 2u

#endif
