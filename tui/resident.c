/*
 * resident: the live samples' pages from /proc/PID/pagemap (resident.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "resident.h"

#define PM_PRESENT (1ULL << 63)
#define PM_SWAPPED (1ULL << 62)
/* Above every user address space Linux has (57-bit with 5-level paging). */
#define USER_TOP   (1ULL << 57)

struct span {
	uint64_t p0, p1;    /* pages [p0, p1) */
	uint32_t live;      /* index in the snapshot's live table */
};

void resident_init(struct resident *r)
{
	memset(r, 0, sizeof *r);
}

static void close_fd(struct resident *r)
{
	if (r->have_fd)
		close(r->fd);
	r->have_fd = 0;
}

void resident_free(struct resident *r)
{
	close_fd(r);
	free(r->buf);
	free(r->spans);
	free(r->res);
	free(r->swp);
	resident_init(r);
}

/* Sort n spans by p0: a least-significant-digit radix sort, a byte a
 * pass, skipping the bytes every span shares (a heap's high bits): a few
 * linear passes where qsort's comparisons cost more than the pages. */
static void sort_spans(struct span *sp, struct span *tmp, uint32_t n)
{
	for (unsigned shift = 0; shift < 64; shift += 8) {
		uint32_t count[257] = { 0 };
		for (uint32_t i = 0; i < n; i++)
			count[((sp[i].p0 >> shift) & 0xff) + 1]++;
		int one = 0;
		for (int b = 1; b <= 256; b++)
			one |= count[b] == n;
		if (one)
			continue;
		for (int b = 1; b <= 256; b++)
			count[b] += count[b - 1];
		for (uint32_t i = 0; i < n; i++)
			tmp[count[(sp[i].p0 >> shift) & 0xff]++] = sp[i];
		memcpy(sp, tmp, (size_t)n * sizeof *sp);
	}
}

/* Pages [p0, p1) into r->buf (p1 - p0 <= RESIDENT_CHUNK); entries the
 * kernel did not give (beyond the address space) are zero: not present.
 * 0, or -1 with errno. */
static int read_pages(struct resident *r, uint64_t p0, uint64_t p1)
{
	size_t want = (size_t)(p1 - p0) * 8, got = 0;
	while (got < want) {
		ssize_t n = pread(r->fd, (char *)r->buf + got, want - got,
				  (off_t)(p0 * 8 + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	memset((char *)r->buf + got, 0, want - got);
	return 0;
}

static void count(const uint64_t *e, uint64_t n, uint64_t *present, uint64_t *swapped)
{
	for (uint64_t i = 0; i < n; i++) {
		*present += (e[i] & PM_PRESENT) != 0;
		*swapped += (e[i] & (PM_PRESENT | PM_SWAPPED)) == PM_SWAPPED;
	}
}

/* Add one sample's share to its stack. */
static void credit(struct resident *r, const struct model *m, const struct span *s,
		   uint64_t present, uint64_t swapped)
{
	const struct ym_live *e = &m->snap.live[s->live];
	double pages = (double)(s->p1 - s->p0), w = (double)e->weight_bytes;
	r->res[e->stack] += w * (double)present / pages;
	r->swp[e->stack] += w * (double)swapped / pages;
}

/* The samples' spans, sorted; 0, or -1 when out of memory. */
static int make_spans(struct resident *r, const struct model *m, unsigned shift,
		      uint64_t *pages)
{
	const struct shm_snapshot *sn = &m->snap;
	if (r->nspans < sn->nlive) {
		/* The spans, then as many for the sort's passes. */
		void *nv = realloc(r->spans, (size_t)sn->nlive * 2 * sizeof(struct span));
		if (!nv)
			return -1;
		r->spans = nv;
		r->nspans = sn->nlive;
	}
	struct span *sp = r->spans;
	uint32_t n = 0;
	*pages = 0;
	for (uint32_t i = 0; i < sn->nlive; i++) {
		const struct ym_live *e = &sn->live[i];
		uint64_t size = e->size ? e->size : 1;
		if (!e->addr || e->addr >= USER_TOP || size > USER_TOP - e->addr ||
		    e->stack >= m->nstacks)
			continue;
		sp[n].p0 = e->addr >> shift;
		sp[n].p1 = ((e->addr + size - 1) >> shift) + 1;
		sp[n].live = i;
		*pages += sp[n].p1 - sp[n].p0;
		n++;
	}
	sort_spans(sp, sp + r->nspans, n);
	return (int)n;
}

/* Read every span's pages: neighbours (gaps under RESIDENT_GAP pages)
 * in one read of at most RESIDENT_CHUNK pages, a larger block in chunks.
 * 0, or -1 with errno. */
static int read_spans(struct resident *r, const struct model *m, uint32_t n)
{
	const struct span *sp = r->spans;
	uint32_t i = 0;
	while (i < n) {
		uint64_t len = sp[i].p1 - sp[i].p0;
		if (len > RESIDENT_CHUNK) {
			uint64_t present = 0, swapped = 0;
			for (uint64_t p = sp[i].p0; p < sp[i].p1; p += RESIDENT_CHUNK) {
				uint64_t q = p + RESIDENT_CHUNK < sp[i].p1 ?
					     p + RESIDENT_CHUNK : sp[i].p1;
				if (read_pages(r, p, q) != 0)
					return -1;
				count(r->buf, q - p, &present, &swapped);
			}
			credit(r, m, &sp[i], present, swapped);
			i++;
			continue;
		}
		uint64_t start = sp[i].p0, end = sp[i].p1;
		uint32_t j = i + 1;
		while (j < n && sp[j].p1 - sp[j].p0 <= RESIDENT_CHUNK &&
		       sp[j].p0 <= end + RESIDENT_GAP &&
		       (sp[j].p1 > end ? sp[j].p1 : end) - start <= RESIDENT_CHUNK) {
			if (sp[j].p1 > end)
				end = sp[j].p1;
			j++;
		}
		if (read_pages(r, start, end) != 0)
			return -1;
		for (uint32_t k = i; k < j; k++) {
			uint64_t present = 0, swapped = 0;
			count(r->buf + (sp[k].p0 - start), sp[k].p1 - sp[k].p0,
			      &present, &swapped);
			credit(r, m, &sp[k], present, swapped);
		}
		i = j;
	}
	return 0;
}

static void unknown(struct resident *r, const char *why)
{
	r->known = 0;
	snprintf(r->why, sizeof r->why, "%s", why);
}

/* Read the figures into r->res and r->swp (indexed by stack id). */
static void measure(struct resident *r, struct model *m)
{
	pid_t pid = model_pid(m);
	if (!m->alive) {
		close_fd(r);
		unknown(r, "not running: its pages are gone");
		return;
	}
	if (!r->have_fd || r->pid != pid) {
		close_fd(r);
		char path[64];
		snprintf(path, sizeof path, "/proc/%ld/pagemap", (long)pid);
		r->fd = open(path, O_RDONLY | O_CLOEXEC);
		r->pid = pid;
		r->have_fd = r->fd >= 0;
		if (!r->have_fd) {
			char why[128];
			snprintf(why, sizeof why, "cannot read %s: %s", path, strerror(errno));
			unknown(r, why);
			return;
		}
	}
	if (!r->buf && !(r->buf = malloc(RESIDENT_CHUNK * sizeof *r->buf))) {
		unknown(r, "out of memory");
		return;
	}
	if (r->nres < m->nstacks) {
		double *a = realloc(r->res, (size_t)m->nstacks * sizeof *a);
		if (a)
			r->res = a;
		double *b = a ? realloc(r->swp, (size_t)m->nstacks * sizeof *b) : NULL;
		if (b)
			r->swp = b;
		if (!a || !b) {
			unknown(r, "out of memory");
			return;
		}
		r->nres = m->nstacks;
	}
	memset(r->res, 0, (size_t)r->nres * sizeof *r->res);
	memset(r->swp, 0, (size_t)r->nres * sizeof *r->swp);
	long ps = sysconf(_SC_PAGESIZE);
	unsigned shift = 12;
	while (ps > 0 && (1L << shift) < ps && shift < 30)
		shift++;
	uint64_t pages;
	int n = make_spans(r, m, shift, &pages);
	if (n < 0) {
		unknown(r, "out of memory");
		return;
	}
	if (pages > RESIDENT_MAX_PAGES) {
		unknown(r, "the live samples span more pages than a refresh reads "
			   "(16777216)");
		return;
	}
	if (read_spans(r, m, (uint32_t)n) != 0) {
		char why[128];
		snprintf(why, sizeof why, "reading /proc/%ld/pagemap: %s", (long)pid,
			 strerror(errno));
		unknown(r, why);
		return;
	}
	r->known = 1;
	r->why[0] = 0;
}

void resident_update(struct resident *r, struct model *m)
{
	if (!m->snap.live_skipped)
		measure(r, m);
	m->resident_known = r->known && r->nres >= m->nstacks;
	snprintf(m->resident_why, sizeof m->resident_why, "%s",
		 m->resident_known ? "" : r->why[0] ? r->why :
		 "not read yet");
	m->resident_sum[0] = m->resident_sum[1] = 0;
	m->swapped_sum[0] = m->swapped_sum[1] = 0;
	for (uint32_t i = 0; i < m->nstacks; i++) {
		struct model_stack *s = &m->stacks[i];
		/* The live table and the counters are read apart: a share is
		 * never more than the retained bytes beside it. */
		double all = s->retained_bytes > 0 ? s->retained_bytes : 0;
		s->resident_bytes = m->resident_known ? r->res[i] : 0;
		s->swapped_bytes = m->resident_known ? r->swp[i] : 0;
		if (s->resident_bytes > all)
			s->resident_bytes = all;
		if (s->swapped_bytes > all - s->resident_bytes)
			s->swapped_bytes = all - s->resident_bytes;
		int k = s->kind == YM_KIND_MMAP;
		m->resident_sum[k] += s->resident_bytes;
		m->swapped_sum[k] += s->swapped_bytes;
	}
}
