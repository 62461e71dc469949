#include <math.h>
#include <string.h>
#include <time.h>

#include "fmt.h"
#include "report.h"

int report_format_parse(const char *s, enum report_format *out)
{
	if (!strcmp(s, "text"))
		*out = REPORT_TEXT;
	else if (!strcmp(s, "json"))
		*out = REPORT_JSON;
	else
		return -1;
	return 0;
}

static double alarm_unix_time(const struct model *m, const struct ym_alarm *a)
{
	const struct ym_header *h = &m->snap.hdr;
	double off = ((double)a->mono_ns - (double)h->start_mono_ns) / 1e9;
	return (double)h->start_real_ns / 1e9 + off;
}

static const char *thread_name(const struct model *m, const struct ym_thread *t,
			       char *buf, size_t len)
{
	if (t->name[0]) {
		snprintf(buf, len, "%s", t->name);
		return buf;
	}
	buf[0] = '\0';
	if (m->alive && t->tid)
		proc_thread_name((pid_t)m->snap.hdr.pid, t->tid, buf, len);
	return buf;
}

/* ---- text ---- */

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
	char buf[1024];
	for (uint32_t i = 0; i < v.n; i++) {
		const char *mark = i < v.display ? "  " : i == v.display ? "=>" : "  ";
		fprintf(f, "%s%s %s%s\n", indent, mark,
			v.f[i].inlined ? "[inlined] " : "",
			frames_label(&v.f[i], buf, sizeof buf));
	}
	frames_view_free(&v);
}

static int write_text(FILE *f, struct model *m, struct sym *s,
		      const struct report_opts *o)
{
	const struct ym_header *h = &m->snap.hdr;
	const struct ym_totals *t = &m->totals;
	char a[32], b[32], c[32], d[32];
	time_t now = (time_t)(m->snap.taken_real_ns / 1000000000ULL);
	struct tm tm;
	char when[64];
	localtime_r(&now, &tm);
	strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", &tm);

	fprintf(f, "ymtop %s heap report: pid %u (%s), %s\n", YM_VERSION,
		h->pid, h->exe[0] ? h->exe : "?", when);
	fprintf(f, "state %s, uptime %s, RSS %s, sample rate %s%s\n",
		model_state(m), fmt_duration(model_uptime(m), a, sizeof a),
		m->alive ? fmt_bytes((double)m->proc.rss_bytes, b, sizeof b) : "-",
		h->sample_rate == 1 ? "exact" : fmt_bytes((double)h->sample_rate, c, sizeof c),
		(h->flags & YM_FLAG_INJECTED) ? ", attached (data starts at the attach)" : "");
	double inuse = (double)t->alloc_bytes - (double)t->free_bytes;
	fprintf(f, "exact totals: allocated %s in %llu calls (%s requested), "
		"freed %s in %llu calls, in use %s\n",
		fmt_bytes((double)t->alloc_bytes, a, sizeof a),
		(unsigned long long)t->alloc_objects,
		fmt_bytes((double)t->req_bytes, b, sizeof b),
		fmt_bytes((double)t->free_bytes, c, sizeof c),
		(unsigned long long)t->free_objects,
		fmt_sbytes(inuse, d, sizeof d));
	fprintf(f, "estimated retained: %s in %.0f objects (%llu samples live)\n",
		fmt_bytes(m->retained_bytes, a, sizeof a), m->retained_objects,
		(unsigned long long)h->live_count);
	fprintf(f, "stacks %llu / %u, samples %llu, dropped: %llu stack-table, "
		"%llu live-table, %llu busy\n",
		(unsigned long long)(h->stacks_used ? h->stacks_used - 1 : 0),
		h->sections[YM_SEC_STACKS].capacity - 1,
		(unsigned long long)m->samples, (unsigned long long)h->drop_stacks,
		(unsigned long long)h->drop_live, (unsigned long long)h->drop_busy);
	if (h->alarms_written)
		fprintf(f, "giant allocations: %llu (see below)\n",
			(unsigned long long)h->alarms_written);

	int top = o->top > 0 ? o->top : 20;
	fprintf(f, "\nTop %d stacks by retained bytes:\n", top);
	int shown = 0;
	for (uint32_t k = 0; k < m->norder && shown < top; k++) {
		const struct model_stack *st = &m->stacks[m->order[k]];
		if (st->retained_bytes <= 0 && shown > 0)
			break;
		double pct = m->retained_bytes > 0 ?
			100.0 * st->retained_bytes / m->retained_bytes : 0;
		fprintf(f, "\n#%d retained %s (%.1f%%) in %.0f objects; "
			"allocated %s in %.0f objects\n",
			++shown, fmt_bytes(st->retained_bytes, a, sizeof a), pct,
			st->retained_objects,
			fmt_bytes(st->alloc_bytes, b, sizeof b), st->alloc_objects);
		text_stack(f, s, o->rules, st->frames, st->depth, "   ");
	}
	if (shown == 0)
		fprintf(f, "  (no samples yet)\n");

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

/* ---- JSON ---- */

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
			fprintf(f, ",\"line\":%d,\"inlined\":%s}", x->line,
				x->inlined ? "true" : "false");
		}
		frames_view_free(&v);
	}
	fputc(']', f);
}

static int write_json(FILE *f, struct model *m, struct sym *s,
		      const struct report_opts *o)
{
	const struct ym_header *h = &m->snap.hdr;
	const struct ym_totals *t = &m->totals;
	fprintf(f, "{\"pid\":%u,\"exe\":", h->pid);
	fmt_json_string(f, h->exe);
	fprintf(f, ",\"time\":%.3f,\"uptime_s\":%.3f,\"state\":\"%s\","
		"\"attached\":%s,\"sample_rate\":%llu,\"rss_bytes\":%llu,",
		(double)m->snap.taken_real_ns / 1e9, model_uptime(m), model_state(m),
		(h->flags & YM_FLAG_INJECTED) ? "true" : "false",
		(unsigned long long)h->sample_rate,
		(unsigned long long)(m->alive ? m->proc.rss_bytes : 0));
	fprintf(f, "\"totals\":{\"allocated_bytes\":%llu,\"allocated_objects\":%llu,"
		"\"requested_bytes\":%llu,\"freed_bytes\":%llu,\"freed_objects\":%llu,"
		"\"in_use_bytes\":%lld,\"retained_bytes\":%.0f,\"retained_objects\":%.0f},",
		(unsigned long long)t->alloc_bytes, (unsigned long long)t->alloc_objects,
		(unsigned long long)t->req_bytes, (unsigned long long)t->free_bytes,
		(unsigned long long)t->free_objects,
		(long long)(t->alloc_bytes - t->free_bytes),
		m->retained_bytes, m->retained_objects);
	fprintf(f, "\"table\":{\"stacks_used\":%llu,\"stacks_capacity\":%u,"
		"\"samples\":%llu,\"live_samples\":%llu,\"dropped_stacks\":%llu,"
		"\"dropped_live\":%llu,\"dropped_busy\":%llu,\"dropped_threads\":%llu},",
		(unsigned long long)(h->stacks_used ? h->stacks_used - 1 : 0),
		h->sections[YM_SEC_STACKS].capacity - 1,
		(unsigned long long)m->samples, (unsigned long long)h->live_count,
		(unsigned long long)h->drop_stacks, (unsigned long long)h->drop_live,
		(unsigned long long)h->drop_busy, (unsigned long long)h->drop_threads);

	fputs("\"stacks\":[", f);
	for (uint32_t k = 0; k < m->norder; k++) {
		const struct model_stack *st = &m->stacks[m->order[k]];
		fprintf(f, "%s{\"id\":%u,\"retained_bytes\":%.0f,\"retained_objects\":%.0f,"
			"\"allocated_bytes\":%.0f,\"allocated_objects\":%.0f,"
			"\"samples\":%llu,\"live_samples\":%u,\"frames\":",
			k ? "," : "", st->id, st->retained_bytes, st->retained_objects,
			st->alloc_bytes, st->alloc_objects,
			(unsigned long long)st->alloc_samples, st->live_samples);
		json_frames(f, s, o->rules, st->frames, st->depth);
		fputc('}', f);
	}
	fputs("],\"lifetimes\":[", f);
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
	for (uint32_t i = 0; i < m->snap.nthreads; i++) {
		const struct ym_thread *th = &m->snap.threads[i];
		if (th->state == YM_THREAD_FREE ||
		    (th->state == YM_THREAD_SHARED && th->t.alloc_objects == 0 &&
		     th->t.free_objects == 0))
			continue;
		char name[64];
		fprintf(f, "%s{\"tid\":%u,\"name\":", first ? "" : ",", th->tid);
		first = 0;
		fmt_json_string(f, th->state == YM_THREAD_SHARED ? "(shared)" :
				thread_name(m, th, name, sizeof name));
		fprintf(f, ",\"state\":\"%s\",\"allocated_bytes\":%llu,"
			"\"allocated_objects\":%llu,\"freed_bytes\":%llu,"
			"\"freed_objects\":%llu}",
			th->state == YM_THREAD_LIVE ? "live" :
			th->state == YM_THREAD_EXITED ? "exited" : "shared",
			(unsigned long long)th->t.alloc_bytes,
			(unsigned long long)th->t.alloc_objects,
			(unsigned long long)th->t.free_bytes,
			(unsigned long long)th->t.free_objects);
	}
	fputs("],\"alarms\":[", f);
	for (uint32_t i = 0; i < m->snap.nalarms; i++) {
		const struct ym_alarm *al = shm_alarm(&m->snap, i);
		fprintf(f, "%s{\"size\":%llu,\"time\":%.3f,\"tid\":%u,\"failed\":%s,"
			"\"frames\":", i ? "," : "", (unsigned long long)al->size,
			alarm_unix_time(m, al), al->tid,
			(al->flags & YM_ALARM_FAILED) ? "true" : "false");
		json_frames(f, s, o->rules, al->frames, al->depth);
		fputc('}', f);
	}
	fputs("]}\n", f);
	return ferror(f) ? -1 : 0;
}

int report_write(FILE *f, struct model *m, struct sym *s,
		 const struct report_opts *o)
{
	if (o->format == REPORT_JSON)
		return write_json(f, m, s, o);
	return write_text(f, m, s, o);
}
