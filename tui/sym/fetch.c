/*
 * fetch: debuginfod lookups in child processes, time-bounded (fetch.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fetch.h"
#include "util/clock.h"

struct fetch_entry {
	uint8_t  id[64];
	uint32_t len;
	char     name[48];
	enum fetch_state state;
	pid_t    pid;          /* FETCH_RUNNING */
	int      fd;           /* read end of the child's pipe */
	double   deadline;     /* CLOCK_MONOTONIC seconds */
	double   started;
	char    *path;         /* FETCH_FOUND */
};

static struct {
	int setup;
	char *urls;            /* DEBUGINFOD_URLS as we found it; NULL: none */
	struct fetch_entry e[FETCH_MAX_ENTRIES];
	uint32_t n;
	unsigned running, found;
} F;

void fetch_setup(void)
{
	if (F.setup)
		return;
	F.setup = 1;
	atexit(fetch_stop_all);
	const char *u = getenv("DEBUGINFOD_URLS");
	if (u && *u)
		F.urls = strdup(u);
	/* libdw's own client reads it at each query: without it, it returns
	 * ENOSYS before any network or cache access. */
	unsetenv("DEBUGINFOD_URLS");
}

int fetch_enabled(void)
{
	return F.urls != NULL;
}

/* A positive number of seconds from the environment, else 0. */
static double env_seconds(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || *end || !(d > 0))
		return 0;
	return d;
}

double fetch_limit_s(void)
{
	double lim = FETCH_MAX_SECONDS;
	double t = env_seconds("DEBUGINFOD_TIMEOUT");
	double m = env_seconds("DEBUGINFOD_MAXTIME");
	if (t > 0 && t < lim)
		lim = t;
	if (m > 0 && m < lim)
		lim = m;
	return lim;
}

typedef void *(*begin_fn)(void);
typedef int (*find_fn)(void *, const unsigned char *, int, char **);
typedef void (*end_fn)(void *);

/* The child: ask the servers, write the cached file's path to fd, exit 0;
 * exit 1 when there is none.  Single-threaded (ymtop runs no threads), so
 * malloc and setenv are safe after fork. */
static void child(const struct fetch_entry *e, int fd, double limit)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(1);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		/* Nothing on ymtop's terminal (DEBUGINFOD_PROGRESS and
		 * DEBUGINFOD_VERBOSE print to stderr). */
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	/* ymtop decides when we end (it kills us); but a SIGTERM or SIGHUP
	 * meant for us must not land in ymtop's flag-setting handler. */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	alarm((unsigned)limit + 2); /* should ymtop miss the deadline */
	setenv("DEBUGINFOD_URLS", F.urls, 1);
	void *so = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!so)
		_exit(1);
	begin_fn begin = (begin_fn)(uintptr_t)dlsym(so, "debuginfod_begin");
	find_fn find = (find_fn)(uintptr_t)dlsym(so, "debuginfod_find_debuginfo");
	end_fn end = (end_fn)(uintptr_t)dlsym(so, "debuginfod_end");
	if (!begin || !find || !end)
		_exit(1);
	void *c = begin();
	if (!c)
		_exit(1);
	char *path = NULL;
	int r = find(c, e->id, (int)e->len, &path);
	if (r < 0 || !path)
		_exit(1);
	size_t n = strlen(path);
	if (write(fd, path, n) != (ssize_t)n)
		_exit(1);
	_exit(0);
}

static void start(struct fetch_entry *e)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
		e->state = FETCH_FAILED;
		return;
	}
	double limit = fetch_limit_s();
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		e->state = FETCH_FAILED;
		return;
	}
	if (pid == 0) {
		close(p[0]);
		child(e, p[1], limit);
	}
	close(p[1]);
	e->pid = pid;
	e->fd = p[0];
	e->started = clock_mono_s();
	e->deadline = e->started + limit;
	e->state = FETCH_RUNNING;
	F.running++;
}

/* A path the child sent: absolute, printable, a regular file. */
static char *take_path(int fd)
{
	char buf[4097];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	if (n <= 0 || n >= (ssize_t)sizeof buf - 1 || buf[0] != '/')
		return NULL;
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			return NULL;
	return strdup(buf);
}

static void finish(struct fetch_entry *e, int killed)
{
	int st = 0;
	if (killed)
		kill(e->pid, SIGKILL);
	if (waitpid(e->pid, &st, killed ? 0 : WNOHANG) <= 0 && !killed)
		return;
	e->path = !killed && WIFEXITED(st) && WEXITSTATUS(st) == 0 ?
		take_path(e->fd) : NULL;
	close(e->fd);
	e->fd = -1;
	e->pid = 0;
	e->state = e->path ? FETCH_FOUND : FETCH_FAILED;
	F.running--;
	if (e->path)
		F.found++;
}

unsigned fetch_poll(void)
{
	double t = clock_mono_s();
	for (uint32_t i = 0; i < F.n; i++) {
		struct fetch_entry *e = &F.e[i];
		if (e->state == FETCH_RUNNING)
			finish(e, t >= e->deadline);
	}
	for (uint32_t i = 0; i < F.n && F.running < FETCH_MAX_CHILDREN; i++)
		if (F.e[i].state == FETCH_WAITING)
			start(&F.e[i]);
	return F.found;
}

enum fetch_state fetch_want(const uint8_t *id, uint32_t len, const char *name,
			    const char **path)
{
	if (!F.urls || !id || len == 0 || len > sizeof F.e[0].id)
		return FETCH_FAILED;
	for (uint32_t i = 0; i < F.n; i++) {
		struct fetch_entry *e = &F.e[i];
		if (e->len == len && !memcmp(e->id, id, len)) {
			if (path)
				*path = e->path;
			return e->state;
		}
	}
	if (F.n == FETCH_MAX_ENTRIES)
		return FETCH_FAILED;
	struct fetch_entry *e = &F.e[F.n++];
	memset(e, 0, sizeof *e);
	memcpy(e->id, id, len);
	e->len = len;
	e->fd = -1;
	const char *base = name ? strrchr(name, '/') : NULL;
	snprintf(e->name, sizeof e->name, "%s", base ? base + 1 : name ? name : "?");
	for (char *c = e->name; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			*c = '?';     /* a progress line shows it */
	e->state = FETCH_WAITING;
	fetch_poll();
	return e->state;
}

unsigned fetch_pending(char *buf, size_t len)
{
	unsigned n = 0;
	double oldest = 0, t = clock_mono_s();
	size_t off = 0;
	char names[160] = "";
	for (uint32_t i = 0; i < F.n; i++) {
		const struct fetch_entry *e = &F.e[i];
		if (e->state != FETCH_WAITING && e->state != FETCH_RUNNING)
			continue;
		n++;
		if (e->state == FETCH_RUNNING && t - e->started > oldest)
			oldest = t - e->started;
		if (off < sizeof names) {
			int w = snprintf(names + off, sizeof names - off, "%s%s",
					 off ? ", " : "", e->name);
			off += w > 0 ? (size_t)w : 0;
		}
	}
	if (buf && len) {
		if (n)
			snprintf(buf, len, "debuginfod: %u lookup%s (%.100s), %.0f s",
				 n, n == 1 ? "" : "s", names, oldest);
		else
			buf[0] = '\0';
	}
	return n;
}

void fetch_stop_all(void)
{
	for (uint32_t i = 0; i < F.n; i++) {
		struct fetch_entry *e = &F.e[i];
		if (e->state == FETCH_RUNNING)
			finish(e, 1);
		else if (e->state == FETCH_WAITING)
			e->state = FETCH_FAILED;
	}
}
