/*
 * libcsyms: see libcsyms.h.
 *
 * The file is read through libelf only: it checks the section header
 * table, each section's data and each string against the file's size, so
 * a truncated or forged library fails here with a message instead of
 * being read past its end by ymtop (root, often).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/libcsyms.h"
#include "ptrace/util.h"

static int is_malloc_family(const char *n)
{
	static const char *const names[] = {
		"malloc", "free", "calloc", "realloc", "memalign", "valloc",
		"pvalloc", "posix_memalign", "aligned_alloc", "malloc_usable_size",
		"malloc_trim", "mallopt", "mallinfo", "mallinfo2", "malloc_stats",
		"malloc_info", "__libc_malloc", "__libc_free", "__libc_calloc",
		"__libc_realloc", "__libc_memalign", "__libc_valloc",
		"__libc_pvalloc", "__libc_mallopt", "__libc_mallinfo", "cfree",
		"reallocarray", "__libc_reallocarray",
	};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (!strcmp(n, names[i]))
			return 1;
	return 0;
}

/* The dynamic symbol table of an opened file. */
struct dynsyms {
	Elf      *elf;
	Elf_Data *sym;
	Elf_Data *ver;      /* .gnu.version, or NULL */
	size_t    strndx;   /* the section of the names */
	int       n;        /* symbols */
};

/* The last SHT_DYNSYM section, its strings and its versions.  0, or -1
 * when there is none libelf can read. */
static int find_dynsyms(Elf *elf, struct dynsyms *d)
{
	Elf_Scn *scn = NULL, *dynsym = NULL, *versym = NULL;
	GElf_Shdr sh;
	size_t link = 0;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM) {
			dynsym = scn;
			link = sh.sh_link;
		} else if (sh.sh_type == SHT_GNU_versym) {
			versym = scn;
		}
	}
	memset(d, 0, sizeof *d);
	d->elf = elf;
	d->strndx = link;
	Elf_Scn *strs = dynsym ? elf_getscn(elf, link) : NULL;
	if (!strs || !gelf_getshdr(strs, &sh) || sh.sh_type != SHT_STRTAB)
		return -1;
	d->sym = elf_getdata(dynsym, NULL);
	size_t entsize = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
	if (!d->sym || entsize == 0)
		return -1;
	size_t n = d->sym->d_size / entsize;
	d->n = n > INT_MAX ? INT_MAX : (int)n;
	d->ver = versym ? elf_getdata(versym, NULL) : NULL;
	if (d->ver && d->ver->d_size / sizeof(GElf_Versym) < n)
		d->ver = NULL;
	return 0;
}

/* Symbol i when it is a defined function with a name: its name, with the
 * symbol in *sym; else NULL. */
static const char *func_sym(const struct dynsyms *d, int i, GElf_Sym *sym)
{
	if (!gelf_getsym(d->sym, i, sym) || sym->st_shndx == SHN_UNDEF ||
	    GELF_ST_TYPE(sym->st_info) != STT_FUNC)
		return NULL;
	return elf_strptr(d->elf, d->strndx, sym->st_name);
}

/* A symbol whose version is hidden: a compat version, not the default
 * one a program links against. */
static int hidden_version(const struct dynsyms *d, int i)
{
	GElf_Versym v;
	return d->ver && gelf_getversym(d->ver, i, &v) && (v & 0x8000);
}

/* Fill s (offsets in the file's addresses) from d; 0, or -1 without
 * dlopen or allocator. */
static int read_syms(const struct dynsyms *d, struct libc_syms *s)
{
	GElf_Sym sym;
	uint64_t mlo = UINT64_MAX, mhi = 0, compat_dlopen = 0, libc_dlopen = 0;
	for (int i = 1; i < d->n; i++) {
		const char *n = func_sym(d, i, &sym);
		if (!n)
			continue;
		int hidden = hidden_version(d, i);
		if (!strcmp(n, "dlopen")) {
			if (!hidden)
				s->dlopen = sym.st_value;
			else
				compat_dlopen = sym.st_value;
		} else if (!strcmp(n, "__libc_dlopen_mode")) {
			libc_dlopen = sym.st_value;
		} else if (!strcmp(n, "dlerror") && !hidden) {
			s->dlerror = sym.st_value;
		} else if (!strcmp(n, "dlsym") && !hidden) {
			s->dlsym = sym.st_value;
		} else if (!strcmp(n, "memfd_create") && !hidden) {
			s->memfd_create = sym.st_value;
		} else if (!strcmp(n, "open") && !hidden) {
			s->open = sym.st_value;
		} else if (!strcmp(n, "close") && !hidden) {
			s->close = sym.st_value;
		}
		if (is_malloc_family(n)) {
			if (sym.st_value < mlo)
				mlo = sym.st_value;
			if (sym.st_value + sym.st_size > mhi)
				mhi = sym.st_value + sym.st_size;
		}
	}
	if (!s->dlopen)
		s->dlopen = compat_dlopen ? compat_dlopen : libc_dlopen;
	if (!s->dlopen || mlo == UINT64_MAX)
		return -1;
	/* The allocator's static functions lie between its exported ones:
	 * widen to the nearest exported functions of other files. */
	uint64_t lo = 0, hi = UINT64_MAX;
	for (int i = 1; i < d->n; i++) {
		const char *n = func_sym(d, i, &sym);
		if (!n || is_malloc_family(n))
			continue;
		uint64_t v = sym.st_value, e = v + sym.st_size;
		if (e <= mlo && e > lo)
			lo = e;
		if (v >= mhi && v < hi)
			hi = v;
	}
	if (hi == UINT64_MAX)
		hi = mhi;
	s->malloc_text.lo = lo;
	s->malloc_text.hi = hi;
	return 0;
}

/* Add base to every address found (0 stays 0: not exported). */
static void relocate(struct libc_syms *s, uintptr_t base)
{
	uintptr_t *const found[] = {
		&s->dlopen, &s->dlerror, &s->dlsym, &s->entry,
		&s->memfd_create, &s->open, &s->close,
	};
	for (size_t i = 0; i < sizeof found / sizeof *found; i++)
		if (*found[i])
			*found[i] += base;
	s->malloc_text.lo += base;
	s->malloc_text.hi += base;
}

int inject_libc_symbols(pid_t pid, const struct tmaps *m, struct libc_syms *s,
			char *err, size_t len)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "/proc/%ld/root%s", (long)pid, m->libc);
	memset(s, 0, sizeof *s);
	int fd = inject_open_mapped(pid, m->libc_base, m->libc);
	if (fd < 0) {
		inject_fail(err, len, "cannot read the target's C library %s: %s", path,
			    strerror(errno));
		return -1;
	}
	int rc = -1;
	GElf_Ehdr eh;
	struct dynsyms d;
	Elf *elf = NULL;
	if (elf_version(EV_CURRENT) != EV_NONE)
		elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64 ||
	    !gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64) {
		inject_fail(err, len, "%s is not an x86-64 ELF library ymtop can read",
			    m->libc);
		goto out;
	}
	if (find_dynsyms(elf, &d) != 0) {
		inject_fail(err, len, "%s has no dynamic symbol table", m->libc);
		goto out;
	}
	if (read_syms(&d, s) != 0 || !eh.e_entry) {
		inject_fail(err, len, "no dlopen (or no entry point) in the target's C "
			    "library %s: only glibc is supported", m->libc);
		goto out;
	}
	s->entry = eh.e_entry;
	relocate(s, m->libc_base);
	rc = 0;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}
