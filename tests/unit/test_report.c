/*
 * The report writers on a model built by hand: stacks whose frames are
 * functions of this test program (symbolized for real, through the
 * program's own module list), with known estimates.  Checks what each
 * format must preserve: folded sums, SVG structure, the pprof message,
 * the SQLite tables, and report_save's never-overwrite, nothing-left-behind
 * rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <link.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "report/report.h"

#define NOINLINE __attribute__((noinline, used))

static void *volatile sink;
NOINLINE static void site_a(void) { sink = malloc(1); free(sink); }
NOINLINE static void site_b(void) { sink = malloc(2); free(sink); }
NOINLINE static void caller_x(void) { site_a(); site_b(); }
NOINLINE static void caller_y(void) { site_a(); }

/* ---- this process's modules, as the agent would publish them ---- */

static struct ym_module mods[256];
static uint32_t nmods;

#include "modules.h"

/* ---- the model ---- */

#define NST 5
#define DEPTH 2

struct fixture {
	struct model m;
	struct sym *s;
	char dir[64];
};

static uint64_t ret(void (*fn)(void), int off)
{
	return (uint64_t)(uintptr_t)fn + (uint64_t)off;
}

/* Stack 0: the overflow stack, never sampled.  Stacks 1 and 4 have the
 * same functions (different return addresses): one folded line. */
static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof *fx);
	if (!fx)
		return -1;
	/* No build id: the symbolizer would check a made-up one against
	 * the file (the integration tests see real ones). */
	nmods = modules_of_self(mods, 256, 0);
	const uint64_t frames[NST][DEPTH] = {
		{ 0, 0 },
		{ ret(site_a, 1), ret(caller_x, 1) },
		{ ret(site_b, 1), ret(caller_x, 2) },
		{ ret(site_a, 1), ret(caller_y, 1) },
		{ ret(site_a, 2), ret(caller_x, 3) },
	};
	const double retained[NST] = { 0, 3000, 1000, 2000, 500 };
	const double alloc[NST] = { 0, 5000, 9000, 2000, 700 };
	struct shm_snapshot s;
	memset(&s, 0, sizeof s);
	s.hdr.pid = 0x7fffffff;   /* no such process */
	s.hdr.sample_rate = 4096;
	s.hdr.max_depth = DEPTH;
	snprintf(s.hdr.exe, sizeof s.hdr.exe, "/bin/test \"<&>\"");
	s.taken_mono_ns = 5000000000ULL;
	s.taken_real_ns = 1700000000000000000ULL;
	s.stack_stride = shm_stack_stride(DEPTH);
	s.nstacks = NST;
	s.stacks = calloc(NST, s.stack_stride);
	for (uint32_t i = 0; i < NST; i++) {
		struct ym_stack *st = (struct ym_stack *)(s.stacks + i * s.stack_stride);
		st->hash = 10 + i;
		st->depth = i ? DEPTH : 0;
		memcpy(st->frames, frames[i], sizeof frames[i]);
		/* Each object a sample: well sampled, nothing marked. */
		st->alloc_samples = (uint64_t)(alloc[i] / 100);
		st->free_samples = (uint64_t)((alloc[i] - retained[i]) / 100);
		st->alloc_bytes = (uint64_t)alloc[i];
		st->free_bytes = (uint64_t)(alloc[i] - retained[i]);
		st->alloc_objects_fx = (uint64_t)(alloc[i] / 100) * YM_FX_ONE;
		st->free_objects_fx = (uint64_t)((alloc[i] - retained[i]) / 100) * YM_FX_ONE;
		st->life[3].bytes = st->free_bytes;
		st->life[3].objects_fx = st->free_objects_fx;
	}
	s.live = calloc(2, sizeof *s.live);
	s.nlive = 2;
	s.live[0] = (struct ym_live){ .addr = 0x1000, .size = 100, .weight_bytes = 3000,
				      .weight_fx = YM_FX_ONE, .stack = 1,
				      .birth_mono_ns = 1000000000ULL, .tid = 7 };
	s.live[1] = (struct ym_live){ .addr = 0x2000, .size = 200, .weight_bytes = 2000,
				      .weight_fx = YM_FX_ONE, .stack = 3,
				      .birth_mono_ns = 4000000000ULL, .tid = 7 };
	s.modules = calloc(nmods, sizeof *s.modules);
	memcpy(s.modules, mods, nmods * sizeof *mods);
	s.nmodules = nmods;
	model_init(&fx->m);
	if (model_update(&fx->m, &s) != 0)
		return -1;
	fx->s = sym_new(NULL);
	if (!fx->s)
		return -1;
	sym_set_modules(fx->s, mods, nmods);
	snprintf(fx->dir, sizeof fx->dir, "/tmp/ymtop-test-report-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	DIR *d = opendir(fx->dir);
	struct dirent *e;
	char p[512];
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof p, "%s/%s", fx->dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(fx->dir);
	model_free(&fx->m);
	sym_free(fx->s);
	free(fx);
	return 0;
}

/* The report in a format, as a string the caller frees. */
static char *render(struct fixture *fx, enum report_format fmt,
		    enum report_weight w, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	assert_non_null(f);
	struct report_opts o = { fmt, 20, NULL, w, SORT_RETAINED };
	assert_int_equal(report_write(f, &fx->m, fx->s, &o), 0);
	fclose(f);
	if (len)
		*len = n;
	return buf;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void names_and_order(void **state)
{
	struct fixture *fx = *state;
	enum report_format f;
	for (int i = 0; i < REPORT_NFORMATS; i++) {
		assert_int_equal(report_format_parse(report_format_name(i), &f), 0);
		assert_int_equal(f, i);
	}
	assert_int_equal(report_format_parse("xml", &f), -1);
	/* The registry's rows: the command line's names and the files'
	 * extensions are an interface (-f, -o, s and f on the screen). */
	static const char *const rows[REPORT_NFORMATS][2] = {
		{ "text", "txt" }, { "json", "json" }, { "folded", "folded" },
		{ "pprof", "pb.gz" }, { "sqlite", "db" }, { "svg", "svg" },
		{ "prometheus", "prom" },
	};
	for (int i = 0; i < REPORT_NFORMATS; i++) {
		assert_string_equal(report_format_name(i), rows[i][0]);
		assert_string_equal(report_format_ext(i), rows[i][1]);
	}
	assert_string_equal(report_format_name(REPORT_NFORMATS), "?");
	assert_string_equal(report_format_ext(REPORT_NFORMATS), "out");
	assert_false(report_format_needs_file(REPORT_NFORMATS));
	assert_false(report_format_needs_file(REPORT_TEXT));
	assert_false(report_format_needs_file(REPORT_JSON));
	assert_false(report_format_needs_file(REPORT_FOLDED));
	assert_true(report_format_needs_file(REPORT_PPROF));
	assert_true(report_format_needs_file(REPORT_SQLITE));
	assert_true(report_format_needs_file(REPORT_SVG));
	assert_false(report_format_needs_file(REPORT_PROMETHEUS));
	enum report_weight w;
	assert_int_equal(report_weight_parse("objects", &w), 0);
	assert_int_equal(w, WEIGHT_OBJECTS);
	assert_int_equal(report_weight_parse("bytes", &w), -1);

	/* The report's own order, whatever the model's sort. */
	model_sort(&fx->m, SORT_ALLOCATED, 1, NULL, NULL, NULL);
	uint32_t n, *o = report_order(&fx->m, &n);
	assert_non_null(o);
	assert_int_equal(n, 4);
	assert_int_equal(o[0], 1);
	assert_int_equal(o[1], 3);
	assert_int_equal(o[2], 2);
	assert_int_equal(o[3], 4);
	free(o);
	assert_true(report_weight_total(&fx->m, WEIGHT_RETAINED) == 6500);
	assert_true(report_weight_total(&fx->m, WEIGHT_ALLOCATED) == 16700);
}

/* Stacks that retain nothing stay in the text report (churn: a server
 * that frees all it allocates); it stopped at the first of them. */
static void text_keeps_stacks_that_retain_nothing(void **state)
{
	struct fixture *fx = *state;
	fx->m.stacks[2].retained_bytes = 0;
	fx->m.stacks[4].retained_bytes = 0;
	char *out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "Top 20 stacks by retained bytes:"));
	assert_non_null(strstr(out, "\n#4 retained 0 B"));
	/* Of the two that retain nothing, the one that allocated more first. */
	const char *third = strstr(out, "\n#3 "), *fourth = strstr(out, "\n#4 ");
	assert_non_null(third);
	assert_non_null(strstr(third, "allocated 8.79 KiB"));
	assert_true(strstr(third, "allocated 8.79 KiB") < fourth);
	free(out);
}

/* A cgroup that could not be read is named in the text report as the
 * terminal must see it: its directory is a name its owner chose, and an
 * escape sequence in it is shown, not sent. */
static void text_cgroup_why_escaped(void **state)
{
	struct fixture *fx = *state;
	snprintf(fx->m.cgroup.path, sizeof fx->m.cgroup.path, "/user.slice/a\033]0;x\007");
	snprintf(fx->m.cgroup.why, sizeof fx->m.cgroup.why,
		 "no memory.current in /sys/fs/cgroup/user.slice/a\033]0;x\007");
	char *out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "  not read: no memory.current"));
	assert_null(strchr(out, '\033'));
	assert_null(strchr(out, '\007'));
	free(out);
}

/* A fork child that could not check the loader's lock lists its modules
 * as at the fork: both reports say so (and say nothing otherwise). */
static void modules_as_at_fork_are_named(void **state)
{
	struct fixture *fx = *state;
	char *out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	assert_null(strstr(out, "modules: as at the fork"));
	free(out);
	out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\"modules_complete\":true,"));
	free(out);
	fx->m.snap.hdr.flags |= YM_FLAG_MODULES_AT_FORK;
	out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\nmodules: as at the fork; objects loaded since are not listed"));
	free(out);
	out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\"modules_complete\":false,"));
	free(out);
}

/* --sort: text and json in the order asked; the parse is strict. */
static void sort_keys_order_text_and_json(void **state)
{
	struct fixture *fx = *state;
	enum model_sort k;
	assert_int_equal(report_sort_parse("allocated", &k), 0);
	assert_int_equal(k, SORT_ALLOCATED);
	assert_int_equal(report_sort_parse("rate", &k), 0);
	assert_int_equal(k, SORT_RATE);
	assert_int_equal(report_sort_parse("retained", &k), 0);
	assert_int_equal(k, SORT_RETAINED);
	assert_int_equal(report_sort_parse("total", &k), -1);
	assert_int_equal(report_sort_parse("Rate", &k), -1);

	uint32_t n, *o = report_order_by(&fx->m, SORT_ALLOCATED, &n);
	assert_int_equal(n, 4);
	assert_int_equal(o[0], 2);   /* 9000 */
	assert_int_equal(o[1], 1);   /* 5000 */
	assert_int_equal(o[2], 3);
	assert_int_equal(o[3], 4);
	free(o);
	fx->m.stacks[4].alloc_rate = 700;
	fx->m.stacks[3].alloc_rate = 10;
	o = report_order_by(&fx->m, SORT_RATE, &n);
	assert_int_equal(o[0], 4);
	assert_int_equal(o[1], 3);
	assert_int_equal(o[2], 1);   /* no rate: by retained */
	assert_int_equal(o[3], 2);
	free(o);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct report_opts ro = { REPORT_TEXT, 20, NULL, 0, SORT_RATE };
	assert_int_equal(report_write(f, &fx->m, fx->s, &ro), 0);
	fclose(f);
	assert_non_null(strstr(buf, "Top 20 stacks by allocation rate:"));
	assert_non_null(strstr(buf, "\n#1 retained 500 B (7.7%) in 5 objects; "
			       "allocated 700 B in 7 objects; 700 B/s; peak 500 B\n"));
	free(buf);
	f = open_memstream(&buf, &len);
	ro.format = REPORT_JSON;
	ro.sort = SORT_ALLOCATED;
	assert_int_equal(report_write(f, &fx->m, fx->s, &ro), 0);
	fclose(f);
	assert_non_null(strstr(buf, "\"sort\":\"allocated\""));
	const char *s2 = strstr(buf, "{\"id\":2,"), *s1 = strstr(buf, "{\"id\":1,");
	assert_non_null(s2);
	assert_non_null(s1);
	assert_true(s2 < s1);
	free(buf);
}

/* A stack whose figures one sample carries: its retained bytes and
 * peak are marked in text, explained once below the list, and JSON
 * carries the samples behind each figure (null: a writer before v7
 * did not say what was behind the peak). */
static void few_samples_marked_text_and_counted_json(void **state)
{
	struct fixture *fx = *state;
	char *out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	assert_null(strstr(out, "retained ?"));   /* well sampled: no mark */
	assert_null(strstr(out, "peak ?"));
	free(out);
	out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	/* Stack 1: 50 samples allocated, 20 freed; peak = retained. */
	assert_non_null(strstr(out, "\"samples\":50,\"live_samples\":30,"));
	assert_non_null(strstr(out, "\"peak_retained_bytes\":3000,\"peak_samples\":30,"));
	free(out);
	/* One live sample of a 64-byte block at 512 KiB. */
	fx->m.snap.hdr.sample_rate = 524288;
	struct model_stack *st = &fx->m.stacks[4];
	st->retained_bytes = st->peak_bytes = 524320;
	st->live_samples = 1;
	st->peak_samples = 1;
	st->retained_err = st->peak_err = model_rel_error(&fx->m, 524320, 1);
	assert_true(model_retained_few(&fx->m, st));
	out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "retained ?512 KiB ("));
	assert_non_null(strstr(out, "; peak ?512 KiB\n"));
	assert_int_equal(count(out, "\n?: "), 1);
	free(out);
	st->peak_samples = -1;
	out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\"live_samples\":1,"));
	assert_non_null(strstr(out, "\"peak_samples\":null,"));
	free(out);
}

/* JSON's sampling object: the rate in force always; the rate asked for
 * and the budget only from a writer that says (v9), null (not known)
 * from an older one, never 0.  With a budget, the text report says what
 * it did, and the estimates' error is stated at the longest rate the
 * budget put in force. */
static void sampling_object_and_budget(void **state)
{
	struct fixture *fx = *state;
	struct ym_header *h = &fx->m.snap.hdr;
	h->abi_version = 8;
	char *out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\"sampling\":{\"effective_rate\":4096,"
				    "\"requested_rate\":null,\"budget_percent\":null,"));
	free(out);
	double err_before = model_rel_error(&fx->m, 524320, 1);
	h->abi_version = YM_ABI_VERSION;
	h->budget.requested_rate = 4096;
	h->budget.max_rate = 4096;
	out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\"sampling\":{\"effective_rate\":4096,"
				    "\"requested_rate\":4096,\"longest_rate\":4096,"
				    "\"budget_percent\":null},"));
	free(out);
	out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	assert_null(strstr(out, "budget"));
	free(out);
	h->sample_rate = 65536;
	h->budget.max_rate = 262144;
	h->budget.budget_ppm = 25000;
	h->budget.window_ms = 100;
	h->budget.adjustments = 3;
	h->budget.spent_ns = 1000;
	h->budget.cpu_ns = 100000;
	h->budget.window_spent_ns = 150;
	h->budget.window_cpu_ns = 10000;
	out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\"sampling\":{\"effective_rate\":65536,"
				    "\"requested_rate\":4096,\"longest_rate\":262144,"
				    "\"budget_percent\":2.5,\"window_ms\":100,"
				    "\"adjustments\":3,\"spent_ns\":1000,"
				    "\"cpu_ns\":100000,"));
	free(out);
	out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "budget 2.5% of CPU: rate 64.0 KiB (asked 4.00 KiB), "
				    "1.5% last window, 3 changes\n"));
	free(out);
	/* The error at the longest rate (256 KiB), not at 4 KiB. */
	assert_true(model_rel_error(&fx->m, 524320, 1) > err_before);
	h->sample_rate = 262144;
	double at_longest = model_rel_error(&fx->m, 524320, 1);
	h->sample_rate = 65536;
	assert_true(model_rel_error(&fx->m, 524320, 1) == at_longest);
	/* Hostile: a budget above 100 % is none. */
	h->budget.budget_ppm = 2000000;
	out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\"budget_percent\":null},"));
	free(out);
}

static void folded_sums(void **state)
{
	struct fixture *fx = *state;
	char *out = render(fx, REPORT_FOLDED, WEIGHT_RETAINED, NULL);
	/* Stacks 1 and 4 merge: 3000 + 500.  The kind is the first frame. */
	assert_non_null(strstr(out, "[malloc];caller_x;site_a 3500\n"));
	assert_non_null(strstr(out, "[malloc];caller_x;site_b 1000\n"));
	assert_non_null(strstr(out, "[malloc];caller_y;site_a 2000\n"));
	assert_int_equal(count(out, "\n"), 3);
	free(out);
	out = render(fx, REPORT_FOLDED, WEIGHT_ALLOCATED, NULL);
	double sum = 0;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
		sum += atof(strrchr(line, ' ') + 1);
	assert_true(sum == 16700);
	free(out);
	out = render(fx, REPORT_FOLDED, WEIGHT_OBJECTS, NULL);
	assert_non_null(strstr(out, "caller_x;site_a 35\n"));
	free(out);
}

static void svg_structure(void **state)
{
	struct fixture *fx = *state;
	char *out = render(fx, REPORT_SVG, WEIGHT_RETAINED, NULL);
	assert_true(!strncmp(out, "<?xml ", 6));
	assert_non_null(strstr(out, "</svg>\n"));
	assert_int_equal(count(out, "<g "), count(out, "</g>"));
	/* all, [malloc], caller_x, caller_y, site_a twice, site_b */
	assert_int_equal(count(out, "<g class=\"f\""), 7);
	assert_non_null(strstr(out, "<title>[malloc] (6.35 KiB, 100.00%)</title>"));
	assert_non_null(strstr(out, "<title>site_a (3.42 KiB, 53.85%)</title>"));
	assert_non_null(strstr(out, "<title>all (6.35 KiB, 100.00%)</title>"));
	/* The executable's name is escaped. */
	assert_non_null(strstr(out, "/bin/test &quot;&lt;&amp;&gt;&quot;"));
	assert_null(strstr(out, "\"<&>\""));
	assert_int_equal(count(out, "<![CDATA["), 1);
	assert_int_equal(count(out, "]]>"), 1);
	free(out);
}

/* Stack 3 (caller_y -> site_a, 2000 B) made an anonymous mapping: the
 * model counts it apart, as model_update does for a v6 writer's mmap
 * stacks. */
static void make_stack3_mmap(struct fixture *fx)
{
	fx->m.snap.hdr.abi_version = 6;
	fx->m.stacks[3].kind = YM_KIND_MMAP;
	fx->m.retained_bytes -= fx->m.stacks[3].retained_bytes;
	fx->m.retained_objects -= fx->m.stacks[3].retained_objects;
	fx->m.mmap_retained_bytes = fx->m.stacks[3].retained_bytes;
}

/* The value of the one series whose line starts with head (name and
 * labels up to the closing brace); -1 when there is none. */
static double prom_series(const char *text, const char *head)
{
	const char *p = text;
	double v = -1;
	int n = 0;
	while ((p = strstr(p, head))) {
		if (p == text || p[-1] == '\n') {
			v = atof(p + strlen(head));
			n++;
		}
		p += strlen(head);
	}
	assert_true(n <= 1);
	return v;
}

/* The sum of ymtop_stack_retained_bytes over the series of a kind. */
static double prom_kind_sum(const char *text, const char *kind, int *nseries)
{
	char want[64];
	snprintf(want, sizeof want, ",kind=\"%s\",", kind);
	double sum = 0;
	*nseries = 0;
	for (const char *p = text; (p = strstr(p, "\nymtop_stack_retained_bytes{")); p++) {
		const char *end = strchr(p + 1, '\n');
		const char *close = strstr(p, "} ");
		assert_non_null(close);
		assert_true(!end || close < end);
		char line[1024];
		size_t len = (size_t)(close - p);
		assert_true(len < sizeof line);
		memcpy(line, p, len);
		line[len] = '\0';
		/* Every stack series names its kind. */
		assert_true(strstr(line, ",kind=\"malloc\",") || strstr(line, ",kind=\"mmap\","));
		if (strstr(line, want)) {
			sum += atof(close + 2);
			(*nseries)++;
		}
	}
	return sum;
}

/* Per process and kind, the stack series add up to the process series:
 * mmap stacks are not in the malloc family's total, nor summed into the
 * same series as its stacks; also with the top N and (other). */
static void prometheus_kinds_add_up(void **state)
{
	struct fixture *fx = *state;
	make_stack3_mmap(fx);
	for (int top = 20; top >= 1; top -= 19) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		struct report_opts o = { REPORT_PROMETHEUS, top, NULL, 0, SORT_RETAINED };
		assert_int_equal(report_write(f, &fx->m, fx->s, &o), 0);
		fclose(f);
		char head[128];
		snprintf(head, sizeof head, "ymtop_process_retained_bytes{pid=\"%d\","
			 "exe=\"test \\\"<&>\\\"\"} ", 0x7fffffff);
		assert_true(prom_series(buf, head) == 4500);
		snprintf(head, sizeof head, "ymtop_process_mmap_retained_bytes{pid=\"%d\","
			 "exe=\"test \\\"<&>\\\"\"} ", 0x7fffffff);
		assert_true(prom_series(buf, head) == 2000);
		int nm, nx;
		assert_true(prom_kind_sum(buf, "malloc", &nm) == 4500);
		assert_true(prom_kind_sum(buf, "mmap", &nx) == 2000);
		if (top == 20) {
			/* site_a of malloc (3000 + 500) and of mmap are apart. */
			assert_int_equal(nm, 2);
			assert_int_equal(nx, 1);
			assert_non_null(strstr(buf, "\nymtop_stack_retained_bytes{pid=\"2147483647\","
					       "exe=\"test \\\"<&>\\\"\",kind=\"mmap\","
					       "function=\"site_a\","));
		} else {
			/* The top one (malloc site_a), an (other) per kind. */
			assert_int_equal(nm, 2);
			assert_int_equal(nx, 1);
			assert_non_null(strstr(buf, "kind=\"mmap\",function=\"(other)\","
					       "location=\"\"} 2000\n"));
			assert_non_null(strstr(buf, "kind=\"malloc\",function=\"(other)\","
					       "location=\"\"} 1000\n"));
		}
		free(buf);
	}
	/* A writer before ABI 6 tracks no mmap: no such series. */
	fx->m.snap.hdr.abi_version = 5;
	char *out = render(fx, REPORT_PROMETHEUS, WEIGHT_RETAINED, NULL);
	assert_null(strstr(out, "\nymtop_process_mmap_retained_bytes{"));
	free(out);
}

/* The exposition as a string, with m's label cache (kept: 0) or
 * without it (dropped first: 1, every stack named again). */
static char *prom_render(struct fixture *fx, int fresh)
{
	if (fresh && fx->m.cache) {
		fx->m.cache_free(fx->m.cache);
		fx->m.cache = NULL;
		fx->m.cache_free = NULL;
	}
	return render(fx, REPORT_PROMETHEUS, WEIGHT_RETAINED, NULL);
}

/* The labels the exporter keeps per stack across scrapes give the same
 * exposition as naming every stack again: for the same state, after a
 * stack's frames change, and after the symbolizer's state changes. */
static void prometheus_labels_kept_match_fresh(void **state)
{
	struct fixture *fx = *state;
	char *a = prom_render(fx, 1);
	assert_non_null(strstr(a, "function=\"site_b\""));
	char *b = prom_render(fx, 0);
	assert_string_equal(a, b);
	free(b);
	/* Stack 2 (site_b, caller_x) now holds site_a's frames. */
	struct ym_stack *y = (struct ym_stack *)(fx->m.snap.stacks +
						 2 * fx->m.snap.stack_stride);
	y->frames[0] = ret(site_a, 3);
	char *c = prom_render(fx, 0);
	assert_null(strstr(c, "function=\"site_b\""));
	char *d = prom_render(fx, 1);
	assert_string_equal(c, d);
	free(c);
	free(d);
	/* A symbolizer without modules: every frame an address, every
	 * group withheld, whatever was named before. */
	struct sym *named = fx->s;
	fx->s = sym_new(NULL);
	assert_non_null(fx->s);
	char *e = prom_render(fx, 0);
	assert_null(strstr(e, "function=\"site_a\""));
	assert_non_null(strstr(e, "function=\"(unresolved)\""));
	char *f = prom_render(fx, 1);
	assert_string_equal(e, f);
	free(e);
	free(f);
	sym_free(fx->s);
	fx->s = named;
	/* Back to the first symbolizer (its epoch unchanged): what it named
	 * before, stack 2 as it is now. */
	char *g = prom_render(fx, 0);
	char *h = prom_render(fx, 1);
	assert_string_equal(g, h);
	assert_string_not_equal(g, a);
	free(g);
	free(h);
	free(a);
}

/* Folded stacks and the flame graph keep the kinds apart: the same
 * call path allocating and mapping is two lines, two boxes. */
static void folded_and_svg_keep_kinds_apart(void **state)
{
	struct fixture *fx = *state;
	make_stack3_mmap(fx);
	char *out = render(fx, REPORT_FOLDED, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "[malloc];caller_x;site_a 3500\n"));
	assert_non_null(strstr(out, "[mmap];caller_y;site_a 2000\n"));
	assert_null(strstr(out, "[malloc];caller_y"));
	assert_int_equal(count(out, "\n"), 3);
	free(out);
	out = render(fx, REPORT_SVG, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "<title>[mmap] (1.95 KiB, 30.77%)</title>"));
	assert_non_null(strstr(out, "<title>[malloc] (4.39 KiB, 69.23%)</title>"));
	/* The subtitle names each kind's total. */
	assert_non_null(strstr(out, "malloc 4.39 KiB, mmap 1.95 KiB"));
	free(out);
}

/* Each figure's unit is named: estimates in requested bytes, in use in
 * usable bytes (text's units line, JSON's rss_explained.units). */
static void units_are_named(void **state)
{
	struct fixture *fx = *state;
	char *out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\nunits: estimates (retained, mmap, stacks) in "
			       "requested bytes, in use in usable bytes"));
	free(out);
	out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\"units\":{\"heap_in_use_bytes\":\"usable\","
			       "\"heap_free_bytes\":\"usable\",\"counted_in_use_bytes\":"
			       "\"usable\",\"retained_bytes\":\"requested\","
			       "\"mmap_retained_bytes\":\"requested\"}"));
	/* Not running: no RSS, nothing to explain. */
	assert_non_null(strstr(out, "\"in_use_minus_retained_bytes\":null,"
			       "\"unexplained_why\":null,\"in_use_minus_retained_why\":null,"));
	free(out);
}

/* The allocator's line names jemalloc's stats.retained (address space it
 * keeps without pages) so that it is not read as the retained estimate
 * printed on the next line (redis-server: "retained 23.5 MiB" above
 * "estimated retained: 0 B"). */
static void heap_line_does_not_reuse_retained(void **state)
{
	struct fixture *fx = *state;
	struct ym_heapstats *hs = &fx->m.snap.hdr.heap;
	hs->allocator = YM_HEAP_JEMALLOC;
	hs->present = YM_HEAP_IN_USE | YM_HEAP_RETAINED;
	hs->in_use_bytes = 113u << 20;
	hs->retained_bytes = 23u << 20;
	hs->taken_mono_ns = fx->m.snap.taken_mono_ns;
	char *out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	const char *line = strstr(out, "\nheap (jemalloc's statistics");
	assert_non_null(line);
	const char *end = strchr(line + 1, '\n');
	assert_non_null(end);
	char buf[256];
	snprintf(buf, sizeof buf, "%.*s", (int)(end - line - 1), line + 1);
	assert_non_null(strstr(buf, "in use 113 MiB, unused address space 23.0 MiB"));
	assert_null(strstr(buf, "retained"));
	free(out);
	out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "\"retained_bytes\":24117248"));   /* key kept */
	free(out);
}

/* ---- a protobuf reader for the pprof check ---- */

static uint64_t varint(const uint8_t **p)
{
	uint64_t v = 0;
	for (int s = 0;; s += 7) {
		uint8_t c = *(*p)++;
		v |= (uint64_t)(c & 0x7f) << s;
		if (c < 0x80)
			return v;
	}
}

static void pprof_message(void **state)
{
	struct fixture *fx = *state;
	size_t n;
	char *gz = render(fx, REPORT_PPROF, WEIGHT_RETAINED, &n);
	assert_true(n > 20);
	assert_int_equal((uint8_t)gz[0], 0x1f);   /* gzip magic */
	assert_int_equal((uint8_t)gz[1], 0x8b);
	static uint8_t raw[1 << 20];
	z_stream z;
	memset(&z, 0, sizeof z);
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)gz;
	z.avail_in = (uInt)n;
	z.next_out = raw;
	z.avail_out = sizeof raw;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	size_t len = sizeof raw - z.avail_out;
	inflateEnd(&z);
	free(gz);

	int nfield[16] = { 0 };
	int first_string = -1;
	uint64_t period = 0;
	const uint8_t *p = raw, *end = raw + len;
	while (p < end) {
		uint64_t key = varint(&p);
		uint32_t field = (uint32_t)(key >> 3);
		assert_true(field > 0 && field < 16);
		nfield[field]++;
		if ((key & 7) == 0) {
			uint64_t v = varint(&p);
			if (field == 12)
				period = v;
		} else {
			assert_int_equal(key & 7, 2);
			uint64_t l = varint(&p);
			if (field == 6 && first_string < 0)
				first_string = (int)l;
			p += l;
		}
	}
	assert_true(p == end);
	assert_int_equal(nfield[1], 4);          /* sample types */
	assert_int_equal(nfield[2], 4);          /* samples: stacks 1-4 */
	assert_int_equal(nfield[3], (int)nmods); /* mappings */
	assert_int_equal(nfield[4], 7);          /* distinct addresses */
	assert_int_equal(nfield[5], 4);          /* functions */
	assert_int_equal(first_string, 0);       /* string_table[0] = "" */
	assert_int_equal(nfield[11], 1);
	assert_int_equal(period, 4096);
	assert_int_equal(nfield[14], 1);
}

static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.' || strncmp(e->d_name, ".ymtop-tmp", 10) == 0;
	if (d)
		closedir(d);
	return n;
}

static void save_never_overwrites(void **state)
{
	struct fixture *fx = *state;
	char path[128], err[256];
	struct report_opts o = { REPORT_TEXT, 20, NULL, 0, SORT_RETAINED };
	snprintf(path, sizeof path, "%s/r.txt", fx->dir);
	assert_int_equal(report_save(path, &fx->m, fx->s, &o, err, sizeof err), 0);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 100);
	assert_int_equal(report_save(path, &fx->m, fx->s, &o, err, sizeof err), -1);
	assert_non_null(strstr(err, "exists"));
	assert_int_equal(dir_entries(fx->dir), 1);

	snprintf(path, sizeof path, "%s/missing/r.txt", fx->dir);
	assert_int_equal(report_save(path, &fx->m, fx->s, &o, err, sizeof err), -1);
	assert_non_null(strstr(err, path));
	assert_int_equal(dir_entries(fx->dir), 1);

	/* sqlite: only through report_save; no format out of range. */
	FILE *f = fopen("/dev/null", "w");
	o.format = REPORT_NFORMATS;
	errno = 0;
	assert_int_equal(report_write(f, &fx->m, fx->s, &o), -1);
	assert_int_equal(errno, EINVAL);
	o.format = REPORT_SQLITE;
	errno = 0;
	assert_int_equal(report_write(f, &fx->m, fx->s, &o), -1);
	assert_int_equal(errno, EINVAL);
	fclose(f);
	snprintf(path, sizeof path, "%s/r.db", fx->dir);
	assert_int_equal(report_save(path, &fx->m, fx->s, &o, err, sizeof err), 0);
	assert_int_equal(dir_entries(fx->dir), 2);
	sqlite3 *db;
	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(db,
		"SELECT (SELECT count(*) FROM stacks), (SELECT count(*) FROM frames),"
		" (SELECT sum(retained_bytes) FROM stacks),"
		" (SELECT function FROM stacks ORDER BY retained_bytes DESC),"
		" (SELECT age_ns FROM allocations WHERE address = 4096),"
		" (SELECT count(*) FROM lifetimes WHERE upto_ns = 1000000),"
		" (SELECT exe FROM meta)", -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(q, 0), 4);
	assert_int_equal(sqlite3_column_int(q, 1), 8);
	assert_true(sqlite3_column_double(q, 2) == 6500);
	assert_string_equal((const char *)sqlite3_column_text(q, 3), "site_a");
	assert_int_equal(sqlite3_column_int64(q, 4), 4000000000LL);
	assert_int_equal(sqlite3_column_int(q, 5), 3);
	assert_string_equal((const char *)sqlite3_column_text(q, 6), "/bin/test \"<&>\"");
	sqlite3_finalize(q);
	sqlite3_close(db);
	assert_int_equal(report_save(path, &fx->m, fx->s, &o, err, sizeof err), -1);
	assert_non_null(strstr(err, "exists"));
}

/* SQLite: byte and object counts are INTEGER, rounded as JSON rounds
 * them; each stack names its kind; meta has the mmap total. */
static void sqlite_counts_are_whole_numbers_with_kinds(void **state)
{
	struct fixture *fx = *state;
	make_stack3_mmap(fx);
	fx->m.stacks[1].retained_objects = 12.5;    /* ties to even: 12 */
	fx->m.stacks[2].retained_objects = 13.5;    /* 14 */
	fx->m.stacks[2].alloc_objects = 90.4;
	((struct ym_stack *)fx->m.stacks[1].rec)->life[3].objects_fx =
		(uint64_t)(20.6 * YM_FX_ONE);
	fx->m.retained_objects = 12.5 + 13.5 + 5;
	char path[128], err[256];
	struct report_opts o = { REPORT_SQLITE, 20, NULL, 0, SORT_RETAINED };
	snprintf(path, sizeof path, "%s/k.db", fx->dir);
	assert_int_equal(report_save(path, &fx->m, fx->s, &o, err, sizeof err), 0);
	sqlite3 *db;
	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	static const char *const whole[] = {
		"SELECT DISTINCT typeof(retained_bytes) FROM stacks",
		"SELECT DISTINCT typeof(retained_objects) FROM stacks",
		"SELECT DISTINCT typeof(allocated_bytes) FROM stacks",
		"SELECT DISTINCT typeof(allocated_objects) FROM stacks",
		"SELECT typeof(retained_bytes) FROM meta",
		"SELECT typeof(retained_objects) FROM meta",
		"SELECT typeof(mmap_retained_bytes) FROM meta",
		"SELECT DISTINCT typeof(count) FROM lifetimes",
		"SELECT DISTINCT typeof(bytes) FROM lifetimes",
		"SELECT DISTINCT typeof(weight_bytes) FROM allocations",
	};
	sqlite3_stmt *q;
	for (size_t i = 0; i < sizeof whole / sizeof *whole; i++) {
		assert_int_equal(sqlite3_prepare_v2(db, whole[i], -1, &q, NULL), SQLITE_OK);
		assert_int_equal(sqlite3_step(q), SQLITE_ROW);
		assert_string_equal((const char *)sqlite3_column_text(q, 0), "integer");
		assert_int_equal(sqlite3_step(q), SQLITE_DONE);
		sqlite3_finalize(q);
	}
	assert_int_equal(sqlite3_prepare_v2(db,
		"SELECT (SELECT retained_objects FROM stacks WHERE id = 1),"
		" (SELECT retained_objects FROM stacks WHERE id = 2),"
		" (SELECT allocated_objects FROM stacks WHERE id = 2),"
		" (SELECT count FROM lifetimes WHERE stack = 1),"
		" (SELECT group_concat(kind, ',') FROM (SELECT kind FROM stacks ORDER BY id)),"
		" (SELECT sum(retained_bytes) FROM stacks WHERE kind = 'malloc'),"
		" (SELECT retained_bytes FROM meta), (SELECT mmap_retained_bytes FROM meta),"
		" (SELECT retained_objects FROM meta)", -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int64(q, 0), 12);
	assert_int_equal(sqlite3_column_int64(q, 1), 14);
	assert_int_equal(sqlite3_column_int64(q, 2), 90);
	assert_int_equal(sqlite3_column_int64(q, 3), 21);
	assert_string_equal((const char *)sqlite3_column_text(q, 4),
			    "malloc,malloc,mmap,malloc");
	assert_int_equal(sqlite3_column_int64(q, 5), 4500);
	assert_int_equal(sqlite3_column_int64(q, 6), 4500);
	assert_int_equal(sqlite3_column_int64(q, 7), 2000);
	assert_int_equal(sqlite3_column_int64(q, 8), 31);
	sqlite3_finalize(q);
	sqlite3_close(db);
	/* JSON says the same. */
	char *out = render(fx, REPORT_JSON, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "{\"id\":1,\"retained_bytes\":3000,\"retained_objects\":12,"));
	assert_non_null(strstr(out, "{\"id\":2,\"retained_bytes\":1000,\"retained_objects\":14,"));
	free(out);
	/* Folded stacks round as JSON and SQLite do (ties to even). */
	fx->m.stacks[3].retained_objects = 20.5;
	out = render(fx, REPORT_FOLDED, WEIGHT_OBJECTS, NULL);
	assert_non_null(strstr(out, "[malloc];caller_x;site_b 14\n"));
	assert_non_null(strstr(out, "[mmap];caller_y;site_a 20\n"));
	free(out);
}

/* Samples that found the stack table full: stack 0, no frames. */
static void overflow_stack(void **state)
{
	struct fixture *fx = *state;
	struct model_stack *o = &fx->m.stacks[0];
	o->alloc_samples = 1;
	o->alloc_bytes = o->retained_bytes = 100;
	o->alloc_objects = o->retained_objects = 1;
	char *out = render(fx, REPORT_FOLDED, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "[malloc];[stack table full] 100\n"));
	free(out);
	out = render(fx, REPORT_TEXT, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "(no frames: samples that found the stack table full)"));
	free(out);
	out = render(fx, REPORT_SVG, WEIGHT_RETAINED, NULL);
	assert_non_null(strstr(out, "<title>[stack table full] (100 B, "));
	free(out);
	size_t n;
	char *gz = render(fx, REPORT_PPROF, WEIGHT_RETAINED, &n);
	static uint8_t raw[1 << 20];
	uLongf len = sizeof raw;
	z_stream z;
	memset(&z, 0, sizeof z);
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)gz;
	z.avail_in = (uInt)n;
	z.next_out = raw;
	z.avail_out = (uInt)len;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	len = sizeof raw - z.avail_out;
	inflateEnd(&z);
	free(gz);
	int nfield[16] = { 0 };
	for (const uint8_t *p = raw; p < raw + len;) {
		uint64_t key = varint(&p);
		nfield[key >> 3]++;
		if ((key & 7) == 0)
			varint(&p);
		else
			p += varint(&p);
	}
	assert_int_equal(nfield[2], 5);   /* samples */
	assert_int_equal(nfield[4], 8);   /* locations: 7 + the made-up one */
	assert_int_equal(nfield[5], 5);   /* functions */
}

static void full_disk_is_an_error(void **state)
{
	struct fixture *fx = *state;
	for (int fmt = 0; fmt < REPORT_NFORMATS; fmt++) {
		if (fmt == REPORT_SQLITE)
			continue;
		FILE *f = fopen("/dev/full", "w");
		assert_non_null(f);
		setvbuf(f, NULL, _IONBF, 0);
		struct report_opts o = { fmt, 20, NULL, 0, SORT_RETAINED };
		assert_int_equal(report_write(f, &fx->m, fx->s, &o), -1);
		fclose(f);
	}
}

int main(void)
{
	caller_x();
	caller_y();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(names_and_order, setup, teardown),
		cmocka_unit_test_setup_teardown(text_keeps_stacks_that_retain_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(text_cgroup_why_escaped, setup, teardown),
		cmocka_unit_test_setup_teardown(sort_keys_order_text_and_json, setup, teardown),
		cmocka_unit_test_setup_teardown(few_samples_marked_text_and_counted_json,
						setup, teardown),
		cmocka_unit_test_setup_teardown(modules_as_at_fork_are_named, setup, teardown),
		cmocka_unit_test_setup_teardown(folded_sums, setup, teardown),
		cmocka_unit_test_setup_teardown(svg_structure, setup, teardown),
		cmocka_unit_test_setup_teardown(prometheus_kinds_add_up, setup, teardown),
		cmocka_unit_test_setup_teardown(prometheus_labels_kept_match_fresh, setup, teardown),
		cmocka_unit_test_setup_teardown(folded_and_svg_keep_kinds_apart, setup, teardown),
		cmocka_unit_test_setup_teardown(units_are_named, setup, teardown),
		cmocka_unit_test_setup_teardown(heap_line_does_not_reuse_retained, setup, teardown),
		cmocka_unit_test_setup_teardown(pprof_message, setup, teardown),
		cmocka_unit_test_setup_teardown(save_never_overwrites, setup, teardown),
		cmocka_unit_test_setup_teardown(overflow_stack, setup, teardown),
		cmocka_unit_test_setup_teardown(sqlite_counts_are_whole_numbers_with_kinds, setup, teardown),
		cmocka_unit_test_setup_teardown(full_disk_is_an_error, setup, teardown),
		cmocka_unit_test_setup_teardown(sampling_object_and_budget, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
