#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "report/pprof.h"
#include "report/prometheus.h"
#include "serve.h"
#include "session.h"
#include "target.h"

int serve_parse_addr(const char *s, struct sockaddr_storage *ss, char *err,
		     size_t len)
{
	char host[64];
	const char *port = s;
	memset(ss, 0, sizeof *ss);
	snprintf(host, sizeof host, "127.0.0.1");
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':' || close - s - 1 >= (long)sizeof host) {
			snprintf(err, len, "--serve: bad address '%s' (use [ADDR]:PORT for IPv6)", s);
			return -1;
		}
		snprintf(host, sizeof host, "%.*s", (int)(close - s - 1), s + 1);
		port = close + 2;
	} else if (strchr(s, ':')) {
		const char *colon = strrchr(s, ':');
		if (colon - s >= (long)sizeof host) {
			snprintf(err, len, "--serve: bad address '%s'", s);
			return -1;
		}
		snprintf(host, sizeof host, "%.*s", (int)(colon - s), s);
		port = colon + 1;
	}
	char *end;
	errno = 0;
	long p = strtol(port, &end, 10);
	if (!*port || *end || errno || p < 0 || p > 65535 || *port == '-' ||
	    *port == '+' || *port == ' ') {
		snprintf(err, len, "--serve: the port must be a number from 0 to 65535, "
			 "not '%s'", port);
		return -1;
	}
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)p);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)p);
		return 0;
	}
	snprintf(err, len, "--serve: '%s' is not a numeric IPv4 or [IPv6] address", host);
	return -1;
}

/* ---- the processes served ---- */

struct served {
	pid_t pid;
	struct session s;
};

struct server {
	const struct options *o;
	struct served *p[SERVE_MAX_PROCS];   /* by pid ascending */
	int n;
	pid_t fixed;                          /* -p, or 0 */
};

static void drop(struct server *sv, int i)
{
	session_close(&sv->p[i]->s);
	free(sv->p[i]);
	memmove(&sv->p[i], &sv->p[i + 1], (size_t)(sv->n - i - 1) * sizeof *sv->p);
	sv->n--;
}

static int served_index(const struct server *sv, pid_t pid)
{
	for (int i = 0; i < sv->n; i++)
		if (sv->p[i]->pid == pid)
			return i;
	return -1;
}

/* Refresh what is served; drop processes gone or failing. */
static int fresh(struct served *p)
{
	char err[256];
	return session_refresh(&p->s, 1, err, sizeof err) == 0 && p->s.model.alive;
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = (*(struct served *const *)a)->pid, y = (*(struct served *const *)b)->pid;
	return (x > y) - (x < y);
}

/* Bring the list up to date: refresh every process served, drop those that
 * exited (or whose segment fails), and, without -p, add the processes that
 * started running the agent since. */
static void update(struct server *sv)
{
	static pid_t pids[SERVE_MAX_PROCS];
	int n = sv->fixed ? 0 : target_list(pids, SERVE_MAX_PROCS);
	if (n > SERVE_MAX_PROCS)
		n = SERVE_MAX_PROCS;
	for (int i = sv->n; i-- > 0;) {
		int listed = sv->fixed != 0;
		for (int k = 0; k < n && !listed; k++)
			listed = pids[k] == sv->p[i]->pid;
		if (!listed || !fresh(sv->p[i]))
			drop(sv, i);
	}
	for (int k = 0; k < n && sv->n < SERVE_MAX_PROCS; k++) {
		if (served_index(sv, pids[k]) >= 0)
			continue;
		char err[256];
		struct shm_reader r;
		if (target_open(pids[k], &r, err, sizeof err) != 0)
			continue;
		struct served *p = calloc(1, sizeof *p);
		if (!p || session_adopt(&p->s, &r) != 0) {
			free(p);
			shm_reader_close(&r);
			continue;
		}
		p->pid = pids[k];
		if (!fresh(p)) {
			session_close(&p->s);
			free(p);
			continue;
		}
		sv->p[sv->n++] = p;
	}
	qsort(sv->p, (size_t)sv->n, sizeof *sv->p, by_pid);
}

/* ---- HTTP ---- */

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status,
			       const char *type, char *body, size_t len)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

__attribute__((format(printf, 3, 4)))
static enum MHD_Result text(struct MHD_Connection *c, unsigned status,
			    const char *fmt, ...)
{
	char *body = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (n < 0)
		return MHD_NO;
	return respond(c, status, "text/plain; charset=utf-8", body, (size_t)n);
}

/* A stream into memory for a response body. */
struct body {
	FILE  *f;
	char  *buf;
	size_t len;
};

static int body_open(struct body *b)
{
	b->buf = NULL;
	b->len = 0;
	b->f = open_memstream(&b->buf, &b->len);
	return b->f ? 0 : -1;
}

/* Close; 0 with the body in b->buf (the caller's), or -1 (freed). */
static int body_close(struct body *b, int ok)
{
	if (fclose(b->f) != 0)
		ok = 0;
	if (!ok) {
		free(b->buf);
		b->buf = NULL;
		return -1;
	}
	return 0;
}

static void list_processes(const struct server *sv, FILE *f)
{
	for (int i = 0; i < sv->n; i++) {
		const struct model *m = &sv->p[i]->s.model;
		char exe[PROM_LABEL_BUF];
		const char *base = strrchr(m->snap.hdr.exe, '/');
		prometheus_label(base ? base + 1 : m->snap.hdr.exe, exe, sizeof exe);
		fprintf(f, "%ld %s /debug/pprof/heap?pid=%ld\n", (long)sv->p[i]->pid, exe,
			(long)sv->p[i]->pid);
	}
}

static enum MHD_Result metrics(struct server *sv, struct MHD_Connection *c)
{
	struct prom_source src[SERVE_MAX_PROCS];
	struct report_opts ro = { REPORT_PROMETHEUS, sv->o->top, &sv->o->rules,
				  WEIGHT_RETAINED, SORT_RETAINED };
	for (int i = 0; i < sv->n; i++) {
		src[i].m = &sv->p[i]->s.model;
		src[i].s = sv->p[i]->s.sym;
	}
	struct body b;
	if (body_open(&b) != 0)
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	int ok = prometheus_write_many(b.f, src, (size_t)sv->n, &ro) == 0;
	if (body_close(&b, ok) != 0)
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	return respond(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
		       b.buf, b.len);
}

/* ?pid=N: 1 to 4194304 in decimal digits, nothing else. */
static int parse_pid(const char *s, pid_t *out)
{
	long v = 0;
	size_t n = strlen(s);
	if (n == 0 || n > 7)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v < 1 || v > 4194304)
		return -1;
	*out = (pid_t)v;
	return 0;
}

static enum MHD_Result heap(struct server *sv, struct MHD_Connection *c)
{
	const char *arg = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pid");
	int i;
	if (arg) {
		pid_t pid;
		if (parse_pid(arg, &pid) != 0)
			return text(c, MHD_HTTP_BAD_REQUEST,
				    "pid must be a process id (1 to 4194304)\n");
		i = served_index(sv, pid);
		if (i < 0)
			return text(c, MHD_HTTP_NOT_FOUND, "no process %ld is served "
				    "(see /debug/pprof/)\n", (long)pid);
	} else if (sv->n == 1) {
		i = 0;
	} else {
		struct body b;
		if (body_open(&b) != 0)
			return MHD_NO;
		fprintf(b.f, "%d processes are served: choose one with "
			"/debug/pprof/heap?pid=PID\n", sv->n);
		list_processes(sv, b.f);
		if (body_close(&b, 1) != 0)
			return MHD_NO;
		return respond(c, sv->n ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_NOT_FOUND,
			       "text/plain; charset=utf-8", b.buf, b.len);
	}
	struct session *s = &sv->p[i]->s;
	struct report_opts ro = { REPORT_PPROF, sv->o->top, &sv->o->rules,
				  WEIGHT_RETAINED, SORT_RETAINED };
	struct body b;
	if (body_open(&b) != 0)
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	int ok = pprof_write(b.f, &s->model, s->sym, &ro) == 0;
	if (body_close(&b, ok) != 0)
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot write the profile\n");
	return respond(c, MHD_HTTP_OK, "application/octet-stream", b.buf, b.len);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version,
			      const char *upload, size_t *upload_size, void **state)
{
	(void)version;
	(void)upload;
	(void)state;
	struct server *sv = cls;
	/* Answered at the first call, before any body is read: a body is
	 * never wanted (MHD closes the connection after the answer). */
	*upload_size = 0;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (!strcmp(url, "/metrics")) {
		update(sv);
		return metrics(sv, c);
	}
	if (!strcmp(url, "/debug/pprof/heap")) {
		update(sv);
		return heap(sv, c);
	}
	if (!strcmp(url, "/debug/pprof/") || !strcmp(url, "/debug/pprof")) {
		update(sv);
		struct body b;
		if (body_open(&b) != 0)
			return MHD_NO;
		list_processes(sv, b.f);
		if (body_close(&b, 1) != 0)
			return MHD_NO;
		return respond(c, MHD_HTTP_OK, "text/plain; charset=utf-8", b.buf, b.len);
	}
	if (!strcmp(url, "/"))
		return text(c, MHD_HTTP_OK, "ymtop %s: /metrics /debug/pprof/ "
			    "/debug/pprof/heap?pid=PID\n", YM_VERSION);
	return text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

int serve_run(const struct options *o)
{
	static struct server sv;
	struct sockaddr_storage ss;
	char err[256];
	if (serve_parse_addr(o->serve, &ss, err, sizeof err) != 0)
		cli_die(2, "%s", err);
	sv.o = o;
	sv.fixed = o->pid;
	if (o->pid) {
		/* As -p everywhere: injected when it has no agent. */
		struct served *p = calloc(1, sizeof *p);
		if (!p)
			cli_die(1, "out of memory");
		session_open(&p->s, o, o->pid);
		p->pid = o->pid;
		sv.p[sv.n++] = p;
	}
	unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, 0, NULL, NULL, handle, &sv,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVE_MAX_CONN,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)SERVE_MAX_PER_IP,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVE_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SERVE_CONN_MEMORY,
		MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
		MHD_OPTION_END);
	if (!d)
		cli_die(1, "--serve %s: cannot listen there (in use, or not an "
			"address of this host)", o->serve);
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	char host[64];
	if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof host);
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof host);
	fprintf(stderr, "ymtop: serving http://%s%s%s:%u/metrics\n",
		ss.ss_family == AF_INET6 ? "[" : "", host,
		ss.ss_family == AF_INET6 ? "]" : "", di ? (unsigned)di->port : 0u);
	fflush(stderr);
	while (!cli_stop) {
		struct timespec ts = { 0, 200000000 };
		nanosleep(&ts, NULL);
	}
	MHD_stop_daemon(d);
	while (sv.n)
		drop(&sv, sv.n - 1);
	return 0;
}
