/*
 * modules: publication of the loaded objects (modules.h).
 *
 * State, this file's: the loader's counters at the last scan, the scan's
 * try-lock, our own text, the segment's MODULES section, and who is told
 * of new objects.
 */
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <stddef.h>
#include <string.h>

#include "backing.h"
#include "config.h"
#include "loader.h"
#include "modules.h"
#include "unwind.h"

struct agent_text agent_self;

static struct ym_header *hdr;
static struct ym_module *modules;
/* The loader's counters at the last scan. */
static unsigned long long mod_adds, mod_subs;
static uint64_t mod_checked_ns;
static uint32_t mod_scanning;      /* try-lock: one scanner at a time */
/* Called after a scan that the loader's counters asked for (set once). */
static void (*on_change)(void);

void modules_map_segment(uint8_t *base, const struct ym_section *sec)
{
	hdr = (struct ym_header *)base;
	modules = (struct ym_module *)(base + sec[YM_SEC_MODULES].offset);
}

void modules_fork_child(void)
{
	mod_scanning = 0;
	mod_checked_ns = 0;
	hdr = NULL;
}

static void read_build_id(const struct dl_phdr_info *info, struct ym_module *m)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			size_t name = (n->n_namesz + 3u) & ~3u;
			size_t desc = (n->n_descsz + 3u) & ~3u;
			const uint8_t *d = p + sizeof *n + name;
			if (d + desc > end)
				break;
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    !memcmp(p + sizeof *n, "GNU", 4) &&
			    n->n_descsz <= sizeof m->build_id) {
				memcpy(m->build_id, d, n->n_descsz);
				m->build_id_len = n->n_descsz;
				return;
			}
			p = d + desc;
		}
	}
}

static void module_extent(const struct dl_phdr_info *info, uintptr_t *lo,
			  uintptr_t *hi)
{
	*lo = UINTPTR_MAX;
	*hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < *lo)
			*lo = a;
		if (a + ph->p_memsz > *hi)
			*hi = a + ph->p_memsz;
	}
}

/* The name of an object the loader lists without one: the main
 * executable, or the vDSO, which musl lists with an empty name (glibc
 * names it linux-vdso.so.1): named so, never as the executable, whose
 * file it is not (its build-id would not match the executable's). */
static const char *unnamed_object(uintptr_t lo, uintptr_t hi)
{
	uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
	if (vdso && vdso >= lo && vdso < hi)
		return "linux-vdso.so.1";
	return hdr->exe;
}

/* Modules seen by the scan in progress (scan lock held). */
static uint8_t module_seen[YM_MAX_MODULES];

static int module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	uintptr_t lo, hi;
	module_extent(info, &lo, &hi);
	if (lo >= hi)
		return 0;
	uintptr_t me = (uintptr_t)&module_cb;
	if (me >= lo && me < hi) {
		agent_self.lo = lo;
		agent_self.hi = hi;
	}
	if (!hdr)
		return 0;
	uint64_t used = hdr->modules_used;
	for (uint64_t i = 0; i < used; i++)
		if (modules[i].state == YM_MODULE_LOADED &&
		    modules[i].lo == lo && modules[i].base == info->dlpi_addr) {
			module_seen[i] = 1;
			return 0;
		}
	if (used >= YM_MAX_MODULES) {
		__atomic_fetch_add(&hdr->drop_modules, 1, __ATOMIC_RELAXED);
		return 0;
	}
	struct ym_module *m = &modules[used];
	if (backing_get(m, sizeof *m) != 0) {
		__atomic_fetch_add(&hdr->drop_modules, 1, __ATOMIC_RELAXED);
		return 0;
	}
	memset(m, 0, sizeof *m);
	m->base = info->dlpi_addr;
	m->lo = lo;
	m->hi = hi;
	const char *path = info->dlpi_name;
	if (!path || !*path)
		path = unnamed_object(lo, hi);
	size_t n = strnlen(path, sizeof m->path - 1);
	memcpy(m->path, path, n);
	read_build_id(info, m);
	m->state = YM_MODULE_LOADED;
	module_seen[used] = 1;
	__atomic_store_n(&hdr->modules_used, used + 1, __ATOMIC_RELEASE);
	return 0;
}

/* Publish modules loaded since the last scan and mark those gone as
 * unloaded.  One scanner at a time; a thread that finds the scan busy
 * skips it (it never waits, so the loader's lock and ours never nest in
 * opposite orders).  force: scan even if the loader's counters did not
 * move (start-up). */
void modules_scan(int force)
{
	unsigned long long v[2];
	loader_counters(v);
	if (!force && v[0] == mod_adds && v[1] == mod_subs)
		return;
	unwind_sync(v[1]);   /* an object went away: forget its rules */
	if (__atomic_exchange_n(&mod_scanning, 1, __ATOMIC_ACQUIRE))
		return;
	mod_adds = v[0];
	mod_subs = v[1];
	memset(module_seen, 0, sizeof module_seen);
	loader_iterate(module_cb, NULL);
	uint64_t used = hdr->modules_used;
	for (uint64_t i = 0; i < used; i++)
		if (!module_seen[i] && modules[i].state == YM_MODULE_LOADED)
			__atomic_store_n(&modules[i].state, YM_MODULE_UNLOADED,
					 __ATOMIC_RELEASE);
	__atomic_store_n(&mod_scanning, 0, __ATOMIC_RELEASE);
	/* Through slots: objects loaded without our dlopen hook (by the C library
	 * itself: NSS, iconv; or through dlmopen's base namespace) get their
	 * GOT patched here (modules_on_change: got_patch_try), at most a
	 * millisecond of samples late. */
	void (*fn)(void) = __atomic_load_n(&on_change, __ATOMIC_ACQUIRE);
	if (agent_slots && !force && fn)
		fn();
}

void modules_on_change(void (*fn)(void))
{
	__atomic_store_n(&on_change, fn, __ATOMIC_RELEASE);
}

/* On the sampled path: at most once a millisecond, see whether the loader
 * added or removed objects (dlopen, dlclose) since the last scan. */
void modules_check(uint64_t now)
{
	if (now - __atomic_load_n(&mod_checked_ns, __ATOMIC_RELAXED) < 1000000)
		return;
	__atomic_store_n(&mod_checked_ns, now, __ATOMIC_RELAXED);
	modules_scan(0);
}
