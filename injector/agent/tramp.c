/*
 * tramp: the trampoline page (tramp.h).
 *
 * State, this file's: where the page is (code, data), and how many hand-
 * outs had no entry.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "compat.h"
#include "os.h"
#include "tramp.h"
#include "hash.h"

#define TRAMP_NAME   "ymagent-trampoline"
#define TRAMP_MAGIC  0x706d617274796dULL   /* "ymtramp" */
#define TRAMP_PAGE   4096u
#define TRAMP_ENTRY  16u
/* Entries, and the `ret` after them, in the code page. */
#define TRAMP_MAX    ((TRAMP_PAGE - TRAMP_ENTRY) / TRAMP_ENTRY)

struct tramp_slot {
	uint64_t name;     /* FNV-1a of the entry's name; 0: free */
	void *target;
};

struct tramp_data {
	uint64_t magic;
	uint64_t count;
	struct tramp_slot slot[TRAMP_MAX];
};
_Static_assert(sizeof(struct tramp_data) <= TRAMP_PAGE, "one page of data");

static uint8_t *code;
static struct tramp_data *data;
static int refused;

static int page_line(const struct os_maps_line *l, void *arg)
{
	if (l->offset != 0 || !strstr(l->path, "/memfd:" TRAMP_NAME))
		return 0;
	*(uintptr_t *)arg = (uintptr_t)l->start;
	return 1;
}

/* The page's base address from /proc/self/maps: the line naming the
 * memfd at file offset 0.  0 when none. */
static uintptr_t find_page(void)
{
	uintptr_t found = 0;
	return os_maps_walk(page_line, &found) == 1 ? found : 0;
}

static void write_code(void)
{
	for (uint32_t i = 0; i < TRAMP_MAX; i++) {
		uint8_t *e = code + i * TRAMP_ENTRY;
		/* jmp *disp32(%rip), to data->slot[i].target */
		int32_t disp = (int32_t)((intptr_t)&data->slot[i].target -
					 (intptr_t)(e + 6));
		e[0] = 0xff;
		e[1] = 0x25;
		memcpy(e + 2, &disp, 4);
		memset(e + 6, 0xcc, TRAMP_ENTRY - 6);   /* int3 */
	}
	code[TRAMP_MAX * TRAMP_ENTRY] = 0xc3;        /* ret */
}

int tramp_init(void)
{
	if (code)
		return 0;
	uintptr_t at = find_page();
	if (at) {
		struct tramp_data *d = (struct tramp_data *)(at + TRAMP_PAGE);
		if (d->magic == TRAMP_MAGIC && d->count <= TRAMP_MAX) {
			code = (uint8_t *)at;
			data = d;
			return 0;
		}
	}
	int fd = memfd_create(TRAMP_NAME, 1 /* MFD_CLOEXEC */);
	if (fd < 0)
		return -1;
	void *p = MAP_FAILED;
	if (ftruncate(fd, 2 * TRAMP_PAGE) == 0)
		p = os_map(NULL, 2 * TRAMP_PAGE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	code = p;
	data = (struct tramp_data *)(code + TRAMP_PAGE);
	write_code();
	data->magic = TRAMP_MAGIC;
	if (os_protect(code, TRAMP_PAGE, PROT_READ | PROT_EXEC) != 0) {
		/* No executable memfd mappings here (vm.memfd_noexec): the
		 * pages stay, named, and are never used. */
		data->magic = 0;
		code = NULL;
		data = NULL;
		return -1;
	}
	return 0;
}

static struct tramp_slot *lookup(uint64_t h, uint32_t *index)
{
	for (uint32_t i = 0; data && i < data->count; i++)
		if (data->slot[i].name == h) {
			*index = i;
			return &data->slot[i];
		}
	return NULL;
}

void *tramp_entry(const char *name, void *target, int *fresh)
{
	*fresh = 0;
	if (!data)
		return NULL;
	uint64_t h = ym_fnv1a_str(YM_FNV1A_INIT, name) | 1;
	uint32_t i;
	struct tramp_slot *s = lookup(h, &i);
	if (!s) {
		if (data->count >= TRAMP_MAX)
			return NULL;
		i = (uint32_t)data->count;
		s = &data->slot[i];
		s->name = h;
		__atomic_store_n(&data->count, i + 1, __ATOMIC_RELEASE);
		*fresh = 1;
	}
	__atomic_store_n(&s->target, target, __ATOMIC_RELEASE);
	return code + i * TRAMP_ENTRY;
}

void tramp_point(const char *name, void *target)
{
	uint32_t i;
	struct tramp_slot *s = lookup(ym_fnv1a_str(YM_FNV1A_INIT, name) | 1, &i);
	if (s)
		__atomic_store_n(&s->target, target, __ATOMIC_RELEASE);
}

int tramp_holds(const void *p)
{
	return code && (uintptr_t)p - (uintptr_t)code < TRAMP_MAX * TRAMP_ENTRY;
}

void *tramp_ret(void)
{
	return code ? code + TRAMP_MAX * TRAMP_ENTRY : NULL;
}

void tramp_refused(void)
{
	__atomic_store_n(&refused, 1, __ATOMIC_RELAXED);
}

int tramp_complete(void)
{
	return !__atomic_load_n(&refused, __ATOMIC_RELAXED);
}
