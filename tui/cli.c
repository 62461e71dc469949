/*
 * cli: ymtop's command line parsed strictly into struct options, and
 * the one-line exits with their status (see cli.h).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bsd/stdlib.h>

#include "cli.h"
#include "fmt.h"
#include "report/prometheus.h"
#include "shm.h"
#include "util/addr.h"

#ifndef YM_LIBDIR
#define YM_LIBDIR "/usr/local/lib/ymtop"
#endif

void cli_die(int code, const char *fmt, ...)
{
	va_list ap;
	fputs("ymtop: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

void cli_die_err(const struct ym_err *e)
{
	if (e->msg[0])
		fprintf(stderr, "ymtop: %s\n", e->msg);
	exit(e->code);
}

/* "ymtop: <message> (see ymtop --help)" and exit status 2. */
__attribute__((noreturn, format(printf, 1, 2)))
static void usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("ymtop: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see ymtop --help)\n", stderr);
	exit(2);
}

static void help(void)
{
	printf(
"usage: ymtop [-p PID] [-d SECS] [-b [-i SECS] [-n N]] [-f FORMAT] [-o PATH]\n"
"       ymtop diff [-f text|json] [--top N] OLD NEW\n"
"\n"
"top for the heap of a running process.  The process runs the agent:\n"
"  LD_PRELOAD=%s/libymagent.so ./app\n"
"\n"
"  -p, --pid PID          process to watch (default: the only one running the agent);\n"
"                         several with -b -f prometheus: one report of them all\n"
"  -d, --delay SECS       screen refresh (default 1)\n"
"  -b, --batch            write reports instead of the live screen\n"
"  -i, --interval SECS    seconds between batch reports (default: the delay)\n"
"  -n, --iterations N     snapshots (reports) to take, 0 = until the process exits\n"
"  -f, --format FORMAT    text (default), json, folded, pprof, sqlite, svg\n"
"                         or prometheus (-o replaces its file)\n"
"  -o, --output PATH      write reports to PATH (%%p pid, %%e executable,\n"
"                         %%t unix time, %%n counter); default standard output;\n"
"                         required for pprof, sqlite and svg\n"
"      --top N            stacks in a text report (default 20); display\n"
"                         frames per process in -f prometheus and --serve (50)\n"
"      --weight WHAT      folded and svg: retained (default), allocated, objects\n"
"      --on-change PCT    batch: write only when retained bytes moved PCT%%\n"
"                         since the last report written\n"
"      --snapshot-on WHEN batch: write only when the process reaches a new\n"
"                         peak above SIZE (peak:SIZE) or its cgroup's memory\n"
"                         events move (pressure); repeatable\n"
"      --sort KEY         stack order: retained (default), allocated, rate, peak,\n"
"                         trend (growth rate)\n"
"      --rate BYTES       ask the agent to sample every BYTES on average\n"
"                         (2 to 1T; k, M, G suffixes: KiB, MiB, GiB)\n"
"      --max-overhead PCT ask the agent to keep its sampling under PCT%% of\n"
"                         the process's CPU time (it lengthens the rate)\n"
"      --serve [ADDR:]PORT  serve /metrics (Prometheus) and /debug/pprof/heap\n"
"                         for every agent process (or -p PID); ADDR default\n"
"                         127.0.0.1; no screen, no write to any target\n"
"      --web-config FILE  --serve with TLS and basic auth, as node_exporter's\n"
"                         web configuration file says\n"
"      --detach           with -p: take the agent out of PID (sampling off,\n"
"                         allocator restored, segment removed; unloaded when\n"
"                         no thread is inside it), then exit\n"
"      --duration SECS    with -p: watch for SECS, then detach (also when\n"
"                         stopped earlier: q, SIGINT, SIGTERM)\n"
"      --children         with -p: PID and the processes forked from it, in\n"
"                         the process list (or --serve)\n"
"      --skip REGEX       treat matching functions as allocator plumbing\n"
"                         (also: ~/.config/ymtop/skip, /etc/ymtop/skip)\n"
"      --no-skip          show every frame as it is (no rule, no skip file)\n"
"  -V, --version          print the version\n"
"  -h, --help             this help\n"
"\n"
"See ymtop(1) and ymagent(7).\n", YM_LIBDIR);
}

/* Strict parses: the whole string, in range, or a usage error.  Integers
 * through libbsd's strtonum (base 10, the whole string, leading blanks
 * and a sign allowed as strtol allows them). */
static long parse_long(const char *s, long lo, long hi, const char *what)
{
	const char *bad = NULL;
	long long v = strtonum(s, lo, hi, &bad);
	if (bad)
		usage_error("%s must be a whole number from %ld to %ld, not '%s'",
			    what, lo, hi, s);
	return (long)v;
}

static double parse_secs(const char *s, const char *what)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < 0.05 || v > 31536000)
		usage_error("%s must be a number of seconds from 0.05 to 31536000, not '%s'",
			    what, s);
	return v;
}

/* A percentage: a number from 0 to 1000000, with an optional '%'. */
static double parse_percent(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (*end == '%')
		end++;
	if (!*s || *end || errno || !isfinite(v) || v < 0 || v > 1e6)
		usage_error("--on-change must be a percentage from 0 to 1000000, not '%s'", s);
	return v;
}

enum { OPT_TOP = 256, OPT_SKIP, OPT_NO_SKIP, OPT_WEIGHT, OPT_ON_CHANGE, OPT_SORT,
       OPT_RATE, OPT_SERVE, OPT_CHILDREN, OPT_WEB_CONFIG, OPT_SNAPSHOT_ON,
       OPT_MAX_OVERHEAD, OPT_DETACH, OPT_DURATION };

/* --max-overhead: a percentage above 0 and up to 100, in millionths (at
 * least 1: 0.0001 %). */
static uint32_t parse_budget(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end != s && *end == '%')
		end++;
	if (!*s || *end || errno || !isfinite(v) || v <= 0 || v > 100 ||
	    v * 1e4 < 0.5)
		usage_error("--max-overhead must be a percentage of CPU time above 0 "
			    "and up to 100 (0.0001 at least), not '%s'", s);
	return (uint32_t)(v * 1e4 + 0.5);
}

/* --snapshot-on peak:SIZE or pressure, into o (repeatable). */
static void parse_snapshot_on(const char *s, struct options *o)
{
	if (!strcmp(s, "pressure")) {
		o->snap_on |= CLI_SNAP_PRESSURE;
		return;
	}
	if (!strncmp(s, "peak:", 5) &&
	    fmt_parse_bytes(s + 5, 1, 1ULL << 50, &o->snap_peak) == 0) {
		o->snap_on |= CLI_SNAP_PEAK;
		return;
	}
	usage_error("--snapshot-on must be peak:SIZE (e.g. peak:512M) or pressure, not '%s'",
		    s);
}

void cli_parse(int argc, char **argv, struct options *o)
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
		{ "weight", required_argument, NULL, OPT_WEIGHT },
		{ "on-change", required_argument, NULL, OPT_ON_CHANGE },
		{ "sort", required_argument, NULL, OPT_SORT },
		{ "rate", required_argument, NULL, OPT_RATE },
		{ "max-overhead", required_argument, NULL, OPT_MAX_OVERHEAD },
		{ "serve", required_argument, NULL, OPT_SERVE },
		{ "web-config", required_argument, NULL, OPT_WEB_CONFIG },
		{ "children", no_argument, NULL, OPT_CHILDREN },
		{ "snapshot-on", required_argument, NULL, OPT_SNAPSHOT_ON },
		{ "detach", no_argument, NULL, OPT_DETACH },
		{ "duration", required_argument, NULL, OPT_DURATION },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	memset(o, 0, sizeof *o);
	o->delay = 1.0;
	o->top = 20;
	o->iterations = -1;
	o->on_change = -1;
	int weight_set = 0, top_set = 0;
	struct sockaddr_storage addr;
	opterr = 0;
	int c;
	char err[256];
	while ((c = getopt_long(argc, argv, ":p:d:bi:n:f:o:Vh", longs, NULL)) != -1) {
		switch (c) {
		case 'p': {
			pid_t pid = (pid_t)parse_long(optarg, 1, 4194304, "-p PID");
			pid_t *v = realloc(o->pids, (size_t)(o->npids + 1) * sizeof *v);
			if (!v)
				cli_die(1, "out of memory");
			v[o->npids++] = pid;
			o->pids = v;
			if (!o->pid)
				o->pid = pid;
			break;
		}
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
				usage_error("unknown format '%s': use text, json, folded, pprof, sqlite, svg or prometheus",
					    optarg);
			o->format_set = 1;
			break;
		case 'o':
			if (!*optarg)
				usage_error("-o needs a path");
			o->output = optarg;
			break;
		case OPT_TOP:
			o->top = (int)parse_long(optarg, 1, 100000, "--top");
			top_set = 1;
			break;
		case OPT_SKIP:
			if (frames_rules_add(&o->rules, optarg, err, sizeof err) != 0)
				usage_error("%s", err);
			break;
		case OPT_NO_SKIP:
			o->rules.no_skip = 1;
			break;
		case OPT_WEIGHT:
			if (report_weight_parse(optarg, &o->weight) != 0)
				usage_error("--weight must be retained, allocated or objects, not '%s'",
					    optarg);
			weight_set = 1;
			break;
		case OPT_ON_CHANGE:
			o->on_change = parse_percent(optarg);
			break;
		case OPT_SNAPSHOT_ON:
			parse_snapshot_on(optarg, o);
			break;
		case OPT_SORT:
			if (report_sort_parse(optarg, &o->sort) != 0)
				usage_error("--sort must be retained, allocated, rate or peak, not '%s'",
					    optarg);
			break;
		case OPT_RATE:
			if (fmt_parse_bytes(optarg, SHM_RATE_MIN, SHM_RATE_MAX, &o->rate) != 0)
				usage_error("--rate must be a number of bytes from 2 to "
					    "1099511627776 (k, M, G suffixes: KiB, MiB, GiB), "
					    "not '%s'", optarg);
			break;
		case OPT_MAX_OVERHEAD:
			o->max_overhead = parse_budget(optarg);
			break;
		case OPT_SERVE:
			if (addr_parse(optarg, &addr, err, sizeof err) != 0)
				usage_error("%s", err);
			o->serve = optarg;
			break;
		case OPT_WEB_CONFIG:
			if (!*optarg)
				usage_error("--web-config needs a file");
			o->web_config = optarg;
			break;
		case OPT_CHILDREN:
			o->children = 1;
			break;
		case OPT_DETACH:
			o->detach = 1;
			break;
		case OPT_DURATION:
			o->duration = parse_secs(optarg, "--duration");
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
	/* The skip files: --no-skip turns them off with every other rule. */
	if (!o->rules.no_skip && frames_rules_load_config(&o->rules, err, sizeof err) != 0)
		usage_error("%s (fix or remove the line, or use --no-skip)", err);
	if (!o->interval_set)
		o->interval = o->delay;
	if (o->serve && (o->batch || o->output || o->format_set || o->rate ||
			 o->max_overhead || o->on_change >= 0 || o->iterations >= 0))
		usage_error("--serve runs alone: no -b, -n, -f, -o, --rate, --max-overhead or --on-change "
			    "(it never writes to a target; -f prometheus is /metrics)");
	if (o->web_config && !o->serve)
		usage_error("--web-config applies to --serve");
	if (o->npids > 1 && (!o->batch || o->format != REPORT_PROMETHEUS ||
			     o->children || o->on_change >= 0 || o->snap_on))
		usage_error("several -p make one report of every process's series: "
			    "-b -f prometheus only (no --children, --on-change or "
			    "--snapshot-on); other reports take one -p");
	if (o->children && (!o->pid || o->batch))
		usage_error("--children needs -p PID, and the screen or --serve (not -b)");
	if ((o->format == REPORT_PROMETHEUS || o->serve) && !top_set)
		o->top = PROM_TOP_DEFAULT;
	if (report_format_needs_file(o->format) && !o->output)
		usage_error("-f %s writes a file: give its name with -o PATH",
			    report_format_name(o->format));
	/* (The live screen's flame-graph keys may use --weight whatever -f
	 * says; a batch run has only -f.) */
	if (weight_set && o->batch && o->format != REPORT_FOLDED &&
	    o->format != REPORT_SVG)
		usage_error("--weight applies to -f folded and -f svg, not -f %s",
			    report_format_name(o->format));
	if (o->on_change >= 0 && !o->batch)
		usage_error("--on-change needs batch mode (-b)");
	if (o->snap_on && !o->batch)
		usage_error("--snapshot-on needs batch mode (-b)");
	if ((o->detach || o->duration > 0) && !o->pid)
		usage_error("--detach and --duration need -p PID");
	if (o->detach && (o->batch || o->serve || o->duration > 0 || o->children))
		usage_error("--detach runs alone: ymtop -p PID --detach");
	if (o->duration > 0 && (o->serve || o->children))
		usage_error("--duration applies to the screen and -b, with -p PID");
	if (o->snap_on && o->on_change >= 0)
		usage_error("--snapshot-on and --on-change are two rules for one thing: give one");
}

void cli_free(struct options *o)
{
	frames_rules_free(&o->rules);
	free(o->pids);
	o->pids = NULL;
	o->npids = 0;
}
