/*
 * serve: `ymtop --serve`, the HTTP exporter of /metrics and
 * /debug/pprof/heap; reads segments, never writes them (see serve.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
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
#include "util/clock.h"
#include "util/stop.h"
#include "fleet.h"
#include "target.h"
#include "webconfig.h"

/* The figures of one complete fleet update, rendered by the update
 * thread, read by the dispatcher under server.mu (copied into each
 * answer), freed when the next one replaces it. */
struct pub {
	char  *metrics, *per_pid, *list;   /* bodies; per_pid NULL: not asked */
	size_t metrics_len, per_pid_len, list_len;
	int    ok;          /* 0: rendering failed (500) */
	int    complete;    /* 0: only the listing made before the first update */
	double start, end;  /* monotonic seconds */
	double window;      /* > 0: started ahead of an expected scrape, which
			     * may take it when it arrives within window of
			     * start */
	unsigned long long seq;  /* complete updates so far, this one included */
};

/* A request waiting for an update (its connection suspended). */
enum want { W_METRICS, W_PER_PID, W_LIST, W_HEAP };
struct waiter {
	struct waiter *next;
	struct MHD_Connection *c;
	enum want kind;
	pid_t  pid;              /* W_HEAP: 0 for the only process */
	double arrival, deadline;
	int    taken;            /* W_HEAP: being rendered by the update thread */
	/* the answer, set before the connection is resumed */
	int    answered;
	unsigned status;
	const char *type;
	char  *body;
	size_t len;
	int    retry;            /* add Retry-After: 1 */
};

/* One periodic client of /metrics, told apart by its address, its
 * User-Agent and the format it asks for (a Prometheus server with two
 * jobs for the two formats is two scrapers). */
struct scraper {
	uint64_t key;            /* 0: unused */
	double   arrivals[SERVE_LEARN];
	int      narrivals;
	double   next;           /* its next scrape expected at, or 0 */
};

/* The update thread owns f, carry and the symbols (fleet_update, the
 * renders); libmicrohttpd's thread owns the web configuration; mu guards
 * the rest, which the dispatcher thread reads to answer waiting requests. */
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
	long  delay_ms;          /* YM_TEST_UPDATE_DELAY_MS (tests only) */

	pthread_mutex_t mu;
	pthread_cond_t  work;    /* the update thread: wanted, quit */
	pthread_cond_t  disp;    /* the dispatcher: a new pub, a waiter, quit */
	atomic_int quit;         /* also read without mu by the test delay */
	int    want_update;      /* a request waits for an update */
	/* Render ?per_pid=1 too: from its first request until it was not
	 * asked for SERVE_PER_PID_IDLE updates and as many times the gap
	 * between its last two requests (a scraper's interval; 0 after one
	 * request): rendering it costs about as much again as the aggregate,
	 * so an update renders it only while a scraper still wants it. */
	int    want_per_pid;
	double per_pid_last, per_pid_gap;
	unsigned per_pid_idle;   /* updates since the last request */
	int    updating;
	double upd_start;
	struct pub *cur;         /* the last complete update (or the listing) */
	unsigned long long seq;
	struct waiter *waiting;
	/* The expected scrapes: each scraper's last /metrics arrivals; when
	 * a scraper's intervals agree, an update is started ahead of its
	 * next one (the soonest of all scrapers'). */
	struct scraper scrapers[SERVE_SCRAPERS];
	double next_scrape;      /* 0: not expected */
	double ahead_at;         /* 0: none planned */
	double last_duration;
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

/* The status gauges after the figures of /metrics. */
static void metrics_tail(const struct server *sv, FILE *f)
{
	/* Agent processes not served (fleet.h): counted, with the reason. */
	char why[PROM_LABEL_BUF];
	prometheus_label(sv->f.skipped ? sv->f.skip_why : "", why, sizeof why);
	fprintf(f, "# HELP ymtop_processes_skipped Agent processes ymtop may "
		"read but does not serve, and why.\n# TYPE ymtop_processes_skipped "
		"gauge\nymtop_processes_skipped{reason=\"%s\"} %d\n", why,
		sv->f.skipped);
	fprintf(f, "# HELP ymtop_processes_unstarted Agent processes not served "
		"because they have sampled nothing yet (no segment; ymagent(7)): "
		"their counters are not in the sums.\n# TYPE ymtop_processes_unstarted "
		"gauge\nymtop_processes_unstarted %d\n", sv->f.unstarted);
	fprintf(f, "# HELP ymtop_segment_snapshots_total Copies ymtop took of the "
		"served processes' segments, by whether their stack records were "
		"copied again or kept (the segment said they had not changed).\n"
		"# TYPE ymtop_segment_snapshots_total counter\n"
		"ymtop_segment_snapshots_total{stacks=\"copied\"} %llu\n"
		"ymtop_segment_snapshots_total{stacks=\"kept\"} %llu\n",
		sv->f.snapshots - sv->f.stacks_kept, sv->f.stacks_kept);
	fprintf(f, "# HELP ymtop_proc_reads_total Files ymtop opened or looked "
		"at under /proc (stat, status, maps...) for the served processes' "
		"refreshes, and for the listings that find them.\n"
		"# TYPE ymtop_proc_reads_total counter\n"
		"ymtop_proc_reads_total{by=\"refresh\"} %llu\n"
		"ymtop_proc_reads_total{by=\"listing\"} %llu\n",
		sv->f.reads_refresh, sv->f.reads_list);
	fprintf(f, "# HELP ymtop_segment_reads_total Reads ymtop made of the "
		"served processes' segments (header, thread slots, stripes, "
		"records...): to list and refresh them, and to ask for their "
		"allocators' statistics and wait for the answers.\n"
		"# TYPE ymtop_segment_reads_total counter\n"
		"ymtop_segment_reads_total{by=\"refresh\"} %llu\n"
		"ymtop_segment_reads_total{by=\"asking\"} %llu\n",
		sv->f.reads_segment - sv->f.reads_asking, sv->f.reads_asking);
}

/* /metrics's body from the fleet as it is (the update thread, after an
 * update): per executable and cgroup (carry follows), or per process
 * (carry as it is: the aggregate's write of the same update moved it). */
static int render_metrics(struct server *sv, int per_pid, char **out, size_t *len)
{
	struct report_opts ro = { REPORT_PROMETHEUS, sv->o->top, &sv->o->rules,
				  WEIGHT_RETAINED, SORT_RETAINED };
	struct prom_source *src = calloc((size_t)sv->f.n + 1, sizeof *src);
	if (!src)
		return -1;
	for (int i = 0; i < sv->f.n; i++) {
		src[i].m = &sv->f.p[i]->s.model;
		src[i].s = sv->f.p[i]->s.sym;
	}
	struct body b;
	if (body_open(&b) != 0) {
		free(src);
		return -1;
	}
	int ok;
	if (per_pid)
		ok = prometheus_write_many(b.f, src, (size_t)sv->f.n, &ro) == 0;
	else
		ok = prometheus_write_agg(b.f, src, (size_t)sv->f.n, &ro, sv->carry) == 0;
	free(src);
	metrics_tail(sv, b.f);
	if (body_close(&b, ok) != 0)
		return -1;
	*out = b.buf;
	*len = b.len;
	return 0;
}

static void pub_free(struct pub *p)
{
	if (!p)
		return;
	free(p->metrics);
	free(p->per_pid);
	free(p->list);
	free(p);
}

/* What the fleet update just made, rendered (the update thread). */
static struct pub *render(struct server *sv, int per_pid)
{
	struct pub *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->complete = 1;
	p->ok = render_metrics(sv, 0, &p->metrics, &p->metrics_len) == 0 &&
		(!per_pid || render_metrics(sv, 1, &p->per_pid, &p->per_pid_len) == 0);
	struct body b;
	if (body_open(&b) == 0) {
		list_processes(sv, b.f);
		if (body_close(&b, 1) == 0) {
			p->list = b.buf;
			p->list_len = b.len;
		}
	}
	p->ok = p->ok && p->list;
	return p;
}

/* Before the first update completed: what a listing finds at once (the
 * update thread, before it starts that update). */
static struct pub *render_pending(struct server *sv)
{
	struct pub *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	int found = 0, unstarted = 0;
	if (sv->f.fixed) {
		found = sv->f.n;
	} else {
		pid_t pids[4096];
		found = target_list(pids, (int)(sizeof pids / sizeof *pids));
		unstarted = target_list_unstarted(pids, (int)(sizeof pids / sizeof *pids));
		if (found < 0)
			found = 0;
		if (unstarted < 0)
			unstarted = 0;
		if (sv->f.root)
			found = unstarted = 0;   /* the tree is known after the update */
	}
	struct body b;
	if (body_open(&b) != 0) {
		free(p);
		return NULL;
	}
	fprintf(b.f, "# HELP ymtop_processes_pending Agent processes found but "
		"not read yet: the first update is under way; their figures and "
		"symbols come in a later scrape.\n# TYPE ymtop_processes_pending "
		"gauge\nymtop_processes_pending %d\n", found);
	fprintf(b.f, "# HELP ymtop_processes_unstarted Agent processes not served "
		"because they have sampled nothing yet (no segment; ymagent(7)): "
		"their counters are not in the sums.\n# TYPE ymtop_processes_unstarted "
		"gauge\nymtop_processes_unstarted %d\n", unstarted);
	if (body_close(&b, 1) != 0) {
		free(p);
		return NULL;
	}
	p->metrics = b.buf;
	p->metrics_len = b.len;
	p->list = strdup("");
	p->ok = p->list != NULL;
	return p;
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

__attribute__((format(printf, 3, 4)))
static void answer_text(struct waiter *w, unsigned status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&w->body, fmt, ap);
	va_end(ap);
	w->status = status;
	w->type = "text/plain; charset=utf-8";
	w->len = n < 0 ? 0 : (size_t)n;
	if (n < 0)
		w->body = NULL;
}

/* /debug/pprof/heap of w->pid from the fleet as it is (the update thread,
 * between two processes' refreshes or between updates: the process's
 * model and the symbols are whole). */
static void render_heap(struct server *sv, struct waiter *w)
{
	int i;
	if (w->pid) {
		i = fleet_find(&sv->f, w->pid);
		if (i < 0) {
			answer_text(w, MHD_HTTP_NOT_FOUND, "no process %ld is served "
				    "(see /debug/pprof/)\n", (long)w->pid);
			return;
		}
	} else if (sv->f.n == 1) {
		i = 0;
	} else {
		struct body b;
		if (body_open(&b) != 0)
			return;
		fprintf(b.f, "%d processes are served: choose one with "
			"/debug/pprof/heap?pid=PID\n", sv->f.n);
		list_processes(sv, b.f);
		if (body_close(&b, 1) != 0)
			return;
		w->status = sv->f.n ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_NOT_FOUND;
		w->type = "text/plain; charset=utf-8";
		w->body = b.buf;
		w->len = b.len;
		return;
	}
	struct session *s = &sv->f.p[i]->s;
	if (s->snapshots == 0) {
		/* added by the update under way, not read yet */
		answer_text(w, MHD_HTTP_SERVICE_UNAVAILABLE, "process %ld is being "
			    "read for the first time: ask again\n", (long)sv->f.p[i]->pid);
		w->retry = 1;
		return;
	}
	struct report_opts ro = { REPORT_PPROF, sv->o->top, &sv->o->rules,
				  WEIGHT_RETAINED, SORT_RETAINED };
	struct body b;
	if (body_open(&b) != 0)
		return;
	int ok = pprof_write(b.f, &s->model, s->sym, &ro) == 0;
	if (body_close(&b, ok) != 0) {
		answer_text(w, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot write the profile\n");
		return;
	}
	w->status = MHD_HTTP_OK;
	w->type = "application/octet-stream";
	w->body = b.buf;
	w->len = b.len;
}

/* ---- the update thread and the dispatcher ---- */

static void resume(struct server *sv, struct waiter *w)
{
	struct waiter **pp = &sv->waiting;
	while (*pp && *pp != w)
		pp = &(*pp)->next;
	if (*pp)
		*pp = w->next;
	w->answered = 1;
	MHD_resume_connection(w->c);   /* w is the connection's from now on */
}

/* Whether p may answer w (not W_HEAP) at once: it started after the
 * request, or ahead for it, and has what w asks for (an update that
 * started before ?per_pid=1 was first asked, or after it was no longer
 * wanted, has the aggregate only). */
static int fresh_for(const struct pub *p, const struct waiter *w)
{
	double arrival = w->arrival;
	return p && p->complete && (w->kind != W_PER_PID || p->per_pid) &&
	       (p->start >= arrival || (p->window > 0 && p->start >= arrival - p->window));
}

/* w (not W_HEAP) answered from p (or nothing at all yet), with its age
 * (under mu). */
static void answer_from(struct waiter *w, const struct pub *p, double now)
{
	const char *src = NULL;
	size_t n = 0;
	if (!p || !p->ok) {
		answer_text(w, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
		return;
	}
	if (w->kind == W_LIST) {
		src = p->list;
		n = p->list_len;
		w->body = malloc(n + 1);
		if (!w->body)
			return;
		memcpy(w->body, src, n);
		w->len = n;
		w->status = MHD_HTTP_OK;
		w->type = "text/plain; charset=utf-8";
		return;
	}
	src = w->kind == W_PER_PID ? p->per_pid : p->metrics;
	n = w->kind == W_PER_PID ? p->per_pid_len : p->metrics_len;
	if (!src) {
		/* per process: asked first while no update rendered it yet */
		answer_text(w, MHD_HTTP_SERVICE_UNAVAILABLE, "the figures per process "
			    "are not ready yet (the update under way renders them): "
			    "ask again\n");
		w->retry = 1;
		return;
	}
	char tail[1024];
	int t;
	if (p->complete)
		t = snprintf(tail, sizeof tail,
			"# HELP ymtop_update_age_seconds Seconds since the update "
			"these figures come from started (its processes were read "
			"between its start and its end).\n"
			"# TYPE ymtop_update_age_seconds gauge\n"
			"ymtop_update_age_seconds %.3f\n"
			"# HELP ymtop_update_duration_seconds How long that update "
			"took, rendering included.\n"
			"# TYPE ymtop_update_duration_seconds gauge\n"
			"ymtop_update_duration_seconds %.3f\n"
			"# HELP ymtop_updates_total Complete updates of the served "
			"processes since ymtop started; these figures come from the "
			"last.\n# TYPE ymtop_updates_total counter\n"
			"ymtop_updates_total %llu\n",
			now - p->start, p->end - p->start, p->seq);
	else
		t = snprintf(tail, sizeof tail,
			"# HELP ymtop_updates_total Complete updates of the served "
			"processes since ymtop started; these figures come from the "
			"last.\n# TYPE ymtop_updates_total counter\n"
			"ymtop_updates_total 0\n");
	if (t < 0 || (size_t)t >= sizeof tail)
		t = 0;
	w->body = malloc(n + (size_t)t + 1);
	if (!w->body)
		return;
	memcpy(w->body, src, n);
	memcpy(w->body + n, tail, (size_t)t);
	w->len = n + (size_t)t;
	w->status = MHD_HTTP_OK;
	w->type = "text/plain; version=0.0.4; charset=utf-8";
}

/* Answer what can be (under mu): W_HEAP ones left by the update thread
 * past their deadline and a second more (it was inside one process's
 * refresh all along); the others from a fresh update, or at their
 * deadline from the last complete one.  The next time to look, or 0. */
static double dispatch(struct server *sv, double now)
{
	double next = 0;
	int fresh = 0;
	for (struct waiter *w = sv->waiting, *nx; w; w = nx) {
		nx = w->next;
		if (w->kind == W_HEAP) {
			if (w->taken)
				continue;
			if (now >= w->deadline + 1.0) {
				answer_text(w, MHD_HTTP_SERVICE_UNAVAILABLE,
					    "the update under way did not let this "
					    "profile be written in time: ask again\n");
				w->retry = 1;
				resume(sv, w);
				continue;
			}
			if (!next || w->deadline + 1.0 < next)
				next = w->deadline + 1.0;
			continue;
		}
		if (fresh_for(sv->cur, w) || now >= w->deadline) {
			fresh += fresh_for(sv->cur, w);
			answer_from(w, sv->cur, now);
			resume(sv, w);
			continue;
		}
		if (!next || w->deadline < next)
			next = w->deadline;
	}
	/* Every request answered by an update that started after it or
	 * ahead for it: no other is wanted until the next request */
	if (fresh && !sv->waiting)
		sv->want_update = 0;
	return next;
}

static void deadline_ts(double at, struct timespec *ts)
{
	/* at: clock_mono_s seconds; the condition variables use CLOCK_MONOTONIC */
	ts->tv_sec = (time_t)at;
	ts->tv_nsec = (long)((at - (double)ts->tv_sec) * 1e9);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void *dispatcher(void *arg)
{
	struct server *sv = arg;
	pthread_mutex_lock(&sv->mu);
	while (!sv->quit) {
		double next = dispatch(sv, clock_mono_s());
		if (next) {
			struct timespec ts;
			deadline_ts(next, &ts);
			pthread_cond_timedwait(&sv->disp, &sv->mu, &ts);
		} else {
			pthread_cond_wait(&sv->disp, &sv->mu);
		}
	}
	pthread_mutex_unlock(&sv->mu);
	return NULL;
}

/* The profiles waiting that are due (the update thread, mu not held):
 * after an update (done: its start), those that arrived before it
 * started; between two processes' refreshes (done 0), those at their
 * deadline. */
static void heap_jobs(struct server *sv, double done)
{
	struct waiter *take[SERVE_MAX_CONN];
	int n = 0;
	double now = clock_mono_s();
	pthread_mutex_lock(&sv->mu);
	for (struct waiter *w = sv->waiting; w && n < SERVE_MAX_CONN; w = w->next)
		if (w->kind == W_HEAP && !w->taken &&
		    (done ? w->arrival <= done : now >= w->deadline)) {
			w->taken = 1;
			take[n++] = w;
		}
	pthread_mutex_unlock(&sv->mu);
	if (!n)
		return;
	for (int i = 0; i < n; i++)
		render_heap(sv, take[i]);
	pthread_mutex_lock(&sv->mu);
	for (int i = 0; i < n; i++) {
		if (!take[i]->body && !take[i]->status)
			answer_text(take[i], MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "out of memory\n");
		resume(sv, take[i]);
	}
	pthread_mutex_unlock(&sv->mu);
}

static void between_refreshes(void *arg)
{
	heap_jobs(arg, 0);
}

/* The next update ahead of the expected scrape (under mu, after an update
 * that took d seconds): started early enough to be complete at it, by d
 * and a quarter more and SERVE_AHEAD_SLACK_S. */
static void plan_ahead(struct server *sv, double now)
{
	sv->ahead_at = 0;
	if (!sv->next_scrape)
		return;
	double lead = sv->last_duration * 1.25 + SERVE_AHEAD_SLACK_S;
	double at = sv->next_scrape - lead;
	if (at > now)
		sv->ahead_at = at;
}

static void *updater(void *arg)
{
	struct server *sv = arg;
	/* No update before a request wants one: an idle server costs
	 * nothing, and stops at once */
	pthread_mutex_lock(&sv->mu);
	while (!sv->quit) {
		double now = clock_mono_s();
		int ahead = !sv->want_update && sv->ahead_at && now >= sv->ahead_at;
		if (!sv->want_update && !ahead) {
			if (sv->ahead_at) {
				struct timespec ts;
				deadline_ts(sv->ahead_at, &ts);
				pthread_cond_timedwait(&sv->work, &sv->mu, &ts);
			} else {
				pthread_cond_wait(&sv->work, &sv->mu);
			}
			continue;
		}
		double window = ahead ? sv->last_duration * 1.25 +
					2 * SERVE_AHEAD_SLACK_S : 0;
		sv->want_update = 0;
		sv->ahead_at = 0;
		sv->updating = 1;
		sv->upd_start = now;
		int per_pid = sv->want_per_pid;
		pthread_mutex_unlock(&sv->mu);

		/* tests only: a slow update, requests still answered */
		for (double until = now + (double)sv->delay_ms / 1000;
		     clock_mono_s() < until && !sv->quit;) {
			struct timespec ts = { 0, 10000000 };
			nanosleep(&ts, NULL);
			between_refreshes(sv);
		}
		fleet_update(&sv->f);
		struct pub *p = render(sv, per_pid);
		double end = clock_mono_s();

		pthread_mutex_lock(&sv->mu);
		sv->updating = 0;
		if (p) {
			p->start = now;
			p->end = end;
			p->window = window;
			p->seq = ++sv->seq;
			pub_free(sv->cur);
			sv->cur = p;
		}
		sv->last_duration = end - now;
		if (per_pid && ++sv->per_pid_idle >= SERVE_PER_PID_IDLE &&
		    end - sv->per_pid_last > SERVE_PER_PID_IDLE * sv->per_pid_gap)
			sv->want_per_pid = 0;   /* asked again: rendered again */
		plan_ahead(sv, end);
		pthread_cond_broadcast(&sv->disp);
		pthread_mutex_unlock(&sv->mu);
		heap_jobs(sv, now);
		pthread_mutex_lock(&sv->mu);
	}
	pthread_mutex_unlock(&sv->mu);
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* FNV-1a over n bytes, from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* The scraper a request comes from: its peer address (not the port: a
 * scraper may open a connection a scrape), its User-Agent and the kind. */
static uint64_t scraper_key(struct MHD_Connection *c, enum want kind)
{
	uint64_t h = fnv(0xcbf29ce484222325ull, &kind, sizeof kind);
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		h = fnv(h, &in->sin_addr, sizeof in->sin_addr);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		h = fnv(h, &in6->sin6_addr, sizeof in6->sin6_addr);
	}
	const char *ua = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_USER_AGENT);
	if (ua)
		h = fnv(h, ua, strnlen(ua, 256));
	return h ? h : 1;
}

static double last_arrival(const struct scraper *x)
{
	return x->arrivals[x->narrivals - 1];
}

/* A scrape of /metrics arrived from the scraper `key` (under mu): when
 * its last SERVE_LEARN arrivals came at intervals within a fifth of
 * their median (and that median is SERVE_AHEAD_MIN_S or more), its next
 * is expected one median later; else none is.  Any client is learnt
 * from, whatever its User-Agent (Prometheus, vmagent, Grafana's agent,
 * OpenTelemetry's receiver, curl in a loop): one that is not periodic
 * just never agrees with itself, and one scraper's arrivals never
 * disturb another's.  The scraper seen longest ago gives way to a new
 * one.  next_scrape: the soonest expected of all. */
static void learn(struct server *sv, uint64_t key, double now)
{
	struct scraper *s = NULL, *oldest = NULL;
	for (int i = 0; i < SERVE_SCRAPERS && !s; i++) {
		struct scraper *x = &sv->scrapers[i];
		if (x->key == key)
			s = x;
		else if (!oldest || (oldest->key && (!x->key || last_arrival(x) <
						      last_arrival(oldest))))
			oldest = x;   /* an unused one first */
	}
	if (!s) {
		s = oldest;
		memset(s, 0, sizeof *s);
		s->key = key;
	}
	if (s->narrivals == SERVE_LEARN) {
		memmove(s->arrivals, s->arrivals + 1,
			(SERVE_LEARN - 1) * sizeof *s->arrivals);
		s->narrivals--;
	}
	s->arrivals[s->narrivals++] = now;
	s->next = 0;
	if (s->narrivals == SERVE_LEARN) {
		double iv[SERVE_LEARN - 1];
		for (int i = 0; i < SERVE_LEARN - 1; i++)
			iv[i] = s->arrivals[i + 1] - s->arrivals[i];
		qsort(iv, SERVE_LEARN - 1, sizeof *iv, by_value);
		double med = iv[(SERVE_LEARN - 1) / 2];
		int steady = med >= SERVE_AHEAD_MIN_S;
		for (int i = 0; i < SERVE_LEARN - 1 && steady; i++)
			steady = iv[i] >= med * 0.8 && iv[i] <= med * 1.2;
		if (steady)
			s->next = now + med;
	}
	/* A scraper whose expected scrape is more than a fifth of its
	 * interval past has stopped or changed: not expected any more. */
	sv->next_scrape = 0;
	for (int i = 0; i < SERVE_SCRAPERS; i++) {
		struct scraper *x = &sv->scrapers[i];
		if (!x->key || !x->next)
			continue;
		double iv = x->next - last_arrival(x);
		if (x->next + iv / 5 < now)
			x->next = 0;
		else if (x->next > now && (!sv->next_scrape || x->next < sv->next_scrape))
			sv->next_scrape = x->next;
	}
}

/* X-Prometheus-Scrape-Timeout-Seconds: a positive decimal ("10", "4.5"),
 * at most SERVE_DEADLINE_MAX_S.  The seconds, or -1. */
static double parse_timeout(const char *s)
{
	double v = 0, scale = 0;
	int digits = 0;
	size_t n = strlen(s);
	if (n == 0 || n > 16)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.' && !scale && digits) {
			scale = 1;
			continue;
		}
		if (s[i] < '0' || s[i] > '9')
			return -1;
		digits++;
		if (scale)
			v += (s[i] - '0') * (scale /= 10);
		else
			v = v * 10 + (s[i] - '0');
	}
	if (scale == 1 || v <= 0 || v > SERVE_DEADLINE_MAX_S)
		return -1;   /* "5." or zero or too long */
	return v;
}

/* How long a request with timeout t may wait before its answer: a tenth
 * (a second at least: a loaded host's scheduler, TLS) before it, and
 * never less than half of it. */
static double budget(double t)
{
	double margin = t / 10 > 1.0 ? t / 10 : 1.0;
	return t - margin > t / 2 ? t - margin : t / 2;
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

/* Queue w's answer (libmicrohttpd's thread; w stays the connection's,
 * freed by done). */
static enum MHD_Result answer(struct MHD_Connection *c, struct waiter *w)
{
	if (!w->body)
		return MHD_NO;
	char *body = w->body;
	w->body = NULL;
	struct MHD_Response *r =
		MHD_create_response_from_buffer(w->len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, w->type);
	if (w->retry)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	webconfig_add_headers(answer_headers, r);
	enum MHD_Result ret = MHD_queue_response(c, w->status, r);
	MHD_destroy_response(r);
	return ret;
}

static void done(void *cls, struct MHD_Connection *c, void **state,
		 enum MHD_RequestTerminationCode why)
{
	(void)cls;
	(void)c;
	(void)why;
	struct waiter *w = *state;
	if (w) {
		free(w->body);
		free(w);
		*state = NULL;
	}
}

/* A request for what an update makes: answered at once from an update
 * that started ahead for it, else suspended until the dispatcher or the
 * update thread answers it. */
static enum MHD_Result wait_for(struct server *sv, struct MHD_Connection *c,
				void **state, enum want kind, pid_t pid)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    "X-Prometheus-Scrape-Timeout-Seconds");
	double t = SERVE_DEFAULT_TIMEOUT_S;
	if (h && (t = parse_timeout(h)) < 0)
		return text(c, MHD_HTTP_BAD_REQUEST, "X-Prometheus-Scrape-Timeout-"
			    "Seconds must be a positive decimal number of seconds, "
			    "at most %d\n", SERVE_DEADLINE_MAX_S);
	struct waiter *w = calloc(1, sizeof *w);
	if (!w)
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	*state = w;
	w->c = c;
	w->kind = kind;
	w->pid = pid;
	w->arrival = clock_mono_s();
	w->deadline = w->arrival + budget(t);
	pthread_mutex_lock(&sv->mu);
	if (sv->quit) {
		pthread_mutex_unlock(&sv->mu);
		return text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "ymtop is stopping\n");
	}
	if (kind == W_METRICS || kind == W_PER_PID)
		learn(sv, scraper_key(c, kind), w->arrival);
	if (kind == W_PER_PID) {
		if (sv->per_pid_last)
			sv->per_pid_gap = w->arrival - sv->per_pid_last;
		sv->per_pid_last = w->arrival;
		sv->per_pid_idle = 0;
		if (!sv->want_per_pid) {
			sv->want_per_pid = 1;
			sv->want_update = 1;
		}
	}
	/* When the update it needs (after the one under way, if any) would
	 * end past its deadline by the last update's duration, the request
	 * is answered at once from the last complete update, not at its
	 * deadline with the same figures. */
	double last = sv->last_duration;
	double after = sv->updating && sv->upd_start + last > w->arrival ?
		       sv->upd_start + last : w->arrival;
	int late = sv->seq && after + last > w->deadline;
	if (kind != W_HEAP && (fresh_for(sv->cur, w) || late) &&
	    (kind != W_PER_PID || sv->cur->per_pid)) {
		answer_from(w, sv->cur, w->arrival);
		if (!fresh_for(sv->cur, w))
			sv->want_update = 1;   /* fresher for the next request */
		plan_ahead(sv, w->arrival);
		pthread_cond_signal(&sv->work);
		pthread_mutex_unlock(&sv->mu);
		return answer(c, w);
	}
	MHD_suspend_connection(c);
	w->next = sv->waiting;
	sv->waiting = w;
	sv->want_update = 1;
	pthread_cond_signal(&sv->work);
	pthread_cond_signal(&sv->disp);
	pthread_mutex_unlock(&sv->mu);
	return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version,
			      const char *upload, size_t *upload_size, void **state)
{
	(void)version;
	(void)upload;
	struct server *sv = cls;
	enum MHD_Result refused;
	if (*state) {
		/* resumed: answered by the dispatcher or the update thread */
		*upload_size = 0;
		return answer(c, *state);
	}
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
		const char *arg = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
							      "per_pid");
		if (arg && strcmp(arg, "0") && strcmp(arg, "1"))
			return text(c, MHD_HTTP_BAD_REQUEST, "per_pid must be 0 or 1\n");
		return wait_for(sv, c, state,
				arg && !strcmp(arg, "1") ? W_PER_PID : W_METRICS, 0);
	}
	if (!strcmp(url, "/debug/pprof/heap")) {
		const char *arg = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
							      "pid");
		pid_t pid = 0;
		if (arg && parse_pid(arg, &pid) != 0)
			return text(c, MHD_HTTP_BAD_REQUEST,
				    "pid must be a process id (1 to 4194304)\n");
		return wait_for(sv, c, state, W_HEAP, pid);
	}
	if (!strcmp(url, "/debug/pprof/") || !strcmp(url, "/debug/pprof"))
		return wait_for(sv, c, state, W_LIST, 0);
	if (!strcmp(url, "/"))
		return text(c, MHD_HTTP_OK, "ymtop %s: /metrics /debug/pprof/ "
			    "/debug/pprof/heap?pid=PID\n", YM_VERSION);
	return text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* Stop the two threads, answer what still waits (503), resume it. */
static void stop_threads(struct server *sv, pthread_t up, pthread_t disp)
{
	pthread_mutex_lock(&sv->mu);
	sv->quit = 1;
	pthread_cond_broadcast(&sv->work);
	pthread_cond_broadcast(&sv->disp);
	pthread_mutex_unlock(&sv->mu);
	pthread_join(disp, NULL);
	pthread_join(up, NULL);
	pthread_mutex_lock(&sv->mu);
	while (sv->waiting) {
		struct waiter *w = sv->waiting;
		free(w->body);
		answer_text(w, MHD_HTTP_SERVICE_UNAVAILABLE, "ymtop is stopping\n");
		resume(sv, w);
	}
	pthread_mutex_unlock(&sv->mu);
}

static long test_delay_ms(void)
{
	const char *s = getenv("YM_TEST_UPDATE_DELAY_MS");
	if (!s || !*s)
		return 0;
	char *end;
	long v = strtol(s, &end, 10);
	return *end || v < 0 || v > 600000 ? 0 : v;
}

int serve_run(const struct options *o, struct ym_err *e)
{
	static struct server sv;
	struct sockaddr_storage ss;
	char err[512];
	if (addr_parse(o->serve, &ss, err, sizeof err) != 0)
		return ym_err_set(e, 2, "%s", err);
	sv.o = o;
	sv.delay_ms = test_delay_ms();
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
	/* What is known before the first update: answered until it completes */
	sv.cur = render_pending(&sv);
	sv.f.between = between_refreshes;
	sv.f.between_arg = &sv;
	pthread_condattr_t ca;
	if (pthread_mutex_init(&sv.mu, NULL) != 0 || pthread_condattr_init(&ca) != 0 ||
	    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&sv.work, &ca) != 0 || pthread_cond_init(&sv.disp, &ca) != 0)
		return ym_err_set(e, 1, "--serve: cannot make its threads' locks");
	pthread_condattr_destroy(&ca);
	unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
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
		MHD_OPTION_NOTIFY_COMPLETED, done, (void *)&sv,
		MHD_OPTION_ARRAY, tls,
		MHD_OPTION_END);
	if (!d)
		return ym_err_set(e, 1, "--serve %s: cannot listen there (in use, or not an "
			"address of this host)", o->serve);
	pthread_t up, disp;
	if (pthread_create(&disp, NULL, dispatcher, &sv) != 0) {
		MHD_stop_daemon(d);
		return ym_err_set(e, 1, "--serve: cannot start its threads");
	}
	if (pthread_create(&up, NULL, updater, &sv) != 0) {
		pthread_mutex_lock(&sv.mu);
		sv.quit = 1;
		pthread_cond_broadcast(&sv.disp);
		pthread_mutex_unlock(&sv.mu);
		pthread_join(disp, NULL);
		MHD_stop_daemon(d);
		return ym_err_set(e, 1, "--serve: cannot start its threads");
	}
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
	stop_threads(&sv, up, disp);
	MHD_stop_daemon(d);
	fleet_free(&sv.f);
	pub_free(sv.cur);
	sv.cur = NULL;
	prom_carry_free(sv.carry);
	sv.carry = NULL;
	answer_headers = NULL;
	if (sv.wc != sv.wc0)
		webconfig_free(sv.wc);
	webconfig_free(sv.wc0);
	return 0;
}
