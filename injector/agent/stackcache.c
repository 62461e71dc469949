/*
 * stackcache: the stack a thread interned last (stackcache.h).
 */
#include <string.h>

#include "stackcache.h"

struct stackcache {
	/* The stack interned last: its id in the segment table_map_gen
	 * named, its kind and frames. */
	uint32_t gen, id, kind, depth;
	uint64_t frames[YM_LIMIT_DEPTH];
};

static struct stackcache caches[STACKCACHE_ENTRIES];
static uint32_t taken[STACKCACHE_ENTRIES];   /* atomic: 1 owned */

struct stackcache *stackcache_of(uint32_t *slot)
{
	uint32_t s = *slot;
	if (s - 1 < STACKCACHE_ENTRIES)
		return &caches[s - 1];
	if (s)
		return NULL;
	for (uint32_t i = 0; i < STACKCACHE_ENTRIES; i++) {
		uint32_t z = 0;
		if (__atomic_load_n(&taken[i], __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&taken[i], &z, 1, 0,
						__ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			caches[i].gen = 0;   /* a previous owner's */
			*slot = i + 1;
			return &caches[i];
		}
	}
	*slot = UINT32_MAX;
	return NULL;
}

void stackcache_release(uint32_t *slot)
{
	uint32_t s = *slot;
	*slot = UINT32_MAX;
	if (s - 1 < STACKCACHE_ENTRIES)
		__atomic_store_n(&taken[s - 1], 0, __ATOMIC_RELEASE);
}

void stackcache_fork_child(void)
{
	memset(taken, 0, sizeof taken);
}

uint32_t stackcache_intern(struct stackcache *sc, const uint64_t *f,
			   uint32_t depth, uint32_t tid, uint64_t now,
			   uint32_t kind)
{
	if (!sc)
		return table_intern_kind(f, depth, tid, now, kind);
	uint32_t gen = table_map_gen();
	if (sc->gen == gen && sc->depth == depth && sc->kind == kind &&
	    memcmp(sc->frames, f, depth * sizeof *f) == 0)
		return sc->id;
	uint32_t id = table_intern_kind(f, depth, tid, now, kind);
	if (id == UINT32_MAX || id == YM_STACK_OVERFLOW || depth > YM_LIMIT_DEPTH) {
		sc->gen = 0;
		return id;
	}
	sc->gen = gen;
	sc->id = id;
	sc->kind = kind;
	sc->depth = depth;
	memcpy(sc->frames, f, depth * sizeof *f);
	return id;
}
