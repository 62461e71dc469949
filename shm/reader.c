/*
 * Segment reader.  The segment is hostile input: it is never mapped (a
 * file truncated under a mapping delivers SIGBUS); it is copied with pread,
 * which just returns short, and only the copy is validated and used.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

__attribute__((format(printf, 4, 5)))
static int fail(char *err, size_t len, int code, const char *fmt, ...)
{
	if (err && len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* -errno of a failed call, never 0 (a caller would take 0 for success
 * and use a buffer that was never filled; scan-build). */
static int neg_errno(void)
{
	return errno ? -errno : -EIO;
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

unsigned long long shm_reads;

/* Read exactly len bytes at off, or fail: a short read means the file
 * shrank under us. */
int shm_read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	shm_reads++;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? neg_errno() : -ENODATA;
		done += (size_t)n;
	}
	return 0;
}

int shm_header_check(const struct ym_header *h, uint64_t fsize, char *err,
		     size_t len)
{
	if (h->magic != YM_MAGIC)
		return fail(err, len, -EPROTO, "not a ymtop segment (bad magic)");
	if (!ym_abi_readable(h->magic, h->abi_version, h->compat_version))
		return fail(err, len, -EPROTO, h->compat_version > YM_ABI_VERSION
			    ? "segment ABI version %u needs a ymtop that reads ABI %u or later; this one reads %u"
			    : "segment ABI version %u (compat %u) is too old for this ymtop (ABI %u)",
			    h->abi_version, h->compat_version, YM_ABI_VERSION);
	/* Size rule (segment.h): the header holds at least the fields known
	 * here; sections start after it, whatever its length. */
	if (h->header_size < sizeof *h || h->header_size > YM_LIMIT_HEADER ||
	    h->header_size % 8 != 0)
		return fail(err, len, -EPROTO, "bad header size %u", h->header_size);
	if (h->total_size != fsize || fsize > YM_LIMIT_SEGMENT)
		return fail(err, len, -EPROTO,
			    "segment size %llu does not match its file (%llu bytes)",
			    (unsigned long long)h->total_size,
			    (unsigned long long)fsize);
	if (h->max_depth == 0 || h->max_depth > YM_LIMIT_DEPTH)
		return fail(err, len, -EPROTO, "bad stack depth %u", h->max_depth);
	if (h->sample_rate == 0)
		return fail(err, len, -EPROTO, "bad sample rate 0");

	static const struct {
		uint32_t min_cap, max_cap;
	} lim[YM_SEC_COUNT] = {
		[YM_SEC_CONTROL] = { 1, 1 },
		[YM_SEC_THREADS] = { 1, YM_LIMIT_THREADS },
		[YM_SEC_STACKS]  = { 1, YM_LIMIT_STACKS },
		[YM_SEC_LIVE]    = { 1, YM_LIMIT_LIVE },
		[YM_SEC_ALARMS]  = { 1, 1u << 16 },
		[YM_SEC_MODULES] = { 1, 1u << 16 },
		[YM_SEC_STRIPES] = { 1, YM_LIMIT_STRIPES },
		[YM_SEC_PLANES]  = { 1, YM_PLANES * YM_LIMIT_STACKS },
	};
	/* The record sizes known here: a segment's strides may be longer
	 * (fields added at the end), never shorter. */
	const uint32_t stride[YM_SEC_COUNT] = {
		[YM_SEC_CONTROL] = sizeof(struct ym_control),
		[YM_SEC_THREADS] = sizeof(struct ym_thread),
		[YM_SEC_STACKS]  = shm_stack_stride_v5(h->max_depth) + SHM_RECORD_TAIL +
			(ym_abi_has_stack_ext(h->abi_version) ?
			 (uint32_t)sizeof(struct ym_stack_ext) : 0),
		[YM_SEC_LIVE]    = sizeof(struct ym_live),
		[YM_SEC_ALARMS]  = shm_alarm_stride(h->max_depth),
		[YM_SEC_MODULES] = sizeof(struct ym_module),
		[YM_SEC_STRIPES] = sizeof(struct ym_stripe),
		[YM_SEC_PLANES]  = sizeof(struct ym_counts),
	};
	for (int i = 0; i < YM_SEC_COUNT; i++) {
		const struct ym_section *s = &h->sections[i];
		if (s->stride < stride[i] || s->stride % 8 != 0 ||
		    s->capacity < lim[i].min_cap ||
		    s->capacity > lim[i].max_cap || s->offset % 8 != 0 ||
		    s->offset < h->header_size || s->offset > fsize ||
		    (uint64_t)s->capacity * s->stride > fsize - s->offset)
			return fail(err, len, -EPROTO,
				    "segment section %d out of bounds", i);
	}
	uint32_t live_cap = h->sections[YM_SEC_LIVE].capacity;
	if (live_cap & (live_cap - 1))
		return fail(err, len, -EPROTO, "live table size not a power of two");
	uint32_t stripes = h->sections[YM_SEC_STRIPES].capacity;
	/* Whole blocks (ym_live_index): a stripe has YM_LIVE_BLOCK entries
	 * at least, so a copy of whole rows stays inside the section. */
	if ((stripes & (stripes - 1)) || live_cap / stripes < YM_LIVE_BLOCK)
		return fail(err, len, -EPROTO, "bad live table stripes (%u)", stripes);

	if (h->sections[YM_SEC_PLANES].capacity !=
	    YM_PLANES * h->sections[YM_SEC_STACKS].capacity)
		return fail(err, len, -EPROTO, "bad counter planes (%u)",
			    h->sections[YM_SEC_PLANES].capacity);

	/* v8: the trend section, when the writer keeps one. */
	const struct ym_section *t = &h->trend;
	if (ym_abi_has_trend(h->abi_version) && t->capacity != 0 &&
	    (t->capacity > YM_LIMIT_TREND_SLOTS || h->trend_stacks == 0 ||
	     h->trend_stacks > YM_LIMIT_TREND_STACKS || h->trend_slot_ns == 0 ||
	     t->stride < shm_trend_stride(h->trend_stacks) || t->stride % 8 != 0 ||
	     t->offset % 8 != 0 || t->offset < h->header_size ||
	     t->offset > fsize ||
	     (uint64_t)t->capacity * t->stride > fsize - t->offset))
		return fail(err, len, -EPROTO, "trend section out of bounds");

	/* h is the caller's copy: plain loads (the copy was read from the
	 * segment before this check; see ym_seq_fence in segment.h). */
	if (h->threads_used > h->sections[YM_SEC_THREADS].capacity ||
	    h->stacks_used > h->sections[YM_SEC_STACKS].capacity ||
	    h->modules_used > h->sections[YM_SEC_MODULES].capacity ||
	    h->planes_used > YM_PLANES)
		return fail(err, len, -EPROTO, "segment counts exceed capacities");
	/* v8's Python code table: a section outside sections[]. */
	const struct ym_section *py = &h->py_codes;
	if (ym_abi_has_python(h->abi_version) && py->capacity &&
	    (py->capacity > YM_LIMIT_PYCODES || py->stride < sizeof(struct ym_pycode) ||
	     py->stride % 8 != 0 || py->offset % 8 != 0 ||
	     py->offset < h->header_size || py->offset > fsize ||
	     (uint64_t)py->capacity * py->stride > fsize - py->offset ||
	     h->py_codes_used > py->capacity))
		return fail(err, len, -EPROTO, "segment Python code table out of bounds");
	return 0;
}

int shm_reader_open_fd(struct shm_reader *r, int fd, pid_t pid, uid_t uid,
		       char *err, size_t len)
{
	struct stat st;
	memset(r, 0, sizeof *r);
	r->fd = -1;
	if (fstat(fd, &st) != 0)
		return fail(err, len, -errno, "cannot stat segment: %s",
			    strerror(errno));
	if (!S_ISREG(st.st_mode))
		return fail(err, len, -EPERM, "segment is not a regular file");
	/* Root's segments are trusted too: only root can make one, and a
	 * daemon started as root creates it before it drops privileges. */
	if (uid != (uid_t)-1 && st.st_uid != uid && st.st_uid != 0)
		return fail(err, len, -EPERM,
			    "segment owner (uid %u) is not the process owner (uid %u): refused",
			    (unsigned)st.st_uid, (unsigned)uid);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return fail(err, len, -EPERM,
			    "segment is group or world writable: refused");
	if ((uint64_t)st.st_size < sizeof(struct ym_header) ||
	    (uint64_t)st.st_size > YM_LIMIT_SEGMENT)
		return fail(err, len, -EPROTO,
			    "segment size %lld is not plausible",
			    (long long)st.st_size);
	struct ym_header h;
	int rc = shm_read_at(fd, &h, sizeof h, 0);
	if (rc < 0)
		return fail(err, len, rc, "cannot read segment header");
	rc = shm_header_check(&h, (uint64_t)st.st_size, err, len);
	if (rc < 0)
		return rc;
	if (pid > 0 && h.pid != (uint32_t)pid)
		return fail(err, len, -EPROTO,
			    "segment names pid %u, expected %ld", h.pid, (long)pid);
	r->fd = fd;
	r->pid = r->nspid = (pid_t)h.pid;
	r->size = (uint64_t)st.st_size;
	r->dev = (uint64_t)st.st_dev;
	r->ino = (uint64_t)st.st_ino;
	int fl = fcntl(fd, F_GETFL);
	r->writable = fl >= 0 && (fl & O_ACCMODE) == O_RDWR;
	r->may_ask = r->writable;
	/* Checked against the file's size; a hostile header that moves them
	 * later moves nothing here: a front read holds the bytes it read. */
	const struct ym_section *c = &h.sections[YM_SEC_CONTROL];
	const struct ym_section *t = &h.sections[YM_SEC_THREADS];
	if (c->offset + sizeof(struct ym_control) <= SHM_FRONT_MAX)
		r->front_ctl_end = c->offset + sizeof(struct ym_control);
	if (t->offset < SHM_FRONT_MAX && t->stride <= SHM_FRONT_MAX) {
		r->front_thr_off = t->offset;
		r->front_thr_stride = t->stride;
	}
	r->front_threads = h.threads_used;
	return 0;
}

int shm_reader_open_path(struct shm_reader *r, const char *path, pid_t pid,
			 pid_t nspid, uid_t uid, char *err, size_t len)
{
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && errno == EACCES)
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			return fail(err, len, -EPERM,
				    "%s is a symbolic link: refused", path);
		return fail(err, len, -e, "cannot open %s: %s", path,
			    strerror(e));
	}
	int rc = shm_reader_open_fd(r, fd, nspid, uid, err, len);
	if (rc < 0)
		close(fd);
	else
		r->pid = pid;
	return rc;
}

void shm_reader_close(struct shm_reader *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

void shm_snapshot_free(struct shm_snapshot *s)
{
	free(s->trend);
	free(s->threads);
	free(s->stacks);
	free(s->live);
	free(s->alarms);
	free(s->modules);
	free(s->pycodes);
	memset(s, 0, sizeof *s);
}

/* Records of `stride` bytes in buf, moved down to `size` bytes each: the
 * prefix this reader knows (segment.h, Versions and sizes). */
static void compact(void *buf, uint64_t count, uint32_t stride, size_t size)
{
	if (stride == size)
		return;
	for (uint64_t i = 1; i < count; i++)
		memmove((char *)buf + i * size, (char *)buf + i * stride, size);
}

/* Copy count records of stride bytes at off into a new buffer (64-byte
 * aligned: struct ym_thread is, and malloc's 16 is not enough; found by
 * tests/fuzz under UBSan); with size non-zero, compacted to size bytes
 * each (else left at stride). */
static int copy_section_at(struct shm_reader *r, uint64_t off, uint64_t count,
			   uint32_t stride, size_t size, void **out)
{
	size_t bytes = (size_t)count * stride;
	*out = NULL;
	if (bytes == 0)
		return 0;
	void *buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
	if (!buf)
		return -ENOMEM;
	int rc = shm_read_at(r->fd, buf, bytes, off);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	if (size)
		compact(buf, count, stride, size);
	*out = buf;
	return 0;
}

/* The front of the segment (struct shm_reader) in one read: a new
 * buffer in *out and its length (at least the header's), or -errno. */
static ssize_t read_front(struct shm_reader *r, uint8_t **out)
{
	uint64_t want = sizeof(struct ym_header);
	if (r->front_ctl_end > want)
		want = r->front_ctl_end;
	if (r->front_thr_stride && r->front_threads <= SHM_FRONT_MAX) {
		uint64_t end = r->front_thr_off + r->front_threads * r->front_thr_stride;
		if (end > want && end <= SHM_FRONT_MAX)
			want = end;
	}
	if (want > r->size)
		want = r->size;   /* >= the header's size: checked at open */
	*out = malloc(want);
	if (!*out)
		return -ENOMEM;
	int rc = shm_read_at(r->fd, *out, want, 0);
	if (rc < 0) {
		free(*out);
		*out = NULL;
		return rc;
	}
	return (ssize_t)want;
}

/* The segment's bytes [off, off + n) in a front read of len bytes, or
 * NULL when it did not reach them. */
static const uint8_t *in_front(const uint8_t *front, size_t len, uint64_t off,
			       uint64_t n)
{
	return off <= len && n <= len - off ? front + off : NULL;
}

/* count records of stride bytes at src (a front read) into a new buffer,
 * as copy_section_at does from the segment. */
static int dup_records(const uint8_t *src, uint64_t count, uint32_t stride,
		       size_t size, void **out)
{
	size_t bytes = (size_t)count * stride;
	*out = NULL;
	if (bytes == 0)
		return 0;
	void *buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, src, bytes);
	if (size)
		compact(buf, count, stride, size);
	*out = buf;
	return 0;
}

/* The thread slots in use (h->threads_used, checked) from the front read,
 * or from the segment where the front did not reach them. */
static int copy_threads(struct shm_reader *r, const struct ym_header *h,
			const uint8_t *front, size_t len, void **out)
{
	const struct ym_section *sec = &h->sections[YM_SEC_THREADS];
	const uint8_t *p = in_front(front, len, sec->offset,
				    h->threads_used * sec->stride);
	r->front_threads = h->threads_used;
	if (p)
		return dup_records(p, h->threads_used, sec->stride,
				   sizeof(struct ym_thread), out);
	return copy_section_at(r, sec->offset, h->threads_used, sec->stride,
			       sizeof(struct ym_thread), out);
}

/* Copy count records of section sec; with size non-zero, compacted to
 * size bytes each (else left at the segment's stride). */
static int copy_section(struct shm_reader *r, const struct ym_header *h,
			int sec, uint64_t count, size_t size, void **out)
{
	return copy_section_at(r, h->sections[sec].offset, count,
			       h->sections[sec].stride, size, out);
}

/* v8's Python code records below py_codes_used (checked against the
 * capacity by shm_header_check), each cut to the prefix known here. */
static int copy_pycodes(struct shm_reader *r, const struct ym_header *h,
			struct shm_snapshot *s)
{
	const struct ym_section *sec = &h->py_codes;
	s->pycodes = NULL;
	s->npycodes = 0;
	if (!ym_abi_has_python(h->abi_version) || !sec->capacity || !h->py_codes_used)
		return 0;
	int rc = copy_section_at(r, sec->offset, h->py_codes_used, sec->stride,
				 sizeof(struct ym_pycode), (void **)&s->pycodes);
	if (rc == 0)
		s->npycodes = (uint32_t)h->py_codes_used;
	return rc;
}

/* v8: the trend section (segment.h, Trend): the ring copied, then each
 * record's seq read again; a record is kept when its seq was even,
 * non-zero, of its position and unchanged, and its points are checked
 * against the stacks copied before (a point of a later stack is dropped).
 * Kept records are moved to the front. */
static int copy_trend(struct shm_reader *r, struct shm_snapshot *s)
{
	const struct ym_header *h = &s->hdr;
	if (!ym_abi_has_trend(h->abi_version) || h->trend.capacity == 0)
		return 0;
	s->trend_kept = 1;
	if (r->skip_trend) {
		s->trend_skipped = 1;
		return 0;
	}
	s->trend_stride = h->trend.stride;
	uint32_t cap = h->trend.capacity;
	int rc = copy_section_at(r, h->trend.offset, cap, h->trend.stride, 0,
				 (void **)&s->trend);
	if (rc < 0)
		return rc;
	ym_seq_fence();
	uint32_t kept = 0;
	for (uint32_t i = 0; i < cap; i++) {
		struct ym_trend_slot *t = (struct ym_trend_slot *)(void *)(s->trend +
			(size_t)i * s->trend_stride);
		uint64_t again;
		rc = shm_read_at(r->fd, &again, sizeof again,
			     h->trend.offset + (uint64_t)i * h->trend.stride);
		if (rc < 0)
			return rc;
		if (!ym_seq_stable(t->seq, again) || t->seq == 0 ||
		    (t->seq / 2 - 1) % cap != i || t->count > h->trend_stacks)
			continue;
		uint32_t n = 0;
		for (uint32_t j = 0; j < t->count; j++)
			if (t->points[j].stack < s->nstacks)
				t->points[n++] = t->points[j];
		t->count = n;
		if (kept != i)
			memcpy(s->trend + (size_t)kept * s->trend_stride, t,
			       s->trend_stride);
		kept++;
	}
	s->ntrend = kept;
	return 0;
}

/* The stripes' seqs and counts (YM_LIMIT_STRIPES at most: on the stack). */
static int read_stripes(struct shm_reader *r, const struct ym_header *h,
			struct ym_stripe *out)
{
	const struct ym_section *sec = &h->sections[YM_SEC_STRIPES];
	if (sec->stride == sizeof *out)
		return shm_read_at(r->fd, out, (size_t)sec->capacity * sizeof *out,
			       sec->offset);
	for (uint32_t i = 0; i < sec->capacity; i++) {
		int rc = shm_read_at(r->fd, &out[i], sizeof *out,
				 sec->offset + (uint64_t)i * sec->stride);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static uint64_t stripes_count(const struct ym_stripe *st, uint32_t n)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < n; i++)
		sum += st[i].count;
	return sum;
}

/* Entries stripe i handed out, as far as a reader may look. */
static uint32_t stripe_used(const struct ym_stripe *st, uint32_t per)
{
	return st->used < per ? (uint32_t)st->used : per;
}

/* The part of the pool that stripes [lo, lo + width) handed out, up to
 * row `rows` (a row is YM_LIVE_BLOCK entries of each stripe: segment.h,
 * ym_live_index), row by row into rows x width blocks.  One read when the
 * stripes span most of the row; one read a row when few do (in exact mode
 * a single-threaded program uses a quarter of the stripes, and a whole-row
 * read would copy four times what it needs). */
struct pool_copy {
	uint8_t *buf;
	uint32_t lo, width;
	uint32_t stride;   /* the segment's, >= sizeof(struct ym_live) */
};

static const struct ym_live *pool_at(const struct pool_copy *c, uint32_t i,
				     uint32_t j)
{
	size_t k = ((size_t)(j / YM_LIVE_BLOCK) * c->width + (i - c->lo)) *
		   YM_LIVE_BLOCK + j % YM_LIVE_BLOCK;
	return (const struct ym_live *)(void *)(c->buf + k * c->stride);
}

static int read_pool(struct shm_reader *r, uint64_t off, uint32_t nst,
		     uint32_t rows, struct pool_copy *c)
{
	size_t row = (size_t)c->width * YM_LIVE_BLOCK * c->stride;   /* bytes */
	size_t n = (size_t)rows * row;
	c->buf = n ? malloc(n) : NULL;
	if (n && !c->buf)
		return -ENOMEM;
	if (c->width == nst)
		return n ? shm_read_at(r->fd, c->buf, n, off) : 0;
	for (uint32_t b = 0; b < rows; b++) {
		uint64_t at = off + ((uint64_t)b * nst + c->lo) * YM_LIVE_BLOCK *
				    c->stride;
		int rc = shm_read_at(r->fd, c->buf + b * row, row, at);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Copy the live table consistently, keeping used entries only.  Each
 * round reads the stripes, the part of the pool they handed out
 * (read_pool) and the stripes again; a stripe whose
 * seq was even and did not move is taken from that round.  Busy stripes
 * wait for the next round; after a few, a slightly torn copy is
 * accepted: entries are validated one by one anyway. */
static int copy_live(struct shm_reader *r, const struct ym_header *h,
		     struct shm_snapshot *s)
{
	enum { ROUNDS = 8 };
	uint32_t cap = h->sections[YM_SEC_LIVE].capacity;
	uint32_t nst = h->sections[YM_SEC_STRIPES].capacity;
	uint32_t per = cap / nst;   /* both powers of two, nst <= cap */
	uint64_t off = h->sections[YM_SEC_LIVE].offset;
	struct ym_stripe before[YM_LIMIT_STRIPES], after[YM_LIMIT_STRIPES];
	uint8_t done[YM_LIMIT_STRIPES] = { 0 };
	struct pool_copy pool = { NULL, 0, 0, h->sections[YM_SEC_LIVE].stride };
	struct ym_live *out = NULL;
	size_t nout = 0, out_cap = 0;
	uint32_t pending = nst;
	uint64_t count = 0;
	int rc = 0;
	for (int round = 0; round < ROUNDS && pending > 0; round++) {
		if (round > 0) {
			struct timespec ts = { 0, 100000 };
			nanosleep(&ts, NULL);
		}
		if ((rc = read_stripes(r, h, before)) < 0)
			break;
		ym_seq_fence();
		uint32_t top = 0, lo = nst, hi = 0;
		size_t want = 0;
		for (uint32_t i = 0; i < nst; i++) {
			uint32_t u = done[i] ? 0 : stripe_used(&before[i], per);
			if (u == 0)
				continue;
			top = u > top ? u : top;
			want += u;
			lo = i < lo ? i : lo;
			hi = i;
		}
		/* Up to the last row with an entry handed out, of the
		 * stripes that have any. */
		free(pool.buf);
		pool.buf = NULL;
		pool.lo = 0;
		pool.width = nst;
		if (top > 0 && (hi - lo + 1) * 2 <= nst) {
			pool.lo = lo;
			pool.width = hi - lo + 1;
		}
		uint32_t rows = (top + YM_LIVE_BLOCK - 1) / YM_LIVE_BLOCK;
		if ((rc = read_pool(r, off, nst, rows, &pool)) < 0)
			break;
		ym_seq_fence();
		if ((rc = read_stripes(r, h, after)) < 0)
			break;
		if (nout + want > out_cap) {
			size_t c = nout + want;
			struct ym_live *o = realloc(out, (c ? c : 1) * sizeof *out);
			if (!o) {
				rc = -ENOMEM;
				break;
			}
			out = o;
			out_cap = c;
		}
		for (uint32_t i = 0; i < nst; i++) {
			if (done[i])
				continue;
			int stable = ym_seq_stable(before[i].seq, after[i].seq);
			if (!stable && round < ROUNDS - 1)
				continue;
			/* Entries past what the first read saw were not read. */
			uint32_t u = stripe_used(&before[i], per);
			for (uint32_t j = 0; j < u; j++) {
				const struct ym_live *e = pool_at(&pool, i, j);
				/* A live entry may name a stack published after
				 * we read stacks_used, or be garbage: keep only
				 * what resolves. */
				if (e->addr != 0 && e->stack < s->nstacks)
					out[nout++] = *e;
			}
			count += after[i].count;
			done[i] = 1;
			pending--;
		}
	}
	free(pool.buf);
	if (rc < 0) {
		free(out);
		return rc;
	}
	s->live_count = count;
	s->live = out;
	s->nlive = (uint32_t)nout;
	return 0;
}

/* Add each plane in use, and of the current reset, to the stack records
 * (segment.h: counter planes).  Single-threaded programs use none. */
static int add_planes(struct shm_reader *r, const struct ym_header *h,
		      struct shm_snapshot *s)
{
	uint64_t used = h->planes_used;   /* <= YM_PLANES: checked */
	const struct ym_section *sec = &h->sections[YM_SEC_PLANES];
	uint32_t cap = h->sections[YM_SEC_STACKS].capacity;
	if (used == 0 || s->nstacks == 0)
		return 0;
	size_t bytes = (size_t)s->nstacks * sec->stride;
	uint8_t *buf = malloc(bytes);
	if (!buf)
		return -ENOMEM;
	int rc = 0;
	for (uint64_t p = 0; p < used && rc == 0; p++) {
		if (h->plane_epoch[p] != h->reset_count)
			continue;   /* its owner has not zeroed it since the reset */
		rc = shm_read_at(r->fd, buf, bytes, sec->offset + (p * cap) * sec->stride);
		for (uint32_t i = 0; rc == 0 && i < s->nstacks; i++) {
			uint64_t *w = (uint64_t *)(void *)(s->stacks +
				(size_t)i * s->stack_stride +
				__builtin_offsetof(struct ym_stack, alloc_samples));
			const uint64_t *v = (const uint64_t *)(void *)
				(buf + (size_t)i * sec->stride);
			for (size_t k = 0; k < YM_COUNT_WORDS; k++)
				w[k] += v[k];
		}
	}
	free(buf);
	return rc;
}

/* The copy's records cut to the deepest stack's frames (stacks of a few
 * frames in records of max_depth: most of the copy is unused frames),
 * the v6 fields moved after them.  Nothing when a depth is out of bounds
 * (check_records refuses the snapshot). */
static void cut_stacks(struct shm_snapshot *s)
{
	uint32_t maxd = s->hdr.max_depth, deepest = 0;
	for (uint32_t i = 0; i < s->nstacks; i++) {
		uint32_t d = shm_stack(s, i)->depth;
		if (d > maxd)
			return;
		deepest = d > deepest ? d : deepest;
	}
	size_t head = sizeof(struct ym_stack) + 8u * (size_t)deepest;
	size_t ext = ym_abi_has_stack_ext(s->hdr.abi_version) ?
		     sizeof(struct ym_stack_ext) : 0;
	size_t from = shm_stack_stride_v5(maxd);   /* the v6 fields, in the copy */
	size_t stride = head + ext;
	if (!s->nstacks || stride + 64 > s->stack_stride)
		return;
	/* Record i moves down, never over record i + 1 not yet moved. */
	for (uint32_t i = 0; i < s->nstacks; i++) {
		uint8_t *src = s->stacks + (size_t)i * s->stack_stride;
		uint8_t *dst = s->stacks + (size_t)i * stride;
		memmove(dst, src, head);
		memmove(dst + head, src + from, ext);
	}
	s->stack_stride = (uint32_t)stride;
	s->stack_ext_off = (uint32_t)head;
	void *v = realloc(s->stacks, (size_t)s->nstacks * stride);
	if (v)
		s->stacks = v;
}

static int check_records(struct shm_snapshot *s, uint64_t alarms_after,
			 unsigned reused, char *err, size_t len)
{
	uint32_t maxd = s->hdr.max_depth;
	/* A section of no bytes was not copied (copy_section). */
	if (!s->stacks)
		s->nstacks = 0;
	if (!s->alarms)
		s->nalarms = 0;
	if (!s->modules)
		s->nmodules = 0;
	if (!s->threads)
		s->nthreads = 0;
	/* Taken over from a snapshot that passed these checks. */
	for (uint32_t i = 0; !(reused & SHM_REUSED_STACKS) && i < s->nstacks; i++) {
		const struct ym_stack *st = shm_stack(s, i);
		if (st->depth > maxd)
			return fail(err, len, -EPROTO,
				    "stack %u has depth %u > %u", i, st->depth, maxd);
	}
	uint32_t keep = 0, cap = s->hdr.sections[YM_SEC_ALARMS].capacity;
	uint64_t written = s->hdr.alarms_written;
	for (uint32_t i = 0; i < s->nalarms; i++) {
		struct ym_alarm *a = (struct ym_alarm *)(s->alarms +
							 (size_t)i * s->alarm_stride);
		/* Complete and not overwritten while copied (segment.h);
		 * anything else is incomplete or forged. */
		if (!ym_alarm_complete(a->seq, i, cap, written, alarms_after) ||
		    a->depth > maxd)
			continue;
		if (keep != i)
			memcpy(s->alarms + (size_t)keep * s->alarm_stride, a,
			       s->alarm_stride);
		keep++;
	}
	s->nalarms = keep;
	for (uint32_t i = 0; i < s->nmodules; i++) {
		struct ym_module *m = &s->modules[i];
		m->path[sizeof m->path - 1] = '\0';
		if (m->build_id_len > sizeof m->build_id)
			m->build_id_len = 0;
	}
	for (uint32_t i = 0; i < s->nthreads; i++)
		s->threads[i].name[sizeof s->threads[i].name - 1] = '\0';
	s->hdr.exe[sizeof s->hdr.exe - 1] = '\0';
	/* v7's unseen calls: a writer before v7 had reserved zeros there;
	 * the flag without a known reason says nothing. */
	if (!ym_abi_has_unseen(s->hdr.abi_version) || !(s->hdr.flags & YM_FLAG_UNSEEN) ||
	    (s->hdr.unseen_why != YM_UNSEEN_OWN_CALLS &&
	     s->hdr.unseen_why != YM_UNSEEN_READONLY)) {
		s->hdr.flags &= ~YM_FLAG_UNSEEN;
		s->hdr.unseen_why = 0;
		memset(s->hdr.unseen_object, 0, sizeof s->hdr.unseen_object);
	}
	/* v8's Python fields: an older writer had reserved zeros there,
	 * which say nothing (not "no Python"): shm_snapshot_py_known. */
	if (!shm_snapshot_py_known(s) || s->hdr.py_state > YM_PY_MISMATCH) {
		memset(&s->hdr.py_codes, 0, sizeof s->hdr.py_codes);
		s->hdr.py_codes_used = 0;
		s->hdr.py_version = 0;
		s->hdr.py_state = YM_PY_NONE;
		s->hdr.py_drop = 0;
	}
	/* v9's pymalloc hook: a v8 writer had reserved zeros there, an
	 * unknown value says nothing either: not known. */
	if (!ym_abi_has_pyhook(s->hdr.abi_version) || s->hdr.py_hook > YM_PYHOOK_OFF ||
	    s->hdr.py_state == YM_PY_NONE)
		s->hdr.py_hook = YM_PYHOOK_UNKNOWN;
	s->hdr.reserved_v9_py = 0;
	if (!s->pycodes)
		s->npycodes = 0;
	for (uint32_t i = 0; i < s->npycodes; i++) {
		struct ym_pycode *c = &s->pycodes[i];
		c->qualname[sizeof c->qualname - 1] = '\0';
		c->filename[sizeof c->filename - 1] = '\0';
	}
	s->hdr.unseen_object[sizeof s->hdr.unseen_object - 1] = '\0';
	return 0;
}

static void sum_totals(struct shm_snapshot *s)
{
	struct ym_totals t = s->hdr.retired;
	for (uint32_t i = 0; i < s->nthreads; i++) {
		const struct ym_totals *x = &s->threads[i].t;
		t.alloc_objects += x->alloc_objects;
		t.alloc_bytes += x->alloc_bytes;
		t.req_bytes += x->req_bytes;
		t.free_objects += x->free_objects;
		t.free_bytes += x->free_bytes;
	}
	s->totals = t;
}

/* The last read of a seqcount loop (segment.h): a header word read again
 * after the data it guards, ordered after those reads. */
static int read_again(struct shm_reader *r, void *word, size_t n, size_t off)
{
	ym_seq_fence();
	return shm_read_at(r->fd, word, n, off);
}

/* A stable copy of the allocator's statistics in h: kept when of known
 * kind, with the bits and reason known here (else none: allocator
 * YM_HEAP_NONE, present 0). */
static int heap_keep(struct ym_header *h)
{
	struct ym_heapstats *hs = &h->heap;
	if (hs->allocator > YM_HEAP_TCMALLOC) {
		memset(hs, 0, sizeof *hs);
		return 0;
	}
	hs->present &= YM_HEAP_IN_USE | YM_HEAP_FREE | YM_HEAP_MAPPED |
		YM_HEAP_ARENAS | YM_HEAP_ACTIVE | YM_HEAP_RESIDENT | YM_HEAP_RETAINED |
		(ym_abi_has_heap_calls(h->abi_version) ? YM_HEAP_CALLS : 0);
	if (hs->allocator == YM_HEAP_NONE)
		hs->present = 0;
	/* v8: why there are none; not known from a v7 writer, or a reason
	 * this reader does not know. */
	if (!ym_abi_has_heap_reason(h->abi_version) || hs->allocator != YM_HEAP_NONE ||
	    hs->none_why > YM_HEAP_WHY_OTHER)
		hs->none_why = YM_HEAP_WHY_UNKNOWN;
	return 0;
}

/* The allocator's statistics (segment.h, struct ym_heapstats): the
 * header copy holds them, possibly torn; copy them again in the seqcount
 * loop over heap.seq, and keep only a stable copy of known kind (else
 * none: allocator YM_HEAP_NONE, present 0). */
static int read_heap(struct shm_reader *r, struct ym_header *h)
{
	struct ym_heapstats *hs = &h->heap;
	const size_t off = __builtin_offsetof(struct ym_header, heap);
	for (int tries = 0; ym_abi_has_heapstats(h->abi_version) && tries < 8; tries++) {
		int rc = shm_read_at(r->fd, hs, sizeof *hs, off);
		if (rc < 0)
			return rc;
		uint32_t seq2;
		rc = read_again(r, &seq2, sizeof seq2, off);
		if (rc < 0)
			return rc;
		if (ym_seq_stable(hs->seq, seq2))
			return heap_keep(h);
	}
	memset(hs, 0, sizeof *hs);
	return 0;
}

int shm_heap_read(struct shm_reader *r, struct shm_snapshot *s)
{
	if (r->fd < 0)
		return -EBADF;
	struct ym_header h = s->hdr;
	int rc = read_heap(r, &h);
	if (rc == 0)
		s->hdr.heap = h.heap;
	return rc;
}

/* The sum of the stripes' counted words (v8: segment.h), and the live
 * entries they count, from one read of the stripes. */
static int read_counted(struct shm_reader *r, struct shm_snapshot *s)
{
	struct ym_stripe st[YM_LIMIT_STRIPES];
	uint32_t n = s->hdr.sections[YM_SEC_STRIPES].capacity;
	int rc = read_stripes(r, &s->hdr, st);
	if (rc < 0)
		return rc;
	ym_seq_fence();
	s->live_count = stripes_count(st, n);
	s->counted_known = ym_abi_has_counted(s->hdr.abi_version);
	for (uint32_t i = 0; s->counted_known && i < n; i++)
		s->counted += st[i].counted;
	return 0;
}

/* prev is a snapshot of the same segment, written by the same process. */
static int same_segment(const struct shm_snapshot *s,
			const struct shm_snapshot *prev)
{
	return prev && prev->seg_dev == s->seg_dev && prev->seg_ino == s->seg_ino &&
	       prev->hdr.start_ticks == s->hdr.start_ticks &&
	       prev->hdr.pid == s->hdr.pid;
}

/* Nothing the stack records hold (with the planes added) changed since
 * prev was taken: the writer says so (segment.h, Stacks, v8). */
static int stacks_unchanged(const struct shm_snapshot *s,
			    const struct shm_snapshot *prev)
{
	if (!prev)
		return 0;
	const struct ym_header *a = &s->hdr, *b = &prev->hdr;
	return same_segment(s, prev) && s->counted_known && prev->counted_known &&
	       s->counted == prev->counted && a->stacks_used == b->stacks_used &&
	       prev->nstacks == a->stacks_used && (prev->stacks || !prev->nstacks) &&
	       b->sections[YM_SEC_STACKS].stride == a->sections[YM_SEC_STACKS].stride &&
	       a->reset_count == b->reset_count && a->planes_used == b->planes_used &&
	       !memcmp(a->plane_epoch, b->plane_epoch, sizeof a->plane_epoch);
}

/* The front just read into s (header and thread slots) holds the words
 * that the seqcounts guard as prev, a stable copy of the same segment,
 * held them: retire_seq and heap.seq even and the same, the retired
 * totals and every slot's totals the same, the allocator's statistics
 * (as heap_keep keeps them) the same.  A fold under way while the front
 * was read shows in those words (a slot's totals move into retired: a
 * copy of part of the move differs from prev in one or the other; a
 * slot with no totals changes no sum), and so does an answer written
 * between heap.seq's two steps; so the copy is prev's stable state and
 * needs no second look at the sequence words. */
static int front_as_before(const struct shm_snapshot *s,
			   const struct shm_snapshot *prev)
{
	const struct ym_header *a = &s->hdr;
	if (!same_segment(s, prev) || (a->retire_seq & 1) ||
	    a->retire_seq != prev->hdr.retire_seq ||
	    memcmp(&a->retired, &prev->hdr.retired, sizeof a->retired) != 0 ||
	    s->nthreads != prev->nthreads || (s->nthreads && (!s->threads || !prev->threads)))
		return 0;
	for (uint32_t i = 0; i < s->nthreads; i++)
		if (memcmp(&s->threads[i].t, &prev->threads[i].t, sizeof s->threads[i].t) != 0)
			return 0;
	if (!ym_abi_has_heapstats(a->abi_version))
		return 1;   /* none: read_heap would give none */
	if (a->heap.seq & 1)
		return 0;
	struct ym_header h;
	memcpy(&h, a, sizeof h);
	heap_keep(&h);
	return h.heap.seq == prev->hdr.heap.seq &&
	       memcmp(&h.heap, &prev->hdr.heap, sizeof h.heap) == 0;
}

/* The alarms written: the ring's first min(alarms_written, cap) slots. */
static uint32_t alarms_in_ring(const struct ym_header *h)
{
	uint32_t cap = h->sections[YM_SEC_ALARMS].capacity;
	return h->alarms_written < cap ? (uint32_t)h->alarms_written : cap;
}

/* No alarm was claimed since prev, and prev kept every one (none was
 * being written then): its copy of the ring is the ring. */
static int alarms_unchanged(const struct shm_snapshot *s,
			    const struct shm_snapshot *prev)
{
	uint64_t w = s->hdr.alarms_written;
	return same_segment(s, prev) && w > 0 && prev->hdr.alarms_written == w &&
	       prev->alarms_after == w && prev->nalarms == alarms_in_ring(&s->hdr) &&
	       prev->alarms && prev->alarm_stride == s->hdr.sections[YM_SEC_ALARMS].stride;
}

/* s's parts borrowed from prev go back to being prev's alone (before s
 * is freed on a failure). */
static void unborrow(struct shm_snapshot *s, unsigned borrowed)
{
	if (borrowed & SHM_REUSED_STACKS)
		s->stacks = NULL;
	if (borrowed & SHM_REUSED_ALARMS)
		s->alarms = NULL;
}

void shm_snapshot_giveback(struct shm_snapshot *s, struct shm_snapshot *prev)
{
	if ((s->reused & SHM_REUSED_STACKS) && prev && !prev->stacks) {
		prev->stacks = s->stacks;
		s->stacks = NULL;
	}
	if ((s->reused & SHM_REUSED_ALARMS) && prev && !prev->alarms) {
		prev->alarms = s->alarms;
		s->alarms = NULL;
	}
	s->reused = 0;
}

int shm_heap_answered(struct shm_reader *r, uint64_t *answered)
{
	*answered = 0;
	if (r->fd < 0)
		return -EBADF;
	return shm_read_at(r->fd, answered, sizeof *answered,
		       __builtin_offsetof(struct ym_header, heap) +
		       __builtin_offsetof(struct ym_heapstats, answered));
}

int shm_snapshot_take(struct shm_reader *r, struct shm_snapshot *s, char *err,
		      size_t len)
{
	return shm_snapshot_take_since(r, s, NULL, err, len);
}

int shm_snapshot_take_since(struct shm_reader *r, struct shm_snapshot *s,
			    struct shm_snapshot *prev, char *err, size_t len)
{
	unsigned borrowed = 0;
	memset(s, 0, sizeof *s);
	if (r->fd < 0)
		return fail(err, len, -EBADF, "segment not open");
	/* No fstat for the file's size: every read below must return all
	 * it asks for (shm_read_at: a file that shrank fails the read of
	 * what it no longer holds), and the header copy is checked against
	 * the size found at open; a file that grew is read within that size. */

	int rc = 0;
	/* Header and thread slots together under retire_seq, so that a slot
	 * folded into `retired` is counted exactly once: the seqcount loop
	 * of segment.h, by reads (the front read holds the first one, of
	 * retire_seq and of heap.seq, with the header; the second look at
	 * both is one read of the words between them, or none when the
	 * front matches the previous snapshot's: front_as_before). */
	enum { AGAIN_FROM = __builtin_offsetof(struct ym_header, retire_seq),
	       HEAP_SEQ = __builtin_offsetof(struct ym_header, heap) };
	uint8_t again[HEAP_SEQ + sizeof(uint32_t) - AGAIN_FROM];
	int ctl_read = 0, as_before = 0;
	for (int tries = 0;; tries++) {
		uint8_t *front;
		ssize_t flen = read_front(r, &front);
		if (flen < 0)
			return fail(err, len, (int)flen, flen == -ENOMEM ?
				    "out of memory copying the segment" :
				    "segment truncated while reading");
		memcpy(&s->hdr, front, sizeof s->hdr);
		ym_seq_fence();
		rc = shm_header_check(&s->hdr, r->size, err, len);
		if (rc == 0 && (uint32_t)r->nspid != s->hdr.pid)
			rc = fail(err, len, -EPROTO, "segment pid changed");
		if (rc < 0) {
			free(front);
			free(s->threads);
			s->threads = NULL;
			return rc;
		}
		s->pid = r->pid;
		s->seg_dev = r->dev;
		s->seg_ino = r->ino;
		free(s->threads);
		s->nthreads = (uint32_t)s->hdr.threads_used;
		rc = copy_threads(r, &s->hdr, front, (size_t)flen, (void **)&s->threads);
		const uint8_t *c = in_front(front, (size_t)flen,
					    s->hdr.sections[YM_SEC_CONTROL].offset,
					    sizeof s->ctl);
		if (c)
			memcpy(&s->ctl, c, sizeof s->ctl);
		ctl_read = c != NULL;
		free(front);
		if (rc < 0)
			goto out;
		if (tries == 0 && (as_before = front_as_before(s, prev)))
			break;
		rc = read_again(r, again, sizeof again, AGAIN_FROM);
		if (rc < 0)
			goto out;
		uint32_t seq2;
		memcpy(&seq2, again, sizeof seq2);
		if (ym_seq_stable(s->hdr.retire_seq, seq2) || tries >= 8)
			break;
	}
	/* The allocator's statistics: the header's copy when heap.seq stayed
	 * even and unchanged since it (or the front matched the previous
	 * snapshot's, whose copy was stable), else their own seqcount loop. */
	uint32_t heap_seq2 = 0;
	if (!as_before)
		memcpy(&heap_seq2, again + (HEAP_SEQ - AGAIN_FROM), sizeof heap_seq2);
	if (as_before)
		s->hdr.heap = prev->hdr.heap;
	else if (ym_abi_has_heapstats(s->hdr.abi_version) &&
		 ym_seq_stable(s->hdr.heap.seq, heap_seq2))
		rc = heap_keep(&s->hdr);
	else
		rc = read_heap(r, &s->hdr);
	if (rc < 0)
		goto out;
	/* The stripes before the stacks: a stack's counters change before
	 * the counted word that says so. */
	rc = read_counted(r, s);
	if (rc < 0)
		goto out;
	s->taken_mono_ns = now_ns(CLOCK_MONOTONIC);
	s->taken_real_ns = now_ns(CLOCK_REALTIME);

	if (!ctl_read)
		rc = shm_read_at(r->fd, &s->ctl, sizeof s->ctl,
				 s->hdr.sections[YM_SEC_CONTROL].offset);
	if (rc < 0)
		goto out;
	s->nstacks = (uint32_t)s->hdr.stacks_used;
	s->stack_stride = s->hdr.sections[YM_SEC_STACKS].stride;
	if (stacks_unchanged(s, prev)) {
		s->stacks = prev->stacks;
		s->stack_stride = prev->stack_stride;
		s->stack_ext_off = prev->stack_ext_off;
		borrowed |= SHM_REUSED_STACKS;
	} else {
		rc = copy_section(r, &s->hdr, YM_SEC_STACKS, s->nstacks, 0,
				  (void **)&s->stacks);
		if (rc < 0)
			goto out;
		/* A record is published by stacks_used; one whose hash reads
		 * zero was not (a forged count): stop there. */
		for (uint32_t i = 0; i < s->nstacks; i++)
			if (shm_stack(s, i)->hash == 0) {
				s->nstacks = i;
				break;
			}
		rc = add_planes(r, &s->hdr, s);
		if (rc < 0)
			goto out;
		cut_stacks(s);
	}
	rc = copy_trend(r, s);
	if (rc < 0)
		goto out;
	if (r->skip_live) {
		s->live_skipped = 1;   /* live_count: read_counted's */
	} else {
		rc = copy_live(r, &s->hdr, s);
		if (rc < 0)
			goto out;
	}
	/* The slots ever written only: the others hold nothing. */
	s->nalarms = alarms_in_ring(&s->hdr);
	s->alarm_stride = s->hdr.sections[YM_SEC_ALARMS].stride;
	if (alarms_unchanged(s, prev)) {
		s->alarms = prev->alarms;
		borrowed |= SHM_REUSED_ALARMS;
	} else {
		rc = copy_section(r, &s->hdr, YM_SEC_ALARMS, s->nalarms, 0,
				  (void **)&s->alarms);
		if (rc < 0)
			goto out;
	}
	/* The ring's second look at alarms_written (ym_alarm_complete): not
	 * when nothing was copied now (no alarm yet, or the ring taken over
	 * from prev, whose records were complete and not claimed again
	 * while it copied them: the ring as it was at alarms_written). */
	uint64_t alarms_after = s->hdr.alarms_written;
	if (s->nalarms && !(borrowed & SHM_REUSED_ALARMS))
		rc = read_again(r, &alarms_after, sizeof alarms_after,
				__builtin_offsetof(struct ym_header, alarms_written));
	if (rc < 0)
		goto out;
	s->nmodules = (uint32_t)s->hdr.modules_used;
	rc = copy_section(r, &s->hdr, YM_SEC_MODULES, s->nmodules,
			  sizeof(struct ym_module), (void **)&s->modules);
	if (rc < 0)
		goto out;
	rc = copy_pycodes(r, &s->hdr, s);
	if (rc < 0)
		goto out;
	s->alarms_after = alarms_after;
	rc = check_records(s, alarms_after, borrowed, err, len);
	if (rc < 0) {
		unborrow(s, borrowed);
		shm_snapshot_free(s);
		return rc;
	}
	sum_totals(s);
	/* Taken over: prev keeps its counts, not the memory. */
	if (borrowed & SHM_REUSED_STACKS)
		prev->stacks = NULL;
	if (borrowed & SHM_REUSED_ALARMS)
		prev->alarms = NULL;
	s->reused = borrowed;
	return 0;
out:
	unborrow(s, borrowed);
	shm_snapshot_free(s);
	if (rc == -ENOMEM)
		return fail(err, len, rc, "out of memory copying the segment");
	return fail(err, len, rc, "segment truncated while reading");
}

int shm_header_read(struct shm_reader *r, struct ym_header *h, char *err,
		    size_t len)
{
	int rc = shm_read_at(r->fd, h, sizeof *h, 0);
	if (rc < 0)
		return fail(err, len, rc, "cannot read the segment header");
	return shm_header_check(h, r->size, err, len);
}
