/*
 * text: the report for people (see text.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fmt.h"
#include "model/memory.h"
#include "model/shortlived.h"
#include "text.h"

/* RSS explained (model/memory.h): one line per figure, "-" for what is
 * not known. */
/* How the samples' figures are known: every allocation recorded
 * (YM_SAMPLE_RATE=1) and none left out, or estimated. */
static const char *samples_word(const struct model *m)
{
	struct model_drops d = model_drops(m);
	return model_sample_rate(m) == 1 && !d.live && !d.busy ?
	       "exact" : "estimated";
}

static void text_rss_explained(FILE *f, const struct model *m)
{
	struct model_memory mm;
	model_memory(m, &mm);
	char a[32], b[32], c[32], d[32], e[32];
	if (!mm.have_rss) {
		fprintf(f, "\nRSS explained: no RSS (the process is not running)\n");
		return;
	}
	fprintf(f, "\nRSS explained (/proc %s):\n", mm.rss_source);
	fprintf(f, "  %-22s %10s  anonymous %s, file %s, shmem %s; swap %s\n", "RSS",
		fmt_bytes(mm.rss, a, sizeof a), fmt_bytes(mm.anon, b, sizeof b),
		fmt_bytes(mm.file, c, sizeof c), fmt_bytes(mm.shmem, d, sizeof d),
		fmt_bytes(mm.swap, e, sizeof e));
	char old[64] = "";
	if (mm.heap_old)
		snprintf(old, sizeof old, ", %.1f s old (not counted below)",
			 mm.heap_age);
	if (mm.have_heap)
		fprintf(f, "  %-22s %10s  usable bytes, and %s free in its arenas%s\n",
			"allocator in use", fmt_bytes(mm.heap_in_use, a, sizeof a),
			fmt_bytes(mm.heap_free, b, sizeof b), old);
	else
		fprintf(f, "  %-22s %10s  (the allocator's statistics are not available%s%s)\n",
			"allocator in use", "-", model_heap_missing(m, NULL) ? ": " : "",
			model_heap_missing(m, NULL) ? model_heap_missing(m, NULL) : "");
	if (mm.have_counted && mm.counted_net)
		fprintf(f, "  %-22s %10s  usable bytes, allocated minus freed since the attach "
			"(frees of older blocks count; not in use)\n",
			"counted net change", fmt_sbytes(mm.counted_in_use, a, sizeof a));
	else if (mm.have_counted)
		fprintf(f, "  %-22s %10s  usable bytes, malloc family, the agent's exact counters\n",
			"counted in use", fmt_sbytes(mm.counted_in_use, a, sizeof a));
	else
		fprintf(f, "  %-22s %10s  (sampling: frees count objects, not bytes)\n",
			"counted in use", "-");
	char label[32];
	snprintf(label, sizeof label, "retained (%s)", samples_word(m));
	fprintf(f, "  %-22s %10s  requested bytes, from samples: the stacks below\n",
		label, fmt_bytes(mm.retained, a, sizeof a));
	if (mm.have_resident)
		fprintf(f, "  %-22s %10s  of retained in RAM; %s never touched (no page "
			"yet), %s swapped (pagemap of the live samples)\n", "  resident",
			fmt_bytes(mm.retained_resident, a, sizeof a),
			fmt_bytes(mm.retained_untouched, b, sizeof b),
			fmt_bytes(mm.retained_swapped, c, sizeof c));
	else
		fprintf(f, "  %-22s %10s  (%s)\n", "  resident", "-", mm.resident_why);
	if (mm.have_gap)
		fprintf(f, "  %-22s %10s  %s\n", "in use - retained",
			fmt_sbytes(mm.gap, a, sizeof a), mm.gap_why);
	if (mm.have_mmap)
		fprintf(f, "  %-22s %10s  requested bytes, anonymous mmap by the program\n",
			"tracked mmap", fmt_bytes(mm.mmap_retained, a, sizeof a));
	else
		fprintf(f, "  %-22s %10s  (not tracked)\n", "tracked mmap", "-");
	fprintf(f, "  %-22s %10s  %s\n", "anonymous unexplained",
		fmt_sbytes(mm.unexplained, a, sizeof a), mm.unexplained_why);
}

/* The process's cgroup (model/cgroup.h): two lines, or one saying why
 * not; nothing when it was not read. */
static void text_cgroup(FILE *f, const struct model *m)
{
	const struct model_cgroup *c = &m->cgroup;
	char a[32], b[32], d[32], e[32], g[32];
	if (!c->known && !c->why[0])
		return;
	char vis[FMT_VIS_SIZE(MODEL_CGROUP_PATH)];
	fprintf(f, "\nCgroup %s (v%d):\n", c->path[0] ? fmt_vis(c->path, vis, sizeof vis) : "?",
		c->v1 ? 1 : 2);
	if (!c->known) {
		/* why names the cgroup's directory: a name its owner chose. */
		fputs("  not read: ", f);
		fmt_vis_fputs(f, c->why);
		fputc('\n', f);
		return;
	}
	fprintf(f, "  %-22s %10s  of max %s", "memory.current",
		fmt_bytes((double)c->current, a, sizeof a),
		!c->have_max ? "-" : c->max_unlimited ? "unlimited" :
		fmt_bytes((double)c->max, b, sizeof b));
	if (c->have_high && !c->high_unlimited)
		fprintf(f, ", high %s", fmt_bytes((double)c->high, d, sizeof d));
	if (c->have_stat)
		fprintf(f, "; anon %s, file %s", fmt_bytes((double)c->anon, d, sizeof d),
			fmt_bytes((double)c->file, e, sizeof e));
	if (c->have_kernel)
		fprintf(f, ", kernel %s", fmt_bytes((double)c->kernel, g, sizeof g));
	fputc('\n', f);
	fprintf(f, "  %-22s %10s  RSS of its %u%s processes; this one's %s\n", "processes",
		fmt_bytes((double)c->procs_rss, a, sizeof a), c->nprocs,
		c->procs_cut ? "+" : "",
		m->alive ? fmt_bytes((double)m->proc.rss_bytes, b, sizeof b) : "-");
	if (c->have_events) {
		fprintf(f, "  %-22s ", "memory.events");
		if (!c->v1)
			fprintf(f, "high %llu, ", (unsigned long long)c->ev_high);
		fprintf(f, "max %llu, ", (unsigned long long)c->ev_max);
		if (c->have_oom)
			fprintf(f, "oom %llu, ", (unsigned long long)c->ev_oom);
		fprintf(f, "oom_kill %llu%s\n", (unsigned long long)c->ev_oom_kill,
			c->v1 ? " (v1: max is memory.failcnt)" : "");
	}
	if (c->have_psi)
		fprintf(f, "  %-22s some %.2f%% %.2f%% %.2f%%, full %.2f%% %.2f%% %.2f%% "
			"(10 s, 60 s, 300 s)\n", "memory.pressure", c->some10, c->some60,
			c->some300, c->full10, c->full60, c->full300);
	else
		fprintf(f, "  %-22s %10s  %s\n", "memory.pressure", "-",
			c->v1 ? "(cgroup v1 has no pressure per cgroup)" : "(not available)");
}

static void text_stack(FILE *f, struct sym *s, const struct frames_rules *r,
		       const uint64_t *frames, uint32_t depth, const char *indent)
{
	struct stack_view v;
	if (depth == 0) {
		fprintf(f, "%s(no frames: samples that found the stack table full)\n",
			indent);
		return;
	}
	if (frames_view(s, r, frames, depth, &v) != 0)
		return;
	char buf[1024], vis[FMT_VIS_SIZE(sizeof buf)];
	for (uint32_t i = 0; i < v.n; i++) {
		const char *mark = i < v.display ? "  " : i == v.display ? "=>" : "  ";
		fprintf(f, "%s%s %s%s\n", indent, mark,
			v.f[i].inlined ? "[inlined] " : "",
			fmt_vis(frames_label(&v.f[i], buf, sizeof buf), vis, sizeof vis));
	}
	frames_view_free(&v);
}

static const char *const life_label[YM_LIFE_BUCKETS] = {
	"< 1us", "< 10us", "< 100us", "< 1ms", "< 10ms", "< 100ms", "< 1s",
	"< 10s", "< 100s", "< 1000s", "< 1h", ">= 1h",
};

/* Freed samples by lifetime, with a bar, for the buckets in use. */
static void text_lifetimes(FILE *f, const struct model *m)
{
	double total = 0, most = 0;
	for (int b = 0; b < YM_LIFE_BUCKETS; b++) {
		total += m->life[b].bytes;
		if (m->life[b].bytes > most)
			most = m->life[b].bytes;
	}
	fprintf(f, "\nLifetimes of freed allocations (%s):\n", samples_word(m));
	if (total <= 0) {
		fprintf(f, "  (nothing sampled has been freed)\n");
		return;
	}
	char a[32], c[32];
	for (int b = 0; b < YM_LIFE_BUCKETS; b++) {
		if (m->life[b].objects <= 0 && m->life[b].bytes <= 0)
			continue;
		int bar = most > 0 ? (int)lround(30.0 * m->life[b].bytes / most) : 0;
		fprintf(f, "  %-8s %10s objects %10s %5.1f%% %.*s\n", life_label[b],
			fmt_count(m->life[b].objects, c, sizeof c),
			fmt_bytes(m->life[b].bytes, a, sizeof a),
			100.0 * m->life[b].bytes / total, bar,
			"##############################");
	}
}

/* The stack's display frame, one line. */
static void text_display_frame(FILE *f, struct sym *s, const struct frames_rules *r,
			       const struct model_stack *st)
{
	struct stack_view v;
	if (!st->depth || frames_view(s, r, st->frames, st->depth, &v) != 0) {
		fputs("(no frames)", f);
		return;
	}
	char buf[1024], vis[FMT_VIS_SIZE(sizeof buf)];
	if (v.n)
		fputs(fmt_vis(frames_label(&v.f[v.display], buf, sizeof buf), vis,
			      sizeof vis), f);
	frames_view_free(&v);
}

static int by_short_bytes(const void *a, const void *b, void *arg)
{
	const struct model *m = arg;
	struct model_short x, y;
	model_short_lived(&m->stacks[*(const uint32_t *)a], &x);
	model_short_lived(&m->stacks[*(const uint32_t *)b], &y);
	return (x.bytes < y.bytes) - (x.bytes > y.bytes);
}

/* The stacks that allocate most in blocks freed within
 * MODEL_SHORT_LIVED_NS (model/shortlived.h), by those blocks' bytes. */
static void text_short_lived(FILE *f, struct model *m, struct sym *s,
			     const struct report_opts *o)
{
	uint32_t n = 0;
	uint32_t *order = report_order_by(m, SORT_RETAINED, &n);
	if (!order)
		return;
	qsort_r(order, n, sizeof *order, by_short_bytes, m);
	char a[32], b[32];
	fprintf(f, "\nShort-lived allocations (freed within %s, %s):\n",
		fmt_duration((double)MODEL_SHORT_LIVED_NS / 1e9, a, sizeof a),
		samples_word(m));
	int shown = 0, top = o->top > 0 && o->top < 10 ? o->top : 10;
	for (uint32_t k = 0; k < n && shown < top; k++) {
		const struct model_stack *st = &m->stacks[order[k]];
		struct model_short sh;
		model_short_lived(st, &sh);
		if (sh.bytes <= 0)
			break;
		fprintf(f, "  %10s in %3.0f%% of its allocations, %10s/s  ",
			fmt_bytes(sh.bytes, a, sizeof a),
			100.0 * (sh.fraction > 0 ? sh.fraction : 0),
			fmt_bytes(sh.rate, b, sizeof b));
		text_display_frame(f, s, o->rules, st);
		fputc('\n', f);
		shown++;
	}
	if (!shown)
		fprintf(f, "  (no sampled block was freed that soon)\n");
	free(order);
}

static void text_threads(FILE *f, const struct model *m)
{
	char a[32], b[32], name[64], vis[FMT_VIS_SIZE(sizeof name)];
	int first = 1;
	const struct ym_thread *th;
	for (uint32_t it = 0; (th = report_next_thread(m, &it)) != NULL;) {
		if (first)
			fprintf(f, "\nThreads (exact):\n  %8s %-16s %-7s %12s %12s %12s\n",
				"TID", "NAME", "STATE",
				/* Sampling: requested sizes, counted exactly
				 * (usable ones are not, man/ymagent.7). */
				model_alloc_bytes_counted(m) ? "ALLOCATED" : "REQUESTED",
				"FREED", "CALLS");
		first = 0;
		const char *nm = report_thread_name(m, th, name, sizeof name);
		fprintf(f, "  %8u %-16.16s %-7s %12s %12s %12llu\n", th->tid,
			*nm ? fmt_vis(nm, vis, sizeof vis) : "-",
			model_thread_state(m, th),
			fmt_bytes((double)model_alloc_bytes(m, &th->t), a, sizeof a),
			model_freed_bytes_counted(m) ?
			fmt_bytes((double)th->t.free_bytes, b, sizeof b) : "-",
			(unsigned long long)th->t.alloc_objects);
	}
}

/* The trend line of the header, and the growing stacks first, under a
 * heading of their own (fastest first). */
static void text_growing(FILE *f, const struct model *m, struct sym *s,
			 const struct report_opts *o)
{
	char a[32], b[32], c[32];
	const char *src = m->trend_source == MODEL_TREND_AGENT ?
		"the agent's points" : "ymtop's own snapshots since it started";
	if (m->ngrowing == 0) {
		fprintf(f, "\nGrowing stacks: none (trends from %s)\n", src);
		return;
	}
	fprintf(f, "\nGrowing stacks: %u, holding %s (trends from %s):\n",
		m->ngrowing, fmt_bytes(m->growing_bytes, a, sizeof a), src);
	uint32_t norder;
	uint32_t *order = report_order_by(m, SORT_TREND, &norder);
	if (!order)
		return;
	for (uint32_t k = 0, shown = 0; k < norder; k++) {
		const struct model_stack *st = &m->stacks[order[k]];
		if (st->trend.verdict != TREND_GROWING)
			continue;
		fprintf(f, "\n#%u growing %s/s over %s; retained %s\n", ++shown,
			fmt_bytes(st->trend.bytes_per_s, a, sizeof a),
			fmt_duration(st->trend.window_s, b, sizeof b),
			fmt_bytes(st->retained_bytes, c, sizeof c));
		text_stack(f, s, o->rules, st->frames, st->depth, "   ");
	}
	free(order);
}

int text_write(FILE *f, struct model *m, struct sym *s,
		      const struct report_opts *o)
{
	const struct ym_totals *t = &m->totals;
	const char *exe = model_exe(m);
	char a[32], b[32], c[32], d[32];
	time_t now = (time_t)(m->snap.taken_real_ns / 1000000000ULL);
	struct tm tm;
	char when[64];
	localtime_r(&now, &tm);
	strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", &tm);

	/* The name it was started as, and the file it runs, which differ
	 * when that name is a symlink (redis-server -> redis-check-rdb);
	 * and its pid inside its own namespace when that is another. */
	char ns[48] = "";
	if ((uint32_t)model_pid(m) != model_ns_pid(m))
		snprintf(ns, sizeof ns, " (pid %u in its namespace)", model_ns_pid(m));
	const char *name = model_name(m), *base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	char vname[FMT_VIS_SIZE(sizeof m->name)], vexe[FMT_VIS_SIZE(MODEL_EXE_SIZE)];
	fmt_vis(exe[0] ? exe : "?", vexe, sizeof vexe);
	if (strcmp(name, base) != 0 && name[0])
		fprintf(f, "ymtop %s heap report: pid %ld%s %s (%s), %s\n", YM_VERSION,
			(long)model_pid(m), ns, fmt_vis(name, vname, sizeof vname),
			vexe, when);
	else
		fprintf(f, "ymtop %s heap report: pid %ld%s (%s), %s\n", YM_VERSION,
			(long)model_pid(m), ns, vexe, when);
	fprintf(f, "state %s, uptime %s, RSS %s, sample rate %s%s\n",
		model_state(m), fmt_duration(model_uptime(m), a, sizeof a),
		m->alive ? fmt_bytes((double)m->proc.rss_bytes, b, sizeof b) : "-",
		model_sample_rate(m) == 1 ? "exact" :
		fmt_bytes((double)model_sample_rate(m), c, sizeof c),
		model_injected(m) ? ", attached (data starts at the attach)" : "");
	char budget[MODEL_BUDGET_LEN];
	if (model_budget_text(m, budget, sizeof budget))
		fprintf(f, "%s\n", budget);
	double inuse = (double)t->alloc_bytes - (double)t->free_bytes;
	/* Injected: the exact counters start at the attach, the estimates
	 * too, but memory allocated before it is in neither (the heap line
	 * below has it).  Sampling: frees count objects, not bytes. */
	fprintf(f, "exact totals%s: allocated ",
		model_injected(m) ? " since the attach" : "");
	/* Sampling: allocations count objects and requested bytes only. */
	if (model_alloc_bytes_counted(m))
		fprintf(f, "%s in ", fmt_bytes((double)t->alloc_bytes, a, sizeof a));
	fprintf(f, "%llu calls (%s requested), ",
		(unsigned long long)t->alloc_objects,
		fmt_bytes((double)t->req_bytes, b, sizeof b));
	/* Injected: frees of blocks from before the attach count, their
	 * allocations do not: allocated minus freed is a net change (it can
	 * be negative), and what is in use is the heap line's. */
	if (model_counted_net(m))
		fprintf(f, "freed %s in %llu calls, net change %s (not in use: "
			"frees of blocks from before the attach count)\n",
			fmt_bytes((double)t->free_bytes, c, sizeof c),
			(unsigned long long)t->free_objects,
			fmt_sbytes(inuse, d, sizeof d));
	else if (model_freed_bytes_counted(m))
		fprintf(f, "freed %s in %llu calls, in use %s\n",
			fmt_bytes((double)t->free_bytes, c, sizeof c),
			(unsigned long long)t->free_objects,
			fmt_sbytes(inuse, d, sizeof d));
	else
		fprintf(f, "freed %llu calls\n", (unsigned long long)t->free_objects);
	double age;
	const struct ym_heapstats *hs = model_heap(m, &age);
	if (hs) {
		char held[FMT_VIS_SIZE(sizeof m->heap_why) + 48] = "current";
		if (!model_heap_current(m)) {
			char why[FMT_VIS_SIZE(sizeof m->heap_why)];
			snprintf(held, sizeof held, "%.1f s old%s%s", age,
				 m->heap_why[0] ? ": " : "",
				 fmt_vis(m->heap_why, why, sizeof why));
		}
		fprintf(f, "heap (%s's statistics, %s):", model_heap_allocator(hs->allocator), held);
		if (hs->present & YM_HEAP_IN_USE)
			fprintf(f, " in use %s", fmt_bytes((double)hs->in_use_bytes, a, sizeof a));
		if (hs->present & YM_HEAP_FREE)
			fprintf(f, ", free %s", fmt_bytes((double)hs->free_bytes, a, sizeof a));
		if (hs->present & YM_HEAP_MAPPED)
			fprintf(f, ", mapped %s", fmt_bytes((double)hs->mapped_bytes, a, sizeof a));
		if (hs->present & YM_HEAP_RESIDENT)
			fprintf(f, ", resident %s", fmt_bytes((double)hs->resident_bytes, a, sizeof a));
		/* jemalloc's "retained" (tcmalloc's unmapped) is address space
		 * kept for reuse without pages, not the retained estimate. */
		if (hs->present & YM_HEAP_RETAINED)
			fprintf(f, ", unused address space %s",
				fmt_bytes((double)hs->retained_bytes, a, sizeof a));
		if (hs->present & YM_HEAP_ARENAS)
			fprintf(f, ", %llu arenas", (unsigned long long)hs->arenas);
		fputc('\n', f);
	} else if (model_heap_missing(m, NULL)) {
		fprintf(f, "heap: no allocator statistics: %s\n",
			model_heap_missing(m, NULL));
	}
	if (m->unseen[0])   /* escaped by the session (tui/unseen.h) */
		fprintf(f, "ymtop cannot see: %s\n", m->unseen);
	fprintf(f, "%s retained: %s in %.0f objects (%llu samples live)\n",
		samples_word(m), fmt_bytes(m->retained_bytes, a, sizeof a), m->retained_objects,
		(unsigned long long)m->snap.live_count);
	char uncounted[MODEL_UNCOUNTED_LEN];
	if (model_uncounted(m, uncounted, sizeof uncounted, NULL, NULL))
		fprintf(f, "%s\n", uncounted);
	char pynote[MODEL_PYTHON_LEN];
	if (model_python_note(m, pynote, sizeof pynote))
		fprintf(f, "%s\n", pynote);
	/* Units: one per figure (model/memory.h). */
	fprintf(f, "units: estimates (retained, mmap, stacks) in %s, in use in %s"
		" (the allocator's size classes)\n", MODEL_UNIT_REQUESTED,
		MODEL_UNIT_USABLE);
	if (model_has_peaks(m)) {
		fprintf(f, "peak retained: %s", fmt_bytes(m->peak_retained_bytes, a, sizeof a));
		if (m->peak_mono_ns && m->snap.taken_mono_ns >= m->peak_mono_ns)
			fprintf(f, " (%s ago)", fmt_duration((double)(m->snap.taken_mono_ns -
							      m->peak_mono_ns) / 1e9, b, sizeof b));
		fputc('\n', f);
		if (m->mmap_peak_bytes > 0)
			fprintf(f, "tracked mmap: %s retained, peak %s\n",
				fmt_bytes(m->mmap_retained_bytes, a, sizeof a),
				fmt_bytes(m->mmap_peak_bytes, b, sizeof b));
	}
	struct model_drops dr = model_drops(m);
	fprintf(f, "stacks %llu / %u, samples %llu, dropped: %llu stack-table, "
		"%llu live-table, %llu busy, %llu thread-slots, %llu modules\n",
		(unsigned long long)model_stacks_used(m), model_stacks_capacity(m),
		(unsigned long long)m->samples, (unsigned long long)dr.stacks,
		(unsigned long long)dr.live, (unsigned long long)dr.busy,
		(unsigned long long)dr.threads, (unsigned long long)dr.modules);
	if (model_modules_at_fork(m))
		fprintf(f, "modules: as at the fork; objects loaded since are not "
			"listed (the agent could not check the loader's lock)\n");
	char unseen[MODEL_UNSEEN_LEN];
	if (model_unseen(m, unseen, sizeof unseen, NULL, NULL)) {
		fmt_vis_fputs(f, unseen);
		fputc('\n', f);
	}
	if (model_alarms_written(m))
		fprintf(f, "giant allocations: %llu (see below)\n",
			(unsigned long long)model_alarms_written(m));
	/* Symbolization: files changed since the process loaded them. */
	for (uint32_t it = 0; sym_next_warning(s, &it) != NULL;) {
		fputs("warning: ", f);
		fmt_vis_fputs(f, sym_module_warning(s, it - 1));
		fputc('\n', f);
	}

	text_rss_explained(f, m);
	text_cgroup(f, m);

	int top = o->top > 0 ? o->top : 20;
	uint32_t norder;
	uint32_t *order = report_order_by(m, o->sort, &norder);
	if (!order) {
		errno = ENOMEM;
		return -1;
	}
	if (model_exited(m)) {
		/* The final report: what the process still held at exit, as
		 * heaptrack's leak summary says it. */
		char how[64];
		fprintf(f, "\nStill held at exit (%s): %s in %.0f objects "
			"(%s), by stack below\n",
			model_exit_text(m, how, sizeof how),
			fmt_bytes(m->retained_bytes, a, sizeof a), m->retained_objects,
			samples_word(m));
	}
	text_growing(f, m, s, o);
	fprintf(f, "\nTop %d stacks by %s:\n", top, report_sort_name(o->sort));
	int shown = 0, few = 0;
	/* Every stack with a sample, also those that retain nothing: on a
	 * server that frees all it allocates the churn is the story. */
	for (uint32_t k = 0; k < norder && shown < top; k++) {
		const struct model_stack *st = &m->stacks[order[k]];
		/* A share of its own kind's retained bytes. */
		double all = st->kind == YM_KIND_MMAP ? m->mmap_retained_bytes :
							m->retained_bytes;
		double pct = all > 0 ? 100.0 * st->retained_bytes / all : 0;
		/* MODEL_FEW_MARK before a figure carried by one or two
		 * samples (model_few), explained below the list. */
		int rfew = model_retained_few(m, st);
		int pfew = model_few(m, st->peak_bytes, st->peak_samples);
		few += rfew || pfew;
		fprintf(f, "\n#%d %sretained %s%s (%.1f%%) in %.0f objects; "
			"allocated %s in %.0f objects",
			++shown, st->kind == YM_KIND_MMAP ? "mmap " : "",
			rfew ? MODEL_FEW_MARK : "",
			fmt_bytes(st->retained_bytes, a, sizeof a), pct,
			st->retained_objects,
			fmt_bytes(st->alloc_bytes, b, sizeof b), st->alloc_objects);
		if (o->sort == SORT_RATE)
			fprintf(f, "; %s/s", fmt_bytes(st->alloc_rate, c, sizeof c));
		if (st->peak_bytes > 0)
			fprintf(f, "; peak %s%s", pfew ? MODEL_FEW_MARK : "",
				fmt_bytes(st->peak_bytes, c, sizeof c));
		if (m->resident_known && st->retained_bytes > 0)
			fprintf(f, "; resident %s", fmt_bytes(st->resident_bytes, c, sizeof c));
		if (st->trend.verdict != TREND_UNKNOWN)
			fprintf(f, "; %s", trend_verdict_name(st->trend.verdict));
		fputc('\n', f);
		text_stack(f, s, o->rules, st->frames, st->depth, "   ");
	}
	if (shown == 0)
		fprintf(f, "  (no samples yet)\n");
	if (few)
		fprintf(f, "\n%s: an estimate carried by one or two samples, its "
			"standard error %d%% of it or more\n", MODEL_FEW_MARK,
			(int)(MODEL_FEW_ERROR * 100));
	free(order);

	text_lifetimes(f, m);
	text_short_lived(f, m, s, o);
	text_threads(f, m);

	uint32_t na = m->snap.nalarms;
	if (na) {
		fprintf(f, "\nGiant allocations (%u):\n", na);
		for (uint32_t i = 0; i < na; i++) {
			const struct ym_alarm *al = shm_alarm(&m->snap, i);
			double ago = ((double)m->snap.taken_mono_ns - (double)al->mono_ns) / 1e9;
			fprintf(f, "\n  %s by thread %u, %s ago%s\n",
				fmt_bytes((double)al->size, a, sizeof a), al->tid,
				fmt_duration(ago, b, sizeof b),
				(al->flags & YM_ALARM_FAILED) ? " (refused: ENOMEM)" : "");
			text_stack(f, s, o->rules, al->frames, al->depth, "   ");
		}
	}
	return ferror(f) ? -1 : 0;
}
