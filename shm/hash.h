/*
 * hash: FNV-1a (64-bit), the one byte hash of ymtop and its agent.
 *
 * Header-only and static inline: the agent (injector/agent, guest code
 * that links nothing but libc and must not call out on its fast paths)
 * and ymtop include the same definition.  No state, no allocation.
 *
 * Every function takes the running hash h so that fields can be chained:
 *     h = ym_fnv1a_str(YM_FNV1A_INIT, path);
 *     h = ym_fnv1a(h, &base, sizeof base);
 * Cost: one xor and one multiply per byte (per word for ym_fnv1a_word).
 */
#ifndef YMTOP_HASH_H
#define YMTOP_HASH_H

#include <stddef.h>
#include <stdint.h>

#define YM_FNV1A_INIT  0xcbf29ce484222325ULL   /* offset basis */
#define YM_FNV1A_PRIME 0x100000001b3ULL

/* h extended with n bytes at p. */
static inline uint64_t ym_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = (const unsigned char *)p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * YM_FNV1A_PRIME;
	return h;
}

/* h extended with the bytes of the NUL-terminated s (not the NUL). */
static inline uint64_t ym_fnv1a_str(uint64_t h, const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		h = (h ^ *c) * YM_FNV1A_PRIME;
	return h;
}

/* One FNV-1a step over a whole 64-bit word (not its bytes): for keys that
 * are arrays of words, such as the agent's stacks of return addresses. */
static inline uint64_t ym_fnv1a_word(uint64_t h, uint64_t w)
{
	return (h ^ w) * YM_FNV1A_PRIME;
}

#endif
