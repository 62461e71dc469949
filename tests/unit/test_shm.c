/* Segment layout and the reader's validation of hostile segments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"

struct seg {
	int fd;
	uint64_t size;
	uint8_t *map;
	struct ym_header *h;
};

/* A valid segment as the agent lays it out, in a memfd, with a live
 * table of `live` entries that nothing handed out yet. */
/* Records of the v8 Python code table seg_init lays out (0: none). */
static uint32_t seg_pycodes;

static void seg_init(struct seg *s, uint32_t depth, uint32_t live)
{
	struct shm_caps caps = { depth, 64, live, 16 };
	struct ym_section sec[YM_SEC_COUNT], py;
	assert_int_equal(shm_layout(&caps, sec, &s->size), 0);
	assert_int_equal(shm_layout_pycodes(seg_pycodes, &py, &s->size), 0);
	s->fd = memfd_create("seg", MFD_CLOEXEC);
	assert_true(s->fd >= 0);
	assert_int_equal(fchmod(s->fd, 0600), 0);   /* memfds start 0777 */
	assert_int_equal(ftruncate(s->fd, (off_t)s->size), 0);
	s->map = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	assert_true(s->map != MAP_FAILED);
	s->h = (struct ym_header *)s->map;
	s->h->magic = YM_MAGIC;
	s->h->abi_version = YM_ABI_VERSION;
	s->h->compat_version = YM_ABI_COMPAT;
	s->h->header_size = YM_HEADER_SIZE;
	s->h->total_size = s->size;
	s->h->pid = 4242;
	s->h->sample_rate = 1;
	s->h->max_depth = depth;
	memcpy(s->h->sections, sec, sizeof sec);
	s->h->py_codes = py;
	s->h->threads_used = 2;
	s->h->stacks_used = 2;
	s->h->modules_used = 1;
	struct ym_stack *st = (struct ym_stack *)(s->map + sec[YM_SEC_STACKS].offset);
	st->hash = 1;
	st = (struct ym_stack *)((uint8_t *)st + sec[YM_SEC_STACKS].stride);
	st->hash = 99;
	st->depth = 2;
	st->frames[0] = 0x1000;
	st->frames[1] = 0x2000;
	st->alloc_bytes = 5000;
	st->free_bytes = 1000;
	struct ym_thread *th = (struct ym_thread *)(s->map + sec[YM_SEC_THREADS].offset);
	th[1].t.alloc_bytes = 777;
	th[1].state = YM_THREAD_LIVE;
	s->h->retired.alloc_bytes = 23;
	struct ym_module *m = (struct ym_module *)(s->map + sec[YM_SEC_MODULES].offset);
	memset(m->path, 'x', sizeof m->path);   /* no NUL: must be cut */
}

static struct ym_live *seg_live(struct seg *s)
{
	return (struct ym_live *)(s->map + s->h->sections[YM_SEC_LIVE].offset);
}

static struct ym_stripe *seg_stripes(struct seg *s)
{
	return (struct ym_stripe *)(s->map + s->h->sections[YM_SEC_STRIPES].offset);
}

/* seg_init, and a few live entries. */
static void seg_make(struct seg *s, uint32_t depth)
{
	seg_init(s, depth, 128);
	const struct ym_section *sec = s->h->sections;
	/* 2 stripes of 64 entries.  Stripe 0 handed out 4 entries, two of
	 * them live; stripe 1 none, so its first entry is never read. */
	uint32_t nst = sec[YM_SEC_STRIPES].capacity;
	assert_int_equal(nst, 2);
	struct ym_live *lv = seg_live(s);
	lv[ym_live_index(0, 1, nst)].addr = 0xabc0;
	lv[ym_live_index(0, 1, nst)].stack = 1;
	lv[ym_live_index(0, 3, nst)].addr = 0xdef0;
	lv[ym_live_index(0, 3, nst)].stack = 77;   /* unpublished: dropped */
	lv[ym_live_index(1, 0, nst)].addr = 0x1110;  /* not handed out */
	lv[ym_live_index(1, 0, nst)].stack = 1;
	struct ym_stripe *sp = seg_stripes(s);
	sp[0].count = 2;
	sp[0].used = 4;
}

static void seg_free(struct seg *s)
{
	munmap(s->map, s->size);
	close(s->fd);
}

static int open_snap(struct seg *s, struct shm_snapshot *snap, char *err)
{
	struct shm_reader r;
	int fd = dup(s->fd);
	int rc = shm_reader_open_fd(&r, fd, 4242, (uid_t)-1, err, 256);
	if (rc != 0) {
		close(fd);
		return rc;
	}
	rc = shm_snapshot_take(&r, snap, err, 256);
	shm_reader_close(&r);
	return rc;
}

static void layout_is_sane(void **state)
{
	(void)state;
	struct shm_caps caps = { 64, 16384, 65536, 4096 };
	struct ym_section sec[YM_SEC_COUNT];
	uint64_t total;
	assert_int_equal(shm_layout(&caps, sec, &total), 0);
	/* Sections in any order (readers follow the offsets), after the
	 * header, aligned, disjoint; the modules last (written at start:
	 * the written part of a small segment ends soon after they begin). */
	uint64_t end = YM_HEADER_SIZE, last = 0;
	for (int k = 0; k < YM_SEC_COUNT; k++) {
		int next = -1;
		for (int i = 0; i < YM_SEC_COUNT; i++)
			if (sec[i].offset >= end &&
			    (next < 0 || sec[i].offset < sec[next].offset))
				next = i;
		assert_true(next >= 0);   /* else two overlap */
		assert_int_equal(sec[next].offset % 64, 0);
		end = sec[next].offset + (uint64_t)sec[next].capacity * sec[next].stride;
		last = (uint64_t)next;
	}
	assert_int_equal(last, YM_SEC_MODULES);
	assert_int_equal(sec[YM_SEC_LIVE].offset % 4096, 0);
	assert_true(total >= end && total % 4096 == 0);
	caps.max_depth = 0;
	assert_int_equal(shm_layout(&caps, sec, &total), -EINVAL);
	caps.max_depth = 64;
	caps.max_live = 1000;   /* rounded up */
	assert_int_equal(shm_layout(&caps, sec, &total), 0);
	assert_int_equal(caps.max_live, 1024);
	assert_int_equal(sec[YM_SEC_STRIPES].capacity, 16);   /* 64 entries each */
	caps.max_live = 1u << 20;
	assert_int_equal(shm_layout(&caps, sec, &total), 0);
	assert_int_equal(sec[YM_SEC_STRIPES].capacity, YM_LIVE_STRIPES);
	caps.max_live = 16;
	assert_int_equal(shm_layout(&caps, sec, &total), 0);
	assert_int_equal(sec[YM_SEC_STRIPES].capacity, 1);
}

static void valid_segment_snapshots(void **state)
{
	(void)state;
	struct seg s;
	struct shm_snapshot snap;
	char err[256] = "";
	seg_make(&s, 8);
	assert_int_equal(open_snap(&s, &snap, err), 0);
	assert_int_equal(snap.nstacks, 2);
	assert_int_equal(shm_stack(&snap, 1)->frames[1], 0x2000);
	assert_int_equal(snap.totals.alloc_bytes, 800);
	assert_int_equal(snap.nlive, 1);   /* the entry naming stack 77 dropped */
	assert_int_equal(snap.live[0].addr, 0xabc0);
	assert_int_equal(snap.live_count, 2);   /* what the stripes say */
	assert_int_equal(snap.nmodules, 1);
	assert_int_equal(strlen(snap.modules[0].path), sizeof snap.modules[0].path - 1);
	shm_snapshot_free(&snap);
	seg_free(&s);
}

/* Each corruption must fail with a message, never crash. */
/* The reader copies the rows of the pool that the stripes in use span:
 * a few neighbours (exact mode, one thread: a quarter of the stripes)
 * row by row, stripes far apart in one read.  Either way every entry
 * handed out is found where ym_live_index puts it, and no other. */
static void live_copy_follows_the_stripes_in_use(void **state)
{
	(void)state;
	for (int wide = 0; wide < 2; wide++) {
		struct seg s;
		seg_init(&s, 8, 1024);   /* 16 stripes of 64 */
		uint32_t nst = s.h->sections[YM_SEC_STRIPES].capacity;
		assert_int_equal(nst, 16);
		struct ym_live *lv = seg_live(&s);
		struct ym_stripe *sp = seg_stripes(&s);
		/* Stripes 4-7 hand out 20 entries each (3 rows), stripe 15
		 * 9 when wide; every entry of every stripe is filled, so an
		 * entry read from the wrong place would show. */
		for (uint32_t i = 0; i < nst; i++)
			for (uint32_t j = 0; j < 64; j++) {
				lv[ym_live_index(i, j, nst)].addr = 0x100000 * (i + 1) + 16 * j;
				lv[ym_live_index(i, j, nst)].stack = 1;
			}
		uint32_t want = 0;
		for (uint32_t i = 4; i < 8; i++)
			want += (uint32_t)(sp[i].used = sp[i].count = 20);
		if (wide)
			want += (uint32_t)(sp[15].used = sp[15].count = 9);
		struct shm_snapshot snap;
		char err[256] = "";
		assert_int_equal(open_snap(&s, &snap, err), 0);
		assert_int_equal(snap.nlive, want);
		assert_int_equal(snap.live_count, want);
		uint8_t seen[16][64] = { { 0 } };
		for (uint32_t k = 0; k < snap.nlive; k++) {
			uint64_t a = snap.live[k].addr;
			uint32_t i = (uint32_t)(a / 0x100000) - 1, j = (uint32_t)(a % 0x100000) / 16;
			assert_true((i >= 4 && i < 8 && j < 20) || (wide && i == 15 && j < 9));
			assert_int_equal(seen[i][j]++, 0);
		}
		shm_snapshot_free(&snap);
		seg_free(&s);
	}
}

static void corrupted_headers_rejected(void **state)
{
	(void)state;
	for (int c = 0; c < 19; c++) {
		struct seg s;
		struct shm_snapshot snap;
		char err[256] = "";
		seg_make(&s, 8);
		struct ym_header *h = s.h;
		switch (c) {
		case 0: h->magic ^= 1; break;
		case 1: h->compat_version = YM_ABI_VERSION + 1; break;
		case 2: h->header_size = 17; break;
		case 3: h->total_size += 4096; break;
		case 4: h->max_depth = 0; break;
		case 5: h->max_depth = 100000; break;
		case 6: h->sections[YM_SEC_STACKS].offset = s.size; break;
		case 7: h->sections[YM_SEC_STACKS].capacity = 0xffffffffu; break;
		case 8: h->sections[YM_SEC_LIVE].stride = 8; break;
		case 9: h->sections[YM_SEC_LIVE].capacity = 100; break;
		case 10: h->stacks_used = 1000000; break;
		case 11: h->threads_used = 1u << 30; break;
		case 12: h->sections[YM_SEC_THREADS].offset = 3; break;
		case 14: h->sections[YM_SEC_STRIPES].capacity = 3; break;
		case 15: h->sections[YM_SEC_STRIPES].capacity = 256; break; /* > live */
		case 16: h->sections[YM_SEC_PLANES].capacity -= 1; break;
		case 17: h->planes_used = YM_PLANES + 1; break;
		case 18: h->sections[YM_SEC_STRIPES].capacity = 32; break; /* 4 each */
		case 13: { /* a published stack deeper than allowed */
			struct ym_stack *st = (struct ym_stack *)(s.map +
				h->sections[YM_SEC_STACKS].offset +
				h->sections[YM_SEC_STACKS].stride);
			st->depth = 9;
			break;
		}
		}
		int rc = open_snap(&s, &snap, err);
		if (rc == 0)
			fail_msg("corruption %d accepted", c);
		assert_true(strlen(err) > 0);
		assert_null(strchr(err, '\n'));
		seg_free(&s);
	}
}

/* A stack's counters are its record's plus its entry in each plane in use
 * whose data is of the current reset. */
static void planes_summed_until_a_reset(void **state)
{
	(void)state;
	struct seg s;
	struct shm_snapshot snap;
	char err[256] = "";
	seg_make(&s, 8);
	const struct ym_section *ps = &s.h->sections[YM_SEC_PLANES];
	uint32_t cap = s.h->sections[YM_SEC_STACKS].capacity;
	struct ym_counts *pl = (struct ym_counts *)(s.map + ps->offset);
	pl[0 * cap + 1].alloc_bytes = 300;
	pl[0 * cap + 1].life[2].bytes = 7;
	pl[2 * cap + 1].alloc_samples = 4;
	pl[2 * cap + 1].free_bytes = 50;
	pl[3 * cap + 1].alloc_bytes = 1u << 20;   /* beyond planes_used */
	s.h->planes_used = 3;
	assert_int_equal(open_snap(&s, &snap, err), 0);
	const struct ym_stack *st = shm_stack(&snap, 1);
	assert_int_equal(st->alloc_bytes, 5300);
	assert_int_equal(st->free_bytes, 1050);
	assert_int_equal(st->alloc_samples, 4);
	assert_int_equal(st->life[2].bytes, 7);
	assert_int_equal(st->frames[1], 0x2000);   /* frames untouched */
	shm_snapshot_free(&snap);
	/* A reset: plane 2's owner has zeroed it since, plane 0's not yet. */
	s.h->reset_count = 1;
	s.h->plane_epoch[2] = 1;
	assert_int_equal(open_snap(&s, &snap, err), 0);
	st = shm_stack(&snap, 1);
	assert_int_equal(st->alloc_bytes, 5000);
	assert_int_equal(st->life[2].bytes, 0);
	assert_int_equal(st->alloc_samples, 4);
	shm_snapshot_free(&snap);
	seg_free(&s);
}

/* A reader's requests land in the control block (segment.h, Control):
 * a reset bumps reset_seq, pause sets pause; a read-only reader may ask
 * neither. */
static void control_requests_reach_the_control_block(void **state)
{
	(void)state;
	struct seg s;
	char err[256] = "", path[64];
	seg_make(&s, 8);
	struct ym_control *c = (struct ym_control *)
		(s.map + s.h->sections[YM_SEC_CONTROL].offset);
	c->reset_seq = 41;
	struct shm_reader r;
	int fd = dup(s.fd);
	assert_int_equal(shm_reader_open_fd(&r, fd, 4242, (uid_t)-1, err, sizeof err), 0);
	assert_int_equal(shm_control_reset(&r), 0);
	assert_int_equal(c->reset_seq, 42);
	assert_int_equal(shm_control_reset(&r), 0);
	assert_int_equal(c->reset_seq, 43);
	assert_int_equal(shm_control_pause(&r, 1), 0);
	assert_int_equal(c->pause, 1);
	assert_int_equal(shm_control_pause(&r, 0), 0);
	assert_int_equal(c->pause, 0);
	shm_reader_close(&r);
	snprintf(path, sizeof path, "/proc/self/fd/%d", s.fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(shm_reader_open_fd(&r, fd, 4242, (uid_t)-1, err, sizeof err), 0);
	assert_int_equal(shm_control_reset(&r), -EPERM);
	assert_int_equal(c->reset_seq, 43);
	shm_reader_close(&r);
	seg_free(&s);
}

/* A stripe whose writer never leaves (odd seq: killed inside, or forged)
 * is copied again a few times, then taken as it is. */
static void held_stripe_does_not_block(void **state)
{
	(void)state;
	struct seg s;
	struct shm_snapshot snap;
	char err[256] = "";
	seg_make(&s, 8);
	struct ym_stripe *sp = (struct ym_stripe *)(s.map +
		s.h->sections[YM_SEC_STRIPES].offset);
	sp[0].seq = 7;
	sp[1].seq = 3;
	assert_int_equal(open_snap(&s, &snap, err), 0);
	assert_int_equal(snap.nlive, 1);
	shm_snapshot_free(&snap);
	seg_free(&s);
}

static void forged_alarm_skipped(void **state)
{
	(void)state;
	struct seg s;
	struct shm_snapshot snap;
	char err[256];
	seg_make(&s, 8);
	const struct ym_section *a = &s.h->sections[YM_SEC_ALARMS];
	struct ym_alarm *al = (struct ym_alarm *)(s.map + a->offset);
	s.h->alarms_written = 1;
	al->seq = 1;
	al->size = 1 << 30;
	al->depth = 1;
	struct ym_alarm *bad = (struct ym_alarm *)(s.map + a->offset + 3 * a->stride);
	bad->seq = 77;          /* not written yet, wrong position */
	bad->depth = 1000;
	assert_int_equal(open_snap(&s, &snap, err), 0);
	assert_int_equal(snap.nalarms, 1);
	assert_int_equal(shm_alarm(&snap, 0)->size, 1 << 30);
	shm_snapshot_free(&snap);
	seg_free(&s);
}

/* Records of max_depth frames are copied cut to the deepest stack's
 * frames, their v6 fields moved along. */
static void records_cut_to_the_deepest_stack(void **state)
{
	(void)state;
	struct seg s;
	struct shm_snapshot snap;
	char err[256];
	seg_make(&s, 64);
	const struct ym_section *sec = &s.h->sections[YM_SEC_STACKS];
	uint8_t *rec = s.map + sec->offset + sec->stride;
	struct ym_stack_ext *x = (struct ym_stack_ext *)(void *)(rec + shm_stack_stride_v5(64));
	x->peak_bytes = 123456;
	x->kind = YM_KIND_MMAP;
	assert_int_equal(open_snap(&s, &snap, err), 0);
	assert_true(snap.stack_stride < sec->stride);
	assert_int_equal(snap.nstacks, 2);
	assert_int_equal(shm_stack(&snap, 1)->frames[1], 0x2000);
	assert_int_equal(shm_stack(&snap, 1)->alloc_bytes, 5000);
	assert_int_equal(shm_stack_ext(&snap, 1)->peak_bytes, 123456);
	assert_int_equal(shm_stack_kind(&snap, 1), YM_KIND_MMAP);
	assert_int_equal(shm_stack_kind(&snap, 0), YM_KIND_MALLOC);
	shm_snapshot_free(&snap);
	seg_free(&s);
}

/* shm_snapshot_take_since keeps the previous copy of what the segment
 * says did not change, and copies again what did (segment.h, v8: the
 * stripes' counted words; alarms_written). */
static void unchanged_parts_taken_over(void **state)
{
	(void)state;
	struct seg s;
	struct shm_reader r;
	struct shm_snapshot a, b, c, d, e;
	char err[256];
	seg_make(&s, 8);
	const struct ym_section *sec = s.h->sections;
	struct ym_alarm *al = (struct ym_alarm *)(s.map + sec[YM_SEC_ALARMS].offset);
	struct ym_alarm *al1 = (struct ym_alarm *)((uint8_t *)al + sec[YM_SEC_ALARMS].stride);
	struct ym_stack *st = (struct ym_stack *)(s.map + sec[YM_SEC_STACKS].offset +
						  sec[YM_SEC_STACKS].stride);
	s.h->alarms_written = 2;
	al->seq = 1;
	al->depth = 1;
	al1->depth = 1;   /* claimed, still written: seq 0 */
	int fd = dup(s.fd);
	assert_int_equal(shm_reader_open_fd(&r, fd, 4242, (uid_t)-1, err, sizeof err), 0);
	assert_int_equal(shm_snapshot_take_since(&r, &a, NULL, err, sizeof err), 0);
	assert_int_equal(a.reused, 0);
	assert_int_equal(a.nalarms, 1);
	/* Nothing moved: a's stacks are taken over; the alarm that was
	 * being written is read now that it is complete. */
	al1->seq = 2;
	uint8_t *stacks = a.stacks;
	assert_int_equal(shm_snapshot_take_since(&r, &b, &a, err, sizeof err), 0);
	assert_int_equal(b.reused, SHM_REUSED_STACKS);
	assert_ptr_equal(b.stacks, stacks);
	assert_null(a.stacks);
	assert_int_equal(b.nstacks, 2);
	assert_int_equal(shm_stack(&b, 1)->alloc_bytes, 5000);
	assert_int_equal(b.nalarms, 2);
	/* A counter moved, and a stripe's counted word says so: copied. */
	st->alloc_bytes = 9000;
	seg_stripes(&s)[1].counted++;
	assert_int_equal(shm_snapshot_take_since(&r, &c, &b, err, sizeof err), 0);
	assert_int_equal(c.reused, SHM_REUSED_ALARMS);
	assert_int_equal(shm_stack(&c, 1)->alloc_bytes, 9000);
	assert_non_null(b.stacks);
	/* Taken over, then given back: the previous snapshot whole again. */
	stacks = c.stacks;
	assert_int_equal(shm_snapshot_take_since(&r, &d, &c, err, sizeof err), 0);
	assert_int_equal(d.reused, SHM_REUSED_STACKS | SHM_REUSED_ALARMS);
	shm_snapshot_giveback(&d, &c);
	assert_ptr_equal(c.stacks, stacks);
	assert_non_null(c.alarms);
	shm_snapshot_free(&d);
	/* A new stack record, or a writer before v8 (no counted word):
	 * copied every time. */
	s.h->stacks_used = 1;
	assert_int_equal(shm_snapshot_take_since(&r, &d, &c, err, sizeof err), 0);
	assert_int_equal(d.reused & SHM_REUSED_STACKS, 0);
	s.h->abi_version = 7;
	assert_int_equal(shm_snapshot_take_since(&r, &e, &d, err, sizeof err), 0);
	assert_false(e.counted_known);
	assert_int_equal(e.reused & SHM_REUSED_STACKS, 0);
	shm_snapshot_free(&a);
	shm_snapshot_free(&b);
	shm_snapshot_free(&c);
	shm_snapshot_free(&d);
	shm_snapshot_free(&e);
	shm_reader_close(&r);
	seg_free(&s);
}

/* A refresh of a segment in which nothing moved reads it three times:
 * the front (header, control block, thread slots), the stripes and the
 * modules.  The second look at the sequence words is left out only when
 * the front shows every word they guard as the previous snapshot had
 * them; the alarms' second look only when no alarm was copied. */
static void unchanged_segment_read_three_times(void **state)
{
	(void)state;
	struct seg s;
	struct shm_reader r;
	struct shm_snapshot a, b, c, d, e;
	char err[256];
	seg_make(&s, 8);
	const struct ym_section *sec = s.h->sections;
	struct ym_alarm *al = (struct ym_alarm *)(s.map + sec[YM_SEC_ALARMS].offset);
	struct ym_alarm *al1 = (struct ym_alarm *)((uint8_t *)al + sec[YM_SEC_ALARMS].stride);
	struct ym_thread *th = (struct ym_thread *)(s.map + sec[YM_SEC_THREADS].offset);
	s.h->alarms_written = 1;
	al->seq = 1;
	al->depth = 1;
	s.h->heap.allocator = YM_HEAP_GLIBC;
	s.h->heap.present = YM_HEAP_IN_USE;
	s.h->heap.in_use_bytes = 4096;
	s.h->heap.seq = 2;
	int fd = dup(s.fd);
	assert_int_equal(shm_reader_open_fd(&r, fd, 4242, (uid_t)-1, err, sizeof err), 0);
	r.skip_live = 1;
	assert_int_equal(shm_snapshot_take_since(&r, &a, NULL, err, sizeof err), 0);
	unsigned long long n0 = shm_reads;
	assert_int_equal(shm_snapshot_take_since(&r, &b, &a, err, sizeof err), 0);
	assert_int_equal(shm_reads - n0, 3);
	assert_int_equal(b.reused, SHM_REUSED_STACKS | SHM_REUSED_ALARMS);
	assert_int_equal(b.totals.alloc_bytes, 23 + 777);
	assert_int_equal(b.nalarms, 1);
	assert_int_equal(b.hdr.heap.in_use_bytes, 4096);
	/* A fold seen in part (retired moved, its slot not yet cleared, the
	 * sequence word as before): looked at again, and the sum is the
	 * copy's. */
	s.h->retired.alloc_bytes += 100;
	n0 = shm_reads;
	assert_int_equal(shm_snapshot_take_since(&r, &c, &b, err, sizeof err), 0);
	assert_int_equal(shm_reads - n0, 4);
	assert_int_equal(c.totals.alloc_bytes, 123 + 777);
	/* A slot's count moved, or the allocator's statistics: the same. */
	th[1].t.alloc_objects++;
	n0 = shm_reads;
	assert_int_equal(shm_snapshot_take_since(&r, &d, &c, err, sizeof err), 0);
	assert_int_equal(shm_reads - n0, 4);
	assert_int_equal(d.totals.alloc_objects, 1);
	s.h->heap.in_use_bytes = 8192;
	s.h->heap.seq = 4;
	/* and an alarm claimed and written: the ring copied and looked at
	 * again. */
	s.h->alarms_written = 2;
	al1->seq = 2;
	al1->depth = 1;
	n0 = shm_reads;
	assert_int_equal(shm_snapshot_take_since(&r, &e, &d, err, sizeof err), 0);
	assert_int_equal(shm_reads - n0, 6);
	assert_int_equal(e.hdr.heap.in_use_bytes, 8192);
	assert_int_equal(e.nalarms, 2);
	shm_snapshot_free(&a);
	shm_snapshot_free(&b);
	shm_snapshot_free(&c);
	shm_snapshot_free(&d);
	shm_snapshot_free(&e);
	shm_reader_close(&r);
	seg_free(&s);
}

/* A reader accepts what its version can read (segment.h, Versions and
 * sizes): compat_version at most its own, or a v4 writer (compat 0). */
static void versions_accepted_by_compat(void **state)
{
	(void)state;
	static const struct {
		uint16_t abi, compat;
		int ok;
	} c[] = {
		{ YM_ABI_VERSION, YM_ABI_COMPAT, 1 },
		{ YM_ABI_VERSION + 3, YM_ABI_COMPAT, 1 },     /* newer, compatible */
		{ YM_ABI_VERSION + 1, YM_ABI_VERSION + 1, 0 },  /* needs a newer reader */
		{ YM_ABI_OLDEST, 0, 1 },                       /* v4: this layout */
		{ YM_ABI_OLDEST - 1, 0, 0 },
		{ YM_ABI_VERSION + 1, 0, 0 },                  /* compat 0 is v4 at most */
		{ 3, 5, 0 },                                   /* compat above its own */
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		struct seg s;
		struct shm_snapshot snap;
		char err[256] = "";
		seg_make(&s, 8);
		s.h->abi_version = c[i].abi;
		s.h->compat_version = c[i].compat;
		int rc = open_snap(&s, &snap, err);
		if ((rc == 0) != c[i].ok)
			fail_msg("abi %u compat %u: rc %d (%s)", c[i].abi, c[i].compat,
				 rc, err);
		if (rc == 0)
			shm_snapshot_free(&snap);
		else
			assert_null(strchr(err, '\n'));
		if (c[i].compat > YM_ABI_VERSION)
			assert_non_null(strstr(err, "needs a ymtop that reads ABI"));
		seg_free(&s);
	}
}

/* v7's unseen calls: the flag, the reason and the object as written, the
 * object cut at its last byte; a writer before v7 (whose reserved space
 * a hostile one filled) or an unknown reason says nothing. */
static void unseen_only_from_v7_with_a_known_reason(void **state)
{
	(void)state;
	const struct {
		uint32_t abi, why;
		int shown;
	} c[] = {
		{ YM_ABI_VERSION, YM_UNSEEN_OWN_CALLS, 1 },
		{ YM_ABI_VERSION, YM_UNSEEN_READONLY, 1 },
		{ YM_ABI_VERSION, 77, 0 },
		{ 6, YM_UNSEEN_OWN_CALLS, 0 },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		struct seg s;
		struct shm_snapshot snap;
		char err[256] = "";
		seg_make(&s, 8);
		s.h->abi_version = (uint16_t)c[i].abi;
		s.h->flags |= YM_FLAG_UNSEEN;
		s.h->unseen_why = c[i].why;
		memset(s.h->unseen_object, 'x', sizeof s.h->unseen_object);
		assert_int_equal(open_snap(&s, &snap, err), 0);
		assert_int_equal(!!(snap.hdr.flags & YM_FLAG_UNSEEN), c[i].shown);
		assert_int_equal(strlen(snap.hdr.unseen_object),
				 c[i].shown ? sizeof snap.hdr.unseen_object - 1 : 0);
		shm_snapshot_free(&snap);
		seg_free(&s);
	}
}

/* v8's Python code table: records below py_codes_used are copied with
 * their strings cut to length; a count or section out of bounds refuses
 * the segment; an older writer's py_* words (reserved then) mean nothing. */
static void python_code_table(void **state)
{
	(void)state;
	for (int c = 0; c < 5; c++) {
		struct seg s;
		struct shm_snapshot snap;
		char err[256] = "";
		seg_pycodes = 4;
		seg_make(&s, 8);
		seg_pycodes = 0;
		struct ym_pycode *pc = (struct ym_pycode *)(void *)
			(s.map + s.h->py_codes.offset);
		strcpy(pc[0].qualname, "Loader.load_users");
		strcpy(pc[0].filename, "app/db.py");
		memset(pc[1].qualname, 'x', sizeof pc[1].qualname);   /* no NUL */
		memset(pc[1].filename, 'y', sizeof pc[1].filename);
		s.h->py_codes_used = 2;
		s.h->py_state = YM_PY_FRAMES;
		s.h->py_version = 0x030b02f0;
		int rc_want = 0;
		if (c == 1) {
			s.h->py_codes_used = 5;            /* beyond capacity */
			rc_want = -EPROTO;
		} else if (c == 2) {
			s.h->py_codes.offset = s.size;     /* past the file */
			rc_want = -EPROTO;
		} else if (c == 3) {
			s.h->py_codes.stride = 8;          /* shorter than a record */
			rc_want = -EPROTO;
		} else if (c == 4) {
			s.h->abi_version = 7;              /* reserved words then */
		}
		assert_int_equal(open_snap(&s, &snap, err), rc_want);
		if (c == 0) {
			assert_true(shm_snapshot_py_known(&snap));
			assert_int_equal(snap.npycodes, 2);
			assert_string_equal(snap.pycodes[0].qualname, "Loader.load_users");
			assert_string_equal(snap.pycodes[0].filename, "app/db.py");
			assert_int_equal(strlen(snap.pycodes[1].qualname),
					 sizeof pc[1].qualname - 1);
			assert_int_equal(strlen(snap.pycodes[1].filename),
					 sizeof pc[1].filename - 1);
			assert_int_equal(snap.hdr.py_state, YM_PY_FRAMES);
		} else if (c == 4) {
			assert_false(shm_snapshot_py_known(&snap));
			assert_int_equal(snap.npycodes, 0);
			assert_null(snap.pycodes);
			assert_int_equal(snap.hdr.py_state, YM_PY_NONE);
			assert_int_equal(snap.hdr.py_version, 0);
		}
		if (rc_want == 0)
			shm_snapshot_free(&snap);
		seg_free(&s);
	}
}

/* v9's header.py_hook (the pymalloc wrapper's state) as the writer put it;
 * from a v8 writer (reserved then) or out of range: not known, never a
 * state; without an interpreter: not known either. */
static void python_hook_state_known_from_v9_writers_only(void **state)
{
	(void)state;
	static const struct { uint32_t abi, hook, py, want; } cases[] = {
		{ YM_ABI_V9, YM_PYHOOK_PENDING, YM_PY_FRAMES, YM_PYHOOK_PENDING },
		{ YM_ABI_V9, YM_PYHOOK_ON, YM_PY_FRAMES, YM_PYHOOK_ON },
		{ YM_ABI_V8, YM_PYHOOK_ON, YM_PY_FRAMES, YM_PYHOOK_UNKNOWN },
		{ YM_ABI_V9, 99, YM_PY_FRAMES, YM_PYHOOK_UNKNOWN },
		{ YM_ABI_V9, YM_PYHOOK_ON, YM_PY_NONE, YM_PYHOOK_UNKNOWN },
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		struct seg s;
		struct shm_snapshot snap;
		char err[256] = "";
		seg_pycodes = 4;
		seg_make(&s, 8);
		seg_pycodes = 0;
		s.h->abi_version = (uint16_t)cases[c].abi;
		s.h->py_state = cases[c].py;
		s.h->py_version = 0x030b02f0;
		s.h->py_hook = cases[c].hook;
		s.h->reserved_v9_py = 7;
		assert_int_equal(open_snap(&s, &snap, err), 0);
		assert_int_equal(snap.hdr.py_hook, cases[c].want);
		assert_int_equal(snap.hdr.reserved_v9_py, 0);
		shm_snapshot_free(&snap);
		seg_free(&s);
	}
}

/* dst: src as a newer writer would lay it out, that appends to everything
 * (segment.h, Versions and sizes): a header of 8 KiB, every record `extra`
 * bytes longer, and the bytes this reader does not know all non-zero. */
static void seg_widen(struct seg *src, struct seg *dst, uint32_t extra)
{
	enum { HDR = 8192 };
	const struct ym_section *os = src->h->sections;
	struct ym_section ns[YM_SEC_COUNT];
	uint64_t off = HDR;
	for (int i = 0; i < YM_SEC_COUNT; i++) {
		ns[i] = os[i];
		ns[i].offset = off;
		ns[i].stride = os[i].stride + extra;
		off = (off + (uint64_t)ns[i].capacity * ns[i].stride + 63) & ~63ULL;
	}
	dst->size = (off + 4095) & ~4095ULL;
	dst->fd = memfd_create("wide", MFD_CLOEXEC);
	assert_true(dst->fd >= 0);
	assert_int_equal(fchmod(dst->fd, 0600), 0);
	assert_int_equal(ftruncate(dst->fd, (off_t)dst->size), 0);
	dst->map = mmap(NULL, dst->size, PROT_READ | PROT_WRITE, MAP_SHARED,
			dst->fd, 0);
	assert_true(dst->map != MAP_FAILED);
	dst->h = (struct ym_header *)dst->map;
	memset(dst->map, 0xa5, HDR);
	memcpy(dst->map, src->map, sizeof *dst->h);
	dst->h->abi_version = YM_ABI_VERSION + 1;
	dst->h->header_size = HDR;
	dst->h->total_size = dst->size;
	memcpy(dst->h->sections, ns, sizeof ns);
	for (int i = 0; i < YM_SEC_COUNT; i++)
		for (uint32_t k = 0; k < ns[i].capacity; k++) {
			uint8_t *to = dst->map + ns[i].offset + (size_t)k * ns[i].stride;
			memcpy(to, src->map + os[i].offset + (size_t)k * os[i].stride,
			       os[i].stride);
			memset(to + os[i].stride, 0xa5, extra);
		}
}

/* A newer compatible writer's segment reads as the same figures. */
static void longer_records_read_by_prefix(void **state)
{
	(void)state;
	struct seg s, w;
	seg_make(&s, 8);
	uint32_t cap = s.h->sections[YM_SEC_STACKS].capacity;
	struct ym_counts *pl = (struct ym_counts *)(s.map +
					s.h->sections[YM_SEC_PLANES].offset);
	pl[1 * cap + 1].alloc_bytes = 300;
	s.h->planes_used = 2;
	struct ym_alarm *al = (struct ym_alarm *)(s.map +
					s.h->sections[YM_SEC_ALARMS].offset);
	s.h->alarms_written = 1;
	al->seq = 1;
	al->size = 1 << 30;
	al->depth = 1;
	al->frames[0] = 0x4000;
	struct ym_thread *th = (struct ym_thread *)(s.map +
					s.h->sections[YM_SEC_THREADS].offset);
	th[1].tid = 99;
	seg_widen(&s, &w, 64);
	struct shm_snapshot a, b;
	char err[256] = "";
	assert_int_equal(open_snap(&s, &a, err), 0);
	if (open_snap(&w, &b, err) != 0)
		fail_msg("wide segment refused: %s", err);
	assert_int_equal(b.nstacks, a.nstacks);
	assert_int_equal(shm_stack(&b, 1)->alloc_bytes, 5300);
	assert_int_equal(shm_stack(&b, 1)->frames[1], 0x2000);
	assert_memory_equal(&b.totals, &a.totals, sizeof a.totals);
	assert_int_equal(b.nthreads, a.nthreads);
	assert_int_equal(b.threads[1].tid, 99);
	assert_int_equal(b.nlive, 1);
	assert_memory_equal(&b.live[0], &a.live[0], sizeof a.live[0]);
	assert_int_equal(b.live_count, a.live_count);
	assert_int_equal(b.nmodules, 1);
	assert_memory_equal(&b.modules[0], &a.modules[0], sizeof a.modules[0]);
	assert_int_equal(b.nalarms, 1);
	assert_int_equal(shm_alarm(&b, 0)->frames[0], 0x4000);
	shm_snapshot_free(&a);
	shm_snapshot_free(&b);
	seg_free(&w);
	seg_free(&s);
}

/* The reader's loops of segment.h: the alarm ring's rule (published, of
 * the last lap, not claimed again while the reader copied) and the
 * seqcount loop. */
static void reader_loop_helpers(void **state)
{
	(void)state;
	/* cap 4; position i holds seq n + 1 with n % 4 == i. */
	assert_true(ym_alarm_complete(3, 2, 4, 3, 3));    /* n = 2, written 3 */
	assert_false(ym_alarm_complete(0, 2, 4, 3, 3));   /* being written */
	assert_false(ym_alarm_complete(7, 2, 4, 3, 3));   /* beyond written */
	assert_false(ym_alarm_complete(3, 1, 4, 3, 3));   /* wrong position */
	assert_false(ym_alarm_complete(3, 2, 4, 7, 7));   /* n + 4 claimed: old lap */
	assert_true(ym_alarm_complete(7, 2, 4, 7, 7));
	assert_true(ym_alarm_complete(3, 2, 4, 3, 6));    /* claims 3..5 elsewhere */
	assert_false(ym_alarm_complete(3, 2, 4, 3, 7));   /* claim 6 hit it */
	assert_false(ym_alarm_complete(3, 2, 4, 3, 2));   /* forged: went back */
	assert_false(ym_alarm_complete(1, 0, 0, 1, 1));
	/* The seqcount loop of a reader that maps the segment. */
	uint64_t seq = 4;
	uint32_t seq32 = 6;
	uint64_t b = ym_seq_read_begin(&seq);
	assert_false(ym_seq_read_retry(&seq, b));
	seq = 5;                                           /* a writer inside */
	assert_true(ym_seq_read_retry(&seq, b));
	assert_true(ym_seq_read_retry(&seq, ym_seq_read_begin(&seq)));
	seq = 6;                                           /* it came and went */
	assert_true(ym_seq_read_retry(&seq, b));
	assert_false(ym_seq_read_retry32(&seq32, ym_seq_read_begin32(&seq32)));
}

static void truncated_file_no_sigbus(void **state)
{
	(void)state;
	struct seg s;
	struct shm_snapshot snap;
	struct shm_reader r;
	char err[256];
	seg_make(&s, 8);
	int fd = dup(s.fd);
	assert_int_equal(shm_reader_open_fd(&r, fd, 4242, (uid_t)-1, err, sizeof err), 0);
	assert_int_equal(ftruncate(s.fd, 8192), 0);   /* shrinks under us */
	assert_true(shm_snapshot_take(&r, &snap, err, sizeof err) < 0);
	assert_true(strlen(err) > 0);
	shm_reader_close(&r);
	/* A fresh open of the short file fails too. */
	fd = dup(s.fd);
	assert_true(shm_reader_open_fd(&r, fd, 4242, (uid_t)-1, err, sizeof err) < 0);
	close(fd);
	seg_free(&s);
}

static void permissions_enforced(void **state)
{
	(void)state;
	struct seg s;
	struct shm_reader r;
	char err[256];
	seg_make(&s, 8);
	int fd = dup(s.fd);
	assert_int_equal(fchmod(s.fd, 0620), 0);
	assert_int_equal(shm_reader_open_fd(&r, fd, 4242, (uid_t)-1, err, sizeof err), -EPERM);
	assert_int_equal(fchmod(s.fd, 0600), 0);
	/* Owned by someone else than the process's owner: refused, unless
	 * by root (a daemon creates it before it drops privileges). */
	uid_t owner = getuid();
	if (owner == 0 && fchown(s.fd, 1, 1) == 0)
		owner = 1;
	assert_int_equal(shm_reader_open_fd(&r, fd, 4242, owner + 1, err, sizeof err), -EPERM);
	assert_true(shm_reader_open_fd(&r, fd, 4243, (uid_t)-1, err, sizeof err) < 0);
	if (getuid() == 0) {
		assert_int_equal(fchown(s.fd, 0, 0), 0);
		assert_int_equal(shm_reader_open_fd(&r, dup(fd), 4242, 65534, err, sizeof err), 0);
		shm_reader_close(&r);
	}
	close(fd);
	seg_free(&s);
}

static void garbage_never_crashes(void **state)
{
	(void)state;
	srand(7);
	for (int round = 0; round < 300; round++) {
		struct seg s;
		struct shm_snapshot snap;
		char err[256];
		seg_make(&s, 4);
		/* Flip random bytes in the header and the first records. */
		for (int k = 0; k < 1 + round % 16; k++) {
			size_t off = (size_t)rand() % (YM_HEADER_SIZE + 8192);
			s.map[off] ^= (uint8_t)(1u << (rand() % 8));
		}
		if (open_snap(&s, &snap, err) == 0)
			shm_snapshot_free(&snap);
		seg_free(&s);
	}
}

/* shm_name writes without stdio (the agent links it); its inverse reads
 * back what it wrote; a short buffer truncates, never overflows. */
static void names_round_trip(void **state)
{
	(void)state;
	char b[40];
	pid_t pid;
	uint32_t ns;
	shm_name(b, sizeof b, 4194304, 0);
	assert_string_equal(b, YM_NAME_PREFIX "4194304");
	shm_name(b, sizeof b, 1, YM_PIDNS_INIT);
	assert_string_equal(b, YM_NAME_PREFIX "1");
	shm_name(b, sizeof b, 7, 4026532290u);
	assert_string_equal(b, YM_NAME_PREFIX "7.4026532290");
	assert_int_equal(shm_parse_name(b + 1, &pid, &ns), 0);
	assert_int_equal(pid, 7);
	assert_int_equal(ns, 4026532290u);
	memset(b, 'x', sizeof b);
	shm_name(b, 10, 123456789, 0);
	assert_string_equal(b, "/ymtop-12");
	assert_int_equal(b[11], 'x');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(layout_is_sane),
		cmocka_unit_test(python_code_table),
		cmocka_unit_test(python_hook_state_known_from_v9_writers_only),
		cmocka_unit_test(names_round_trip),
		cmocka_unit_test(valid_segment_snapshots),
		cmocka_unit_test(live_copy_follows_the_stripes_in_use),
		cmocka_unit_test(planes_summed_until_a_reset),
		cmocka_unit_test(control_requests_reach_the_control_block),
		cmocka_unit_test(corrupted_headers_rejected),
		cmocka_unit_test(held_stripe_does_not_block),
		cmocka_unit_test(forged_alarm_skipped),
		cmocka_unit_test(unchanged_parts_taken_over),
		cmocka_unit_test(records_cut_to_the_deepest_stack),
		cmocka_unit_test(versions_accepted_by_compat),
		cmocka_unit_test(unseen_only_from_v7_with_a_known_reason),
		cmocka_unit_test(longer_records_read_by_prefix),
		cmocka_unit_test(reader_loop_helpers),
		cmocka_unit_test(unchanged_segment_read_three_times),
		cmocka_unit_test(truncated_file_no_sigbus),
		cmocka_unit_test(permissions_enforced),
		cmocka_unit_test(garbage_never_crashes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
