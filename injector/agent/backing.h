/*
 * Memory behind the segment's pages, taken when first needed.
 *
 * The segment is a sparse tmpfs file: creating it costs no memory, and a
 * process that records fifty stacks holds a few hundred KiB of /dev/shm,
 * not the whole reservation.  But a write to a page that tmpfs cannot
 * supply raises SIGBUS in the host.  So the agent writes no part of the
 * segment before backing_get() said yes for it: it populates the range
 * with MADV_POPULATE_WRITE (Linux 5.14), which reports a full /dev/shm as
 * an error instead of a signal, and remembers the pages done.
 * Reads need the same care: a read fault on a hole of a shared tmpfs
 * mapping allocates too, so callers read only what they had backed.
 *
 * On an older kernel shm_create reserves every page up front
 * (posix_fallocate) and backing_get always succeeds.
 */
#ifndef YMTOP_BACKING_H
#define YMTOP_BACKING_H

#include <stddef.h>
#include <stdint.h>

/* Pages: populating more than is written costs about 2 us a page at
 * start-up, which short-lived processes pay every time. */
#define BACKING_CHUNK_LOG 12

/* A new mapping of `size` bytes at base; all: every page already backed. */
void backing_init(uint8_t *base, uint64_t size, int all);

/* [p, p + len) was populated by the segment's creator (shm_create's
 * header page): no second system call for it. */
void backing_mark(const void *p, size_t len);

/* The segment is complete: the first failure from now on prints one line
 * to stderr (before, the creator reports failures itself). */
void backing_created(void);

/* 0 when [p, p + len) is backed (populating what is not, one system call
 * a missing run of chunks), -1 when tmpfs has no memory for it: write
 * nothing there.  After a failure the next 4096 requests that need a new
 * chunk fail without a system call.  Safe from any thread, lock-free. */
int backing_get(const void *p, size_t len);

/* backing_get, and when it must populate, the missing chunks of the
 * `ahead` bytes after the range too, in the same system call: for a
 * table appended to at a high rate (exact mode's stack records), where
 * one call a page was a system call every few records.  When tmpfs
 * cannot supply what lies ahead, the range alone. */
int backing_get_ahead(const void *p, size_t len, size_t ahead);

/* Bytes of the segment backed so far (tests, and ymagent's own memory). */
uint64_t backing_bytes(void);

#endif
