#include <string.h>

#include "search.h"

size_t search_upper(const void *base, size_t n, size_t size, size_t off,
		    uint64_t key)
{
	const unsigned char *b = base;
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t k;
		memcpy(&k, b + mid * size + off, sizeof k);
		if (k <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
