/*
 * threads: thread slots and registration (threads.h).
 *
 * State, this file's: the TLS of every thread, the epoch (bumped by fork:
 * a pre-fork thread's TLS is stale), the exit key, the pre-slot and slot
 * 0's stand-in (threads.h), and the segment's THREADS section.
 */
#include <pthread.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backing.h"
#include "segstate.h"
#include "table.h"
#include "threads.h"

__thread struct agent_tls agent_tls AGENT_TLS_MODEL;

static uint32_t epoch;
static pthread_key_t thread_key;
static int key_state;

static struct ym_header *hdr;
static struct ym_thread *threads;
static uint32_t max_threads;
static uint32_t thread_cursor;  /* where to look for an exited slot */

/* Before the segment (threads.h).  Pre-slots, claimed by the threads that
 * come first (each once a process, under pre_lock, until the maker closes
 * them): owner is the thread's TLS while it lives, snap what the maker
 * copied of it, handoff the slot it is to adopt (PRE_SHARED: none, count
 * in slot 0; PRE_DROPPED: no segment).  pre_lock orders claims and exits
 * against the maker. */
#define PRE_SLOTS   16
#define PRE_SHARED  ((struct ym_thread *)1)
#define PRE_DROPPED ((struct ym_thread *)2)
static struct pre {
	struct ym_thread slot;
	struct ym_totals snap;
	struct agent_tls *owner;
	struct ym_thread *handoff;   /* atomic */
} pre[PRE_SLOTS];
static uint32_t pre_used;
static int pre_closed;
static int pre_lock;
/* Slot 0's stand-in, and the adders in it: the maker waits for them to
 * leave before it adds what the stand-in holds to slot 0. */
static struct ym_thread pre_shared;
static struct ym_thread *shared = &pre_shared;   /* atomic */
static uint32_t shared_busy;
static const struct ym_totals no_totals;

static void pre_take_lock(void)
{
	for (uint32_t i = 0; __atomic_exchange_n(&pre_lock, 1, __ATOMIC_ACQUIRE); i++)
		agent_backoff(i);
}

static void pre_give_lock(void)
{
	__atomic_store_n(&pre_lock, 0, __ATOMIC_RELEASE);
}

void thread_shared_alloc(size_t u, size_t n)
{
	__atomic_fetch_add(&shared_busy, 1, __ATOMIC_SEQ_CST);
	struct ym_thread *s = __atomic_load_n(&shared, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&s->t.alloc_objects, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->t.alloc_bytes, u, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->t.req_bytes, n, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&shared_busy, 1, __ATOMIC_RELEASE);
}

void thread_shared_free(size_t u)
{
	__atomic_fetch_add(&shared_busy, 1, __ATOMIC_SEQ_CST);
	struct ym_thread *s = __atomic_load_n(&shared, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&s->t.free_objects, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->t.free_bytes, u, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&shared_busy, 1, __ATOMIC_RELEASE);
}

/* d += a - b, field by field (atomic adds when shared). */
static void totals_add_diff(struct ym_totals *d, const struct ym_totals *a,
			    const struct ym_totals *b, int atomic)
{
	uint64_t v[5] = {
		a->alloc_objects - b->alloc_objects, a->alloc_bytes - b->alloc_bytes,
		a->req_bytes - b->req_bytes, a->free_objects - b->free_objects,
		a->free_bytes - b->free_bytes,
	};
	uint64_t *f[5] = { &d->alloc_objects, &d->alloc_bytes, &d->req_bytes,
			   &d->free_objects, &d->free_bytes };
	for (int i = 0; i < 5; i++) {
		if (atomic)
			__atomic_fetch_add(f[i], v[i], __ATOMIC_RELAXED);
		else
			thread_bump(f[i], v[i]);
	}
}

int threads_map_segment(uint8_t *base, const struct ym_section *sec,
			uint32_t max)
{
	hdr = (struct ym_header *)base;
	threads = (struct ym_thread *)(base + sec[YM_SEC_THREADS].offset);
	max_threads = max;
	if (backing_get(threads, sec[YM_SEC_THREADS].stride) != 0)
		return -1;
	hdr->threads_used = 1;   /* slot 0: shared */
	threads[0].state = YM_THREAD_SHARED;
	/* Slot 0's stand-in into slot 0, once the adders that may still
	 * hold it are out (a few instructions each; bounded all the same: a
	 * thread stopped there by a debugger must not stop us). */
	__atomic_store_n(&shared, &threads[0], __ATOMIC_SEQ_CST);
	for (uint32_t i = 0; i < 64 && __atomic_load_n(&shared_busy, __ATOMIC_SEQ_CST); i++)
		agent_backoff(i);
	totals_add_diff(&threads[0].t, &pre_shared.t, &no_totals, 1);
	return 0;
}

static void fold_slot(struct ym_thread *s)
{
	struct ym_header *h = hdr;
	__atomic_store_n(&h->retire_seq, h->retire_seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	totals_add_diff(&h->retired, &s->t, &no_totals, 0);
	memset(&s->t, 0, sizeof s->t);
	__atomic_store_n(&h->retire_seq, h->retire_seq + 1, __ATOMIC_RELEASE);
}

static struct ym_thread *slot_claim(uint32_t tid)
{
	struct ym_header *h = hdr;
	struct ym_thread *s = NULL;
	if (!table_lock(AGENT_SPINS))
		return NULL;
	uint64_t used = h->threads_used;
	if (used < max_threads) {
		if (backing_get(&threads[used], sizeof *s) == 0)
			s = &threads[used];
	} else {
		/* Every slot taken: reuse an exited one, keeping its totals. */
		for (uint32_t n = 1; n < max_threads && !s; n++) {
			uint32_t i = 1 + (thread_cursor + n) % (max_threads - 1);
			if (__atomic_load_n(&threads[i].state, __ATOMIC_ACQUIRE) ==
			    YM_THREAD_EXITED) {
				s = &threads[i];
				thread_cursor = i;
				fold_slot(s);
			}
		}
	}
	if (s) {
		memset(s->name, 0, sizeof s->name);
		s->tid = tid;
		__atomic_store_n(&s->state, YM_THREAD_LIVE, __ATOMIC_RELEASE);
		if (used < max_threads)
			__atomic_store_n(&h->threads_used, used + 1, __ATOMIC_RELEASE);
	}
	table_unlock();
	return s;
}

static void pre_adopt(struct agent_tls *t);

static void thread_exit(void *arg)
{
	(void)arg;
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	if (t->pre && t->epoch == epoch) {
		/* Its slot in the segment if it has one by now; else the
		 * maker folds the pre-slot into an exited slot. */
		struct pre *e = &pre[t->pre - 1];
		pre_take_lock();
		if (__atomic_load_n(&e->handoff, __ATOMIC_ACQUIRE)) {
			pre_adopt(t);
		} else {
			prctl(PR_GET_NAME, e->slot.name, 0, 0, 0);
			e->owner = NULL;
			t->pre = 0;
		}
		pre_give_lock();
	}
	if (t->state == TLS_OWN && t->slot && !t->pre && t->epoch == epoch) {
		prctl(PR_GET_NAME, t->slot->name, 0, 0, 0);
		__atomic_store_n(&t->slot->state, YM_THREAD_EXITED, __ATOMIC_RELEASE);
	}
	t->slot = NULL;
	thread_fast_set(t, NULL);
	t->pre = 0;
	t->state = TLS_DEAD;
	agent_guard_leave(t);
}

void threads_init(void)
{
	/* Once, by whichever thread comes first (0 none, 1 being made, 2 ok,
	 * 3 failed: thread_key_ok); the others go on without waiting. */
	int expect = 0;
	if (__atomic_compare_exchange_n(&key_state, &expect, 1, 0,
					__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		__atomic_store_n(&key_state,
				 pthread_key_create(&thread_key, thread_exit) == 0 ? 2 : 3,
				 __ATOMIC_RELEASE);
}

void threads_detach(void)
{
	int expect = 2;
	if (__atomic_compare_exchange_n(&key_state, &expect, 3, 0,
					__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		pthread_key_delete(thread_key);
}

static int thread_key_ok(void)
{
	return __atomic_load_n(&key_state, __ATOMIC_ACQUIRE) == 2;
}

/* A pre-slot's owner, at a slow path: its slot in the segment, with what
 * it counted after the maker's copy; or slot 0 (no slot was free); or
 * nothing (no segment: its calls pass through).  Owner only; under
 * pre_lock from thread_exit. */
static void pre_adopt(struct agent_tls *t)
{
	struct pre *e = &pre[t->pre - 1];
	struct ym_thread *s = __atomic_load_n(&e->handoff, __ATOMIC_ACQUIRE);
	t->pre = 0;
	thread_fast_set(t, NULL);
	if (s == PRE_DROPPED) {
		t->slot = NULL;
		t->state = TLS_NEW;
		return;
	}
	if (s == PRE_SHARED) {
		totals_add_diff(&__atomic_load_n(&shared, __ATOMIC_ACQUIRE)->t,
				&e->slot.t, &e->snap, 1);
		t->slot = NULL;
		t->state = TLS_SHARED;
		return;
	}
	totals_add_diff(&s->t, &e->slot.t, &e->snap, 0);
	t->slot = s;
}

/* The fast word was just set from the invariant: clear it again if the
 * maker asked (threads.h).  With the maker's store, fence, store, one of
 * the two clears it. */
void threads_pre_sync(struct agent_tls *t)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pre[t->pre - 1].handoff, __ATOMIC_RELAXED))
		thread_fast_set(t, NULL);
}

/* A pre-slot for t: 1 taken (first: it was the first), 0 none left. */
static int pre_claim(struct agent_tls *t, int *first)
{
	pre_take_lock();
	uint32_t i = pre_used;
	int ok = !pre_closed && i < PRE_SLOTS;
	if (ok) {
		pre_used = i + 1;
		t->tid = (uint32_t)syscall(SYS_gettid);
		pre[i].owner = t;
		pre[i].slot.tid = t->tid;
	}
	pre_give_lock();
	if (!ok)
		return 0;
	*first = i == 0;
	/* The exit key for a thread whose TLS may go away before the
	 * segment is made (the main thread's never does). */
	if (t->tid != (uint32_t)getpid())
		threads_init();
	t->state = TLS_OWN;
	t->slot = &pre[i].slot;
	t->pre = i + 1;
	if (thread_key_ok())
		pthread_setspecific(thread_key, (void *)1);
	return 1;
}

void threads_publish_pre(struct agent_tls *self)
{
	pre_take_lock();
	pre_closed = 1;
	for (uint32_t i = 0; i < pre_used; i++) {
		struct pre *e = &pre[i];
		struct agent_tls *o = e->owner;
		struct ym_thread *s = slot_claim(e->slot.tid);
		memcpy(&e->snap, &e->slot.t, sizeof e->snap);
		if (s) {
			memcpy(&s->t, &e->snap, sizeof s->t);
		} else {
			totals_add_diff(&threads[0].t, &e->snap, &no_totals, 1);
			__atomic_fetch_add(&hdr->drop_threads, 1, __ATOMIC_RELAXED);
		}
		if (!o && s) {   /* its owner exited: an exited slot */
			memcpy(s->name, e->slot.name, sizeof s->name);
			__atomic_store_n(&s->state, YM_THREAD_EXITED, __ATOMIC_RELEASE);
		}
		__atomic_store_n(&e->handoff, s ? s : PRE_SHARED, __ATOMIC_SEQ_CST);
		if (o == self)
			pre_adopt(self);
		else if (o)
			__atomic_store_n(&o->fast, NULL, __ATOMIC_SEQ_CST);
	}
	pre_give_lock();
}

void threads_drop_pre(void)
{
	pre_take_lock();
	pre_closed = 1;
	for (uint32_t i = 0; i < pre_used; i++) {
		__atomic_store_n(&pre[i].handoff, PRE_DROPPED, __ATOMIC_SEQ_CST);
		if (pre[i].owner)
			__atomic_store_n(&pre[i].owner->fast, NULL, __ATOMIC_SEQ_CST);
	}
	pre_give_lock();
}

/* t as a thread of this epoch that has not registered: what a thread
 * of the parent becomes in a fork child. */
static void tls_reset(struct agent_tls *t)
{
	t->slot = NULL;
	thread_fast_set(t, NULL);
	t->pre = 0;
	t->state = TLS_NEW;
	t->plane.plane = 0;
	t->epoch = epoch;
}

int threads_enter(struct agent_tls *t)
{
	if (t->epoch != epoch)   /* TLS of a pre-fork thread */
		tls_reset(t);
	if (unlikely(t->pre) &&
	    __atomic_load_n(&pre[t->pre - 1].handoff, __ATOMIC_ACQUIRE)) {
		pre_adopt(t);
		if (t->state == TLS_OWN && thread_key_ok())
			pthread_setspecific(thread_key, (void *)1);
	}
	if (t->state != TLS_NEW)
		return 0;
	int st = __atomic_load_n(&agent_seg_state, __ATOMIC_ACQUIRE);
	if (st == SEG_PRE || st == SEG_CREATING) {
		/* The first thread waits for a sample; a second one makes
		 * the segment now (seg.h); ones that come while it is made
		 * keep their own totals meanwhile. */
		int first = 0;
		if (!pre_claim(t, &first))
			return st == SEG_PRE ? THREADS_SEGMENT : 0;
		return THREADS_STARTED |
		       (st == SEG_PRE && !first ? THREADS_SEGMENT : 0);
	}
	if (!agent_active())
		return 0;
	t->tid = (uint32_t)syscall(SYS_gettid);
	struct ym_thread *s = slot_claim(t->tid);
	if (!s) {
		__atomic_fetch_add(&hdr->drop_threads, 1, __ATOMIC_RELAXED);
		t->state = TLS_SHARED;
		return THREADS_STARTED;
	}
	t->state = TLS_OWN;
	t->slot = s;
	/* For the exit destructor; may allocate (guard held). */
	if (thread_key_ok())
		pthread_setspecific(thread_key, (void *)1);
	return THREADS_STARTED;
}

void threads_fork_child(struct agent_tls *t)
{
	epoch++;
	t->polled_ns = 0;   /* the child's control block: read it first */
	t->paused = 0;
	t->forking = 0;
	tls_reset(t);
	/* The parent's pre-slot and stand-in are the parent's. */
	memset(pre, 0, sizeof pre);
	memset(&pre_shared, 0, sizeof pre_shared);
	pre_used = 0;
	pre_closed = 0;
	pre_lock = 0;
	shared = &pre_shared;
	shared_busy = 0;
	hdr = NULL;
	threads = NULL;
}

uint64_t threads_calls(void)
{
	struct ym_header *h = hdr;
	if (!h)
		return 0;
	uint64_t sum = 0;
	/* The seqcount loop over retire_seq (segment.h): a slot folded into
	 * retired meanwhile is counted once.  Bounded: a folding thread
	 * stopped inside its update must not stop us (then a sum that may
	 * count that slot twice or not at all: the reader's comparison is
	 * off for one figure, never unsafe). */
	for (int tries = 0; tries < 8; tries++) {
		uint32_t s1 = __atomic_load_n(&h->retire_seq, __ATOMIC_ACQUIRE);
		sum = __atomic_load_n(&h->retired.alloc_objects, __ATOMIC_RELAXED) +
		      __atomic_load_n(&h->retired.free_objects, __ATOMIC_RELAXED);
		uint64_t n = __atomic_load_n(&h->threads_used, __ATOMIC_ACQUIRE);
		if (n > max_threads)
			n = max_threads;
		for (uint64_t i = 0; i < n; i++)
			sum += __atomic_load_n(&threads[i].t.alloc_objects, __ATOMIC_RELAXED) +
			       __atomic_load_n(&threads[i].t.free_objects, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		uint32_t s2 = __atomic_load_n(&h->retire_seq, __ATOMIC_RELAXED);
		if (s1 == s2 && !(s1 & 1))
			break;
	}
	return sum;
}
