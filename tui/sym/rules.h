/*
 * rules: the user's skip rules, POSIX extended regexes (unanchored) that
 * mark functions as allocator plumbing: --skip REGEX, /etc/ymtop/skip and
 * $XDG_CONFIG_HOME/ymtop/skip.  --no-skip (no_skip) turns every rule off,
 * the built-in ones of frames.c too.
 *
 * Ownership: struct frames_rules owns its compiled patterns until
 * frames_rules_free.  Bounded: FRAMES_MAX_RULES patterns, FRAMES_MAX_LINE
 * bytes per line of a file.
 */
#ifndef YMTOP_SYM_RULES_H
#define YMTOP_SYM_RULES_H

#include <regex.h>
#include <stddef.h>

#include "sym.h"

struct frames_rules {
	int      no_skip;
	regex_t *user;       /* extra skip patterns (--skip REGEX) */
	char   **source;     /* their text, for pprof (frames_drop_regex) */
	int      nuser;
};

/* Bounds on user rules: patterns per run, bytes per line of a file. */
#define FRAMES_MAX_RULES 4096
#define FRAMES_MAX_LINE  4096

/* Add a user rule; 0, or -1 with a message in err for a bad pattern. */
int frames_rules_add(struct frames_rules *r, const char *pattern, char *err,
		     size_t errlen);

/* Add the rules of a file: one POSIX extended regex per line, surrounding
 * blanks removed, empty lines and lines starting with '#' ignored.  The
 * number of rules added (0 when the file does not exist), or -1 with one
 * line "path:line: bad pattern '...': reason" (or why the file cannot be
 * read) in err; rules before the bad line stay added. */
int frames_rules_load(struct frames_rules *r, const char *path, char *err,
		      size_t errlen);

/* /etc/ymtop/skip, then $XDG_CONFIG_HOME/ymtop/skip (default
 * ~/.config/ymtop/skip): 0, or -1 with frames_rules_load's message. */
int frames_rules_load_config(struct frames_rules *r, char *err, size_t errlen);
void frames_rules_free(struct frames_rules *r);

/* Does a user rule match f's name as printed (the fallback
 * "[module+0x...]" when it has none)?  0 for r NULL. */
int frames_rules_match(const struct frames_rules *r, const struct sym_frame *f);

#endif
