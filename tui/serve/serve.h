/*
 * serve: `ymtop --serve [ADDR:]PORT`, the exporter.  An HTTP server
 * (libmicrohttpd) that reads agents' segments and never writes to them:
 *
 *   GET /metrics              every served process in the Prometheus text
 *                             format (report/prometheus.h)
 *   GET /debug/pprof/heap     the -f pprof profile (gzip'd profile.proto)
 *       ?pid=N                of process N (404 when it is not served);
 *                             without pid only when exactly one process is
 *                             served (else 400 and the list)
 *   GET /debug/pprof/         the processes served, one a line
 *
 * Served: the process of -p PID (injected at the start when it has no
 * agent, as -p does everywhere), else every process running the agent that
 * we may read (target_list), looked up again at each update, so that
 * processes that start appear and processes that exit disappear; those
 * that cannot be served (fleet.h: descriptors, memory) are counted in
 * /metrics, ymtop_processes_skipped, with the reason in its help.
 *
 * Three threads.  The update thread alone touches the fleet, its models,
 * the symbols and the aggregate's carry: it runs fleet_update when a
 * request waits for one (or ahead of a scrape expected from the learnt
 * interval), renders /metrics (per_pid too once asked) and the list into
 * finished buffers published whole under a lock (the unit of consistency
 * is the whole fleet: one answer, one complete update), and writes the
 * profiles of /debug/pprof/heap after an update or, past their deadline,
 * between two processes' refreshes (fleet.between: one process's model
 * is whole then).  libmicrohttpd's thread checks a request and answers it
 * at once from an update started ahead for it, else suspends it; the
 * dispatcher thread answers the suspended ones from an update that
 * started after them, or at their deadline from the last complete one
 * (ymtop_update_age_seconds), and resumes them.  Before the first update
 * completes, the answer is what a listing at the start found
 * (ymtop_processes_pending).
 *
 * Bounds against slow or hostile clients: one internal polling thread
 * (epoll or poll) that never blocks on a client (a request waiting for an
 * update is suspended); SERVE_MAX_CONN connections
 * at once, SERVE_MAX_PER_IP from one address; SERVE_TIMEOUT_S without
 * traffic closes a connection; SERVE_CONN_MEMORY bytes per connection for
 * the request line and headers (larger: 431); only GET and HEAD (else 405);
 * malformed requests 400 (strict parsing).
 */
#ifndef YMTOP_SERVE_H
#define YMTOP_SERVE_H

#include "options.h"
#include "util/err.h"

#define SERVE_MAX_CONN    64
#define SERVE_MAX_PER_IP  16
#define SERVE_TIMEOUT_S   10
#define SERVE_CONN_MEMORY (32 * 1024)

/* A request's deadline: X-Prometheus-Scrape-Timeout-Seconds (a positive
 * decimal, at most SERVE_DEADLINE_MAX_S; else 400), or
 * SERVE_DEFAULT_TIMEOUT_S without it (Prometheus's default); the answer
 * comes a tenth of it (a second at least, half of it at most) before. */
#define SERVE_DEFAULT_TIMEOUT_S 10
#define SERVE_DEADLINE_MAX_S    600
/* The scrape interval learnt from a scraper's last SERVE_LEARN /metrics
 * arrivals (SERVE_AHEAD_MIN_S apart at least), for SERVE_SCRAPERS
 * scrapers at once (a scraper: one address, User-Agent and format); the
 * update ahead of the next scrape is planned to be complete
 * SERVE_AHEAD_SLACK_S before it. */
#define SERVE_LEARN         4
#define SERVE_SCRAPERS      8
#define SERVE_AHEAD_MIN_S   1.0
#define SERVE_AHEAD_SLACK_S 0.25
/* ?per_pid=1 is rendered by every update from its first request until
 * SERVE_PER_PID_IDLE updates, and SERVE_PER_PID_IDLE times the interval
 * between its last two requests, went by without one. */
#define SERVE_PER_PID_IDLE  10

/* Serve until SIGINT, SIGTERM or SIGHUP (stop_asked).  One line on stderr
 * gives the address ("ymtop: serving http://127.0.0.1:PORT/metrics").
 * 0 once stopped, or -1 with the reason in e (status 2 for a bad address
 * or web configuration, 1 when it cannot be bound or -p fails). */
int serve_run(const struct options *o, struct ym_err *e);

#endif
