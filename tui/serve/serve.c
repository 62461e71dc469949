/*
 * serve: `ymtop --serve`, the HTTP exporter of /metrics and
 * /debug/pprof/heap; reads segments, never writes them (see serve.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <microhttpd.h>

#include "report/pprof.h"
#include "report/prometheus.h"
#include "serve.h"
#include "util/addr.h"
#include "util/stop.h"
#include "fleet.h"
#include "webconfig.h"

/* What the request handler (libmicrohttpd's one thread) reads and updates. */
struct server {
	const struct options *o;
	struct fleet f;
	struct webconfig *wc;    /* --web-config, or NULL */
	/* The file as libmicrohttpd started with it (its options point into
	 * it: kept to the end), the file's identity when wc was read, and
	 * whether the file as it is now could not be used (webconfig.h). */
	struct webconfig *wc0;
	struct stat wc_st;
	int   wc_bad;
	/* /metrics in aggregate: the exited processes' counters per
	 * executable and cgroup, so that those counters never fall. */
	struct prom_carry *carry;
};

/* ---- HTTP ---- */

/* --web-config's headers, added to every answer (set before the daemon
 * starts, read by its thread only). */
static const struct webconfig *answer_headers;

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
	webconfig_add_headers(answer_headers, r);
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
	for (int i = 0; i < sv->f.n; i++) {
		const struct model *m = &sv->f.p[i]->s.model;
		char exe[PROM_LABEL_BUF];
		const char *base = strrchr(m->snap.hdr.exe, '/');
		prometheus_label(base ? base + 1 : m->snap.hdr.exe, exe, sizeof exe);
		fprintf(f, "%ld %s /debug/pprof/heap?pid=%ld\n", (long)sv->f.p[i]->pid, exe,
			(long)sv->f.p[i]->pid);
	}
}

/* /metrics: per executable and cgroup, or with ?per_pid=1 per process. */
static enum MHD_Result metrics(struct server *sv, struct MHD_Connection *c)
{
	const char *arg = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
						      "per_pid");
	if (arg && strcmp(arg, "0") && strcmp(arg, "1"))
		return text(c, MHD_HTTP_BAD_REQUEST, "per_pid must be 0 or 1\n");
	int per_pid = arg && !strcmp(arg, "1");
	struct report_opts ro = { REPORT_PROMETHEUS, sv->o->top, &sv->o->rules,
				  WEIGHT_RETAINED, SORT_RETAINED };
	struct prom_source *src = calloc((size_t)sv->f.n + 1, sizeof *src);
	if (!src)
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	for (int i = 0; i < sv->f.n; i++) {
		src[i].m = &sv->f.p[i]->s.model;
		src[i].s = sv->f.p[i]->s.sym;
	}
	struct body b;
	if (body_open(&b) != 0) {
		free(src);
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	int ok;
	if (per_pid)
		ok = prom_carry_update(sv->carry, src, (size_t)sv->f.n) == 0 &&
		     prometheus_write_many(b.f, src, (size_t)sv->f.n, &ro) == 0;
	else
		ok = prometheus_write_agg(b.f, src, (size_t)sv->f.n, &ro, sv->carry) == 0;
	free(src);
	/* Agent processes not served (fleet.h): counted, with the reason. */
	char why[PROM_LABEL_BUF];
	prometheus_label(sv->f.skipped ? sv->f.skip_why : "", why, sizeof why);
	fprintf(b.f, "# HELP ymtop_processes_skipped Agent processes ymtop may "
		"read but does not serve, and why.\n# TYPE ymtop_processes_skipped "
		"gauge\nymtop_processes_skipped{reason=\"%s\"} %d\n", why,
		sv->f.skipped);
	fprintf(b.f, "# HELP ymtop_processes_unstarted Agent processes not served "
		"because they have sampled nothing yet (no segment; ymagent(7)): "
		"their counters are not in the sums.\n# TYPE ymtop_processes_unstarted "
		"gauge\nymtop_processes_unstarted %d\n", sv->f.unstarted);
	fprintf(b.f, "# HELP ymtop_segment_snapshots_total Copies ymtop took of the "
		"served processes' segments, by whether their stack records were "
		"copied again or kept (the segment said they had not changed).\n"
		"# TYPE ymtop_segment_snapshots_total counter\n"
		"ymtop_segment_snapshots_total{stacks=\"copied\"} %llu\n"
		"ymtop_segment_snapshots_total{stacks=\"kept\"} %llu\n",
		sv->f.snapshots - sv->f.stacks_kept, sv->f.stacks_kept);
	fprintf(b.f, "# HELP ymtop_proc_reads_total Files ymtop opened or looked "
		"at under /proc (stat, status, maps...) for the served processes' "
		"refreshes, and for the listings that find them.\n"
		"# TYPE ymtop_proc_reads_total counter\n"
		"ymtop_proc_reads_total{by=\"refresh\"} %llu\n"
		"ymtop_proc_reads_total{by=\"listing\"} %llu\n",
		sv->f.reads_refresh, sv->f.reads_list);
	fprintf(b.f, "# HELP ymtop_segment_reads_total Reads ymtop made of the "
		"served processes' segments (header, thread slots, stripes, "
		"records...): to list and refresh them, and to ask for their "
		"allocators' statistics and wait for the answers.\n"
		"# TYPE ymtop_segment_reads_total counter\n"
		"ymtop_segment_reads_total{by=\"refresh\"} %llu\n"
		"ymtop_segment_reads_total{by=\"asking\"} %llu\n",
		sv->f.reads_segment - sv->f.reads_asking, sv->f.reads_asking);
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
		i = fleet_find(&sv->f, pid);
		if (i < 0)
			return text(c, MHD_HTTP_NOT_FOUND, "no process %ld is served "
				    "(see /debug/pprof/)\n", (long)pid);
	} else if (sv->f.n == 1) {
		i = 0;
	} else {
		struct body b;
		if (body_open(&b) != 0)
			return MHD_NO;
		fprintf(b.f, "%d processes are served: choose one with "
			"/debug/pprof/heap?pid=PID\n", sv->f.n);
		list_processes(sv, b.f);
		if (body_close(&b, 1) != 0)
			return MHD_NO;
		return respond(c, sv->f.n ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_NOT_FOUND,
			       "text/plain; charset=utf-8", b.buf, b.len);
	}
	struct session *s = &sv->f.p[i]->s;
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

static int same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* --web-config read again when the file changed (a new inode, size or
 * times: an editor's rename, a rewrite in place).  Used when it loads
 * and keeps what libmicrohttpd took at the start; else the last good one
 * stays, one line on stderr says why, and requests are answered 500 while
 * the file does not load (as exporter-toolkit does). */
static void webconfig_follow(struct server *sv)
{
	struct stat st;
	if (stat(sv->o->web_config, &st) != 0)
		memset(&st, 0, sizeof st);
	if (same_file(&st, &sv->wc_st))
		return;
	sv->wc_st = st;
	char err[512];
	struct webconfig *wc = webconfig_load(sv->o->web_config, err, sizeof err);
	sv->wc_bad = !wc;
	if (!wc) {
		fprintf(stderr, "ymtop: %s (answering 500 until it is fixed)\n", err);
		return;
	}
	if (!webconfig_same_tls(wc, sv->wc0)) {
		fprintf(stderr, "ymtop: %s: its TLS settings changed: they need a "
			"restart of ymtop; the file is not applied\n", sv->o->web_config);
		webconfig_free(wc);
		return;
	}
	if (sv->wc != sv->wc0)
		webconfig_free(sv->wc);
	sv->wc = wc;
	answer_headers = wc;
	fprintf(stderr, "ymtop: %s read again\n", sv->o->web_config);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version,
			      const char *upload, size_t *upload_size, void **state)
{
	(void)version;
	(void)upload;
	(void)state;
	struct server *sv = cls;
	enum MHD_Result refused;
	if (sv->wc) {
		webconfig_follow(sv);
		if (sv->wc_bad)
			return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "the web configuration file does not load\n");
	}
	if (sv->wc && webconfig_gate(sv->wc, c, &refused))
		return refused;
	/* Answered at the first call, before any body is read: a body is
	 * never wanted (MHD closes the connection after the answer). */
	*upload_size = 0;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (!strcmp(url, "/metrics")) {
		fleet_update(&sv->f);
		return metrics(sv, c);
	}
	if (!strcmp(url, "/debug/pprof/heap")) {
		fleet_update(&sv->f);
		return heap(sv, c);
	}
	if (!strcmp(url, "/debug/pprof/") || !strcmp(url, "/debug/pprof")) {
		fleet_update(&sv->f);
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

int serve_run(const struct options *o, struct ym_err *e)
{
	static struct server sv;
	struct sockaddr_storage ss;
	char err[512];
	if (addr_parse(o->serve, &ss, err, sizeof err) != 0)
		return ym_err_set(e, 2, "%s", err);
	sv.o = o;
	if (o->web_config) {
		if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
			return ym_err_set(e, 1, "--web-config: this libmicrohttpd has no TLS support");
		if (!MHD_is_feature_supported(MHD_FEATURE_BASIC_AUTH))
			return ym_err_set(e, 1, "--web-config: this libmicrohttpd has no basic auth support");
		/* The file's identity before it is read: a change while it is
		 * read makes the first request read it again. */
		if (stat(o->web_config, &sv.wc_st) != 0)
			memset(&sv.wc_st, 0, sizeof sv.wc_st);
		if (!(sv.wc = webconfig_load(o->web_config, err, sizeof err)))
			return ym_err_set(e, 2, "%s", err);
		sv.wc0 = sv.wc;
		answer_headers = sv.wc;
	}
	if (webconfig_warning(sv.wc, &ss, o->serve, err, sizeof err))
		fprintf(stderr, "ymtop: %s\n", err);
	if (!(sv.carry = prom_carry_new()))
		return ym_err_set(e, 1, "--serve: out of memory");
	fleet_init(&sv.f, o->children ? o->pid : 0);
	/* -p: as everywhere, injected when it has no agent */
	if (o->pid && !o->children && fleet_add(&sv.f, o, o->pid, e) != 0)
		return -1;
	unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	struct MHD_OptionItem tls[WC_MHD_ITEMS];
	webconfig_mhd(sv.wc, &flags, tls);
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, 0, NULL, NULL, handle, &sv,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVE_MAX_CONN,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)SERVE_MAX_PER_IP,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVE_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SERVE_CONN_MEMORY,
		MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
		MHD_OPTION_ARRAY, tls,
		MHD_OPTION_END);
	if (!d)
		return ym_err_set(e, 1, "--serve %s: cannot listen there (in use, or not an "
			"address of this host)", o->serve);
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	char host[64];
	if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof host);
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof host);
	fprintf(stderr, "ymtop: serving %s://%s%s%s:%u/metrics\n",
		sv.wc && sv.wc->tls ? "https" : "http", ss.ss_family == AF_INET6 ? "[" : "", host,
		ss.ss_family == AF_INET6 ? "]" : "", di ? (unsigned)di->port : 0u);
	fflush(stderr);
	while (!stop_asked) {
		struct timespec ts = { 0, 200000000 };
		nanosleep(&ts, NULL);
	}
	MHD_stop_daemon(d);
	fleet_free(&sv.f);
	prom_carry_free(sv.carry);
	sv.carry = NULL;
	answer_headers = NULL;
	if (sv.wc != sv.wc0)
		webconfig_free(sv.wc);
	webconfig_free(sv.wc0);
	return 0;
}
