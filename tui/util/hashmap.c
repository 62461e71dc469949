/*
 * hashmap: open addressing, linear probing (see hashmap.h).
 *
 * Invariants: cap is 0 or a power of two; used * 2 <= cap, so a probe
 * always meets an empty slot (val == HMAP_NONE) and ends.
 */
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"

#define HMAP_MIN_CAP 64u

uint32_t hmap_find(const struct hmap *m, uint64_t h, hmap_eq_fn eq,
		   const void *ctx)
{
	if (!m->cap)
		return HMAP_NONE;
	uint32_t mask = m->cap - 1;
	for (uint32_t i = (uint32_t)h & mask; m->val[i] != HMAP_NONE;
	     i = (i + 1) & mask)
		if (m->hash[i] == h && (!eq || eq(ctx, m->val[i])))
			return m->val[i];
	return HMAP_NONE;
}

/* Store (h, val) in the first empty slot of its probe sequence; the
 * caller made room. */
static void put(struct hmap *m, uint64_t h, uint32_t val)
{
	uint32_t mask = m->cap - 1, i = (uint32_t)h & mask;
	while (m->val[i] != HMAP_NONE)
		i = (i + 1) & mask;
	m->hash[i] = h;
	m->val[i] = val;
	m->used++;
}

static int grow(struct hmap *m)
{
	uint32_t cap = m->cap ? m->cap * 2 : HMAP_MIN_CAP;
	struct hmap g = { .cap = cap };
	g.hash = malloc((size_t)cap * sizeof *g.hash);
	g.val = malloc((size_t)cap * sizeof *g.val);
	if (!g.hash || !g.val) {
		free(g.hash);
		free(g.val);
		return -1;
	}
	memset(g.val, 0xff, (size_t)cap * sizeof *g.val);   /* HMAP_NONE */
	for (uint32_t i = 0; i < m->cap; i++)
		if (m->val[i] != HMAP_NONE)
			put(&g, m->hash[i], m->val[i]);
	free(m->hash);
	free(m->val);
	*m = g;
	return 0;
}

int hmap_add(struct hmap *m, uint64_t h, uint32_t val)
{
	if (val == HMAP_NONE || m->used >= HMAP_MAX_ENTRIES)
		return -1;
	if ((m->used + 1) * 2 > m->cap && grow(m) != 0)
		return -1;
	put(m, h, val);
	return 0;
}

void hmap_clear(struct hmap *m)
{
	if (m->cap)
		memset(m->val, 0xff, (size_t)m->cap * sizeof *m->val);
	m->used = 0;
}

void hmap_free(struct hmap *m)
{
	free(m->hash);
	free(m->val);
	memset(m, 0, sizeof *m);
}
