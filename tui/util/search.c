/*
 * search: binary search in arrays of records sorted by a 64-bit key
 * (see search.h).
 */
#include <string.h>

#include "search.h"

static uint64_t key_at(const unsigned char *b, size_t i, size_t size,
		       size_t off)
{
	uint64_t k;
	memcpy(&k, b + i * size + off, sizeof k);
	return k;
}

size_t search_upper(const void *base, size_t n, size_t size, size_t off,
		    uint64_t key)
{
	const unsigned char *b = base;
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (key_at(b, mid, size, off) <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t search_run_start(const void *base, size_t end, size_t size, size_t off)
{
	const unsigned char *b = base;
	size_t i = end - 1;
	uint64_t at = key_at(b, i, size, off);
	while (i > 0 && key_at(b, i - 1, size, off) == at)
		i--;
	return i;
}
