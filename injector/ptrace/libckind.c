/* libckind: see libckind.h.  Everything here only reads /proc; the
 * executable's headers are untrusted input, bounded before use. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/libckind.h"
#include "ptrace/util.h"

/* More program headers than any linker writes: a corrupt file. */
#define MAX_PHDRS 256

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* The program interpreter of pid's executable into buf: 1 found, 0 none
 * (a static program, or a loader run as the program), -1 unreadable. */
static int read_interp(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/exe", (long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = -1;
	Elf64_Ehdr eh;
	if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > MAX_PHDRS)
		goto out;
	rc = 0;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) !=
		    (ssize_t)sizeof ph) {
			rc = -1;
			break;
		}
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz < 2 || ph.p_filesz > len) {
			rc = -1;
			break;
		}
		ssize_t n = pread(fd, buf, ph.p_filesz, (off_t)ph.p_offset);
		if (n != (ssize_t)ph.p_filesz) {
			rc = -1;
			break;
		}
		buf[ph.p_filesz - 1] = '\0';
		rc = 1;
		break;
	}
out:
	close(fd);
	return rc;
}

static int is_musl_libc(const char *path)
{
	const char *b = base_name(path);
	return !strncmp(b, "ld-musl-", 8) || !strncmp(b, "libc.musl-", 10) ||
	       (!strncmp(b, "libc.so", 7) && strstr(path, "musl"));
}

static int is_glibc(const char *path)
{
	const char *b = base_name(path);
	return !strncmp(b, "libc.so.6", 9) || !strncmp(b, "libc-2.", 7) ||
	       !strncmp(b, "ld-linux", 8);
}

/* Scan maps: *musl / *glibc when such a C library is mapped, *agent when
 * the musl agent is.  0, or -errno. */
static int scan_maps(pid_t pid, int *musl, int *glibc, int *agent)
{
	char path[64], line[PATH_MAX + 128];
	snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno ? -errno : -EIO;
	while (fgets(line, sizeof line, f)) {
		char *p = strchr(line, '/');
		if (!p)
			continue;
		p[strcspn(p, "\n")] = '\0';
		const char *b = base_name(p);
		if (is_musl_libc(p))
			*musl = 1;
		else if (is_glibc(p))
			*glibc = 1;
		else if (!strcmp(b, "libymagent-musl.so"))
			*agent = 1;
	}
	fclose(f);
	return 0;
}

int inject_libc_kind(pid_t pid, struct inject_libc_seen *out)
{
	char interp[PATH_MAX];
	int musl = 0, glibc = 0;
	out->kind = INJECT_LIBC_UNKNOWN;
	out->musl_agent = 0;
	int ir = read_interp(pid, interp, sizeof interp);
	int mr = scan_maps(pid, &musl, &glibc, &out->musl_agent);
	if (ir < 0 && mr < 0)
		return mr;
	if (musl || (ir == 1 && !strncmp(base_name(interp), "ld-musl-", 8)))
		out->kind = INJECT_LIBC_MUSL;
	else if (glibc || ir == 1)
		out->kind = INJECT_LIBC_GLIBC;
	else if (ir == 0 && mr == 0)
		out->kind = INJECT_LIBC_STATIC;
	return 0;
}

int inject_libc_refusal(pid_t pid, const char *name, const char *agent,
			char *err, size_t len)
{
	struct inject_libc_seen s;
	if (inject_libc_kind(pid, &s) != 0)
		return 0;
	if (s.kind == INJECT_LIBC_STATIC) {
		inject_fail(err, len, "process %ld (%s) is statically linked: it loads "
			    "no shared library, so the agent can be neither preloaded "
			    "(LD_PRELOAD) nor injected (ymtop -p); link it dynamically "
			    "to watch its heap", (long)pid, name);
		return -1;
	}
	if (s.kind != INJECT_LIBC_MUSL ||
	    !strcmp(base_name(agent), "libymagent-musl.so"))
		return 0;
	inject_fail(err, len, "pid %ld is a musl program (%s): it takes "
		    "libymagent-musl.so, not %s", (long)pid, name, agent);
	return -1;
}

void inject_agent_for(pid_t pid, char *agent, size_t len)
{
	struct inject_libc_seen s;
	if (inject_libc_kind(pid, &s) != 0 || s.kind != INJECT_LIBC_MUSL)
		return;
	char *slash = strrchr(agent, '/');
	size_t dir = slash ? (size_t)(slash - agent) + 1 : 0;
	if (dir + sizeof "libymagent-musl.so" <= len)
		memcpy(agent + dir, "libymagent-musl.so", sizeof "libymagent-musl.so");
}
