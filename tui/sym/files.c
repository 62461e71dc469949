/*
 * files: the libdwfl session and the resolved addresses of each ELF file,
 * shared by every process that maps it (see files.h).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>

#include "fetch.h"
#include "files.h"
#include "hash.h"
#include "resolve.h"
#include "tables.h"
#include "util/hashmap.h"

/* A resolved vaddr: its chain in the file's store. */
struct file_cent {
	uint64_t vaddr;
	uint32_t n;
	const struct sym_frame *frames;
};

struct sym_file {
	unsigned refs;
	uint32_t idlen;            /* 0: known by the fields below */
	uint8_t id[32];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	char *full;                /* the path opened (root prefixed) */
	char *name;                /* the module's name: the segment's path */
	char *debuginfo_path;      /* for the callbacks; NULL: default */
	Dwfl_Callbacks cb;         /* libdwfl keeps a pointer to it */

	Dwfl *dwfl;                /* NULL: closed (never opened, evicted) */
	Dwfl_Module *dm;
	struct sym_tables tables;
	int broken;                /* opening it again failed: no names */
	int probed;                /* sym_file_prefetch asked for DWARF */
	uint64_t used;             /* tick of the last use, for eviction */

	struct sym_store store;    /* chains and their strings */
	struct file_cent *cent;
	uint32_t ncent, capcent;
	struct hmap cache;         /* vaddr -> index in cent */
};

static struct {
	struct sym_file **v;
	uint32_t n, cap;
	unsigned open;
	uint64_t open_bytes;
	uint64_t tick;
	unsigned fetched;          /* fetch_poll's count last taken in */
	unsigned gen;
} files;

/* libdwfl's find_debuginfo: the standard local lookup (debuginfod is out
 * of our environment, see fetch.h), then a file a debuginfod lookup
 * brought, else that lookup is started and the file has no DWARF for now
 * (sym_files_poll closes the session when a file arrives).  A dwz
 * alternate file (debuglink_file an absolute path, no CRC) is not
 * fetched: its build-id is not the module's. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
			  const char *modname, GElf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base,
					      file_name, debuglink_file,
					      debuglink_crc, debuginfo_file_name);
	if (fd >= 0 || !fetch_enabled())
		return fd;
	if (debuglink_file && (debuglink_crc == 0 || strchr(debuglink_file, '/')))
		return -1;
	const unsigned char *bits = NULL;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &bits, &vaddr);
	const char *path = NULL;
	if (len <= 0 || !bits ||
	    fetch_want(bits, (uint32_t)len, modname, &path) != FETCH_FOUND ||
	    !path)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	char *name = strdup(path);
	if (name) {
		free(*debuginfo_file_name);
		*debuginfo_file_name = name;
	}
	return fd;
}

static void file_close(struct sym_file *f)
{
	if (!f->dwfl)
		return;
	sym_tables_free(&f->tables);
	dwfl_end(f->dwfl);
	f->dwfl = NULL;
	f->dm = NULL;
	files.open--;
	files.open_bytes -= (uint64_t)f->size;
}

/* Close the least recently used sessions but keep's until one more of
 * size bytes fits the bounds. */
static void make_room(const struct sym_file *keep, uint64_t size)
{
	while (files.open > 0 &&
	       (files.open >= SYM_FILES_OPEN ||
		files.open_bytes + size > SYM_FILES_BYTES)) {
		struct sym_file *lru = NULL;
		for (uint32_t i = 0; i < files.n; i++) {
			struct sym_file *f = files.v[i];
			if (f != keep && f->dwfl && (!lru || f->used < lru->used))
				lru = f;
		}
		if (!lru)
			return;
		file_close(lru);
	}
}

/* Open the file's session: 0, or -1 (the file cannot be opened, is no
 * ELF file, or is no longer the one the file stands for: sets
 * *mismatch for a build-id or identity that differs). */
static int file_open(struct sym_file *f, int *mismatch)
{
	*mismatch = 0;
	if (f->dwfl)
		return 0;
	/* O_NONBLOCK and the S_ISREG check: a path naming a FIFO or a device
	 * must not hang or feed us. */
	int fd = open(f->full, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -1;
	struct stat sb;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return -1;
	}
	if (!f->idlen && (sb.st_dev != f->dev || sb.st_ino != f->ino ||
			  sb.st_size != f->size ||
			  sb.st_mtim.tv_sec != f->mtime.tv_sec ||
			  sb.st_mtim.tv_nsec != f->mtime.tv_nsec)) {
		close(fd);
		*mismatch = 1;
		return -1;
	}
	if (f->idlen)
		f->size = sb.st_size;
	make_room(f, (uint64_t)sb.st_size);
	f->dwfl = dwfl_begin(&f->cb);
	if (!f->dwfl) {
		close(fd);
		return -1;
	}
	dwfl_report_begin(f->dwfl);
	/* add_p_vaddr = true with base 0: the module's addresses are the
	 * file's vaddrs (a process's load bias is taken off by the caller).
	 * The name is the segment's path, unprefixed. */
	f->dm = dwfl_report_elf(f->dwfl, f->name, f->full, fd, 0, true);
	if (!f->dm)
		close(fd);      /* not consumed on failure */
	dwfl_report_end(f->dwfl, NULL, NULL);
	if (f->dm && f->idlen) {
		const unsigned char *bits = NULL;
		GElf_Addr vaddr;
		int len = dwfl_module_build_id(f->dm, &bits, &vaddr);
		if (len <= 0 || !bits || (uint32_t)len != f->idlen ||
		    memcmp(bits, f->id, f->idlen)) {
			*mismatch = 1;
			f->dm = NULL;
		}
	}
	files.open++;
	files.open_bytes += (uint64_t)f->size;
	if (!f->dm) {
		file_close(f);
		return -1;
	}
	return 0;
}

static void file_free(struct sym_file *f)
{
	file_close(f);
	sym_store_free(&f->store);
	free(f->cent);
	hmap_free(&f->cache);
	free(f->full);
	free(f->name);
	free(f->debuginfo_path);
	free(f);
}

/* Debug files: first under the target's root, then ours (both checked
 * against the build-id by libdwfl). */
static char *debug_dirs(const char *root)
{
	static const char fmt[] = ":.debug:%s/usr/lib/debug:/usr/lib/debug";
	size_t len = sizeof fmt + strlen(root);
	char *p = malloc(len);
	if (p)
		snprintf(p, len, fmt, root);
	return p;
}

struct sym_file *sym_file_get(const char *root, const char *path,
			      const uint8_t *build_id, uint32_t build_id_len,
			      struct sym_store *st, const char **warning)
{
	*warning = NULL;
	if (!path || !path[0] || build_id_len > sizeof ((struct sym_file *)0)->id)
		return NULL;
	if (build_id_len) {
		for (uint32_t i = 0; i < files.n; i++) {
			struct sym_file *f = files.v[i];
			if (f->idlen == build_id_len && !f->broken &&
			    !memcmp(f->id, build_id, build_id_len)) {
				f->refs++;
				return f;
			}
		}
	}
	char full[4096];
	int w = snprintf(full, sizeof full, "%s%s", root ? root : "", path);
	if (w < 0 || (size_t)w >= sizeof full)
		return NULL;
	struct stat sb;
	if (stat(full, &sb) != 0 || !S_ISREG(sb.st_mode))
		return NULL;
	if (!build_id_len) {
		for (uint32_t i = 0; i < files.n; i++) {
			struct sym_file *f = files.v[i];
			if (!f->idlen && !f->broken && f->dev == sb.st_dev &&
			    f->ino == sb.st_ino && f->size == sb.st_size &&
			    f->mtime.tv_sec == sb.st_mtim.tv_sec &&
			    f->mtime.tv_nsec == sb.st_mtim.tv_nsec &&
			    !strcmp(f->full, full)) {
				f->refs++;
				return f;
			}
		}
	}
	if (files.n == files.cap) {
		uint32_t cap = files.cap ? files.cap * 2 : 64;
		void *v = realloc(files.v, (size_t)cap * sizeof *files.v);
		if (!v)
			return NULL;
		files.v = v;
		files.cap = cap;
	}
	struct sym_file *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->idlen = build_id_len;
	if (build_id_len)
		memcpy(f->id, build_id, build_id_len);
	f->dev = sb.st_dev;
	f->ino = sb.st_ino;
	f->size = sb.st_size;
	f->mtime = sb.st_mtim;
	f->full = strdup(full);
	f->name = strdup(path);
	f->debuginfo_path = root && *root ? debug_dirs(root) : NULL;
	if (!f->full || !f->name || (root && *root && !f->debuginfo_path)) {
		file_free(f);
		return NULL;
	}
	f->cb.find_elf = dwfl_build_id_find_elf;
	fetch_setup();
	f->cb.find_debuginfo = find_debuginfo;
	f->cb.section_address = dwfl_offline_section_address;
	f->cb.debuginfo_path = f->debuginfo_path ? &f->debuginfo_path : NULL;
	int mismatch;
	f->used = ++files.tick;
	if (file_open(f, &mismatch) != 0) {
		if (mismatch && build_id_len) {
			char msg[4200];
			snprintf(msg, sizeof msg,
				 "%s: file changed since the process loaded it "
				 "(build-id mismatch)", path);
			*warning = sym_store_intern(st, msg);
		}
		file_free(f);
		return NULL;
	}
	f->refs = 1;
	files.v[files.n++] = f;
	return f;
}

void sym_file_put(struct sym_file *f)
{
	if (!f || --f->refs > 0)
		return;
	for (uint32_t i = 0; i < files.n; i++) {
		if (files.v[i] == f) {
			files.v[i] = files.v[--files.n];
			break;
		}
	}
	file_free(f);
	if (files.n == 0) {
		free(files.v);
		files.v = NULL;
		files.cap = 0;
	}
}

static int cent_eq(const void *ctx, uint32_t i)
{
	const struct sym_file *f = ((const void *const *)ctx)[0];
	const uint64_t *vaddr = ((const void *const *)ctx)[1];
	return f->cent[i].vaddr == *vaddr;
}

int sym_file_resolve(struct sym_file *f, uint64_t vaddr,
		     const struct sym_frame **out)
{
	static const struct sym_frame unknown;
	*out = &unknown;
	if (!f)
		return 1;
	f->used = ++files.tick;
	uint64_t h = hmap_u64(vaddr);
	const void *key[2] = { f, &vaddr };
	uint32_t hit = hmap_find(&f->cache, h, cent_eq, key);
	if (hit != HMAP_NONE) {
		*out = f->cent[hit].frames;
		return (int)f->cent[hit].n;
	}
	struct sym_frame tmp[SYM_MAX_CHAIN];
	memset(tmp, 0, sizeof tmp);
	int n = 0, mismatch;
	if (!f->broken && file_open(f, &mismatch) != 0)
		f->broken = 1;   /* gone or replaced since: fallback names */
	if (f->dm)
		n = sym_resolve_module(&f->store, &f->tables, f->dm, vaddr, tmp);
	if (n <= 0)
		n = 1;
	struct sym_frame *frames =
		sym_store_alloc(&f->store, (size_t)n * sizeof *frames);
	if (!frames)
		return 0;
	memcpy(frames, tmp, (size_t)n * sizeof *frames);
	*out = frames;
	/* Out of memory or at the map's bound: uncached, still correct. */
	if (f->ncent == f->capcent) {
		uint32_t cap = f->capcent ? f->capcent * 2 : 256;
		struct file_cent *c = cap <= HMAP_MAX_ENTRIES ?
			realloc(f->cent, (size_t)cap * sizeof *c) : NULL;
		if (!c)
			return n;
		f->cent = c;
		f->capcent = cap;
	}
	if (hmap_add(&f->cache, h, f->ncent) != 0)
		return n;
	f->cent[f->ncent++] = (struct file_cent){
		.vaddr = vaddr, .n = (uint32_t)n, .frames = frames,
	};
	return n;
}

void sym_file_prefetch(struct sym_file *f)
{
	if (!f || f->probed || f->broken)
		return;
	int mismatch;
	f->used = ++files.tick;
	if (file_open(f, &mismatch) != 0) {
		f->broken = 1;
		return;
	}
	f->probed = 1;
	Dwarf_Addr bias;
	dwfl_module_getdwarf(f->dm, &bias);   /* find_debuginfo starts it */
}

unsigned sym_files_poll(void)
{
	if (!fetch_enabled())
		return files.gen;
	unsigned n = fetch_poll();
	if (n == files.fetched)
		return files.gen;
	files.fetched = n;
	for (uint32_t i = 0; i < files.n; i++) {
		struct sym_file *f = files.v[i];
		file_close(f);
		f->probed = 0;
		f->ncent = 0;
		hmap_clear(&f->cache);   /* the chains stay in the store */
	}
	return ++files.gen;
}

void sym_files_stats(unsigned *open, unsigned *known)
{
	if (open)
		*open = files.open;
	if (known)
		*known = files.n;
}
