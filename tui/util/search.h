/*
 * search: binary search in arrays of records sorted by a 64-bit key.
 *
 * The symbolizer's tables (modules by start address, CU ranges, function
 * ranges, ELF symbols) are all "records sorted by a uint64_t field"; one
 * upper-bound search serves them all, the caller walking back from its
 * result to the records that may contain an address.
 */
#ifndef YMTOP_UTIL_SEARCH_H
#define YMTOP_UTIL_SEARCH_H

#include <stddef.h>
#include <stdint.h>

/* Index of the first of the n records at base (each size bytes, sorted by
 * the uint64_t at byte offset off, ascending) whose key is greater than
 * key; n when there is none.  So the records with key <= key are
 * [0, result), and the last of them (result - 1) is the candidate for
 * "the range starting at or before key".  O(log n) reads of the key. */
size_t search_upper(const void *base, size_t n, size_t size, size_t off,
		    uint64_t key);

/* search_upper over an array of struct type sorted by field:
 *     size_t i = SEARCH_UPPER(x->syms, x->nsyms, struct elf_sym, addr, pc); */
#define SEARCH_UPPER(base, n, type, field, key) \
	search_upper((base), (n), sizeof(type), offsetof(type, field), (key))

#endif
