/*
 * store: arena and interned strings of a struct sym (see store.h).
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "store.h"

#define ARENA_CHUNK (64u * 1024u)

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

void *sym_store_alloc(struct sym_store *st, size_t size)
{
	size_t align = alignof(max_align_t);
	size = (size + align - 1) & ~(align - 1);
	if (size == 0 || size > SIZE_MAX / 2)
		return NULL;
	struct arena_chunk *c = st->arena;
	if (!c || c->cap - c->used < size) {
		size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;
		c = malloc(sizeof *c + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		if (st->arena && size > ARENA_CHUNK) {
			/* Keep filling the current chunk: put the big one behind. */
			c->next = st->arena->next;
			st->arena->next = c;
		} else {
			c->next = st->arena;
			st->arena = c;
		}
	}
	void *p = c->data + c->used;
	c->used += size;
	return p;
}

struct str_key {
	const struct sym_store *st;
	const char *str;
};

static int str_eq(const void *ctx, uint32_t val)
{
	const struct str_key *k = ctx;
	return !strcmp(k->st->strs[val], k->str);
}

const char *sym_store_intern(struct sym_store *st, const char *str)
{
	if (!str)
		return NULL;
	size_t len = strlen(str);
	uint64_t h = ym_fnv1a(YM_FNV1A_INIT, str, len);
	struct str_key k = { st, str };
	uint32_t i = hmap_find(&st->index, h, str_eq, &k);
	if (i != HMAP_NONE)
		return st->strs[i];
	if (st->nstrs == st->capstrs) {
		uint32_t cap = st->capstrs ? st->capstrs * 2 : 1024;
		if (cap > HMAP_MAX_ENTRIES)
			return NULL;
		const char **t = realloc(st->strs, (size_t)cap * sizeof *t);
		if (!t)
			return NULL;
		st->strs = t;
		st->capstrs = cap;
	}
	char *copy = sym_store_alloc(st, len + 1);
	if (!copy || hmap_add(&st->index, h, st->nstrs) != 0)
		return NULL;    /* the arena bytes are lost: rare, bounded */
	memcpy(copy, str, len + 1);
	st->strs[st->nstrs++] = copy;
	return copy;
}

void sym_store_free(struct sym_store *st)
{
	struct arena_chunk *c = st->arena;
	while (c) {
		struct arena_chunk *next = c->next;
		free(c);
		c = next;
	}
	free(st->strs);
	hmap_free(&st->index);
	memset(st, 0, sizeof *st);
}
