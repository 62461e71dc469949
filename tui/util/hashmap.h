/*
 * hashmap: the one hash map of ymtop (the agent has its own lock-free
 * table in shared memory, injector/agent/table.c).
 *
 * Open addressing with linear probing, capacity a power of two, load at
 * most 1/2.  A slot holds the entry's 64-bit hash and a 32-bit value; the
 * keys themselves stay with the caller, usually in an array the value
 * indexes, so one map serves string interning (value: index of the
 * string), composite keys (value: index of the record) and 64-bit keys:
 *
 *  - 64-bit keys: hash with hmap_u64, a bijection, and pass eq = NULL:
 *    equal hashes then mean equal keys;
 *  - anything else: any hash (e.g. ym_fnv1a from shm/hash.h), and an eq
 *    that compares the caller's key with the record behind a value.
 *
 * Bounds: at most HMAP_MAX_ENTRIES entries (16 GiB of slots before that);
 * hmap_add fails beyond it as it does when memory runs out, and the map is
 * then unchanged.  No removal: callers that drop entries rebuild with
 * hmap_clear and hmap_add (the capacity stays, so that cannot fail).
 *
 * Cost: a lookup hashes once (the caller) and probes about 1.5 slots,
 * calling eq only on slots whose stored hash is equal.
 * Not thread-safe.  A zeroed struct hmap is an empty map.
 */
#ifndef YMTOP_UTIL_HASHMAP_H
#define YMTOP_UTIL_HASHMAP_H

#include <stdint.h>

#define HMAP_NONE        UINT32_MAX     /* no value; never stored */
#define HMAP_MAX_ENTRIES (1u << 30)

struct hmap {
	uint64_t *hash;         /* per slot: the entry's hash */
	uint32_t *val;          /* per slot: the value, HMAP_NONE when empty */
	uint32_t used, cap;     /* cap: 0 or a power of two */
};

/* Does the record behind val have the key the caller looks for? */
typedef int (*hmap_eq_fn)(const void *ctx, uint32_t val);

/* The value of an entry with hash h that eq accepts (eq(ctx, val) != 0;
 * every entry with hash h when eq is NULL), or HMAP_NONE. */
uint32_t hmap_find(const struct hmap *m, uint64_t h, hmap_eq_fn eq,
		   const void *ctx);

/* Add val (not HMAP_NONE) under h, growing first when needed: 0, or -1
 * when out of memory or full (map unchanged).  No check for an equal entry
 * already there: hmap_find first. */
int hmap_add(struct hmap *m, uint64_t h, uint32_t val);

/* Forget every entry, keep the capacity. */
void hmap_clear(struct hmap *m);

/* Free the slots; m is then an empty map again. */
void hmap_free(struct hmap *m);

/* A hash for 64-bit keys: murmur3's finalizer, a bijection (xor-shifts
 * and multiplications by odd constants are invertible), so that eq may be
 * NULL. */
static inline uint64_t hmap_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

#endif
