/* agentsym: see agentsym.h. */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/agentsym.h"
#include "ptrace/procfs.h"

#define MAX_TEXT 8   /* executable mappings of the agent we keep */

struct agent_maps {
	uintptr_t base;            /* the mapping at file offset 0 */
	char path[PATH_MAX];
	struct range text[MAX_TEXT];
	int ntext;
};

static int is_agent(const char *p)
{
	const char *b = strrchr(p, '/');
	b = b ? b + 1 : p;
	return inject_is_agent_file(b);
}

/* The agent's mappings in pid (the first object of that name): 0, or -1
 * when it is not mapped. */
static int read_agent_maps(pid_t pid, struct agent_maps *a)
{
	char path[64], line[PATH_MAX + 128];
	snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
	memset(a, 0, sizeof *a);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	struct maps_line ml;
	while (fgets(line, sizeof line, f)) {
		if (!inject_maps_line(line, &ml) || ml.path[0] != '/' ||
		    !is_agent(ml.path))
			continue;
		unsigned long lo = ml.lo, hi = ml.hi, off = ml.off;
		const char *perms = ml.perms;
		const char *p = ml.path;
		if (!a->path[0]) {
			if (off != 0)
				continue;   /* its first mapping starts at offset 0 */
			snprintf(a->path, sizeof a->path, "%s", p);
			a->base = lo;
		} else if (strcmp(p, a->path) != 0) {
			continue;       /* another copy: not the one we read */
		}
		if (perms[2] == 'x' && a->ntext < MAX_TEXT)
			a->text[a->ntext++] = (struct range){ lo, hi };
	}
	fclose(f);
	return a->path[0] ? 0 : -1;
}

int inject_dynsym(int fd, const char *name, int type, uint64_t *value,
		  uint64_t *size, uint64_t *first)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int found = 0;
	GElf_Ehdr eh;
	size_t nph = 0;
	if (!e || !gelf_getehdr(e, &eh) || eh.e_type != ET_DYN ||
	    eh.e_machine != EM_X86_64 || elf_getphdrnum(e, &nph) != 0)
		goto out;
	*first = UINT64_MAX;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    ph.p_vaddr < *first)
			*first = ph.p_vaddr & ~(uint64_t)4095;
	}
	Elf_Scn *scn = NULL;
	while (*first != UINT64_MAX && !found && (scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = d ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; i < n && !found; i++) {
			GElf_Sym s;
			const char *sn;
			if (gelf_getsym(d, (int)i, &s) && s.st_shndx != SHN_UNDEF &&
			    GELF_ST_TYPE(s.st_info) == type &&
			    (sn = elf_strptr(e, sh.sh_link, s.st_name)) && !strcmp(sn, name)) {
				*value = s.st_value;
				if (size)
					*size = s.st_size;
				found = 1;
			}
		}
	}
out:
	if (e)
		elf_end(e);
	return found;
}

uintptr_t inject_agent_symbol(pid_t pid, const char *name)
{
	struct agent_maps a;
	if (read_agent_maps(pid, &a) != 0)
		return 0;
	int fd = inject_open_mapped(pid, a.base, a.path);
	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	uint64_t value = 0, first = 0;
	int ok = inject_dynsym(fd, name, STT_FUNC, &value, NULL, &first);
	close(fd);
	if (!ok || value < first)
		return 0;
	uintptr_t at = a.base + (uintptr_t)(value - first);
	for (int i = 0; i < a.ntext; i++)
		if (at >= a.text[i].lo && at < a.text[i].hi)
			return at;
	return 0;
}
