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
		fprintf(f, "  %-22s %10s  (the allocator's statistics are not available)\n",
			"allocator in use", "-");
	if (mm.have_counted)
		fprintf(f, "  %-22s %10s  usable bytes, malloc family, the agent's exact counters\n",
			"counted in use", fmt_sbytes(mm.counted_in_use, a, sizeof a));
	else
		fprintf(f, "  %-22s %10s  (sampling: frees count objects, not bytes)\n",
			"counted in use", "-");
	char label[32];
	snprintf(label, sizeof label, "retained (%s)", samples_word(m));
	fprintf(f, "  %-22s %10s  requested bytes, from samples: the stacks below\n",
		label, fmt_bytes(mm.retained, a, sizeof a));
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
	if (model_freed_bytes_counted(m))
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
	}
	if (m->unseen[0])   /* escaped by the session (tui/unseen.h) */
		fprintf(f, "ymtop cannot see: %s\n", m->unseen);
	fprintf(f, "%s retained: %s in %.0f objects (%llu samples live)\n",
		samples_word(m), fmt_bytes(m->retained_bytes, a, sizeof a), m->retained_objects,
		(unsigned long long)m->snap.live_count);
	char uncounted[MODEL_UNCOUNTED_LEN];
	if (model_uncounted(m, uncounted, sizeof uncounted, NULL, NULL))
		fprintf(f, "%s\n", uncounted);
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
