/*
 * trend: the trend section's writer (trend.h, segment.h Trend).
 *
 * State, this file's: the next slot's time (trend_due) and the segment's
 * trend section.  A slot is claimed by a compare-and-swap of trend_due,
 * so one thread writes it; a record's seq is made odd by a compare-and-
 * swap as well, so that a writer that stalled for a whole lap of the ring
 * and a new one never write the same record together.
 */
#include <stdint.h>

#include "backing.h"
#include "table.h"
#include "trend.h"

uint64_t trend_due = UINT64_MAX;

static struct ym_header *hdr;
static uint8_t *slots;
static uint32_t nslots, stride, kstacks;
static uint64_t slot_ns, start_ns;

void trend_map_segment(uint8_t *base)
{
	hdr = (struct ym_header *)base;
	const struct ym_section *t = &hdr->trend;
	if (t->capacity == 0 || hdr->trend_slot_ns == 0 || hdr->trend_stacks == 0) {
		__atomic_store_n(&trend_due, UINT64_MAX, __ATOMIC_RELAXED);
		return;
	}
	slots = base + t->offset;
	nslots = t->capacity;
	stride = t->stride;
	kstacks = hdr->trend_stacks;
	slot_ns = hdr->trend_slot_ns;
	start_ns = hdr->start_mono_ns;
	__atomic_store_n(&trend_due, start_ns, __ATOMIC_RELAXED);
}

/* Insert (stack, bytes, n) into top[0..*len) kept in descending order of
 * bytes (ties: the lower stack first, as it was seen first), at most k. */
static void top_insert(struct ym_trend_point *top, uint32_t *len, uint32_t k,
		       uint32_t stack, int64_t bytes, int64_t n)
{
	if (*len == k && bytes <= top[k - 1].retained)
		return;
	uint32_t i = *len < k ? (*len)++ : k - 1;
	while (i > 0 && top[i - 1].retained < bytes) {
		top[i] = top[i - 1];
		i--;
	}
	top[i] = (struct ym_trend_point){
		.stack = stack,
		.samples = n <= 0 ? 0 : n >= (int64_t)UINT32_MAX ? UINT32_MAX
								 : (uint32_t)n,
		.retained = bytes,
	};
}

void trend_write(uint64_t now)
{
	uint64_t due = __atomic_load_n(&trend_due, __ATOMIC_RELAXED);
	if (now < due || now < start_ns)
		return;
	uint64_t n = (now - start_ns) / slot_ns;
	uint64_t next = start_ns + (n + 1) * slot_ns;
	if (!__atomic_compare_exchange_n(&trend_due, &due, next, 0,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;   /* another thread writes this slot */
	struct ym_trend_slot *rec =
		(struct ym_trend_slot *)(void *)(slots + (size_t)(n % nslots) * stride);
	if (backing_get(rec, stride) != 0)
		return;
	uint64_t seq = __atomic_load_n(&rec->seq, __ATOMIC_RELAXED);
	if ((seq & 1) || !__atomic_compare_exchange_n(&rec->seq, &seq, seq + 1, 0,
						      __ATOMIC_ACQUIRE,
						      __ATOMIC_RELAXED))
		return;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	/* Built in place: the record is the writer's while seq is odd. */
	uint32_t len = 0, used = table_stacks_used();
	for (uint32_t s = 0; s < used; s++) {
		int64_t k;
		int64_t b = table_stack_retained(s, &k);
		if (b > 0)
			top_insert(rec->points, &len, kstacks, s, b, k);
	}
	__atomic_store_n(&rec->mono_ns, now, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->count, len, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->seq, 2 * (n + 1), __ATOMIC_RELEASE);
}
