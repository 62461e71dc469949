/* Test fixture: this process's module list (modules.h). */
#include "modules.h"

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct walk {
	struct ym_module *mods;
	uint32_t max, n;
	int build_ids;
};

static void note_build_id(struct ym_module *m, const struct dl_phdr_info *info,
			  const ElfW(Phdr) *ph)
{
	const unsigned char *p =
		(const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
	const unsigned char *end = p + ph->p_memsz;
	while (p + sizeof(ElfW(Nhdr)) <= end) {
		const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
		size_t namesz = (nh->n_namesz + 3) & ~3u;
		size_t descsz = (nh->n_descsz + 3) & ~3u;
		const unsigned char *name = p + sizeof *nh;
		const unsigned char *desc = name + namesz;
		if (desc + descsz > end)
			return;
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    !memcmp(name, "GNU", 4) && nh->n_descsz <= 20) {
			memcpy(m->build_id, desc, nh->n_descsz);
			m->build_id_len = nh->n_descsz;
			return;
		}
		p = desc + descsz;
	}
}

static int add_module(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct walk *w = data;
	if (w->n >= w->max)
		return 1;
	struct ym_module *m = &w->mods[w->n];
	memset(m, 0, sizeof *m);
	m->base = info->dlpi_addr;
	m->state = YM_MODULE_LOADED;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD) {
			uint64_t a = info->dlpi_addr + ph->p_vaddr;
			if (a < lo)
				lo = a;
			if (a + ph->p_memsz > hi)
				hi = a + ph->p_memsz;
		} else if (ph->p_type == PT_NOTE && w->build_ids && !m->build_id_len) {
			note_build_id(m, info, ph);
		}
	}
	if (lo >= hi)
		return 0;
	m->lo = lo;
	m->hi = hi;
	if (info->dlpi_name && info->dlpi_name[0]) {
		snprintf(m->path, sizeof m->path, "%s", info->dlpi_name);
	} else {
		ssize_t n = readlink("/proc/self/exe", m->path,
				     sizeof m->path - 1);
		m->path[n > 0 ? n : 0] = '\0';
	}
	w->n++;
	return 0;
}

uint32_t modules_of_self(struct ym_module *mods, uint32_t max, int build_ids)
{
	struct walk w = { .mods = mods, .max = max, .build_ids = build_ids };
	dl_iterate_phdr(add_module, &w);
	return w.n;
}
