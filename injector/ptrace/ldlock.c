/* ldlock: see ldlock.h. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/agentsym.h"
#include "ptrace/ldlock.h"
#include "ptrace/procfs.h"

/* _rtld_global is about 4 KiB on x86-64 (glibc 2.36: 4336 bytes). */
#define RTLD_GLOBAL_MAX 65536
#define MUTEX_SIZE      40    /* pthread_mutex_t on x86-64 */
#define MUTEX_KIND_AT   16    /* its __kind */
#define MUTEX_OWNER_AT  8     /* its __owner: the holder's thread id */
#define MUTEX_RECURSIVE 1     /* PTHREAD_MUTEX_RECURSIVE_NP */
#define DL_NNS          16

/* ld.so's path and the address it is mapped at (its offset-0 mapping):
 * the file of the executable mapping m->ldso starts at.  0, or -1. */
static int ldso_file(pid_t pid, const struct tmaps *m, char *path, size_t len,
		     uintptr_t *base)
{
	char mp[64], line[PATH_MAX + 128];
	snprintf(mp, sizeof mp, "/proc/%ld/maps", (long)pid);
	path[0] = '\0';
	*base = 0;
	for (int pass = 0; pass < 2; pass++) {
		FILE *f = fopen(mp, "re");
		if (!f)
			return -1;
		struct maps_line ml;
		while (fgets(line, sizeof line, f)) {
			if (!inject_maps_line(line, &ml) || ml.path[0] != '/')
				continue;
			if (pass == 0 && ml.lo == m->ldso.lo) {
				snprintf(path, len, "%s", ml.path);
				break;
			}
			if (pass == 1 && ml.off == 0 && !strcmp(ml.path, path)) {
				*base = ml.lo;
				break;
			}
		}
		fclose(f);
		if (!path[0])
			return -1;
	}
	return *base ? 0 : -1;
}

static uint64_t word(const uint8_t *b, size_t at)
{
	uint64_t v;
	memcpy(&v, b + at, sizeof v);
	return v;
}

static int32_t int32_at(const uint8_t *b, size_t at)
{
	int32_t v;
	memcpy(&v, b + at, sizeof v);
	return v;
}

/* The offset of _dl_load_lock in the bytes g (n of them) of
 * _rtld_global, or 0 when the shape is not there once and only once. */
static size_t find_lock(const uint8_t *g, size_t n)
{
	size_t at = 0;
	for (size_t o = 8; o + 2 * MUTEX_SIZE <= n; o += 8) {
		uint64_t nns = word(g, o - 8);
		if (nns < 1 || nns > DL_NNS ||
		    int32_at(g, o + MUTEX_KIND_AT) != MUTEX_RECURSIVE ||
		    int32_at(g, o + MUTEX_SIZE + MUTEX_KIND_AT) != MUTEX_RECURSIVE ||
		    int32_at(g, o + MUTEX_OWNER_AT) < 0)
			continue;
		if (at)
			return 0;   /* twice: not sure which */
		at = o;
	}
	return at;
}

/* The thread of pid whose id in its own pid namespace is nstid (the
 * last field of NSpid in its status), as ours numbers it: the lock's
 * owner word holds the id the kernel gave the thread in the process's
 * namespace.  nstid itself when none matches (or NSpid is missing: one
 * namespace). */
static pid_t our_tid(pid_t pid, pid_t nstid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
	DIR *d = opendir(path);
	if (!d)
		return nstid;
	pid_t found = nstid;
	struct dirent *e;
	while (found == nstid && (e = readdir(d)) != NULL) {
		char *end;
		long tid = strtol(e->d_name, &end, 10);
		if (tid <= 0 || *end)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/task/%ld/status", (long)pid, tid);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof line, f)) {
			if (strncmp(line, "NSpid:", 6) != 0)
				continue;
			char *last = strrchr(line, '\t');
			if (last && strtol(last + 1, NULL, 10) == (long)nstid)
				found = (pid_t)tid;
			break;
		}
		fclose(f);
	}
	closedir(d);
	return found;
}

pid_t inject_loader_lock_owner(pid_t pid)
{
	struct tmaps m;
	char path[PATH_MAX];
	uintptr_t base;
	if (inject_read_maps(pid, &m) != 0 || !m.ldso.lo ||
	    ldso_file(pid, &m, path, sizeof path, &base) != 0)
		return -1;
	int fd = inject_open_mapped(pid, base, path);
	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	uint64_t value = 0, size = 0, first = 0;
	int ok = inject_dynsym(fd, "_rtld_global", STT_OBJECT, &value, &size,
			       &first);
	close(fd);
	if (!ok || value < first || size < 2 * MUTEX_SIZE + 8 ||
	    size > RTLD_GLOBAL_MAX)
		return -1;
	static uint8_t g[RTLD_GLOBAL_MAX];
	char mp[64];
	snprintf(mp, sizeof mp, "/proc/%ld/mem", (long)pid);
	int mem = open(mp, O_RDONLY | O_CLOEXEC);
	if (mem < 0)
		return -1;
	ssize_t got = pread(mem, g, (size_t)size, (off_t)(base + (value - first)));
	close(mem);
	if (got != (ssize_t)size)
		return -1;
	size_t at = find_lock(g, (size_t)size);
	if (!at)
		return -1;
	int32_t lock = int32_at(g, at), owner = int32_at(g, at + MUTEX_OWNER_AT);
	if (lock == 0)
		return 0;
	return owner > 0 ? our_tid(pid, (pid_t)owner) : -1;
}
