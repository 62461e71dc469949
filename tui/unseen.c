/*
 * unseen: allocators the agent cannot see (unseen.h).
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt.h"
#include "unseen.h"

/* Entry points that name an allocator.  Any module may define the
 * prefixed ones; malloc itself only counts in the executable (a library
 * that defines it is reached through the agent's own malloc, which comes
 * first in the lookup order). */
static const struct {
	const char *name, *allocator;
} entry[] = {
	{ "je_malloc", "jemalloc" },       /* bundled, prefixed (redis) */
	{ "je_mallocx", "jemalloc" },
	{ "_rjem_malloc", "jemalloc" },    /* Rust's tikv-jemallocator */
	{ "_rjem_mallocx", "jemalloc" },
	{ "mallocx", "jemalloc" },         /* unprefixed, linked in */
	{ "mi_malloc", "mimalloc" },
	{ "mi_heap_malloc", "mimalloc" },
	{ "tc_malloc", "tcmalloc" },       /* gperftools */
	{ "TCMallocInternalMalloc", "tcmalloc" },   /* google/tcmalloc */
};

const char *unseen_symbol_allocator(const char *name)
{
	for (size_t i = 0; i < sizeof entry / sizeof *entry; i++)
		if (!strcmp(name, entry[i].name))
			return entry[i].allocator;
	return "";
}

/* Modules whose allocator calls the agent sees or that are its own: the C
 * library, the loader, the vDSO, the agent, and the allocator libraries
 * that a process reaches through malloc. */
static int skipped(const char *base)
{
	static const char *const prefix[] = {
		"libc.so", "libc-", "ld-linux", "ld-musl", "linux-vdso", "[vdso]",
		"libymagent", "libjemalloc", "libtcmalloc", "libmimalloc",
	};
	for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
		if (!strncmp(base, prefix[i], strlen(prefix[i])))
			return 1;
	return !base[0];
}

/* The first allocator entry point the ELF file at path defines (exe: the
 * main executable, where malloc counts too), into u.  1 found, 0 not. */
static int scan_file(struct unseen *u, const char *path, const char *base, int exe)
{
	/* The target's file: never wait on it (a FIFO planted at the path). */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return 0;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	int found = 0;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	while (e && !found && (scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = d ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; i < n && !found; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF ||
			    GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    GELF_ST_BIND(s.st_info) == STB_LOCAL)
				continue;
			const char *name = elf_strptr(e, sh.sh_link, s.st_name);
			if (!name)
				continue;
			const char *a = unseen_symbol_allocator(name);
			if (!a[0] && exe && !strcmp(name, "malloc"))
				a = "malloc";
			if (a[0]) {
				snprintf(u->allocator, sizeof u->allocator, "%s", a);
				snprintf(u->symbol, sizeof u->symbol, "%s", name);
				snprintf(u->module, sizeof u->module, "%s", base);
				found = 1;
			}
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return found;
}

void unseen_scan(struct unseen *u, const struct shm_snapshot *snap,
		 const char *root)
{
	if (u->scanned > snap->nmodules)
		u->scanned = 0;   /* another segment (exec): read them again */
	if (u->scanned == snap->nmodules)
		return;
	elf_version(EV_CURRENT);
	for (uint32_t i = u->scanned; i < snap->nmodules && !u->allocator[0]; i++) {
		const struct ym_module *m = &snap->modules[i];
		/* /proc/self/fd/N (an agent brought in through a memfd) would
		 * name one of ours here. */
		if (m->state != YM_MODULE_LOADED || m->path[0] != '/' ||
		    !strncmp(m->path, "/proc/", 6))
			continue;
		const char *base = strrchr(m->path, '/') + 1;
		if (skipped(base))
			continue;
		char path[4096];
		snprintf(path, sizeof path, "%s%s", root ? root : "", m->path);
		/* An agent of v7 or later tells an executable's own malloc
		 * itself (YM_FLAG_UNSEEN, model_unseen): not said twice. */
		scan_file(u, path, base, !strcmp(m->path, snap->hdr.exe) &&
			  !ym_abi_has_unseen(snap->hdr.abi_version));
	}
	u->scanned = snap->nmodules;
}

void unseen_watch(struct unseen *u, uint64_t calls, double anon, int have_anon)
{
	if (!have_anon)
		return;
	if (!u->have_base || calls != u->base_calls) {
		u->have_base = 1;
		u->base_calls = calls;
		u->base_anon = anon;
		u->grown = 0;
		return;
	}
	u->grown = anon - u->base_anon;
	/* Only what nothing else explains counts (anon here is what the
	 * allocator's figures and tracked mmap leave over): memory malloc'ed
	 * earlier and touched only now is in the heap already. */
	if (anon < UNSEEN_GROWTH)
		u->grown = 0;
}

const char *unseen_allocator(const struct unseen *u)
{
	return u->allocator[0] ? u->allocator :
	       u->grown >= UNSEEN_GROWTH ? "unknown" : "";
}

const char *unseen_line(const struct unseen *u, char *buf, size_t len)
{
	char g[32], sym[FMT_VIS_SIZE(sizeof u->symbol)], mod[FMT_VIS_SIZE(sizeof u->module)];
	buf[0] = '\0';
	if (u->allocator[0]) {
		fmt_vis(u->symbol, sym, sizeof sym);
		fmt_vis(u->module, mod, sizeof mod);
		snprintf(buf, len, "%s defines %s (%s linked in): what it allocates "
			 "there never calls malloc, so ymtop sees only what does%s%s",
			 mod, sym, !strcmp(u->allocator, "malloc") ? "its own malloc" :
			 u->allocator,
			 u->grown >= UNSEEN_GROWTH ? "; anonymous memory grew " : "",
			 u->grown >= UNSEEN_GROWTH ? fmt_bytes(u->grown, g, sizeof g) : "");
		if (u->grown >= UNSEEN_GROWTH)
			snprintf(buf + strlen(buf), len - strlen(buf),
				 " with no allocator call");
	} else if (u->grown >= UNSEEN_GROWTH) {
		snprintf(buf, len, "anonymous memory grew %s with no allocator call "
			 "the agent saw: an allocator it cannot see (linked into the "
			 "program, or raw mmap system calls)",
			 fmt_bytes(u->grown, g, sizeof g));
	}
	return buf;
}
