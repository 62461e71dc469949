/*
 * ymtop: command line, attach, and the batch loop.
 *
 * Exit status: 0 success, 1 attach or runtime failure (with the reason and
 * the remedy), 2 usage error.  Every message is one line on stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frames.h"
#include "model.h"
#include "outfile.h"
#include "proc.h"
#include "report.h"
#include "shm.h"
#include "sym.h"

#ifndef YM_LIBDIR
#define YM_LIBDIR "/usr/local/lib/ymtop"
#endif

struct options {
	pid_t    pid;
	double   delay;
	double   interval;
	int      interval_set;
	int      batch;
	long     iterations;
	int      top;
	enum report_format format;
	const char *output;
	struct frames_rules rules;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void die(int code, const char *fmt, ...)
{
	va_list ap;
	fputs("ymtop: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static void usage_error(const char *fmt, const char *arg)
{
	fputs("ymtop: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs(" (see ymtop --help)\n", stderr);
	exit(2);
}

static void help(void)
{
	printf(
"usage: ymtop [-p PID] [-d SECS] [-b [-i SECS] [-n N]] [-f FORMAT] [-o PATH]\n"
"\n"
"top for the heap of a running process.  The process runs the agent:\n"
"  LD_PRELOAD=%s/libymagent.so ./app\n"
"\n"
"  -p, --pid PID          process to watch (default: the only one running the agent)\n"
"  -d, --delay SECS       screen refresh (default 1)\n"
"  -b, --batch            write reports instead of the live screen\n"
"  -i, --interval SECS    seconds between batch reports (default: the delay)\n"
"  -n, --iterations N     number of reports, 0 = until the process exits\n"
"  -f, --format FORMAT    text or json (default text)\n"
"  -o, --output PATH      write reports to PATH (%%p pid, %%e executable,\n"
"                         %%t unix time, %%n counter); default standard output\n"
"      --top N            stacks in a text report (default 20)\n"
"      --skip REGEX       treat matching functions as allocator plumbing\n"
"      --no-skip          show every frame as it is\n"
"  -V, --version          print the version\n"
"  -h, --help             this help\n"
"\n"
"See ymtop(1) and ymagent(7).\n", YM_LIBDIR);
}

/* Strict parses: the whole string, in range, or a usage error. */
static long parse_long(const char *s, long lo, long hi, const char *what)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < lo || v > hi) {
		char msg[128];
		snprintf(msg, sizeof msg, "%s must be a whole number from %ld to %ld, not '%%s'",
			 what, lo, hi);
		usage_error(msg, s);
	}
	return v;
}

static double parse_secs(const char *s, const char *what)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < 0.05 || v > 31536000) {
		char msg[128];
		snprintf(msg, sizeof msg,
			 "%s must be a number of seconds from 0.05 to 31536000, not '%%s'",
			 what);
		usage_error(msg, s);
	}
	return v;
}

enum { OPT_TOP = 256, OPT_SKIP, OPT_NO_SKIP };

static void parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longs[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "delay", required_argument, NULL, 'd' },
		{ "batch", no_argument, NULL, 'b' },
		{ "interval", required_argument, NULL, 'i' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "top", required_argument, NULL, OPT_TOP },
		{ "skip", required_argument, NULL, OPT_SKIP },
		{ "no-skip", no_argument, NULL, OPT_NO_SKIP },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	memset(o, 0, sizeof *o);
	o->delay = 1.0;
	o->top = 20;
	o->iterations = -1;
	opterr = 0;
	int c;
	char err[256];
	while ((c = getopt_long(argc, argv, ":p:d:bi:n:f:o:Vh", longs, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->pid = (pid_t)parse_long(optarg, 1, 4194304, "-p PID");
			break;
		case 'd':
			o->delay = parse_secs(optarg, "-d");
			break;
		case 'b':
			o->batch = 1;
			break;
		case 'i':
			o->interval = parse_secs(optarg, "-i");
			o->interval_set = 1;
			break;
		case 'n':
			o->iterations = parse_long(optarg, 0, LONG_MAX, "-n");
			break;
		case 'f':
			if (report_format_parse(optarg, &o->format) != 0)
				usage_error("unknown format '%s' (text or json)", optarg);
			break;
		case 'o':
			if (!*optarg)
				usage_error("-o needs a path%s", "");
			o->output = optarg;
			break;
		case OPT_TOP:
			o->top = (int)parse_long(optarg, 1, 100000, "--top");
			break;
		case OPT_SKIP:
			if (frames_rules_add(&o->rules, optarg, err, sizeof err) != 0)
				usage_error("%s", err);
			break;
		case OPT_NO_SKIP:
			o->rules.no_skip = 1;
			break;
		case 'V':
			printf("ymtop %s\n", YM_VERSION);
			exit(0);
		case 'h':
			help();
			exit(0);
		case ':':
			usage_error("option %s needs a value", argv[optind - 1]);
			break;
		default:
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->interval_set)
		o->interval = o->delay;
}

/* Where the agent is, for the remedy in messages: beside ymtop (a build
 * tree), then ../lib/ymtop/ relative to it (an installed prefix, wherever
 * it was moved), then the configured library directory. */
static void agent_path(char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			const char *rel[] = { "/libymagent.so", "/../lib/ymtop/libymagent.so" };
			for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
				char cand[PATH_MAX + 64], real[PATH_MAX];
				snprintf(cand, sizeof cand, "%s%s", self, rel[i]);
				if (access(cand, R_OK) == 0 && realpath(cand, real)) {
					snprintf(buf, len, "%s", real);
					return;
				}
			}
		}
	}
	snprintf(buf, len, "%s/libymagent.so", YM_LIBDIR);
}

static pid_t choose_pid(const struct options *o)
{
	char agent[PATH_MAX];
	if (o->pid)
		return o->pid;
	pid_t pids[64];
	int n = proc_find_agents(pids, 64);
	if (n == 1)
		return pids[0];
	agent_path(agent, sizeof agent);
	if (n == 0)
		die(1, "no running process has the agent loaded; start one with "
		       "LD_PRELOAD=%s, or give -p PID", agent);
	fprintf(stderr, "ymtop: %d processes run the agent; choose one with -p PID:\n", n);
	for (int i = 0; i < n && i < 64; i++) {
		struct proc_info pi;
		if (proc_read(pids[i], &pi) == 0)
			fprintf(stderr, "  %7ld  %s\n", (long)pids[i], pi.comm);
	}
	exit(1);
}

static void attach(pid_t pid, struct shm_reader *r)
{
	char err[512], agent[PATH_MAX];
	struct proc_info pi;
	int rc = proc_read(pid, &pi);
	if (rc == -ENOENT) {
		/* Gone, but a segment kept with YM_KEEP_SEGMENT=1 still tells
		 * its final state (ours only, unless we are root). */
		uid_t own = geteuid() == 0 ? (uid_t)-1 : geteuid();
		if (shm_reader_open(r, pid, own, err, sizeof err) == 0)
			return;
		die(1, "no process with pid %ld", (long)pid);
	}
	if (rc != 0)
		die(1, "cannot read /proc/%ld: %s", (long)pid, strerror(-rc));
	if (geteuid() != 0 && pi.uid != geteuid())
		die(1, "process %ld belongs to another user (uid %u); run ymtop as "
		       "that user or as root", (long)pid, (unsigned)pi.uid);
	rc = shm_reader_open(r, pid, pi.uid, err, sizeof err);
	if (rc == -ENOENT) {
		agent_path(agent, sizeof agent);
		die(1, "process %ld (%s) is not running the ymtop agent; start it "
		       "with LD_PRELOAD=%s", (long)pid, pi.comm, agent);
	}
	if (rc != 0)
		die(1, "pid %ld: %s", (long)pid, err);
	struct ym_header h;
	if (pread(r->fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
		die(1, "pid %ld: cannot read the segment header", (long)pid);
	if (h.start_ticks && h.start_ticks != pi.start_ticks)
		die(1, "pid %ld: the segment belongs to an earlier process with the "
		       "same pid (stale); restart the program under the agent",
		    (long)pid);
}

/* Sleep up to secs, waking early on a signal or when the target exits. */
static void wait_interval(double secs, struct shm_reader *r, uint64_t start_ticks)
{
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	double t = (double)end.tv_sec + (double)end.tv_nsec / 1e9 + secs;
	for (;;) {
		if (stop_requested)
			return;
		clock_gettime(CLOCK_MONOTONIC, &now);
		double left = t - ((double)now.tv_sec + (double)now.tv_nsec / 1e9);
		if (left <= 0)
			return;
		uint32_t flags = 0;
		if (pread(r->fd, &flags, sizeof flags,
			  __builtin_offsetof(struct ym_header, flags)) == sizeof flags &&
		    (flags & YM_FLAG_EXITED))
			return;
		if (!proc_same(r->pid, start_ticks))
			return;
		double step = left < 0.1 ? left : 0.1;
		struct timespec ts = { 0, (long)(step * 1e9) };
		nanosleep(&ts, NULL);
	}
}

static int write_one(const struct options *o, struct model *m, struct sym *s,
		     unsigned counter)
{
	struct report_opts ro = { o->format, o->top, &o->rules };
	if (!o->output) {
		int rc = report_write(stdout, m, s, &ro);
		fflush(stdout);
		if (rc != 0 || ferror(stdout))
			die(1, "writing the report to standard output failed");
		return 0;
	}
	char path[4096], err[512];
	if (outfile_expand(o->output, (pid_t)m->snap.hdr.pid, m->snap.hdr.exe,
			   m->snap.taken_real_ns / 1000000000ULL, counter, path,
			   sizeof path) != 0)
		die(2, "bad -o pattern '%s' (placeholders: %%p %%e %%t %%n %%%%)",
		    o->output);
	struct outfile of;
	if (outfile_begin(&of, path, err, sizeof err) != 0)
		die(1, "%s", err);
	if (report_write(of.f, m, s, &ro) != 0) {
		outfile_abort(&of);
		die(1, "writing %s failed: %s", path, strerror(errno));
	}
	if (outfile_commit(&of, err, sizeof err) != 0)
		die(1, "%s", err);
	fprintf(stderr, "ymtop: wrote %s\n", path);
	return 0;
}

static int run_batch(const struct options *o, pid_t pid)
{
	struct shm_reader r;
	struct model m;
	char err[512];
	attach(pid, &r);
	struct sym *s = sym_new(NULL);
	if (!s)
		die(1, "cannot start the symbolizer (libdw)");
	model_init(&m);
	uint32_t known_modules = UINT32_MAX;
	long limit = o->iterations < 0 ? (o->batch ? 0 : 1) : o->iterations;
	for (unsigned iter = 1;; iter++) {
		struct shm_snapshot snap;
		if (shm_snapshot_take(&r, &snap, err, sizeof err) != 0)
			die(1, "pid %ld: %s", (long)pid, err);
		if (model_update(&m, &snap) != 0)
			die(1, "out of memory");
		if (m.snap.nmodules != known_modules) {
			sym_set_modules(s, m.snap.modules, m.snap.nmodules);
			known_modules = m.snap.nmodules;
		}
		write_one(o, &m, s, iter);
		if ((limit && (long)iter >= limit) || !m.alive || stop_requested)
			break;
		wait_interval(o->interval, &r, m.snap.hdr.start_ticks);
		if (stop_requested)
			break;
	}
	model_free(&m);
	sym_free(s);
	shm_reader_close(&r);
	frames_rules_free((struct frames_rules *)&o->rules);
	return 0;
}

int main(int argc, char **argv)
{
	struct options o;
	parse_args(argc, argv, &o);
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	pid_t pid = choose_pid(&o);
	return run_batch(&o, pid);
}
