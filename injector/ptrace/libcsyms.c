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
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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

/* The text of the file that defines the functions member() accepts:
 * from the end of the nearest exported function of another file below
 * them to the nearest one above, since their static helpers lie between
 * (a linker keeps each file's functions together).  0, or -1 when no
 * function is a member. */
static int file_text(const struct dynsyms *d, int (*member)(const char *),
		     struct range *r)
{
	GElf_Sym sym;
	uint64_t mlo = UINT64_MAX, mhi = 0;
	for (int i = 1; i < d->n; i++) {
		const char *n = func_sym(d, i, &sym);
		if (!n || !member(n))
			continue;
		if (sym.st_value < mlo)
			mlo = sym.st_value;
		if (sym.st_value + sym.st_size > mhi)
			mhi = sym.st_value + sym.st_size;
	}
	if (mlo == UINT64_MAX)
		return -1;
	uint64_t lo = 0, hi = UINT64_MAX;
	for (int i = 1; i < d->n; i++) {
		const char *n = func_sym(d, i, &sym);
		if (!n || member(n))
			continue;
		uint64_t v = sym.st_value, e = v + sym.st_size;
		if (e <= mlo && e > lo)
			lo = e;
		if (v >= mhi && v < hi)
			hi = v;
	}
	r->lo = lo;
	r->hi = hi == UINT64_MAX ? mhi : hi;
	return 0;
}

/* musl's files whose code holds a lock that its dlopen takes (see
 * libcsyms.h).  musl links its loader (ldso/dynlink.c) into libc.so and
 * exports from it _dl_debug_state, __dls2b, __dls3, dlopen, dladdr and
 * dl_iterate_phdr; its dlsym is an assembly stub that jumps into it. */
static int musl_dynlink(const char *n)
{
	return !strcmp(n, "_dl_debug_state") || !strcmp(n, "__dls2b") ||
	       !strcmp(n, "__dls3") || !strcmp(n, "dlopen") ||
	       !strcmp(n, "dladdr") || !strcmp(n, "dl_iterate_phdr");
}

/* musl's allocator (src/malloc): its valloc is a wrapper of memalign in
 * a file of its own, far from the others, taking no lock. */
static int musl_malloc_family(const char *n)
{
	return is_malloc_family(n) && strcmp(n, "valloc") != 0;
}

static int musl_atfork(const char *n)
{
	return !strcmp(n, "pthread_atfork");
}

static int musl_pthread_create(const char *n)
{
	return !strcmp(n, "pthread_create") || !strcmp(n, "pthread_exit");
}

static int musl_fork(const char *n)
{
	return !strcmp(n, "fork");
}

static int musl_fork_syscall(const char *n)
{
	return !strcmp(n, "_Fork");
}

/* Fill s (offsets in the file's addresses) from d; 0, or -1 without
 * dlopen or allocator. */
static int read_syms(const struct dynsyms *d, struct libc_syms *s)
{
	GElf_Sym sym;
	uint64_t compat_dlopen = 0, libc_dlopen = 0;
	int musl = 0;
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
		} else if (!strcmp(n, "dlclose") && !hidden) {
			s->dlclose = sym.st_value;
		} else if (!strcmp(n, "dlsym") && !hidden) {
			s->dlsym = sym.st_value;
		} else if (!strcmp(n, "memfd_create") && !hidden) {
			s->memfd_create = sym.st_value;
		} else if (!strcmp(n, "open") && !hidden) {
			s->open = sym.st_value;
		} else if (!strcmp(n, "close") && !hidden) {
			s->close = sym.st_value;
		} else if (!strcmp(n, "__dls3")) {
			musl = 1;   /* musl's loader's last stage: libc is ld.so */
		}
	}
	if (!s->dlopen)
		s->dlopen = compat_dlopen ? compat_dlopen : libc_dlopen;
	if (!s->dlopen ||
	    file_text(d, musl ? musl_malloc_family : is_malloc_family,
		      &s->malloc_text) != 0)
		return -1;
	if (!musl)
		return 0;
	/* Without its loader's text the safe moment cannot be told. */
	s->own_loader = 1;
	if (file_text(d, musl_dynlink, &s->lock_text[0]) != 0)
		return -1;
	s->nlock = 1;
	int (*const locking[])(const char *) = {
		musl_atfork,                  /* anywhere in the chain */
		musl_pthread_create, musl_fork, musl_fork_syscall,
	};
	_Static_assert(sizeof locking / sizeof *locking < INJECT_LOCK_TEXT,
		       "room for each musl file that holds a lock");
	for (size_t i = 0; i < sizeof locking / sizeof *locking; i++) {
		if (file_text(d, locking[i], &s->lock_text[s->nlock]) == 0)
			s->nlock++;
		if (i == 0)
			s->nlock_any = s->nlock;
	}
	return 0;
}

/* Add base to every address found (0 stays 0: not exported). */
static void relocate(struct libc_syms *s, uintptr_t base)
{
	uintptr_t *const found[] = {
		&s->dlopen, &s->dlerror, &s->dlsym, &s->entry,
		&s->memfd_create, &s->open, &s->close, &s->dlclose,
	};
	for (size_t i = 0; i < sizeof found / sizeof *found; i++)
		if (*found[i])
			*found[i] += base;
	s->malloc_text.lo += base;
	s->malloc_text.hi += base;
	for (int i = 0; i < s->nlock; i++) {
		s->lock_text[i].lo += base;
		s->lock_text[i].hi += base;
	}
}

/* What read_syms found in a file (addresses in the file's terms), kept
 * by the file: the same C library serves every process of a host, and
 * reading its few thousand symbols again for each borrowed thread cost
 * a fleet's refresh more than the borrow.  A file is the same while its
 * device, inode, size, times and a fingerprint of its ELF and section
 * headers are (the times are a clock tick coarse: a file rewritten in
 * place within one tick keeps them, and the fingerprint tells).  Only
 * what was read without fault is kept. */
#define LIBC_CACHED 8
static struct libc_cached {
	dev_t    dev;
	ino_t    ino;
	off_t    size;
	struct timespec mtime, ctime;
	uint64_t print;
	uint64_t used;   /* 0: empty; else the last use, for eviction */
	struct libc_syms s;
} cached[LIBC_CACHED];
static uint64_t cached_tick;
static pthread_mutex_t cached_lock = PTHREAD_MUTEX_INITIALIZER;

/* FNV-1a over the ELF header and the section header table of the file
 * open as fd (sb its fstat), bounded: 0, or -1 when they cannot be read
 * (then nothing is kept nor taken). */
static int fingerprint(int fd, const struct stat *sb, uint64_t *out)
{
	unsigned char buf[4096];
	Elf64_Ehdr eh;
	if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh)
		return -1;
	uint64_t h = 1469598103934665603ULL;
	const unsigned char *p = (const unsigned char *)&eh;
	for (size_t i = 0; i < sizeof eh; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	uint64_t left = (uint64_t)eh.e_shnum * eh.e_shentsize;
	uint64_t at = eh.e_shoff;
	if (left > (64u << 10) || at > (uint64_t)sb->st_size ||
	    left > (uint64_t)sb->st_size - at)
		return -1;
	while (left) {
		size_t n = left < sizeof buf ? (size_t)left : sizeof buf;
		if (pread(fd, buf, n, (off_t)at) != (ssize_t)n)
			return -1;
		for (size_t i = 0; i < n; i++)
			h = (h ^ buf[i]) * 1099511628211ULL;
		left -= n;
		at += n;
	}
	*out = h;
	return 0;
}

static int same_file(const struct libc_cached *c, const struct stat *sb,
		     uint64_t print)
{
	return c->used && c->dev == sb->st_dev && c->ino == sb->st_ino &&
	       c->size == sb->st_size && c->print == print &&
	       c->mtime.tv_sec == sb->st_mtim.tv_sec &&
	       c->mtime.tv_nsec == sb->st_mtim.tv_nsec &&
	       c->ctime.tv_sec == sb->st_ctim.tv_sec &&
	       c->ctime.tv_nsec == sb->st_ctim.tv_nsec;
}

/* The kept symbols of the file into *s: 1, or 0 when not kept. */
static int cached_get(const struct stat *sb, uint64_t print, struct libc_syms *s)
{
	int found = 0;
	pthread_mutex_lock(&cached_lock);
	for (int i = 0; i < LIBC_CACHED && !found; i++)
		if (same_file(&cached[i], sb, print)) {
			*s = cached[i].s;
			cached[i].used = ++cached_tick;
			found = 1;
		}
	pthread_mutex_unlock(&cached_lock);
	return found;
}

/* Keep s for the file, in place of the least recently used. */
static void cached_put(const struct stat *sb, uint64_t print,
		       const struct libc_syms *s)
{
	pthread_mutex_lock(&cached_lock);
	int k = 0;
	for (int i = 1; i < LIBC_CACHED; i++)
		if (cached[i].used < cached[k].used)
			k = i;
	struct libc_cached *c = &cached[k];
	c->dev = sb->st_dev;
	c->ino = sb->st_ino;
	c->size = sb->st_size;
	c->mtime = sb->st_mtim;
	c->ctime = sb->st_ctim;
	c->print = print;
	c->s = *s;
	c->used = ++cached_tick;
	pthread_mutex_unlock(&cached_lock);
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
	struct stat sb;
	uint64_t print = 0;
	int keyed = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    fingerprint(fd, &sb, &print) == 0;
	if (keyed && cached_get(&sb, print, s)) {
		relocate(s, m->libc_base);
		close(fd);
		return 0;
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
			    "library %s: only glibc and musl are supported", m->libc);
		goto out;
	}
	s->entry = eh.e_entry;
	if (keyed)
		cached_put(&sb, print, s);
	relocate(s, m->libc_base);
	rc = 0;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}
