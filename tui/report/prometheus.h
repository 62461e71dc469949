/*
 * prometheus: the model in the Prometheus text exposition format (0.0.4),
 * for `-f prometheus` (node_exporter's textfile collector) and for
 * `ymtop --serve` (serve/serve.c), which writes several processes at once.
 *
 * Metric families, each with its HELP and TYPE lines once, its series
 * grouped (the format requires it):
 *
 *   per process, labels pid, exe (the executable's base name), or in
 *   aggregate (prometheus_write_agg) per exe and cgroup:
 *     ymtop_process_retained_bytes          gauge   (estimate, requested
 *                                                    bytes, malloc family)
 *     ymtop_process_mmap_retained_bytes     gauge   (estimate, the program's
 *                                                    anonymous mappings; only
 *                                                    when the agent tracks
 *                                                    them, ABI 6 and later)
 *     ymtop_process_in_use_bytes            gauge   (usable bytes; only when the
 *                                                    agent ran from the start:
 *                                                    injected, frees of older
 *                                                    blocks would count)
 *     ymtop_process_rss_bytes               gauge   (while it runs)
 *     ymtop_process_allocated_bytes_total   counter (exact)
 *     ymtop_process_allocations_total       counter (exact)
 *     ymtop_process_alarms_total            counter
 *     ymtop_process_sample_rate_bytes       gauge   (the rate in force;
 *                                                    aggregated: the longest)
 *     ymtop_process_requested_sample_rate_bytes gauge (asked for; ABI 9)
 *     ymtop_process_cost_budget_percent     gauge   (only with a budget)
 *     ymtop_process_dropped_total           counter, label reason
 *                                           (stacks, live, busy, threads,
 *                                           modules)
 *     ymtop_stack_series_withheld          gauge   (see prometheus_write_agg)
 *   per stack, labels pid, exe (or exe, cgroup), kind ("malloc" or "mmap"), function,
 *   location ("file:line" of the display frame, or the module's base name
 *   when there is no line); estimates in requested bytes:
 *     ymtop_stack_retained_bytes            gauge
 *     ymtop_stack_allocated_bytes_total     counter
 *
 * Stacks sharing a kind and a display frame (function and location, after
 * escaping and truncation) are one series, their values summed: no
 * duplicate series.  Only the top N such groups by retained bytes get
 * their own series (o->top; <= 0: PROM_TOP_DEFAULT); the rest are summed
 * into one series per kind with function="(other)", location="".
 * Cardinality per label set is therefore at most N + 4 stack series per
 * family (with the "(unresolved)" ones, below) plus 18 process series
 * and the unseen gauges.  Per label set and kind the retained
 * stack series (each rounded down) add up to no more than the process
 * series (ymtop_process_retained_bytes for malloc,
 * ymtop_process_mmap_retained_bytes for mmap); the estimates being whole
 * bytes, to exactly it.
 * Each stack's labels are kept in its model (m->cache) between writes and
 * named again only when the stack's frames, the symbolizer's state
 * (sym_epoch) or the rules change: a write of a model whose stacks are
 * named costs no symbolization and one string copy per group.
 * Label values: at most PROM_LABEL_MAX bytes (cut at a character boundary,
 * "..." appended), invalid UTF-8 and control characters as '?', and
 * backslash, double quote and newline escaped as the format says.
 */
#ifndef YMTOP_PROMETHEUS_H
#define YMTOP_PROMETHEUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"

#define PROM_TOP_DEFAULT 50
#define PROM_LABEL_MAX   200

/* One process to write: its model, its symbolizer and, for the
 * aggregate writer, its cgroup (NULL: read from /proc/PID/cgroup while
 * the process runs, proc_cgroup; "" when unknown). */
struct prom_source {
	struct model *m;
	struct sym   *s;
	const char   *cgroup;
};

/* Write n processes as one exposition.  0, or -1 when writing failed or
 * memory ran out (errno set). */
int prometheus_write_many(FILE *f, const struct prom_source *src, size_t n,
			  const struct report_opts *o);

/* The stacks of several processes of one program (a prefork server's
 * master and workers: their addresses agree, as fork keeps the mappings)
 * grouped together by kind and display frame, as the ymtop_stack_*
 * series group one process's: the top N (o->top) by retained, largest
 * first, then an "(other)" for each kind that has more.  Labels escaped as above.  0 with *out
 * (prometheus_merge_free), or -1 when out of memory. */
struct prom_group {
	char    *function, *location;   /* escaped label values, owned */
	uint32_t kind;                  /* YM_KIND_MALLOC or YM_KIND_MMAP */
	double   retained, allocated;
	int      withheld;              /* the exporter's: 0 in these */
};
int prometheus_merge(const struct prom_source *src, size_t n,
		     const struct report_opts *o, struct prom_group **out,
		     size_t *nout);
void prometheus_merge_free(struct prom_group *g, size_t n);

/* Aggregate: the series of the processes sharing an executable (base
 * name) and a cgroup summed into one, labels exe and cgroup and no pid,
 * so that programs whose pids churn (a PostgreSQL backend per
 * connection, recycled workers) keep a bounded set of series.  Stack
 * series are merged as prometheus_merge does, top N per group.
 *
 * Counters stay counters across exits: carry (the scrape loop's, from
 * prom_carry_new) remembers each process's counters at the last write
 * and adds those of a process that is gone (or restarted: a reused pid,
 * a counter that went back) to its group's, so that a group's counter
 * never falls; what a process counted between its last scrape and its
 * exit is not seen.  Groups are kept while they have a process or
 * carried counters, at most PROM_CARRY_KEYS (then the first group
 * without a process gives its slot up: its series end).  With carry NULL
 * (one write) the counters are the running processes' sums.  The stack
 * allocation estimates, which carry cannot follow per stack, are a gauge
 * here (ymtop_stack_allocated_bytes): they fall when a process exits.
 *
 * Both writers withhold stack groups whose display frame has no name (an
 * address "[module+0x...]" while symbols are pending or absent): their
 * bytes go into function="(unresolved)" (one per kind, not counted in
 * top N) and their number into ymtop_stack_series_withheld, so that the
 * stack series still add up to the process series. */
#define PROM_CARRY_KEYS 4096
struct prom_carry;
struct prom_carry *prom_carry_new(void);
void prom_carry_free(struct prom_carry *c);
int prometheus_write_agg(FILE *f, const struct prom_source *src, size_t n,
			 const struct report_opts *o, struct prom_carry *carry);
/* What prometheus_write_agg does to carry, without writing: for the
 * scrapes answered per pid, so that an exit between two aggregate
 * scrapes is still seen.  0, or -1 when out of memory. */
int prom_carry_update(struct prom_carry *c, const struct prom_source *src,
		      size_t n);

/* The registry's writer: one process. */
int prometheus_write(FILE *f, struct model *m, struct sym *s,
		     const struct report_opts *o);

/* A label value as the format wants it, into buf (at least
 * 2 * PROM_LABEL_MAX + 8 bytes): bounded, valid UTF-8, escaped. */
#define PROM_LABEL_BUF (2 * PROM_LABEL_MAX + 8)
const char *prometheus_label(const char *raw, char *buf, size_t len);

#endif
