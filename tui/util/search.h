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

/* The start of the run of equal keys that ends at end - 1 (end > 0): the
 * first index i such that the records [i, end) all have the key of record
 * end - 1.  For walking back from search_upper over aliases (symbols or
 * functions starting at one address).  Linear in the run's length. */
size_t search_run_start(const void *base, size_t end, size_t size, size_t off);

#define SEARCH_RUN_START(base, end, type, field) \
	search_run_start((base), (end), sizeof(type), offsetof(type, field))

#endif
