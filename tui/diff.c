/*
 * diff: two reports compared stack by stack (see diff.h).
 *
 * Each report is read whole (at most DIFF_MAX_FILE bytes, from a file, a
 * pipe or the standard input), a pprof profile turned into the JSON
 * report's shape (diffpb.h), JSON parsed by jansson, and checked: an object, report_version absent or at most
 * DIFF_REPORT_VERSION, a "stacks" array of at most DIFF_MAX_STACKS
 * objects, each with finite non-negative retained_bytes and
 * allocated_bytes and a "frames" array of at most DIFF_MAX_FRAMES objects.
 * A stack's key is its kind and, per frame, the module's file name and
 * the function; stacks of one report with the same key (two call sites
 * in one function, lines apart) are summed.  The keys of both reports
 * are sorted together and merged: a key in NEW only is "new", in OLD only
 * "gone", in both with a different figure "changed"; the rest are counted
 * as unchanged.  The result is sorted by the change in retained bytes,
 * growth first.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "diff.h"
#include "diffpb.h"
#include "fmt.h"

#define DIFF_MAX_KEY    (8u << 20)     /* bytes of one stack's key: 4096 frames of long C++ names */

/* One stack of one report, or two merged. */
struct dstack {
	char    *key;          /* owned */
	size_t   keylen;
	int      side;         /* 0 OLD, 1 NEW: while sorting */
	int      in[2];        /* present in OLD, in NEW */
	double   ret[2], alloc[2];
	json_t  *frames;       /* borrowed from the newest report holding it */
	long long display;     /* its display_frame, -1 none */
	const char *kind;      /* borrowed */
};

struct dreport {
	const char *path;
	json_t  *root;
	double   retained, allocated;
};

struct dset {
	struct dstack *v;
	size_t n, cap;
};

/* One line on stderr naming the file (escaped: a path is the user's, a
 * parser message may quote the file's bytes), status 2. */
__attribute__((format(printf, 2, 3)))
static int bad(const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fputs("ymtop: diff: ", stderr);
	if (path) {
		fmt_vis_fputs(stderr, path);
		fputs(": ", stderr);
	}
	fmt_vis_fputs(stderr, msg);
	fputc('\n', stderr);
	return 2;
}

/* The whole file into a new buffer, at most DIFF_MAX_FILE bytes: a
 * regular file, a pipe or socket (a FIFO, <(...)), or "-", the standard
 * input, whatever it is. */
static int slurp(const char *path, char **out, size_t *len)
{
	int is_stdin = !strcmp(path, "-");
	/* A FIFO is opened blocking, as cat does: its writer may come
	 * later, and a read before it would be the end.  Anything else
	 * non-blocking, so that a device does not hold the open. */
	struct stat pre;
	int fifo = !is_stdin && stat(path, &pre) == 0 && S_ISFIFO(pre.st_mode);
	int fd = is_stdin ? 0 : open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY |
						 (fifo ? 0 : O_NONBLOCK));
	if (fd < 0)
		return bad(path, "%s", strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode) ||
	    (!is_stdin && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) &&
	     !S_ISSOCK(st.st_mode))) {
		if (!is_stdin)
			close(fd);
		return bad(path, "not a regular file, pipe or socket");
	}
	if (!is_stdin && !S_ISREG(st.st_mode)) {
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size > DIFF_MAX_FILE) {
		if (!is_stdin)
			close(fd);
		return bad(path, "larger than %u MiB: not a report ymtop diff reads",
			   DIFF_MAX_FILE >> 20);
	}
	/* A regular file's size is a hint; a pipe's is unknown: read to
	 * the end either way, never past DIFF_MAX_FILE + 1 bytes. */
	size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536, n = 0;
	char *buf = malloc(cap);
	const char *why = NULL;
	int e = 0;
	if (!buf)
		why = "out of memory";
	while (!why) {
		if (n == cap) {
			if (cap > DIFF_MAX_FILE) {
				why = "larger";
				break;
			}
			size_t nc = cap * 2 > (size_t)DIFF_MAX_FILE + 1 ?
				    (size_t)DIFF_MAX_FILE + 1 : cap * 2;
			char *nb = realloc(buf, nc);
			if (!nb) {
				why = "out of memory";
				break;
			}
			buf = nb;
			cap = nc;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			e = errno;
			why = "read";
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (!is_stdin)
		close(fd);
	if (why) {
		free(buf);
		if (!strcmp(why, "larger"))
			return bad(path, "larger than %u MiB: not a report ymtop diff reads",
				   DIFF_MAX_FILE >> 20);
		return bad(path, "%s", e ? strerror(e) : why);
	}
	*out = buf;
	*len = n;
	return 0;
}

/* A finite non-negative number field (integer or real); 0 and *v, or -1. */
static int num(const json_t *o, const char *k, double *v)
{
	const json_t *x = json_object_get(o, k);
	if (!json_is_number(x))
		return -1;
	double d = json_number_value(x);
	if (!isfinite(d) || d < 0 || d > 9.2e18)
		return -1;
	*v = d;
	return 0;
}

static const char *str_or(const json_t *o, const char *k, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : dflt;
}

/* Append s (n bytes) to the key being built; -1 beyond DIFF_MAX_KEY. */
static int key_add(char *key, size_t *len, const char *s, size_t n)
{
	if (*len + n + 1 > DIFF_MAX_KEY)
		return -1;
	memcpy(key + *len, s, n);
	*len += n;
	key[*len] = 0;
	return 0;
}

/* The key of a stack (see the file's comment) into a new string, built
 * in key (DIFF_MAX_KEY bytes). */
static char *stack_key(char *key, const json_t *frames, const char *kind,
		       size_t *len)
{
	*len = 0;
	key[0] = 0;
	/* NUL separates fields, so that no name can forge another's key. */
	if (key_add(key, len, kind, strlen(kind) + 1) != 0)
		goto fail;
	size_t i;
	const json_t *fr;
	json_array_foreach(frames, i, fr) {
		const char *mod = str_or(fr, "module", "");
		const char *base = strrchr(mod, '/');
		base = base ? base + 1 : mod;
		const char *fn = str_or(fr, "function", "");
		if (key_add(key, len, base, strlen(base) + 1) != 0 ||
		    key_add(key, len, fn, strlen(fn) + 1) != 0)
			goto fail;
	}
	char *k = malloc(*len + 1);
	if (k)
		memcpy(k, key, *len + 1);
	return k;
fail:
	return NULL;
}

static int set_push(struct dset *s, const struct dstack *d)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 256;
		struct dstack *nv = realloc(s->v, nc * sizeof *nv);
		if (!nv)
			return -1;
		s->v = nv;
		s->cap = nc;
	}
	s->v[s->n++] = *d;
	return 0;
}

static int load_stacks(struct dreport *r, int side, struct dset *set,
		       const json_t *stacks, char *scratch);

/* Read, parse and check one report; its stacks appended to set with
 * side.  0, or the exit status after one line. */
static int load(struct dreport *r, int side, struct dset *set)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = slurp(r->path, &buf, &len);
	if (rc)
		return rc;
	if (diffpb_is_profile((const unsigned char *)buf, len)) {
		char msg[256];
		int prc = diffpb_read((const unsigned char *)buf, len, &r->root,
				      msg, sizeof msg);
		free(buf);
		if (prc != 0)
			return bad(r->path, "pprof: %s", msg);
	} else {
		json_error_t err;
		r->root = json_loadb(buf, len, 0, &err);
		free(buf);
		if (!r->root)
			return bad(r->path, "not a JSON report (line %d: %.120s)",
				   err.line, err.text);
	}
	if (!json_is_object(r->root))
		return bad(r->path, "not a ymtop JSON report (not an object)");
	const json_t *ver = json_object_get(r->root, "report_version");
	if (ver && (!json_is_integer(ver) || json_integer_value(ver) < 1))
		return bad(r->path, "not a ymtop JSON report (report_version is not a positive whole number)");
	if (ver && json_integer_value(ver) > DIFF_REPORT_VERSION)
		return bad(r->path, "report_version %lld is newer than this ymtop reads (%d)",
			   (long long)json_integer_value(ver), DIFF_REPORT_VERSION);
	const json_t *stacks = json_object_get(r->root, "stacks");
	if (!json_is_array(stacks))
		return bad(r->path, "not a ymtop JSON report (no \"stacks\" array)");
	if (json_array_size(stacks) > DIFF_MAX_STACKS)
		return bad(r->path, "more than %u stacks", DIFF_MAX_STACKS);
	const json_t *totals = json_object_get(r->root, "totals");
	if (json_is_object(totals))
		(void)num(totals, "retained_bytes", &r->retained);
	char *scratch = malloc(DIFF_MAX_KEY);
	if (!scratch)
		return bad(r->path, "out of memory");
	rc = load_stacks(r, side, set, stacks, scratch);
	free(scratch);
	if (rc)
		return rc;
	if (!json_is_object(totals))
		for (size_t k = 0; k < set->n; k++)
			if (set->v[k].side == side)
				r->retained += set->v[k].ret[side];
	return 0;
}

static int load_stacks(struct dreport *r, int side, struct dset *set,
		       const json_t *stacks, char *scratch)
{
	size_t i;
	json_t *st;
	json_array_foreach(stacks, i, st) {
		struct dstack d;
		memset(&d, 0, sizeof d);
		json_t *frames = json_object_get(st, "frames");
		if (!json_is_object(st) || !json_is_array(frames) ||
		    num(st, "retained_bytes", &d.ret[side]) != 0 ||
		    num(st, "allocated_bytes", &d.alloc[side]) != 0)
			return bad(r->path, "stack %zu is not a ymtop report's stack "
				   "(frames, retained_bytes, allocated_bytes)", i);
		if (json_array_size(frames) > DIFF_MAX_FRAMES)
			return bad(r->path, "stack %zu has more than %u frames", i,
				   DIFF_MAX_FRAMES);
		size_t j;
		const json_t *fr;
		json_array_foreach(frames, j, fr)
			if (!json_is_object(fr))
				return bad(r->path, "stack %zu: frame %zu is not an object", i, j);
		d.kind = str_or(st, "kind", "malloc");
		d.key = stack_key(scratch, frames, d.kind, &d.keylen);
		if (!d.key)
			return bad(r->path, "stack %zu: its frames' names are longer than %u bytes "
				   "(or out of memory)", i, DIFF_MAX_KEY);
		d.side = side;
		d.in[side] = 1;
		d.frames = frames;
		const json_t *disp = json_object_get(st, "display_frame");
		d.display = json_is_integer(disp) ? (long long)json_integer_value(disp) : -1;
		if (d.display >= (long long)json_array_size(frames))
			d.display = -1;
		r->allocated += d.alloc[side];
		if (set_push(set, &d) != 0) {
			free(d.key);
			return bad(r->path, "out of memory");
		}
	}
	return 0;
}

static int by_key(const void *a, const void *b)
{
	const struct dstack *x = a, *y = b;
	size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
	int c = memcmp(x->key, y->key, n);
	if (c)
		return c;
	if (x->keylen != y->keylen)
		return x->keylen < y->keylen ? -1 : 1;
	return x->side - y->side;
}

static double dret(const struct dstack *d) { return d->ret[1] - d->ret[0]; }
static double dalloc(const struct dstack *d) { return d->alloc[1] - d->alloc[0]; }

/* Growth first; then by the change in allocated bytes; then by key, so
 * that the order never depends on qsort. */
static int by_growth(const void *a, const void *b)
{
	const struct dstack *x = a, *y = b;
	if (dret(x) != dret(y))
		return dret(x) > dret(y) ? -1 : 1;
	if (dalloc(x) != dalloc(y))
		return dalloc(x) > dalloc(y) ? -1 : 1;
	return by_key(a, b);
}

/* Merge the sorted set in place: one entry per key, both sides. */
static size_t merge(struct dset *s)
{
	size_t w = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct dstack *d = &s->v[i];
		if (w && s->v[w - 1].keylen == d->keylen &&
		    memcmp(s->v[w - 1].key, d->key, d->keylen) == 0) {
			struct dstack *t = &s->v[w - 1];
			for (int k = 0; k < 2; k++) {
				t->in[k] |= d->in[k];
				t->ret[k] += d->ret[k];
				t->alloc[k] += d->alloc[k];
			}
			if (d->side == 1) {   /* name it as the newer report does */
				t->frames = d->frames;
				t->display = d->display;
			}
			free(d->key);
			continue;
		}
		s->v[w++] = *d;
	}
	s->n = w;
	return w;
}

static const char *status(const struct dstack *d)
{
	return !d->in[0] ? "new" : !d->in[1] ? "gone" : "changed";
}

static int unchanged(const struct dstack *d)
{
	return d->in[0] && d->in[1] && d->ret[0] == d->ret[1] && d->alloc[0] == d->alloc[1];
}

/* The stack's display frame as "function (file:line)", escaped. */
static void print_label(FILE *f, const struct dstack *d)
{
	size_t n = json_array_size(d->frames);
	if (!n) {
		fputs("(no frames)", f);
		return;
	}
	size_t k = d->display >= 0 ? (size_t)d->display : 0;
	const json_t *fr = json_array_get(d->frames, k);
	fmt_vis_fputs(f, str_or(fr, "function", "?"));
	const char *file = json_string_value(json_object_get(fr, "file"));
	const json_t *line = json_object_get(fr, "line");
	if (file && json_is_integer(line) && json_integer_value(line) > 0) {
		const char *base = strrchr(file, '/');
		fputs(" (", f);
		fmt_vis_fputs(f, base ? base + 1 : file);
		fprintf(f, ":%lld)", (long long)json_integer_value(line));
	}
	if (strcmp(d->kind, "malloc") != 0) {
		fputs(" [", f);
		fmt_vis_fputs(f, d->kind);
		fputc(']', f);
	}
}

/* What identifies a report in the output: its name, pid and time. */
static void text_side(FILE *f, const char *what, const struct dreport *r)
{
	const json_t *o = r->root;
	char b1[32];
	fprintf(f, "%s: ", what);
	fmt_vis_fputs(f, r->path);
	fputs(" (", f);
	fmt_vis_fputs(f, str_or(o, "name", "?"));
	const json_t *pid = json_object_get(o, "pid");
	if (json_is_integer(pid))
		fprintf(f, " pid %lld", (long long)json_integer_value(pid));
	const json_t *up = json_object_get(o, "uptime_s");
	if (json_is_number(up) && isfinite(json_number_value(up)) &&
	    json_number_value(up) >= 0)
		fprintf(f, ", up %s", fmt_duration(json_number_value(up), b1, sizeof b1));
	fprintf(f, "), retained %s\n", fmt_bytes(r->retained, b1, sizeof b1));
}

static void write_text(FILE *f, const struct dreport *r, const struct dset *s,
		       size_t nunchanged, size_t top)
{
	char b1[32], b2[32], b3[32], b4[32];
	text_side(f, "old", &r[0]);
	text_side(f, "new", &r[1]);
	fprintf(f, "retained %s, allocated %s; %zu stacks changed, %zu unchanged\n\n",
		fmt_sbytes(r[1].retained - r[0].retained, b1, sizeof b1),
		fmt_sbytes(r[1].allocated - r[0].allocated, b2, sizeof b2),
		s->n - nunchanged, nunchanged);
	fprintf(f, "%12s %12s %10s %10s %-7s  %s\n", "RETAINED+-", "ALLOCATED+-",
		"OLD", "NEW", "STATUS", "FUNCTION");
	size_t shown = 0;
	for (size_t i = 0; i < s->n && (!top || shown < top); i++) {
		const struct dstack *d = &s->v[i];
		if (unchanged(d))
			continue;
		shown++;
		fprintf(f, "%12s %12s %10s %10s %-7s  ",
			fmt_sbytes(dret(d), b1, sizeof b1),
			fmt_sbytes(dalloc(d), b2, sizeof b2),
			fmt_bytes(d->ret[0], b3, sizeof b3),
			fmt_bytes(d->ret[1], b4, sizeof b4), status(d));
		print_label(f, d);
		fputc('\n', f);
	}
}

static void json_side(FILE *f, const struct dreport *r)
{
	const json_t *o = r->root;
	fputs("{\"file\":", f);
	fmt_json_string(f, r->path);
	fputs(",\"name\":", f);
	fmt_json_string(f, json_string_value(json_object_get(o, "name")));
	const json_t *pid = json_object_get(o, "pid");
	if (json_is_integer(pid))
		fprintf(f, ",\"pid\":%lld", (long long)json_integer_value(pid));
	else
		fputs(",\"pid\":null", f);
	const json_t *t = json_object_get(o, "time");
	if (json_is_number(t) && isfinite(json_number_value(t)))
		fprintf(f, ",\"time\":%.3f", json_number_value(t));
	else
		fputs(",\"time\":null", f);
	fprintf(f, ",\"retained_bytes\":%.0f,\"allocated_bytes\":%.0f}",
		r->retained, r->allocated);
}

static void write_json(FILE *f, const struct dreport *r, const struct dset *s,
		       size_t nunchanged, size_t top)
{
	fprintf(f, "{\"report_version\":%d,\"old\":", DIFF_REPORT_VERSION);
	json_side(f, &r[0]);
	fputs(",\"new\":", f);
	json_side(f, &r[1]);
	fprintf(f, ",\"delta_retained_bytes\":%.0f,\"delta_allocated_bytes\":%.0f,"
		"\"unchanged_stacks\":%zu,\"stacks\":[",
		r[1].retained - r[0].retained, r[1].allocated - r[0].allocated,
		nunchanged);
	size_t shown = 0;
	for (size_t i = 0; i < s->n && (!top || shown < top); i++) {
		const struct dstack *d = &s->v[i];
		if (unchanged(d))
			continue;
		fprintf(f, "%s{\"status\":\"%s\",\"kind\":", shown ? "," : "", status(d));
		shown++;
		fmt_json_string(f, d->kind);
		fprintf(f, ",\"delta_retained_bytes\":%.0f,\"delta_allocated_bytes\":%.0f,"
			"\"old_retained_bytes\":%.0f,\"new_retained_bytes\":%.0f,"
			"\"old_allocated_bytes\":%.0f,\"new_allocated_bytes\":%.0f,"
			"\"frames\":", dret(d), dalloc(d), d->ret[0], d->ret[1],
			d->alloc[0], d->alloc[1]);
		/* The input's frames, re-encoded by jansson: valid JSON
		 * whatever the file held. */
		json_dumpf(d->frames, f, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (d->display >= 0)
			fprintf(f, ",\"display_frame\":%lld}", d->display);
		else
			fputs(",\"display_frame\":null}", f);
	}
	fputs("]}\n", f);
}

__attribute__((format(printf, 1, 2)))
static int usage(const char *fmt, ...)
{
	va_list ap;
	fputs("ymtop: diff: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (usage: ymtop diff [-f text|json] [--top N] OLD NEW)\n", stderr);
	return 2;
}

int diff_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "top", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int json = 0;
	size_t top = 0;
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "+:f:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (!strcmp(optarg, "json"))
				json = 1;
			else if (strcmp(optarg, "text") != 0)
				return usage("unknown format '%s': use text or json", optarg);
			break;
		case 't': {
			char *end;
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 1 || v > 100000000)
				return usage("--top must be a whole number from 1, not '%s'", optarg);
			top = (size_t)v;
			break;
		}
		case 'h':
			printf("usage: ymtop diff [-f text|json] [--top N] OLD NEW\n"
			       "Compare two reports of ymtop (JSON or pprof; - for the standard\n"
			       "input) stack by stack, growth first.\n");
			return 0;
		case ':':
			return usage("option %s needs a value", argv[optind - 1]);
		default:
			return usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 2)
		return usage("needs two reports");
	if (!strcmp(argv[optind], "-") && !strcmp(argv[optind + 1], "-"))
		return usage("only one report can be the standard input");
	struct dreport r[2];
	memset(r, 0, sizeof r);
	r[0].path = argv[optind];
	r[1].path = argv[optind + 1];
	struct dset set = { 0 };
	int rc = load(&r[0], 0, &set);
	if (!rc)
		rc = load(&r[1], 1, &set);
	if (!rc) {
		qsort(set.v, set.n, sizeof *set.v, by_key);
		merge(&set);
		qsort(set.v, set.n, sizeof *set.v, by_growth);
		size_t nunchanged = 0;
		for (size_t i = 0; i < set.n; i++)
			nunchanged += unchanged(&set.v[i]) != 0;
		if (json)
			write_json(stdout, r, &set, nunchanged, top);
		else
			write_text(stdout, r, &set, nunchanged, top);
		if (fflush(stdout) != 0 || ferror(stdout))
			rc = bad(NULL, "writing the comparison: %s", strerror(errno));
	}
	for (size_t i = 0; i < set.n; i++)
		free(set.v[i].key);
	free(set.v);
	json_decref(r[0].root);
	json_decref(r[1].root);
	return rc;
}
