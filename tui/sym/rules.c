/*
 * rules: the user's skip rules, --skip REGEX and the skip files (see
 * rules.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "names.h"
#include "rules.h"


/* Does a user rule match f's name as printed (the fallback
 * "[module+0x...]" when it has none)? */
int frames_rules_match(const struct frames_rules *r, const struct sym_frame *f)
{
	if (!r || r->nuser == 0)
		return 0;
	char fb[256];
	const char *name = frames_name(f, fb, sizeof fb);
	for (int i = 0; i < r->nuser; i++)
		if (regexec(&r->user[i], name, 0, NULL, 0) == 0)
			return 1;
	return 0;
}


/* Compile pattern into a new user rule: 0, or -1 with regerror's text (or
 * "out of memory") in msg. */
static int rule_add(struct frames_rules *r, const char *pattern, char *msg,
		    size_t msglen)
{
	if (r->nuser >= FRAMES_MAX_RULES) {
		snprintf(msg, msglen, "more than %d rules", FRAMES_MAX_RULES);
		return -1;
	}
	regex_t *u = realloc(r->user, (size_t)(r->nuser + 1) * sizeof *u);
	if (u)
		r->user = u;
	char **src = u ? realloc(r->source, (size_t)(r->nuser + 1) * sizeof *src) : NULL;
	if (src)
		r->source = src;
	char *copy = src ? strdup(pattern) : NULL;
	if (!copy) {
		snprintf(msg, msglen, "out of memory");
		return -1;
	}
	int rc = regcomp(&u[r->nuser], pattern, REG_EXTENDED | REG_NOSUB);
	if (rc != 0) {
		regerror(rc, &u[r->nuser], msg, msglen);
		free(copy);
		return -1;
	}
	src[r->nuser] = copy;
	r->nuser++;
	return 0;
}

int frames_rules_add(struct frames_rules *r, const char *pattern, char *err,
		     size_t errlen)
{
	char msg[128];
	if (rule_add(r, pattern, msg, sizeof msg) != 0) {
		snprintf(err, errlen, "bad --skip pattern '%s': %s", pattern, msg);
		return -1;
	}
	return 0;
}

int frames_rules_load(struct frames_rules *r, const char *path, char *err,
		      size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		int e = errno;
		struct stat st;
		/* Absent, or behind a directory closed to us (ymtop run as
		 * another user with HOME unchanged): no rules from it.  A file
		 * we can see but not read is an error. */
		if (e == ENOENT || e == ENOTDIR ||
		    (e == EACCES && stat(path, &st) != 0))
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -1;
	}
	char line[FRAMES_MAX_LINE + 2];
	int lineno = 0, added = 0, rc = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		size_t n = strlen(line);
		if (n == sizeof line - 1 && line[n - 1] != '\n' && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line longer than %d bytes",
				 path, lineno, FRAMES_MAX_LINE);
			rc = -1;
			break;
		}
		while (n && isspace((unsigned char)line[n - 1]))
			line[--n] = '\0';
		const char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		char msg[128];
		if (rule_add(r, p, msg, sizeof msg) != 0) {
			char shown[64];
			snprintf(shown, sizeof shown, "%s", p);
			snprintf(err, errlen, "%s:%d: bad pattern '%s%s': %s", path,
				 lineno, shown, strlen(p) >= sizeof shown ? "..." : "",
				 msg);
			rc = -1;
			break;
		}
		added++;
	}
	if (rc == 0 && ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		rc = -1;
	}
	fclose(f);
	return rc == 0 ? added : -1;
}

int frames_rules_load_config(struct frames_rules *r, char *err, size_t errlen)
{
	char path[4096];
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	if (frames_rules_load(r, "/etc/ymtop/skip", err, errlen) < 0)
		return -1;
	/* XDG: a relative XDG_CONFIG_HOME is invalid and ignored. */
	if (xdg && xdg[0] == '/')
		snprintf(path, sizeof path, "%s/ymtop/skip", xdg);
	else if (home && home[0] == '/')
		snprintf(path, sizeof path, "%s/.config/ymtop/skip", home);
	else
		return 0;
	return frames_rules_load(r, path, err, errlen) < 0 ? -1 : 0;
}

void frames_rules_free(struct frames_rules *r)
{
	for (int i = 0; i < r->nuser; i++) {
		regfree(&r->user[i]);
		free(r->source[i]);
	}
	free(r->user);
	free(r->source);
	r->user = NULL;
	r->source = NULL;
	r->nuser = 0;
}
