/*
 * Unit tests for the shared containers: tui/util/hashmap (the one hash
 * map of ymtop), tui/util/search (the upper-bound search of the
 * symbolizer's sorted tables) and shm/hash.h (FNV-1a, shared with the
 * agent).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "util/hashmap.h"
#include "util/search.h"

/* ---- shm/hash.h ---- */

static void test_fnv1a_vectors(void **state)
{
	(void)state;
	/* The published FNV-1a 64 test vectors. */
	assert_true(ym_fnv1a(YM_FNV1A_INIT, "", 0) == 0xcbf29ce484222325ULL);
	assert_true(ym_fnv1a(YM_FNV1A_INIT, "a", 1) == 0xaf63dc4c8601ec8cULL);
	assert_true(ym_fnv1a(YM_FNV1A_INIT, "foobar", 6) == 0x85944171f73967e8ULL);
	assert_true(ym_fnv1a_str(YM_FNV1A_INIT, "foobar") == 0x85944171f73967e8ULL);
	/* Chaining is hashing the concatenation. */
	uint64_t h = ym_fnv1a_str(YM_FNV1A_INIT, "foo");
	assert_true(ym_fnv1a(h, "bar", 3) == 0x85944171f73967e8ULL);
	/* A word step is one xor and one multiply of the whole word. */
	uint64_t w = 0x123456789abcdef0ULL;
	assert_true(ym_fnv1a_word(YM_FNV1A_INIT, w) ==
		    (YM_FNV1A_INIT ^ w) * YM_FNV1A_PRIME);
}

/* ---- hashmap: string interning, as sym/store.c does it ---- */

struct strtab {
	char **s;
	uint32_t n;
	struct hmap m;
};

struct strkey {
	const struct strtab *t;
	const char *s;
};

static int str_eq(const void *ctx, uint32_t v)
{
	const struct strkey *k = ctx;
	return !strcmp(k->t->s[v], k->s);
}

static uint32_t intern(struct strtab *t, const char *s, uint64_t h)
{
	struct strkey k = { t, s };
	uint32_t v = hmap_find(&t->m, h, str_eq, &k);
	if (v != HMAP_NONE)
		return v;
	t->s[t->n] = strdup(s);
	assert_int_equal(hmap_add(&t->m, h, t->n), 0);
	return t->n++;
}

static void test_strings(void **state)
{
	(void)state;
	enum { N = 5000 };
	struct strtab t = { .s = calloc(N, sizeof(char *)) };
	char buf[32];
	for (int round = 0; round < 2; round++) {
		for (uint32_t i = 0; i < N; i++) {
			snprintf(buf, sizeof buf, "name%u", i);
			uint64_t h = ym_fnv1a_str(YM_FNV1A_INIT, buf);
			assert_int_equal(intern(&t, buf, h), i);
		}
	}
	assert_int_equal(t.n, N);
	assert_int_equal(t.m.used, N);
	/* Load at most 1/2, capacity a power of two. */
	assert_true(t.m.cap >= 2 * t.m.used);
	assert_int_equal(t.m.cap & (t.m.cap - 1), 0);
	struct strkey k = { &t, "absent" };
	assert_int_equal(hmap_find(&t.m, ym_fnv1a_str(YM_FNV1A_INIT, "absent"),
				   str_eq, &k), HMAP_NONE);
	for (uint32_t i = 0; i < N; i++)
		free(t.s[i]);
	free(t.s);
	hmap_free(&t.m);
	assert_int_equal(t.m.cap, 0);
}

/* Every key hashing alike (a hostile or unlucky input): still correct,
 * told apart by eq alone. */
static void test_collisions(void **state)
{
	(void)state;
	enum { N = 300 };
	struct strtab t = { .s = calloc(N, sizeof(char *)) };
	char buf[32];
	for (uint32_t i = 0; i < N; i++) {
		snprintf(buf, sizeof buf, "k%u", i);
		assert_int_equal(intern(&t, buf, 42), i);
	}
	for (uint32_t i = 0; i < N; i++) {
		snprintf(buf, sizeof buf, "k%u", i);
		assert_int_equal(intern(&t, buf, 42), i);
	}
	assert_int_equal(t.n, N);
	for (uint32_t i = 0; i < N; i++)
		free(t.s[i]);
	free(t.s);
	hmap_free(&t.m);
}

/* ---- hashmap: 64-bit keys without eq ---- */

static void test_u64_keys(void **state)
{
	(void)state;
	struct hmap m = { 0 };
	assert_int_equal(hmap_find(&m, hmap_u64(1), NULL, NULL), HMAP_NONE);
	for (uint64_t k = 0; k < 10000; k++)
		assert_int_equal(hmap_add(&m, hmap_u64(k * 4096), (uint32_t)k), 0);
	for (uint64_t k = 0; k < 10000; k++)
		assert_int_equal(hmap_find(&m, hmap_u64(k * 4096), NULL, NULL), k);
	assert_int_equal(hmap_find(&m, hmap_u64(4095), NULL, NULL), HMAP_NONE);
	/* hmap_u64 is a bijection: distinct keys, distinct hashes. */
	assert_true(hmap_u64(0) != hmap_u64(1));
	/* HMAP_NONE is no value. */
	assert_int_equal(hmap_add(&m, 7, HMAP_NONE), -1);
	/* clear keeps the capacity, forgets the entries. */
	uint32_t cap = m.cap;
	hmap_clear(&m);
	assert_int_equal(m.used, 0);
	assert_int_equal(m.cap, cap);
	assert_int_equal(hmap_find(&m, hmap_u64(4096), NULL, NULL), HMAP_NONE);
	assert_int_equal(hmap_add(&m, hmap_u64(4096), 1), 0);
	assert_int_equal(hmap_find(&m, hmap_u64(4096), NULL, NULL), 1);
	hmap_free(&m);
	/* An emptied map is usable again. */
	assert_int_equal(hmap_add(&m, 5, 5), 0);
	assert_int_equal(hmap_find(&m, 5, NULL, NULL), 5);
	hmap_free(&m);
}

/* ---- search ---- */

struct rec {
	uint32_t pad;
	uint64_t key;
	char tag;
};

static void test_upper_bound(void **state)
{
	(void)state;
	struct rec r[] = {
		{ 0, 10, 'a' }, { 0, 20, 'b' }, { 0, 20, 'c' }, { 0, 30, 'd' },
		{ 0, UINT64_MAX, 'e' },
	};
	size_t n = sizeof r / sizeof *r;
	assert_int_equal(SEARCH_UPPER(r, n, struct rec, key, 0), 0);
	assert_int_equal(SEARCH_UPPER(r, n, struct rec, key, 9), 0);
	assert_int_equal(SEARCH_UPPER(r, n, struct rec, key, 10), 1);
	assert_int_equal(SEARCH_UPPER(r, n, struct rec, key, 19), 1);
	/* Past every equal key. */
	assert_int_equal(SEARCH_UPPER(r, n, struct rec, key, 20), 3);
	assert_int_equal(SEARCH_UPPER(r, n, struct rec, key, 29), 3);
	assert_int_equal(SEARCH_UPPER(r, n, struct rec, key, 30), 4);
	assert_int_equal(SEARCH_UPPER(r, n, struct rec, key, UINT64_MAX - 1), 4);
	assert_int_equal(SEARCH_UPPER(r, n, struct rec, key, UINT64_MAX), 5);
	assert_int_equal(SEARCH_UPPER(r, 0, struct rec, key, 5), 0);
	assert_int_equal(search_upper(NULL, 0, sizeof(struct rec), 0, 5), 0);
	/* Runs of equal keys, walking back from an upper bound. */
	assert_int_equal(SEARCH_RUN_START(r, 3, struct rec, key), 1);
	assert_int_equal(SEARCH_RUN_START(r, 2, struct rec, key), 1);
	assert_int_equal(SEARCH_RUN_START(r, 1, struct rec, key), 0);
	assert_int_equal(SEARCH_RUN_START(r, 4, struct rec, key), 3);

	/* Against a linear scan, on a larger array with runs. */
	enum { N = 1000 };
	struct rec *v = malloc(N * sizeof *v);
	for (size_t i = 0; i < N; i++)
		v[i] = (struct rec){ 0, (uint64_t)(i / 3) * 7, 0 };
	for (uint64_t key = 0; key < (N / 3 + 2) * 7; key++) {
		size_t want = 0;
		while (want < N && v[want].key <= key)
			want++;
		assert_int_equal(SEARCH_UPPER(v, N, struct rec, key, key), want);
		if (want > 0)
			assert_int_equal(SEARCH_RUN_START(v, want, struct rec, key),
					 (want - 1) / 3 * 3);
	}
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fnv1a_vectors),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_collisions),
		cmocka_unit_test(test_u64_keys),
		cmocka_unit_test(test_upper_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
