/* Built by gcc after clang.c (first.c): the unit whose aranges follow
 * clang_alloc's addresses. */
#include <stddef.h>

int last_check(const void *p)
{
	return p == NULL;
}
