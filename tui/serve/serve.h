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
 * we may read (target_list), looked up again at each request, so that
 * processes that start appear and processes that exit disappear; those
 * that cannot be served (fleet.h: descriptors, memory) are counted in
 * /metrics, ymtop_processes_skipped, with the reason in its help.
 *
 * Bounds against slow or hostile clients: one internal polling thread
 * (epoll or poll) that never blocks on a client; SERVE_MAX_CONN connections
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

/* Serve until SIGINT, SIGTERM or SIGHUP (stop_asked).  One line on stderr
 * gives the address ("ymtop: serving http://127.0.0.1:PORT/metrics").
 * 0 once stopped, or -1 with the reason in e (status 2 for a bad address
 * or web configuration, 1 when it cannot be bound or -p fails). */
int serve_run(const struct options *o, struct ym_err *e);

#endif
