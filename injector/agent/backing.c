/*
 * Memory behind the segment's pages (backing.h): a bitmap of chunks
 * (pages), set once a chunk is populated.  Bits are only ever set (until
 * the next mapping), so a set bit seen with acquire means a backed chunk.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backing.h"
#include "os.h"
#include "ymtop/segment.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define CHUNK   ((uint64_t)1 << BACKING_CHUNK_LOG)
#define CHUNKS  (YM_LIMIT_SEGMENT >> BACKING_CHUNK_LOG)

static uint64_t done[CHUNKS / 64];
static uint8_t *seg_base;
static uint64_t seg_size;
static int seg_all, warned;
/* After a failure, the next requests for missing chunks fail at once
 * (tmpfs rarely frees memory soon): a table that wants a new piece on
 * every sample then costs no system call each time.  Retried after
 * RETRY_AFTER of them. */
#define RETRY_AFTER 4096u
static unsigned skip;

static uint64_t words(uint64_t size)
{
	return (((size + CHUNK - 1) >> BACKING_CHUNK_LOG) + 63) / 64;
}

void backing_init(uint8_t *base, uint64_t size, int all)
{
	if (size > YM_LIMIT_SEGMENT)
		size = YM_LIMIT_SEGMENT;
	/* Only the words a segment used were ever set: clear those. */
	uint64_t n = words(size > seg_size ? size : seg_size);
	memset(done, 0, n * sizeof *done);
	seg_base = base;
	seg_size = size;
	seg_all = all;
	skip = 0;
	warned = 1;   /* the creator reports its own failures */
}

void backing_created(void)
{
	__atomic_store_n(&warned, 0, __ATOMIC_RELAXED);
}

static int chunk_done(uint64_t c)
{
	return (int)(__atomic_load_n(&done[c / 64], __ATOMIC_ACQUIRE) >> (c % 64)) & 1;
}

/* The offset of [p, p + len) in the segment, or 0 when it leaves it. */
static int seg_offset(const void *p, size_t len, uint64_t *off)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)seg_base;
	if (!seg_base || a < b || a - b > seg_size || len > seg_size - (a - b))
		return 0;
	*off = a - b;
	return 1;
}

/* Chunks [*lo, *hi) of the byte range, or 0 when it leaves the segment. */
static int chunks_of(const void *p, size_t len, uint64_t *lo, uint64_t *hi)
{
	uint64_t off;
	if (!seg_offset(p, len, &off))
		return 0;
	*lo = off >> BACKING_CHUNK_LOG;
	*hi = len ? ((off + len - 1) >> BACKING_CHUNK_LOG) + 1 : *lo;
	return 1;
}

static void set_done(uint64_t lo, uint64_t hi)
{
	for (uint64_t c = lo; c < hi; c++)
		__atomic_fetch_or(&done[c / 64], 1ULL << (c % 64), __ATOMIC_RELEASE);
}

/* Only chunks wholly inside the range: the rest of a chunk was not. */
void backing_mark(const void *p, size_t len)
{
	uint64_t off;
	if (seg_offset(p, len, &off))
		set_done((off + CHUNK - 1) >> BACKING_CHUNK_LOG,
			 (off + len) >> BACKING_CHUNK_LOG);
}

static void warn_full(void)
{
	if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		return;
	static const char msg[] = "ymagent: /dev/shm is full; new stacks, "
				  "samples and threads are counted as dropped\n";
	ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
	(void)w;
}

static int get(const void *p, size_t len, uint64_t ahead)
{
	uint64_t lo, hi;
	if (!chunks_of(p, len, &lo, &hi))
		return -1;
	if (seg_all)
		return 0;
	int saved = errno;
	uint64_t c = lo;
	while (c < hi) {
		if (chunk_done(c)) {
			c++;
			continue;
		}
		unsigned k = __atomic_load_n(&skip, __ATOMIC_RELAXED);
		if (k > 0) {
			__atomic_store_n(&skip, k - 1, __ATOMIC_RELAXED);
			return -1;
		}
		/* One call for the whole run of missing chunks. */
		uint64_t end = c + 1, last = hi + ahead;
		while (end < last && !chunk_done(end))
			end++;
		uint64_t off = c << BACKING_CHUNK_LOG;
		uint64_t stop = end << BACKING_CHUNK_LOG;
		if (stop > seg_size)
			stop = seg_size;
		if (os_advise(seg_base + off, stop - off, MADV_POPULATE_WRITE) != 0) {
			if (end > hi) {   /* what lies ahead may not fit: ask for less */
				errno = saved;
				return get(p, len, 0);
			}
			if (errno != EINTR) {   /* EINTR: a fatal signal */
				__atomic_store_n(&skip, RETRY_AFTER, __ATOMIC_RELAXED);
				warn_full();
			}
			errno = saved;
			return -1;
		}
		set_done(c, end);
		c = end;
	}
	errno = saved;
	return 0;
}

int backing_get(const void *p, size_t len)
{
	return get(p, len, 0);
}

int backing_get_ahead(const void *p, size_t len, size_t ahead)
{
	return get(p, len, ahead >> BACKING_CHUNK_LOG);
}

uint64_t backing_bytes(void)
{
	if (seg_all)
		return seg_size;
	uint64_t n = 0, chunks = (seg_size + CHUNK - 1) >> BACKING_CHUNK_LOG;
	for (uint64_t c = 0; c < chunks; c++)
		if (chunk_done(c)) {
			uint64_t end = (c + 1) << BACKING_CHUNK_LOG;
			n += (end > seg_size ? seg_size : end) - (c << BACKING_CHUNK_LOG);
		}
	return n;
}
