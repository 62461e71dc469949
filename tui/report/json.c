/*
 * json: the report for programs, one JSON object (see json.h).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "fmt.h"
#include "json.h"
#include "model/memory.h"
#include "model/shortlived.h"

/* "key":value, or "key":null when absent. */
static void json_opt(FILE *f, const char *key, int have, double v, int comma)
{
	if (have)
		fprintf(f, "\"%s\":%.0f%s", key, v, comma ? "," : "");
	else
		fprintf(f, "\"%s\":null%s", key, comma ? "," : "");
}

/* RSS explained (model/memory.h): the kernel's split of RSS beside what
 * ymtop knows of the heap; null for what is not known. */
static void json_rss_explained(FILE *f, const struct model *m)
{
	struct model_memory mm;
	model_memory(m, &mm);
	fputs("\"rss_explained\":{\"source\":", f);
	fmt_json_string(f, mm.have_rss ? mm.rss_source : NULL);
	fputc(',', f);
	json_opt(f, "rss_bytes", mm.have_rss, mm.rss, 1);
	json_opt(f, "anon_bytes", mm.have_rss, mm.anon, 1);
	json_opt(f, "file_bytes", mm.have_rss, mm.file, 1);
	json_opt(f, "shmem_bytes", mm.have_rss, mm.shmem, 1);
	json_opt(f, "swap_bytes", mm.have_rss, mm.swap, 1);
	json_opt(f, "pss_bytes", mm.have_rss && mm.pss >= 0, mm.pss, 1);
	json_opt(f, "heap_in_use_bytes", mm.have_heap, mm.heap_in_use, 1);
	json_opt(f, "heap_free_bytes", mm.have_heap, mm.heap_free, 1);
	if (mm.have_heap)
		fprintf(f, "\"heap_age_s\":%.3f,", mm.heap_age);
	else
		fputs("\"heap_age_s\":null,", f);
	/* Injected: allocated minus freed since the attach is a net change,
	 * never an in use (model_counted_net). */
	json_opt(f, "counted_in_use_bytes", mm.have_counted && !mm.counted_net,
		 mm.counted_in_use, 1);
	json_opt(f, "counted_net_change_bytes", mm.have_counted && mm.counted_net,
		 mm.counted_in_use, 1);
	json_opt(f, "retained_bytes", 1, mm.retained, 1);
	json_opt(f, "mmap_retained_bytes", mm.have_mmap, mm.mmap_retained, 1);
	/* Of retained and tracked mmap: in RAM, swapped, never touched
	 * (the live samples' pages); null when not read, and why. */
	json_opt(f, "retained_resident_bytes", mm.have_resident, mm.retained_resident, 1);
	json_opt(f, "retained_swapped_bytes", mm.have_resident, mm.retained_swapped, 1);
	json_opt(f, "retained_untouched_bytes", mm.have_resident, mm.retained_untouched, 1);
	json_opt(f, "mmap_resident_bytes", mm.have_resident && mm.have_mmap,
		 mm.mmap_resident, 1);
	json_opt(f, "mmap_swapped_bytes", mm.have_resident && mm.have_mmap,
		 mm.mmap_swapped, 1);
	json_opt(f, "mmap_untouched_bytes", mm.have_resident && mm.have_mmap,
		 mm.mmap_untouched, 1);
	fputs("\"resident_why\":", f);
	fmt_json_string(f, mm.have_resident ? NULL : mm.resident_why);
	fputc(',', f);
	json_opt(f, "unexplained_anon_bytes", mm.have_rss, mm.unexplained, 1);
	json_opt(f, "in_use_minus_retained_bytes", mm.have_gap, mm.gap, 1);
	/* Units (model/memory.h) and what the differences are made of. */
	fputs("\"unexplained_why\":", f);
	fmt_json_string(f, mm.have_rss ? mm.unexplained_why : NULL);
	fputs(",\"in_use_minus_retained_why\":", f);
	fmt_json_string(f, mm.have_gap ? mm.gap_why : NULL);
	fputs(",\"units\":{\"heap_in_use_bytes\":\"usable\","
	      "\"heap_free_bytes\":\"usable\",\"counted_in_use_bytes\":\"usable\","
	      "\"retained_bytes\":\"requested\",\"mmap_retained_bytes\":\"requested\"}},",
	      f);
}

static void json_frames(FILE *f, struct sym *s, const struct frames_rules *r,
			const uint64_t *frames, uint32_t depth)
{
	struct stack_view v;
	fputc('[', f);
	if (depth && frames_view(s, r, frames, depth, &v) == 0) {
		for (uint32_t i = 0; i < v.n; i++) {
			const struct sym_frame *x = &v.f[i];
			fprintf(f, "%s{\"address\":\"0x%llx\",\"module\":", i ? "," : "",
				(unsigned long long)x->addr);
			fmt_json_string(f, x->module);
			fputs(",\"function\":", f);
			char fb[128];
			fmt_json_string(f, x->function ? x->function :
					(sym_fallback(x, fb, sizeof fb), fb));
			fputs(",\"file\":", f);
			fmt_json_string(f, x->file);
			fprintf(f, ",\"line\":%d,\"inlined\":%s,\"kind\":\"%s\"}",
				x->line, x->inlined ? "true" : "false",
				x->python ? "python" : "native");
		}
		/* Display frame: index into frames, after them. */
		fprintf(f, "],\"display_frame\":%u", v.n ? v.display : 0);
		frames_view_free(&v);
		return;
	}
	fputs("],\"display_frame\":null", f);
}

/* "heap": the allocator's own statistics (segment.h, struct ym_heapstats),
 * the keys it reports only; null when the agent published none. */
static void json_heap(FILE *f, const struct model *m)
{
	double age;
	const struct ym_heapstats *hs = model_heap(m, &age);
	if (!hs) {
		const char *key;
		const char *why = model_heap_missing(m, &key);
		fputs("\"heap\":null,", f);
		if (why) {
			fprintf(f, "\"heap_missing\":{\"reason\":\"%s\",\"text\":", key);
			fmt_json_string(f, why);
			fputs("},", f);
		}
		return;
	}
	fprintf(f, "\"heap\":{\"allocator\":\"%s\"", model_heap_allocator(hs->allocator));
	static const struct {
		uint32_t bit;
		const char *key;
		size_t off;
	} keys[] = {
		{ YM_HEAP_IN_USE, "in_use_bytes", offsetof(struct ym_heapstats, in_use_bytes) },
		{ YM_HEAP_FREE, "free_bytes", offsetof(struct ym_heapstats, free_bytes) },
		{ YM_HEAP_MAPPED, "mapped_bytes", offsetof(struct ym_heapstats, mapped_bytes) },
		{ YM_HEAP_ARENAS, "arenas", offsetof(struct ym_heapstats, arenas) },
		{ YM_HEAP_ACTIVE, "active_bytes", offsetof(struct ym_heapstats, active_bytes) },
		{ YM_HEAP_RESIDENT, "resident_bytes", offsetof(struct ym_heapstats, resident_bytes) },
		{ YM_HEAP_RETAINED, "retained_bytes", offsetof(struct ym_heapstats, retained_bytes) },
	};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (hs->present & keys[i].bit) {
			uint64_t v;
			memcpy(&v, (const char *)hs + keys[i].off, sizeof v);
			fprintf(f, ",\"%s\":%llu", keys[i].key, (unsigned long long)v);
		}
	fprintf(f, ",\"age_s\":%.3f,\"current\":%s,\"cost_ns\":%llu", age,
		model_heap_current(m) ? "true" : "false",
		(unsigned long long)hs->cost_ns);
	if (m->heap_why[0]) {
		fputs(",\"why_old\":", f);
		fmt_json_string(f, m->heap_why);
	}
	fputs("},", f);
}

/* A writer's CLOCK_MONOTONIC time as seconds since the epoch, or null
 * (0: no such time, e.g. no peak yet or an older agent). */
static void json_time(FILE *f, const struct model *m, uint64_t mono_ns)
{
	if (mono_ns == 0)
		fputs("null", f);
	else
		fprintf(f, "%.3f", report_mono_time(m, mono_ns));
}

/* "cgroup": the process's cgroup's memory (model/cgroup.h): null when not
 * read; a figure null when its file is missing (with "why" when none
 * was). */
static void json_cgroup(FILE *f, const struct model *m)
{
	const struct model_cgroup *c = &m->cgroup;
	if (!c->known && !c->why[0]) {
		fputs("\"cgroup\":null,", f);
		return;
	}
	fputs("\"cgroup\":{\"path\":", f);
	fmt_json_string(f, c->path[0] ? c->path : NULL);
	fprintf(f, ",\"version\":%d,", c->v1 ? 1 : 2);
	json_opt(f, "memory_current_bytes", c->have_current, (double)c->current, 1);
	json_opt(f, "memory_max_bytes", c->have_max && !c->max_unlimited, (double)c->max, 1);
	fprintf(f, "\"memory_max_unlimited\":%s,",
		c->have_max && c->max_unlimited ? "true" : "false");
	json_opt(f, "memory_high_bytes", c->have_high && !c->high_unlimited,
		 (double)c->high, 1);
	if (c->have_events) {
		fputs("\"events\":{", f);
		json_opt(f, "high", !c->v1, (double)c->ev_high, 1);
		json_opt(f, "max", 1, (double)c->ev_max, 1);
		json_opt(f, "oom", c->have_oom, (double)c->ev_oom, 1);
		json_opt(f, "oom_kill", 1, (double)c->ev_oom_kill, 0);
		fputs("},", f);
	} else {
		fputs("\"events\":null,", f);
	}
	if (c->have_psi)
		fprintf(f, "\"pressure\":{\"some_avg10\":%.2f,\"some_avg60\":%.2f,"
			"\"some_avg300\":%.2f,\"full_avg10\":%.2f,\"full_avg60\":%.2f,"
			"\"full_avg300\":%.2f},", c->some10, c->some60, c->some300,
			c->full10, c->full60, c->full300);
	else
		fputs("\"pressure\":null,", f);
	json_opt(f, "anon_bytes", c->have_stat, (double)c->anon, 1);
	json_opt(f, "file_bytes", c->have_stat, (double)c->file, 1);
	json_opt(f, "kernel_bytes", c->have_kernel, (double)c->kernel, 1);
	fprintf(f, "\"processes\":%u,\"processes_cut\":%s,", c->nprocs,
		c->procs_cut ? "true" : "false");
	json_opt(f, "processes_rss_bytes", c->known, (double)c->procs_rss, 1);
	json_opt(f, "process_rss_bytes", c->known && m->alive,
		 (double)m->proc.rss_bytes, 1);
	fputs("\"why\":", f);
	fmt_json_string(f, c->known ? NULL : c->why);
	fputs("},", f);
}

int json_write(FILE *f, struct model *m, struct sym *s,
		      const struct report_opts *o)
{
	const struct ym_totals *t = &m->totals;
	struct model_drops dr = model_drops(m);
	/* report_version: what `ymtop diff` checks before it reads (diff.h). */
	fprintf(f, "{\"report_version\":%d,\"pid\":%ld,", DIFF_REPORT_VERSION,
		(long)model_pid(m));
	if ((uint32_t)model_pid(m) != model_ns_pid(m))
		fprintf(f, "\"ns_pid\":%u,", model_ns_pid(m));
	fprintf(f, "\"exe\":");
	fmt_json_string(f, model_exe(m));
	fputs(",\"name\":", f);
	fmt_json_string(f, model_name(m));
	fprintf(f, ",\"sort\":\"%s\"", o->sort == SORT_ALLOCATED ? "allocated" :
		o->sort == SORT_RATE ? "rate" : o->sort == SORT_PEAK ? "peak" :
		o->sort == SORT_TREND ? "trend" : "retained");
	fprintf(f, ",\"time\":%.3f,\"uptime_s\":%.3f,\"state\":\"%s\","
		"\"attached\":%s,\"modules_complete\":%s,\"sample_rate\":%llu,"
		"\"rss_bytes\":%llu,",
		(double)m->snap.taken_real_ns / 1e9, model_uptime(m), model_state(m),
		model_injected(m) ? "true" : "false",
		model_modules_at_fork(m) ? "false" : "true",
		(unsigned long long)model_sample_rate(m),
		(unsigned long long)(m->alive ? m->proc.rss_bytes : 0));
	/* Sampling: the rate in force, the one asked for and the cost
	 * budget (v9); null where an older agent does not say. */
	struct model_sampling sm = model_sampling(m);
	fprintf(f, "\"sampling\":{\"effective_rate\":%llu,",
		(unsigned long long)sm.effective);
	if (sm.known) {
		fprintf(f, "\"requested_rate\":%llu,\"longest_rate\":%llu,"
			"\"budget_percent\":", (unsigned long long)sm.requested,
			(unsigned long long)sm.longest);
		if (sm.budget_percent > 0)
			fprintf(f, "%g,\"window_ms\":%u,\"adjustments\":%llu,"
				"\"spent_ns\":%llu,\"cpu_ns\":%llu,"
				"\"window_spent_ns\":%llu,\"window_cpu_ns\":%llu},",
				sm.budget_percent, sm.window_ms,
				(unsigned long long)sm.adjustments,
				(unsigned long long)sm.spent_ns,
				(unsigned long long)sm.cpu_ns,
				(unsigned long long)sm.window_spent_ns,
				(unsigned long long)sm.window_cpu_ns);
		else
			fputs("null},", f);
	} else {
		fputs("\"requested_rate\":null,\"budget_percent\":null,"
		      "\"known\":false},", f);
	}
	/* Allocator calls the agent does not see: null, or where and why. */
	char unseen[MODEL_UNSEEN_LEN];
	const char *uobj, *uwhy;
	fputs("\"unseen\":", f);
	if (model_unseen(m, unseen, sizeof unseen, &uobj, &uwhy)) {
		fputs("{\"object\":", f);
		fmt_json_string(f, uobj);
		fprintf(f, ",\"reason\":\"%s\",\"text\":", uwhy);
		fmt_json_string(f, unseen);
		fputs("},", f);
	} else {
		fputs("null,", f);
	}
	/* Samples not counted in the retained figures: null, or how many. */
	char uncounted[MODEL_UNCOUNTED_LEN];
	uint64_t ulive, ubusy;
	fputs("\"uncounted\":", f);
	if (model_uncounted(m, uncounted, sizeof uncounted, &ulive, &ubusy)) {
		fprintf(f, "{\"live_table_full\":%llu,\"busy\":%llu,\"text\":",
			(unsigned long long)ulive, (unsigned long long)ubusy);
		fmt_json_string(f, uncounted);
		fputs("},", f);
	} else {
		fputs("null,", f);
	}
	/* CPython in the process (v8): null when none was seen or the
	 * agent is older; frames false with the reason in text. */
	struct model_python py = model_python(m);
	fputs("\"python\":", f);
	if (py.seen) {
		char pynote[MODEL_PYTHON_LEN];
		uint32_t pv = py.version;
		if (pv)
			fprintf(f, "{\"version\":\"%u.%u.%u\"", pv >> 24,
				(pv >> 16) & 0xff, (pv >> 8) & 0xff);
		else
			fputs("{\"version\":null", f);
		fprintf(f, ",\"frames\":%s,\"code_objects\":%u,\"dropped_frames\":%llu,\"text\":",
			py.frames ? "true" : "false", py.codes,
			(unsigned long long)py.dropped);
		fmt_json_string(f, model_python_note(m, pynote, sizeof pynote));
		fputs(",\"pymalloc\":", f);
		fmt_json_string(f, py.pymalloc_name);
		fputs("},", f);
	} else {
		fputs("null,", f);
	}
	/* The final report of a process that has exited: what
	 * its stacks retain is what it still held at exit. */
	if (model_exited(m)) {
		fprintf(f, "\"leaked_at_exit\":true,\"leaked_bytes\":%.0f,"
			"\"leaked_objects\":%.0f,\"exit\":{\"how\":",
			m->retained_bytes, m->retained_objects);
		if (m->exit_how == PROC_EXIT_STATUS)
			fprintf(f, "\"status\",\"status\":%d},", m->exit_value);
		else if (m->exit_how == PROC_EXIT_SIGNAL)
			fprintf(f, "\"signal\",\"signal\":%d%s},", m->exit_value,
				m->cgroup.oom_killed ? ",\"oom_killed\":true" : "");
		else
			fputs("\"unknown\"},", f);
	}
	json_heap(f, m);
	/* What the agent cannot see (tui/unseen.h): null, or the allocator
	 * and the one line. */
	if (m->unseen[0]) {
		fputs("\"unseen_allocator\":{\"allocator\":", f);
		fmt_json_string(f, m->unseen_allocator);
		fputs(",\"line\":", f);
		fmt_json_string(f, m->unseen);
		fputs("},", f);
	} else {
		fputs("\"unseen_allocator\":null,", f);
	}
	/* Sampling (v6 agents): frees count objects only, so freed_bytes
	 * and in_use_bytes are absent; heap.in_use_bytes says what is in use. */
	int freed = model_freed_bytes_counted(m);
	/* Allocated bytes stay a stable key (DESIGN, scripts read it): the
	 * usable sizes in exact mode, the requested sizes when sampling
	 * (the agent counts those exactly, usable ones not), as
	 * ymtop_process_allocated_bytes_total; allocated_bytes_kind says
	 * which. */
	fputs("\"totals\":{", f);
	fprintf(f, "\"allocated_bytes\":%llu,\"allocated_bytes_kind\":\"%s\",",
		(unsigned long long)model_alloc_bytes(m, t),
		model_alloc_bytes_counted(m) ? "usable" : "requested");
	fprintf(f, "\"allocated_objects\":%llu,"
		"\"requested_bytes\":%llu,\"freed_objects\":%llu,",
		(unsigned long long)t->alloc_objects,
		(unsigned long long)t->req_bytes, (unsigned long long)t->free_objects);
	/* Injected: frees of blocks from before the attach count, their
	 * allocations do not; allocated minus freed is net_change_bytes
	 * (can be negative), never in_use_bytes. */
	if (freed && model_counted_net(m))
		fprintf(f, "\"freed_bytes\":%llu,\"net_change_bytes\":%lld,",
			(unsigned long long)t->free_bytes,
			(long long)(t->alloc_bytes - t->free_bytes));
	else if (freed)
		fprintf(f, "\"freed_bytes\":%llu,\"in_use_bytes\":%lld,",
			(unsigned long long)t->free_bytes,
			(long long)(t->alloc_bytes - t->free_bytes));
	fprintf(f, "\"retained_bytes\":%.0f,\"retained_objects\":%.0f,"
		"\"mmap_retained_bytes\":%.0f,\"peak_retained_bytes\":%.0f,\"peak_time\":",
		m->retained_bytes, m->retained_objects, m->mmap_retained_bytes,
		m->peak_retained_bytes);
	json_time(f, m, m->peak_mono_ns);
	fprintf(f, ",\"mmap_peak_retained_bytes\":%.0f,\"mmap_peak_time\":",
		m->mmap_peak_bytes);
	json_time(f, m, m->mmap_peak_mono_ns);
	fputs("},", f);
	fprintf(f, "\"table\":{\"stacks_used\":%llu,\"stacks_capacity\":%u,"
		"\"samples\":%llu,\"live_samples\":%llu,\"dropped_stacks\":%llu,"
		"\"dropped_live\":%llu,\"dropped_busy\":%llu,\"dropped_threads\":%llu,"
		"\"dropped_modules\":%llu},",
		(unsigned long long)model_stacks_used(m), model_stacks_capacity(m),
		(unsigned long long)m->samples, (unsigned long long)m->snap.live_count,
		(unsigned long long)dr.stacks, (unsigned long long)dr.live,
		(unsigned long long)dr.busy, (unsigned long long)dr.threads,
		(unsigned long long)dr.modules);

	json_rss_explained(f, m);
	json_cgroup(f, m);
	/* Where the verdicts come from (man ymtop(1), TREND). */
	fprintf(f, "\"trend\":{\"source\":\"%s\",\"growing_stacks\":%u,"
		"\"growing_retained_bytes\":%.0f},",
		m->trend_source == MODEL_TREND_AGENT ? "agent" : "ymtop",
		m->ngrowing, m->growing_bytes);

	uint32_t norder;
	uint32_t *order = report_order_by(m, o->sort, &norder);
	if (!order) {
		errno = ENOMEM;
		return -1;
	}
	/* Symbolization warnings: files changed since loaded. */
	fputs("\"warnings\":[", f);
	for (uint32_t it = 0, k = 0; sym_next_warning(s, &it) != NULL; k++)
		fputs(k ? "," : "", f), fmt_json_string(f, sym_module_warning(s, it - 1));
	fputs("],", f);
	fputs("\"stacks\":[", f);
	for (uint32_t k = 0; k < norder; k++) {
		const struct model_stack *st = &m->stacks[order[k]];
		fprintf(f, "%s{\"id\":%u,\"retained_bytes\":%.0f,\"retained_objects\":%.0f,"
			"\"allocated_bytes\":%.0f,\"allocated_objects\":%.0f,"
			"\"allocated_bytes_per_s\":%.0f,"
			"\"samples\":%llu,\"live_samples\":%u,\"kind\":\"%s\","
			"\"peak_retained_bytes\":%.0f,\"peak_samples\":",
			k ? "," : "", st->id, st->retained_bytes, st->retained_objects,
			st->alloc_bytes, st->alloc_objects, st->alloc_rate,
			(unsigned long long)st->alloc_samples, st->live_samples,
			report_kind_name(st->kind), st->peak_bytes);
		/* The samples behind the peak; null: a writer before v7. */
		if (st->peak_samples >= 0)
			fprintf(f, "%lld", (long long)st->peak_samples);
		else
			fputs("null", f);
		fputs(",\"peak_time\":", f);
		json_time(f, m, st->peak_mono_ns);
		/* Blocks freed within short_lived_threshold_ns: their share of
		 * the allocated objects (null: none allocated), bytes, rate. */
		struct model_short sh;
		model_short_lived(st, &sh);
		fputs(",\"short_lived_fraction\":", f);
		if (sh.fraction >= 0)
			fprintf(f, "%.4f", sh.fraction);
		else
			fputs("null", f);
		fprintf(f, ",\"short_lived_bytes\":%.0f,\"short_lived_bytes_per_s\":%.0f",
			sh.bytes, sh.rate);
		/* Of retained_bytes, in RAM and in swap (null: not read). */
		fputc(',', f);
		json_opt(f, "resident_bytes", m->resident_known, st->resident_bytes, 1);
		json_opt(f, "swapped_bytes", m->resident_known, st->swapped_bytes, 0);
		fprintf(f, ",\"trend\":{\"verdict\":\"%s\",\"bytes_per_s\":%.0f,"
			"\"window_s\":%.0f}", trend_verdict_name(st->trend.verdict),
			st->trend.bytes_per_s, st->trend.window_s);
		fputs(",\"frames\":", f);
		json_frames(f, s, o->rules, st->frames, st->depth);
		fputc('}', f);
	}
	free(order);
	fprintf(f, "],\"short_lived_threshold_ns\":%llu,\"lifetimes\":[",
		(unsigned long long)MODEL_SHORT_LIVED_NS);
	static const uint64_t upto[YM_LIFE_BUCKETS] = YM_LIFE_UPTO_NS_INIT;
	for (int b = 0; b < YM_LIFE_BUCKETS; b++) {
		fprintf(f, "%s{\"upto_ns\":", b ? "," : "");
		if (upto[b])
			fprintf(f, "%llu", (unsigned long long)upto[b]);
		else
			fputs("null", f);
		fprintf(f, ",\"count\":%.0f,\"bytes\":%.0f}",
			m->life[b].objects, m->life[b].bytes);
	}
	fputs("],\"threads\":[", f);
	int first = 1;
	const struct ym_thread *th;
	for (uint32_t it = 0; (th = report_next_thread(m, &it)) != NULL;) {
		char name[64];
		fprintf(f, "%s{\"tid\":%u,\"name\":", first ? "" : ",", th->tid);
		first = 0;
		fmt_json_string(f, report_thread_name(m, th, name, sizeof name));
		fprintf(f, ",\"state\":\"%s\",", model_thread_state(m, th));
		fprintf(f, "\"allocated_bytes\":%llu,",
			(unsigned long long)model_alloc_bytes(m, &th->t));
		fprintf(f, "\"allocated_objects\":%llu,\"requested_bytes\":%llu,",
			(unsigned long long)th->t.alloc_objects,
			(unsigned long long)th->t.req_bytes);
		if (freed)
			fprintf(f, "\"freed_bytes\":%llu,",
				(unsigned long long)th->t.free_bytes);
		fprintf(f, "\"freed_objects\":%llu}",
			(unsigned long long)th->t.free_objects);
	}
	fputs("],\"alarms\":[", f);
	for (uint32_t i = 0; i < m->snap.nalarms; i++) {
		const struct ym_alarm *al = shm_alarm(&m->snap, i);
		fprintf(f, "%s{\"size\":%llu,\"time\":%.3f,\"tid\":%u,\"failed\":%s,"
			"\"frames\":", i ? "," : "", (unsigned long long)al->size,
			report_alarm_time(m, al), al->tid,
			(al->flags & YM_ALARM_FAILED) ? "true" : "false");
		json_frames(f, s, o->rules, al->frames, al->depth);
		fputc('}', f);
	}
	fputs("]}\n", f);
	return ferror(f) ? -1 : 0;
}
