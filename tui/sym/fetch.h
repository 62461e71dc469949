/*
 * fetch: separate debug files from debuginfod servers, with a time bound,
 * never on the caller's thread.
 *
 * libdw asks debuginfod itself (dwfl_standard_find_debuginfo, through the
 * libdebuginfod it dlopens) when DEBUGINFOD_URLS is set, but synchronously
 * and unbounded: a server that accepts and never answers held a batch
 * report for minutes, and SIGTERM waited with it.  So ymtop takes
 * DEBUGINFOD_URLS out of its own environment at start (fetch_setup: libdw's
 * client then answers ENOSYS at once, before any network or cache), and
 * each lookup runs here in a child process that dlopens libdebuginfod with
 * the URLs put back.  A child is killed when its time is up, when ymtop
 * stops (fetch_stop_all), or never waited for: nothing ymtop does can block
 * on a server.
 *
 * Bounds: FETCH_MAX_SECONDS per lookup, DEBUGINFOD_TIMEOUT (and
 * DEBUGINFOD_MAXTIME) when smaller; FETCH_MAX_CHILDREN at once; each
 * build-id is asked once per run: one that failed or timed out is not
 * asked again.  The files land in libdebuginfod's cache
 * (DEBUGINFOD_CACHE_PATH), which its later runs read first.
 *
 * Process-wide state (the environment is), used from one thread.
 */
#ifndef YMTOP_SYM_FETCH_H
#define YMTOP_SYM_FETCH_H

#include <stddef.h>
#include <stdint.h>

#define FETCH_MAX_SECONDS  10.0
#define FETCH_MAX_CHILDREN 4
#define FETCH_MAX_ENTRIES  512  /* build-ids remembered; beyond: not asked */

enum fetch_state {
	FETCH_NONE = 0,     /* never asked */
	FETCH_WAITING,      /* queued */
	FETCH_RUNNING,      /* a child asks the servers */
	FETCH_FOUND,        /* path below */
	FETCH_FAILED,       /* not found, error or timed out: not asked again */
};

/* Once, before libdw may look anything up: take DEBUGINFOD_URLS out of the
 * environment (kept for the children).  Idempotent. */
void fetch_setup(void);

/* Are servers configured (DEBUGINFOD_URLS was set and not empty)? */
int fetch_enabled(void);

/* The state of build-id id[0..len); FETCH_NONE queues it (name: for the
 * progress line).  *path is set for FETCH_FOUND (owned here, valid until
 * exit). */
enum fetch_state fetch_want(const uint8_t *id, uint32_t len, const char *name,
			    const char **path);

/* Reap finished children, kill those past their time, start queued ones.
 * Returns how many lookups have found a file so far (it grows when a new
 * file arrived).  Never blocks. */
unsigned fetch_poll(void);

/* Lookups queued or running; with a line for a progress display into buf
 * ("debuginfod: 2 lookups (prog, libc.so.6), 3 s"), "" when none. */
unsigned fetch_pending(char *buf, size_t len);

/* Kill every running child and fail what is queued (exit, a deadline). */
void fetch_stop_all(void);

/* For tests: the per-lookup limit in seconds, from the environment. */
double fetch_limit_s(void);

#endif
