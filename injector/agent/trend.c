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

/* Of the points a slot holds, the ones kept for stacks that are rising:
 * so that a leak too small to be among the largest yet is followed. */
#define TREND_RISING 16u

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
	/* The largest estimates, built in place (the record is the
	 * writer's while seq is odd); beside them, on the stack, the largest
	 * of the stacks whose peak rose since the previous slot was due
	 * (rising: a growing stack raises its peak with its samples). */
	struct ym_trend_point rising[TREND_RISING];
	uint32_t len = 0, nr = 0, kr = kstacks / 4 < TREND_RISING ? kstacks / 4 : TREND_RISING;
	uint32_t used = table_stacks_used();
	uint64_t since = due - slot_ns;
	for (uint32_t s = 0; s < used; s++) {
		int64_t k;
		int64_t b = table_stack_retained(s, &k);
		if (b <= 0)
			continue;
		top_insert(rec->points, &len, kstacks, s, b, k);
		if (kr && table_stack_peak_ns(s) >= since)
			top_insert(rising, &nr, kr, s, b, k);
	}
	/* The first kstacks - kr largest stay; the rising ones not among
	 * them follow, largest first; the next largest fill what is left. */
	uint32_t keep = len < kstacks - kr ? len : kstacks - kr, out = keep;
	struct ym_trend_point spare[TREND_RISING];
	uint32_t nspare = 0;
	for (uint32_t i = keep; i < len && nspare < kr; i++)
		spare[nspare++] = rec->points[i];
	for (uint32_t i = 0; i < nr && out < kstacks; i++) {
		int dup = 0;
		for (uint32_t j = 0; j < keep && !dup; j++)
			dup = rec->points[j].stack == rising[i].stack;
		if (!dup)
			rec->points[out++] = rising[i];
	}
	for (uint32_t i = 0; i < nspare && out < kstacks; i++) {
		int dup = 0;
		for (uint32_t j = keep; j < out && !dup; j++)
			dup = rec->points[j].stack == spare[i].stack;
		if (!dup)
			rec->points[out++] = spare[i];
	}
	__atomic_store_n(&rec->mono_ns, now, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->count, out, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->seq, 2 * (n + 1), __ATOMIC_RELEASE);
}
