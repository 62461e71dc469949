/*
 * threads: thread slots and registration (threads.h).
 *
 * State, this file's: the TLS of every thread, the epoch (bumped by fork:
 * a pre-fork thread's TLS is stale), the exit key, and the segment's
 * THREADS section.
 */
#include <pthread.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backing.h"
#include "sampling.h"
#include "seg.h"
#include "table.h"
#include "threads.h"

__thread struct agent_tls agent_tls __attribute__((tls_model("initial-exec")));

static uint32_t epoch;
static pthread_key_t thread_key;
static int thread_key_ok;

static struct ym_header *hdr;
static struct ym_thread *threads;
static uint32_t max_threads;
static uint32_t thread_cursor;  /* where to look for an exited slot */

void thread_shared_alloc(size_t u, size_t n)
{
	struct ym_thread *s = &threads[0];
	__atomic_fetch_add(&s->t.alloc_objects, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->t.alloc_bytes, u, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->t.req_bytes, n, __ATOMIC_RELAXED);
}

void thread_shared_free(size_t u)
{
	struct ym_thread *s = &threads[0];
	__atomic_fetch_add(&s->t.free_objects, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->t.free_bytes, u, __ATOMIC_RELAXED);
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
	return 0;
}

static void fold_slot(struct ym_thread *s)
{
	struct ym_header *h = hdr;
	__atomic_store_n(&h->retire_seq, h->retire_seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	h->retired.alloc_objects += s->t.alloc_objects;
	h->retired.alloc_bytes += s->t.alloc_bytes;
	h->retired.req_bytes += s->t.req_bytes;
	h->retired.free_objects += s->t.free_objects;
	h->retired.free_bytes += s->t.free_bytes;
	memset(&s->t, 0, sizeof s->t);
	__atomic_store_n(&h->retire_seq, h->retire_seq + 1, __ATOMIC_RELEASE);
}

static struct ym_thread *slot_claim(uint32_t tid)
{
	struct ym_header *h = hdr;
	struct ym_thread *s = NULL;
	if (!table_lock(100000))
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

static void thread_exit(void *arg)
{
	(void)arg;
	struct agent_tls *t = &agent_tls;
	agent_guard_enter(t);
	if (t->state == TLS_OWN && t->slot && t->epoch == epoch) {
		prctl(PR_GET_NAME, t->slot->name, 0, 0, 0);
		__atomic_store_n(&t->slot->state, YM_THREAD_EXITED, __ATOMIC_RELEASE);
	}
	t->slot = NULL;
	t->fast = NULL;
	t->state = TLS_DEAD;
	agent_guard_leave(t);
}

void threads_init(void)
{
	if (!thread_key_ok)
		thread_key_ok = pthread_key_create(&thread_key, thread_exit) == 0;
}

void threads_enter(struct agent_tls *t)
{
	if (t->epoch != epoch) {   /* TLS of a pre-fork thread */
		t->slot = NULL;
		t->fast = NULL;
		t->state = TLS_NEW;
		t->plane.plane = 0;
		t->epoch = epoch;
	}
	if (t->state != TLS_NEW || !agent_active())
		return;
	t->tid = (uint32_t)syscall(SYS_gettid);
	sampling_thread_start(t);
	struct ym_thread *s = slot_claim(t->tid);
	if (!s) {
		__atomic_fetch_add(&hdr->drop_threads, 1, __ATOMIC_RELAXED);
		t->state = TLS_SHARED;
		return;
	}
	t->state = TLS_OWN;
	t->slot = s;
	/* For the exit destructor; may allocate (guard held). */
	if (thread_key_ok)
		pthread_setspecific(thread_key, (void *)1);
}

void threads_fork_child(struct agent_tls *t)
{
	epoch++;
	t->polled_ns = 0;   /* the child's control block: read it first */
	t->paused = 0;
	t->forking = 0;
	t->slot = NULL;
	t->fast = NULL;
	t->state = TLS_NEW;
	t->plane.plane = 0;
	t->epoch = epoch;
}
